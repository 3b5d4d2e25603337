"""Letta benchmark, against one real Letta 0.16.7 server (brought up if none runs).

    python -m bench.letta_bench [--nodes 111] [--per-node 10] [--queries 200] [--crowds 600,2000,10000]

Measures, in one run and on the same agents:

- replay: passages/s pushed by batches, beside ARI's one-by-one ``passages.create``;
- reading from Letta (``ARI_MEMORY_SEARCH_ENGINE=letta``) on a tree of ``--nodes`` nodes,
  ``--per-node`` entries each: ``search_memory`` p50/p99 from random nodes, beside ARI's
  plain call (one ``passages.search`` with ``top_k = max(200, limit*40)``, then a post-filter)
  for the same queries, and how many queries each cut short;
- crowded pools: ``M`` sibling passages matching the query better than any of the scope's 6,
  the 6 written after the crowd or spread through it in time; the time of an exact read beside
  the plain call's, and the plain call's recall.

Reading from the local index (the default) is in ``bench/projection_bench.py``.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger import Ledger
from projections import letta_server
from projections.adapters.cli.framework import Parser
from projections.engines.embedded import EmbeddedEngine
from projections.engines.letta import delete_agent

from .common import Figure, Timer, report
from .projection_bench import VOCAB, text

LIMIT = 5
PLAIN_TOP_K = max(200, LIMIT * 40)  # ARI's letta_backend: max(letta_overfetch, limit * 40)
CROWD_QUERY = "stencil GFlops roofline bandwidth result"


def tree_of(nodes: int, rng: random.Random) -> dict[str, list[str]]:
    """node → ancestors: a BFTS-like tree, each node a child of a random earlier one."""
    tree: dict[str, list[str]] = {"root": []}
    for i in range(1, nodes):
        parent = rng.choice(list(tree))
        tree[f"n{i}"] = tree[parent] + [parent]
    return tree


def ms(seconds: float) -> float:
    return seconds * 1000


def timed(call: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """(milliseconds, result) of ``call(*args)``."""
    started = time.perf_counter()
    result = call(*args)
    return ms(time.perf_counter() - started), result


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else values[0]


class Plain:
    """ARI's read: one ranked call over the whole agent, then keep the scope's passages."""

    def __init__(self, backend) -> None:
        self.letta = backend.session.letta.projection
        self.entries = backend.session.projector.catalog.entries

    def search(self, query: str, scope: list[str]) -> list[str]:
        found = self.letta.client.agents.passages.search(self.letta.agent_id, query=query, top_k=PLAIN_TOP_K)
        ids = [next((t[2:] for t in r.tags or () if t.startswith("e:")), None) for r in found.results]
        return [i for i in ids if i in self.entries and self.entries[i].node_id in scope][:LIMIT]


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=111)
    parser.add_argument("--per-node", type=int, default=10)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--one-by-one", type=int, default=100, help="passages inserted one by one for the baseline")
    parser.add_argument("--crowds", default="600,2000,10000", help="crowd sizes M, comma-separated")
    args = parser.parse_args(argv)
    crowds = [int(m) for m in args.crowds.split(",") if m]
    server = letta_server.server() or letta_server.up()
    os.environ["LETTA_BASE_URL"] = server.base_url
    os.environ["LETTA_API_KEY"] = server.api_key
    os.environ["ARI_MEMORY_EMBED_URL"] = server.embedding_url
    os.environ["ARI_MEMORY_SEARCH_ENGINE"] = "letta"
    from projections.api import MemoryBackend

    work = Path(tempfile.mkdtemp(prefix="ari-letta-bench-"))
    backends: list[MemoryBackend] = []

    def open_synced(ckpt: Path) -> tuple[MemoryBackend, float]:
        backend = MemoryBackend(ckpt)
        backends.append(backend)
        backend.session.projector.catch_up()  # the local fold first, outside the timing
        letta = backend.session.letta.projection
        with Timer() as t:
            letta.restore()
        return backend, letta.passages / t.seconds

    figures: list[Figure] = []
    try:
        # -- the tree: replay rate, then reads from random nodes
        rng = random.Random(7)
        tree = tree_of(args.nodes, rng)
        with Ledger.open(work / "tree") as ledger, ledger.batch() as batch:
            for node, ancestors in tree.items():
                batch.append(
                    node,
                    "node_started",
                    {
                        "parent_id": ancestors[-1] if ancestors else None,
                        "ancestor_ids": ancestors,
                        "depth": len(ancestors),
                    },
                    current_node=node,
                )
            for i in range(args.nodes * args.per_node):
                node = rng.choice(list(tree))
                batch.append(node, "memory_added", {"text": text(rng, i)}, current_node=node)
        backend, batched = open_synced(work / "tree")
        one_by_one = _one_by_one(backend, rng, args.one_by_one)
        figures.append(
            Figure(
                "replay by batches (create_many, 200/batch)",
                batched,
                "passages/s",
                one_by_one,
                ">= 5 x one-by-one passages.create",
                batched >= 5 * one_by_one,
            )
        )

        plain, embedded = Plain(backend), EmbeddedEngine(backend.session.projector)
        ours_ms, plain_ms, short_plain, short_ours, differ = [], [], 0, 0, 0
        for _ in range(args.queries):
            node = rng.choice(list(tree))
            scope = tree[node] + [node]
            query = " ".join(rng.choices(VOCAB, k=8))
            t_ours, found = timed(backend.search_memory, query, scope, LIMIT)
            t_plain, plain_ids = timed(plain.search, query, scope)
            hits = found["results"]
            ours_ms.append(t_ours)
            plain_ms.append(t_plain)
            exact = [i for i, _s in embedded.search(query, scope, LIMIT, None)]
            short_ours += len(hits) < len(exact)
            short_plain += len(plain_ids) < len(exact)
            differ += {h["entry_id"] for h in hits} != set(exact)
        stats = backend.session.letta.projection.last_search
        figures += [
            Figure(
                f"read from Letta p50, {args.nodes} nodes x {args.per_node} entries, limit {LIMIT}",
                statistics.median(ours_ms),
                "ms",
                statistics.median(plain_ms),
                "<= 2 x ARI's plain call p50",
                statistics.median(ours_ms) <= 2 * statistics.median(plain_ms),
            ),
            Figure(
                "read from Letta p99",
                p99(ours_ms),
                "ms",
                p99(plain_ms),
                "<= 2 x ARI's plain call p99",
                p99(ours_ms) <= 2 * p99(plain_ms),
            ),
            Figure(
                f"queries cut short / differing from the local index's answer, of {args.queries}",
                short_ours + differ,
                "",
                None,
                "0 (exact)",
                short_ours + differ == 0,
            ),
            Figure(
                f"queries ARI's plain call cut short, of {args.queries} (last plan: {stats})",
                short_plain,
                "",
                None,
                "reported",
                True,
            ),
        ]

        # -- crowded pools
        for m in crowds:
            ckpt = work / f"crowd{m}"
            spread_every = max(1, m // 6)
            with Ledger.open(ckpt) as ledger, ledger.batch() as batch:
                spread = 0
                for i in range(m):
                    batch.append("crowd", "memory_added", {"text": f"{CROWD_QUERY} {i}"}, current_node="crowd")
                    if i % spread_every == spread_every // 2 and spread < 6:
                        batch.append(
                            "spread",
                            "memory_added",
                            {"text": f"weather report {spread}: rain and wind"},
                            current_node="spread",
                        )
                        spread += 1
                for i in range(6):
                    batch.append(
                        "last",
                        "memory_added",
                        {"text": f"grocery list item {i}: apples and bread"},
                        current_node="last",
                    )
            crowd, _rate = open_synced(ckpt)
            plain = Plain(crowd)
            for layout in ("last", "spread"):
                exact = {
                    i for i, _s in EmbeddedEngine(crowd.session.projector).search(CROWD_QUERY, [layout], LIMIT, None)
                }
                ours = [timed(crowd.search_memory, CROWD_QUERY, [layout], LIMIT) for _ in range(5)]
                plains = [timed(plain.search, CROWD_QUERY, [layout]) for _ in range(5)]
                t_ours, t_plain = statistics.median(t for t, _ in ours), statistics.median(t for t, _ in plains)
                got = {h["entry_id"] for h in ours[0][1]["results"]}
                recall_plain = len(set(plains[0][1]) & exact) / len(exact)
                plan = crowd.session.letta.projection.last_search
                figures.append(
                    Figure(
                        f"crowded pool M={m:,}, scope written {'after the crowd' if layout == 'last' else 'through it'}: exact read "
                        f"({'exact' if got == exact else 'NOT EXACT'}; plan {plan}; ARI's plain call recall {recall_plain:.2f})",
                        t_ours,
                        "ms",
                        t_plain,
                        "exact, <= 2 x ARI's plain call",
                        got == exact and t_ours <= 2 * t_plain,
                    )
                )
    finally:
        for b in backends:
            delete_agent(b.session.letta.projection.client, b.session.letta.projection.agent_name)
            b.close()
        shutil.rmtree(work, ignore_errors=True)
    return report(figures)


def _one_by_one(backend, rng: random.Random, count: int) -> float:
    """ARI's insert path: one ``agents.passages.create`` per entry, into a scratch agent."""
    letta = backend.session.letta.projection
    client = letta.client
    name = f"ari_bench_one_by_one_{os.getpid()}"
    agent = client.agents.create(
        name=name, model="letta/letta-free", embedding_config=letta.embedding, include_base_tools=False
    )
    try:
        with Timer() as t:
            for i in range(count):
                client.agents.passages.create(
                    agent.id, text=text(rng, i), tags=[letta.node_tag, "n:x", "k:note", f"e:{i}"]
                )
        return count / t.seconds
    finally:
        delete_agent(client, name)


if __name__ == "__main__":
    raise SystemExit(main())
