"""What every search engine must do, run on each (embedded, and a real Letta server).

Exact ancestor scope over random trees whose sibling ids share prefixes, the engine's rank
order kept under any limit, ``as_of`` time travel across tombstones and purges, the flat
ReAct trace. Typed search and the verified context on both engines are in
``test_ari_contract``; the memory API's own cases in ``test_memory_api``.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.trees import WORDS, trees


@pytest.fixture
def make(engine_backend, tmp_path_factory):
    """A fresh backend on the engine under test, in a new directory each call."""
    counter = iter(range(10**6))
    return lambda: engine_backend(tmp_path_factory.mktemp(f"ckpt{next(counter)}"))


def test_exact_scope_over_random_trees(make, request) -> None:
    examples = 3 if "letta" in request.node.name else 20

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(tree=trees(full_levels=2, max_children=2), seed=st.integers(0, 2**16))
    def check(tree: dict[str, list[str]], seed: int) -> None:
        rnd = random.Random(seed)
        backend = make()
        written: dict[str, set[str]] = {n: set() for n in tree}
        with backend.session.batch() as batch:  # one group commit: the tree is written quickly
            for i in range(3 * len(tree)):
                node = rnd.choice(list(tree))
                text = f"{' '.join(rnd.choices(WORDS, k=4))} #{i}"
                written[node].add(batch.append(node, "memory_added", {"text": text}, current_node=node).id)
        query = " ".join(rnd.choices(WORDS, k=3))
        for node, ancestors in tree.items():
            scope = ancestors + [node]
            every = backend.search_memory(query, scope, limit=10_000)["results"]
            assert {h["entry_id"] for h in every} == set().union(*(written[n] for n in scope))
            few = backend.search_memory(query, scope, limit=2)["results"]
            assert [h["entry_id"] for h in few] == [h["entry_id"] for h in every[:2]]  # rank kept

    check()


def test_limits(make) -> None:
    backend = make()
    ids = [backend.add_memory("root", f"halo exchange variant {i}", current_node="root")["id"] for i in range(7)]
    assert backend.search_memory("halo exchange", ["root"], limit=0) == {"results": []}
    assert len(backend.search_memory("halo exchange", ["root"], limit=1)["results"]) == 1
    assert {h["entry_id"] for h in backend.search_memory("halo exchange", ["root"], limit=100)["results"]} == set(ids)


def test_time_travel_across_a_clear_and_a_purge(make) -> None:
    backend = make()
    first = backend.add_memory("root", "roofline of the baseline", current_node="root")["id"]
    seq_one = backend.session.ledger.last_seq
    backend.clear_node_memory("root", current_node="root")
    second = backend.add_memory("root", "roofline after blocking", current_node="root")["id"]
    seq_two = backend.session.ledger.last_seq
    backend.purge_checkpoint()
    third = backend.add_memory("root", "roofline after the purge", current_node="root")["id"]
    at = lambda seq: [h["entry_id"] for h in backend.search_memory("roofline", ["root"], limit=5, as_of=seq)["results"]]  # noqa: E731
    assert at(seq_one) == [first] and at(seq_two) == [second] and at(None) == [third]


def test_react_trace_is_flat_and_travels_in_time(make) -> None:
    backend = make()
    a = backend.react_add("Thought: tile the k loop", {"node_id": "n1"})["id"]
    seq = backend.session.ledger.last_seq
    b = backend.react_add("Thought: tile the j loop", {"node_id": "n2"})["id"]
    assert {e["id"] for e in backend.react_search("tile the loop", limit=5)} == {a, b}
    assert [e["id"] for e in backend.react_search("tile the loop", limit=5, as_of=seq)] == [a]


def test_an_empty_scope_and_unknown_nodes_find_nothing(make) -> None:
    backend = make()
    backend.add_memory("n1", "cache blocking", current_node="n1")
    assert backend.search_memory("cache", [], limit=5) == {"results": []}
    assert backend.search_memory("cache", ["n", "n12", "n1_"], limit=5) == {"results": []}


def test_the_engine_that_answered_is_named(make) -> None:
    backend = make()
    backend.add_memory("root", "x", current_node="root")
    assert backend.health()["backend"] in ("embedded", "letta")
    assert isinstance(backend.session.engine.name, str)
