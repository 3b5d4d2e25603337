"""The lexical channel (projections/models/lexical.py) and its fusion with the semantic one.

Properties: the postings kept across writes score exactly as postings built from scratch on the
same log (rebuild == incremental, whatever was added, cleared or searched in between); a scope's
scores come from its own visible rows only (a sibling's memory never changes them); a search as
of a seq sees the rows visible then. And through the backend: an exact token picks its entry
where the embedding ranks neighbours first, and nothing outside the scope is ever returned.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from projections.api import MemoryBackend
from projections.models.catalog import Catalog
from projections.models.fusion import asks_failure, fuse
from projections.models.lexical import LexicalIndex, terms

WORDS = ["loss", "diverged", "lr=3e-4", "lr=1e-4", "nccl", "timeout", "ucp_ep_create", "p99", "p999", "epoch", "oom"]
NODES = ["root", "a", "b", "a1"]


def test_terms_keep_compound_tokens_whole_beside_their_stemmed_parts() -> None:
    found = terms("NCCL WARN ucp_ep_create failed; lr=3e-4 diverged at epoch 12")
    assert "=ucp_ep_create" in found and "ucp" in found and "creat" in found
    assert "=lr=3e-4" in found and "diverg" in found and "12" in found
    assert "at" not in found and "fail" in found


def _wrote(backend: MemoryBackend, op: str, node: str, words: list[str], seqs: list[int]) -> bool:
    """Play a script's write (an add, its seq kept, or a clear); False for any other step."""
    if op == "add":
        seqs.append(int(backend.add_memory(node, " ".join(words), current_node=node)["seq"]))
    elif op == "clear":
        backend.clear_node_memory(node, current_node=node)
    else:
        return False
    return True


def _catalog(backend: MemoryBackend) -> Catalog:
    with backend.session.reading() as catalog:
        return catalog


writes = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(NODES), st.lists(st.sampled_from(WORDS), min_size=1, max_size=5)),
        st.tuples(st.just("clear"), st.sampled_from(NODES), st.just([])),
        st.tuples(st.just("search"), st.sampled_from(NODES), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=writes, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
def test_kept_postings_score_as_rebuilt_ones(tmp_path_factory: pytest.TempPathFactory, script, query) -> None:
    backend = MemoryBackend(tmp_path_factory.mktemp("lex") / "ckpt")
    kept = LexicalIndex()
    seqs: list[int] = []
    try:
        for op, node, words in script:
            if not _wrote(backend, op, node, words, seqs):
                kept.scores(_catalog(backend), " ".join(words), NODES, None)  # builds and keeps postings
        catalog = _catalog(backend)
        text = " ".join(query)
        for as_of in [None, *seqs]:
            for scope in (NODES, ["root", "a"], ["b"]):
                assert kept.scores(catalog, text, scope, as_of) == LexicalIndex().scores(catalog, text, scope, as_of)
                visible = {e.entry_id for nid in scope for e in catalog.node_entries(nid, as_of)}
                assert set(kept.scores(catalog, text, scope, as_of).scores) <= visible
    finally:
        backend.close()


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[MemoryBackend]:
    opened = MemoryBackend(tmp_path / "ckpt")
    yield opened
    opened.close()


def test_a_siblings_memory_never_changes_a_scopes_scores(backend: MemoryBackend) -> None:
    backend.add_memory("root", "NCCL timeout on rank 3 during all_reduce", current_node="root")
    backend.add_memory("a", "lr=3e-4 diverged at epoch 12", current_node="a")
    before = LexicalIndex().scores(_catalog(backend), "nccl timeout", ["root", "a"], None).scores
    for k in range(20):
        backend.add_memory("b", f"nccl timeout again {k}", current_node="b")
    assert LexicalIndex().scores(_catalog(backend), "nccl timeout", ["root", "a"], None).scores == before


def test_an_exact_token_picks_its_entry_and_the_scope_stays_exact(backend: MemoryBackend) -> None:
    backend.add_memory("root", "Sweep of the learning rate: lr=1e-4 converged slowly", current_node="root")
    backend.add_memory("root", "Sweep of the learning rate: lr=3e-4 gave the best val loss", current_node="root")
    backend.add_memory("root", "Learning rate warmup of 500 steps kept the loss stable", current_node="root")
    backend.add_memory("sib", "lr=3e-4 diverged in the sibling's run", current_node="sib")
    found = backend.search_memory("lr=3e-4", ["root"], 5)["results"]
    assert "lr=3e-4 gave the best" in found[0]["text"]
    assert {r["node_id"] for r in found} == {"root"}
    assert all(0.0 <= r["score"] <= 1.0 for r in found)
    assert [r["score"] for r in found] == sorted((r["score"] for r in found), reverse=True)


def test_failure_intent_lifts_the_entry_that_tells_the_failure() -> None:
    assert asks_failure("why did the 576-rank job abort") and not asks_failure("baseline p99 latency")
    about = {"ok": ("root", False), "bad": ("root", True)}
    ranked = fuse("what broke in the build", [("ok", 0.8), ("bad", 0.8)], {}, about.__getitem__, None, 2)
    assert [e for e, _ in ranked] == ["bad", "ok"]
    plain = fuse("build flags", [("ok", 0.8), ("bad", 0.8)], {}, about.__getitem__, None, 2)
    assert [e for e, _ in plain] == ["ok", "bad"]


WRITER = """
import sys
from projections.api import MemoryBackend
b = MemoryBackend(sys.argv[1])
b.add_memory("root", "NCCL WARN Call to ibv_reg_mr failed on rank 7", current_node="root")
b.close()
"""


def test_another_process_write_is_found_by_kept_postings(backend: MemoryBackend) -> None:
    """Postings built before another process wrote are rebuilt on the next search (the catalog
    folds the write; its node's version moves), so the acknowledged write is found."""
    backend.add_memory("root", "NCCL timeout during all_reduce on rank 3", current_node="root")
    assert "ibv_reg_mr" not in backend.search_memory("ibv_reg_mr", ["root"], 5)["results"][0]["text"]
    subprocess.run([sys.executable, "-c", WRITER, str(backend.checkpoint_dir)], check=True)
    found = backend.search_memory("ibv_reg_mr", ["root"], 5)["results"]
    assert "ibv_reg_mr" in found[0]["text"] and len(found) == 2
    kept = backend.session.lexical.scores(_catalog(backend), "ibv_reg_mr", ["root"], None).scores
    assert list(kept) == [found[0]["entry_id"]]  # the session's own postings, not a fresh index


fused_writes = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(NODES), st.lists(st.sampled_from(WORDS), min_size=1, max_size=5)),
        st.tuples(st.just("clear"), st.sampled_from(NODES), st.just([])),
        st.tuples(st.just("reopen"), st.just("root"), st.just([])),  # rows stored in a snapshot, then fresh ones
        st.tuples(st.just("search"), st.sampled_from(NODES), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=fused_writes, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), limit=st.integers(1, 8))
def test_the_array_fusion_ranks_as_the_fusion_of_the_two_lists(
    tmp_path_factory: pytest.TempPathFactory, script, query, limit
) -> None:
    """The embedded engine's search fuses both channels as arrays (``fused_scope``); every
    result and score is the one ``fuse`` gives over the engine's list and the lexical dict."""
    from projections.models.fused_scope import fuse_scope
    from projections.models.fusion import POOL

    path = tmp_path_factory.mktemp("fused") / "ckpt"
    backend = MemoryBackend(path)
    seqs: list[int] = []
    try:
        for op, node, words in script:
            if _wrote(backend, op, node, words, seqs):
                continue
            if op == "reopen":
                backend.session.projector.save()
                backend.close()
                backend = MemoryBackend(path)  # the saved rows are read from the snapshot from now on
            else:
                backend.search_memory(" ".join(words), NODES, 5)
        engine, lexical, catalog = backend.session.engine, backend.session.lexical, _catalog(backend)
        text = " ".join(query)
        for as_of in [None, *seqs]:
            for scope in (NODES, ["root", "a", "a1"], ["b"]):
                pool = max(limit, POOL)
                matches = lexical.scores(catalog, text, scope, as_of, pool)
                listed = fuse(
                    text,
                    engine.search(text, scope, pool, as_of),
                    matches.scores,
                    matches.about,
                    scope[-1],
                    limit,
                    matches.coverage,
                )
                ranked = lexical.ranked(catalog, text, scope, as_of, pool)
                arrays = fuse_scope(text, engine.scope_rows(text, scope, as_of), ranked, scope[-1], limit)
                assert arrays is not None
                assert [(w.id, w.score) for w in arrays] == listed
    finally:
        backend.close()
