"""The Letta harness brings up a real Letta 0.16.7 server that ranks passages semantically offline."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path

import pytest

from projections import letta_server as letta_harness
from projections.letta_server import LettaServer

TOPICS = [
    "The sourdough starter needs flour and water every day to stay active.",
    "Jupiter's moon Europa may hide a liquid ocean beneath its icy crust.",
    "The central bank raised interest rates to fight inflation.",
    "The striker scored twice in the second half of the football match.",
    "Antibiotics do not work against viral infections such as the flu.",
    "The violinist rehearsed the concerto for six hours before the premiere.",
    "Glaciers in the Alps have lost half their volume since 1900.",
    "The compiler reported a type error in the generic function signature.",
    "Honeybees communicate the location of flowers with a waggle dance.",
    "The medieval castle was besieged for three months before it fell.",
    "Electric cars need fewer maintenance visits than petrol cars.",
    "The marathon runner collapsed from dehydration near the finish line.",
    "A sudden frost destroyed most of the vineyard's grape harvest.",
    "The novel follows a detective who solves crimes in Victorian London.",
    "Solar panels on the roof cut the household's electricity bill.",
    "The chess grandmaster sacrificed her queen to force checkmate.",
    "Volcanic ash grounded flights across northern Europe for a week.",
    "The toddler learned to ride a bicycle without training wheels.",
    "Coral reefs bleach when the ocean water becomes too warm.",
    "The startup raised ten million dollars in its first funding round.",
]
# Paraphrases sharing (almost) no words with their target passage.
QUERIES = {
    "a moon of a giant planet with a hidden sea under ice": 1,
    "medicine that kills bacteria is useless against a virus": 4,
    "insects dancing to tell each other where the nectar is": 8,
    "a board game master gave up her strongest piece to win": 15,
}


def _passages() -> list[dict]:
    out = [{"text": text, "tags": ["topic", f"t:{i}"]} for i, text in enumerate(TOPICS)]
    out += [
        {
            "text": f"Run {i} of the hyper-parameter sweep finished with seed {i} and batch size {2 ** (i % 7 + 3)}.",
            "tags": ["run", f"r:{i}"],
        }
        for i in range(50 - len(TOPICS))
    ]
    assert len(out) == 50
    return out


def test_home_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ARI_LETTA_HOME", str(tmp_path / "env-home"))
    assert letta_harness.resolve_home() == tmp_path / "env-home"
    assert letta_harness.resolve_home(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("ARI_LETTA_HOME")
    assert letta_harness.resolve_home() == Path.home() / ".cache" / "ari-ledger" / "letta"


def test_status_and_down_of_an_empty_home(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "nothing-here"
    st = letta_harness.status(home)
    assert st["healthy"] is False and st["installed"] is False
    assert not st["letta"]["running"] and not st["embed"]["running"] and not st["postgres"]["running"]
    assert letta_harness.down(home) == {"letta": False, "embed": False, "postgres": False}
    assert letta_harness.main(["status", "--home", str(home), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["healthy"] is False


@pytest.mark.letta
def test_real_letta_server_ranks_a_batch_semantically(letta_server: LettaServer) -> None:
    from letta_client import Letta

    srv = letta_server
    # Health, as the server itself reports it, and as the harness sees it.
    with urllib.request.urlopen(f"{srv.base_url}/v1/health/", timeout=10) as resp:
        assert json.loads(resp.read()) == {"version": "0.16.7", "status": "ok"}
    st = letta_harness.status()
    assert st["healthy"] is True and st["base_url"] == srv.base_url
    assert srv.embedding_dim == 256 and srv.embedding_model == "wordllama/l2_supercat_256"

    client = Letta(base_url=srv.base_url, api_key=srv.api_key, timeout=120)
    name = f"test-letta-harness-{uuid.uuid4().hex[:10]}"
    agent = client.agents.create(
        name=name,
        model="letta/letta-free",
        embedding_config=srv.embedding_config,
        memory_blocks=[
            {"label": "persona", "value": "ari-memory-ledger test projection"},
            {"label": "human", "value": "pytest"},
            {"label": "ari_context", "value": "node n0"},
        ],
        include_base_tools=False,
        tags=["ari-ledger-test"],
    )
    block_ids: list[str] = []
    try:
        assert agent.embedding_config.embedding_endpoint == srv.embedding_url
        assert agent.embedding_config.embedding_dim == 256
        block_ids = [b.id for b in client.agents.blocks.list(agent_id=agent.id)]
        assert {
            client.agents.blocks.retrieve(lbl, agent_id=agent.id).label for lbl in ("persona", "human", "ari_context")
        } == {"persona", "human", "ari_context"}

        # The agent's archive exists only after its first passage.
        first = client.agents.passages.create(agent.id, text="The ledger projection was created.", tags=["meta"])
        assert len(first) == 1 and first[0].text == "The ledger projection was created."
        archives = list(client.archives.list(agent_id=agent.id))
        assert len(archives) == 1

        created = client.archives.passages.create_many(archives[0].id, passages=_passages())
        assert len(created) == 50 and all(p.id for p in created)
        by_text = {p.text: p.id for p in created}

        for query, target in QUERIES.items():
            found = client.agents.passages.search(agent.id, query=query, top_k=5)
            assert found.results, query
            assert found.results[0].id == by_text[TOPICS[target]], (query, [r.content for r in found.results])

        # Tags are filtered after the top-k cut: ask for all 51 to get every tagged match.
        tagged = client.agents.passages.search(
            agent.id, query="football match", top_k=51, tags=["topic"], tag_match_mode="any"
        )
        assert tagged.count == len(TOPICS)
        assert tagged.results[0].content == TOPICS[3]

        listed = client.agents.passages.list(agent.id, limit=100)
        assert len(listed) == 51
    finally:
        for archive in list(client.archives.list(agent_id=agent.id)):
            client.archives.delete(archive.id)
        client.agents.delete(agent.id)
        for block_id in block_ids:  # agents.delete leaves the agent's blocks behind
            client.blocks.delete(block_id)
    assert list(client.agents.list(name=name)) == []
