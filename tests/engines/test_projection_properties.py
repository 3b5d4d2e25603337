"""Properties of the projections (R8, R9, R10): exact ancestor scope at any shape, replay ==
incremental fold, and the same answers from a snapshot, without it, or with a bad one."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import Ledger
from ledger.layout import store_dir
from projections.api import MemoryBackend
from projections.engines.local import SNAPSHOT_NAME, Projector
from projections.models.embedder import get_embedder
from support.trees import WORDS, trees


def scope_of(tree: dict[str, list[str]], node: str) -> list[str]:
    return tree[node] + [node]


def answers(backend: MemoryBackend, tree: dict[str, list[str]], query: str, limit: int) -> dict:
    return {
        node: (
            [
                (r["entry_id"], round(r["score"], 6))
                for r in backend.search_memory(query, scope_of(tree, node), limit)["results"]
            ],
            backend.bulk_get_node_memory(scope_of(tree, node))["by_node"],
        )
        for node in tree
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tree=trees(full_levels=3, max_children=3), data=st.data())
def test_exact_scope_replay_and_snapshot(tree: dict[str, list[str]], data) -> None:
    nodes = list(tree)
    writes = data.draw(
        st.lists(
            st.tuples(st.sampled_from(nodes), st.lists(st.sampled_from(WORDS), min_size=1, max_size=5)), max_size=40
        )
    )
    clears = data.draw(st.lists(st.sampled_from(nodes), max_size=2))
    query = " ".join(data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp)
        backend = MemoryBackend(ckpt)
        for node, ancestors in tree.items():
            backend.start_node(node, ancestors[-1] if ancestors else None, ancestors, "draft", current_node=node)
        written: dict[str, list[str]] = {n: [] for n in nodes}
        for i, (node, words) in enumerate(writes):
            written[node].append(backend.add_memory(node, f"{' '.join(words)} #{i}", current_node=node)["id"])
            if i == len(writes) // 2:
                for node_to_clear in clears:
                    backend.clear_node_memory(node_to_clear, current_node=node_to_clear)
                    written[node_to_clear] = []

        for node in nodes:
            scope = scope_of(tree, node)
            expected = {e for n in scope for e in written[n]}
            hits = backend.search_memory(query, scope, limit=len(writes) + 1)["results"]
            assert {h["entry_id"] for h in hits} == expected  # all of the scope, nothing else
            assert all(h["node_id"] in scope for h in hits)
            few = backend.search_memory(query, scope, limit=2)["results"]
            assert [h["entry_id"] for h in few] == [h["entry_id"] for h in hits[:2]]  # rank preserved
            by_node = backend.bulk_get_node_memory(scope)["by_node"]
            assert {e["entry_id"] for es in by_node.values() for e in es} == expected

        incremental = answers(backend, tree, query, 3)
        # replay from seq 0 into a fresh projector == the incremental fold
        rebuilt = Projector(backend.session.ledger, get_embedder(), use_snapshot=False)
        rebuilt.catch_up()
        assert rebuilt.catalog.state() == backend.session.projector.catalog.state()
        names = backend.session.projector.catalog.collections()
        assert rebuilt.catalog.collections() == names
        for name in names:
            mine, other = backend.session.projector.index, rebuilt.index
            assert other.ids(name) == mine.ids(name) and np.array_equal(other.vectors(name), mine.vectors(name))
        backend.close()

        reopened = MemoryBackend(ckpt)  # from the snapshot
        assert reopened.session.projector.loaded_from_snapshot
        assert answers(reopened, tree, query, 3) == incremental
        reopened.close()

        (store_dir(ckpt) / SNAPSHOT_NAME).unlink()
        cold = MemoryBackend(ckpt)
        assert not cold.session.projector.loaded_from_snapshot
        assert answers(cold, tree, query, 3) == incremental
        cold.close()

        (store_dir(ckpt) / SNAPSHOT_NAME).write_bytes(b"\x28\xb5\x2f\xfd garbage")
        corrupt = MemoryBackend(ckpt)
        assert not corrupt.session.projector.loaded_from_snapshot
        assert answers(corrupt, tree, query, 3) == incremental
        corrupt.close()


class _OtherModel:
    """The same vectors under another model name: a snapshot from it must not be reused."""

    def __init__(self) -> None:
        self.inner = get_embedder()
        self.name, self.dim = "some/other-model", self.inner.dim

    def embed(self, texts):
        return self.inner.embed(texts)


def test_snapshot_from_another_model_is_rebuilt_not_mixed(ckpt: Path) -> None:
    with Ledger.open(ckpt) as ledger:
        ledger.append("root", "memory_added", {"text": "hello"}, current_node="root")
        first = Projector(ledger, _OtherModel())
        first.catch_up()
        first.save()
        second = Projector(ledger, get_embedder())
        assert not second.loaded_from_snapshot
        second.catch_up()
        assert second.index.ids("root") == first.index.ids("root")


def test_stale_snapshot_folds_only_the_tail(ckpt: Path) -> None:
    with Ledger.open(ckpt) as ledger:
        for i in range(10):
            ledger.append("root", "memory_added", {"text": f"entry {i}"}, current_node="root")
        p = Projector(ledger, get_embedder())
        p.catch_up()
        p.save()
        for i in range(10, 13):
            ledger.append("root", "memory_added", {"text": f"entry {i}"}, current_node="root")
        resumed = Projector(ledger, get_embedder())
        assert resumed.loaded_from_snapshot and resumed.cursor == 10
        assert resumed.catch_up() == 3 and resumed.cursor == 13


def test_snapshot_of_another_log_is_ignored(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        with Ledger.open(d) as ledger:
            ledger.append("root", "memory_added", {"text": f"log {d.name}"}, current_node="root")
    with Ledger.open(a) as ledger:
        p = Projector(ledger, get_embedder())
        p.catch_up()
        p.save()
    (store_dir(b) / SNAPSHOT_NAME).write_bytes((store_dir(a) / SNAPSHOT_NAME).read_bytes())
    with Ledger.open(b) as ledger:
        p = Projector(ledger, get_embedder())
        assert not p.loaded_from_snapshot
        p.catch_up()
        assert [e.text for e in p.catalog.node_entries("root")] == ["log b"]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tree=trees(full_levels=3, max_children=3), data=st.data())
def test_stored_rows_plus_a_folded_tail_answer_as_a_fold_from_scratch(tree: dict[str, list[str]], data) -> None:
    """Reopened from a snapshot (rows read in place, checked lazily), then written to and
    tombstoned again: every search, as of now and of earlier seqs, and every read equal a fold
    of the whole log from scratch; saved and reopened again, still equal."""
    from unittest import mock

    from projections.engines import snapshot as snapshot_module

    nodes = list(tree)
    phases = [
        data.draw(
            st.lists(
                st.tuples(st.sampled_from(nodes), st.lists(st.sampled_from(WORDS), min_size=1, max_size=5)), max_size=25
            )
        )
        for _ in range(2)
    ]
    clears = [data.draw(st.lists(st.sampled_from(nodes), max_size=2)) for _ in range(2)]
    purge = data.draw(st.booleans())
    query = " ".join(data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(snapshot_module, "CHECK_WHOLE_UP_TO", 0):
        ckpt = Path(tmp)
        backend = MemoryBackend(ckpt)
        for node, ancestors in tree.items():
            backend.start_node(node, ancestors[-1] if ancestors else None, ancestors, "draft", current_node=node)
        for phase, (writes, cleared) in enumerate(zip(phases, clears)):
            if phase == 1:
                backend.close()
                backend = MemoryBackend(ckpt)
                assert backend.session.projector.loaded_from_snapshot
                if purge:
                    backend.purge_checkpoint()
            for i, (node, words) in enumerate(writes):
                backend.add_memory(node, f"{' '.join(words)} #{phase}.{i}", current_node=node)
                backend.react_add(f"step {phase}.{i}: {' '.join(words)}")
            for node in cleared:
                backend.clear_node_memory(node, current_node=node)
            backend.add_memory("root", f"{query} (the same text twice)", current_node="root")
            backend.add_memory(nodes[-1], f"{query} (the same text twice)", current_node=nodes[-1])

        last = backend.session.ledger.last_seq
        seqs = sorted({1, last // 3, last // 2, last - 1, last})

        def everything(b: MemoryBackend) -> dict:
            return {
                as_of: (
                    {
                        n: [
                            (r["entry_id"], r["score"])
                            for r in b.search_memory(query, scope_of(tree, n), 4, as_of=as_of)["results"]
                        ]
                        for n in tree
                    },
                    b.list_all_nodes(as_of=as_of),
                    [(r["id"], r["score"]) for r in b.react_search(query, 3, as_of=as_of)],
                    b.react_get_all(as_of=as_of),
                    b.get_experiment_context(as_of=as_of),
                )
                for as_of in [None, *seqs]
            }

        mixed = everything(backend)
        assert (
            backend.session.projector.catalog.base is not None
            and backend.session.projector.catalog.fresh("root") is not None
        )
        cold = Projector(backend.session.ledger, get_embedder(), use_snapshot=False)
        cold.catch_up()
        assert cold.catalog.state() == backend.session.projector.catalog.state()
        assert cold.catalog.collections() == backend.session.projector.catalog.collections()
        backend.close()
        (store_dir(ckpt) / SNAPSHOT_NAME).unlink()
        scratch = MemoryBackend(ckpt)
        assert not scratch.session.projector.loaded_from_snapshot
        assert everything(scratch) == mixed
        scratch.close()
        again = MemoryBackend(ckpt)
        assert again.session.projector.loaded_from_snapshot and again.session.projector.catalog.fresh("root") is None
        assert everything(again) == mixed
        again.close()
