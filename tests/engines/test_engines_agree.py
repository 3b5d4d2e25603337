"""The local index and the Letta agent give the same answers (issue 12, item 1).

That is why searches read from the local index by default even when Letta is configured:
the same entries, the same embedder, a thousand times faster. Here both engines answer the
same searches over the fixture run and the retrieval-quality set: the same result sets, in
the same order but for near-ties (scores within float rounding, where Letta's pgvector and
numpy may order two entries either way).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from projections.adapters.demo import copy_run, replay_run
from projections.engines.embedded import EmbeddedEngine
from support.engines import backends_on
from support.env import FIXTURES

pytestmark = pytest.mark.letta

NEAR_TIE = 1e-3


def same_order_but_near_ties(local: list[tuple[str, float]], letta: list[tuple[str, float]]) -> bool:
    """Equal lists once runs of scores within NEAR_TIE of each other are compared as sets."""
    if [eid for eid, _ in sorted(local)] != [eid for eid, _ in sorted(letta)]:
        return False
    score = dict(local)
    return all(a == b or abs(score[a] - score[b]) <= NEAR_TIE for (a, _), (b, _) in zip(local, letta))


def test_letta_and_the_local_index_answer_the_same(request, monkeypatch, tmp_path: Path) -> None:
    with backends_on("letta", request, monkeypatch) as make:
        backend = make(tmp_path / "checkpoint")
        replay = replay_run(backend, FIXTURES / "ari_run", copy_run(FIXTURES / "ari_run", tmp_path))
        cases = json.loads((FIXTURES / "retrieval_quality.json").read_text())
        for i, case in enumerate(cases):
            for text in case["entries"]:
                backend.add_memory(f"case_{i}", text, current_node=f"case_{i}")
        assert backend.flush_projections()
        letta = backend.session.engine
        local = EmbeddedEngine(backend.session.projector)
        searches = [(replay.queries[n], replay.tree[n] + [n]) for n in replay.tree]
        searches += [(case["query"], [f"case_{i}"]) for i, case in enumerate(cases)]
        searches += [(q, replay.tree[n] + [n]) for q, _ in searches[:9] for n in ("node_A21", "node_B1")]
        same_sets = same_order = 0
        for query, scope in searches:
            ours, theirs = local.search(query, scope, 5, None), letta.search(query, scope, 5, None)
            assert letta.name == "letta"  # it answered, no fallback
            same_sets += {e for e, _ in ours} == {e for e, _ in theirs}
            same_order += same_order_but_near_ties(ours, theirs)
        assert same_sets == len(searches) and same_order == len(searches), (same_sets, same_order, len(searches))
