"""Letta benchmark (issue 5), against one real Letta 0.16.7 server (brought up if needed).

    python -m bench.letta_bench [--passages 10000] [--one-by-one 200]

Measures, in one run: replay passages/s by batches vs one-by-one ``passages.create`` (ARI's
way today); search p50 at the full passage count; and the recall of ARI's fixed over-fetch
(``top_k = max(200, limit*40)`` + post-filter) vs this projection on a crowded pool.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ledger import Ledger
from projections import letta_server as letta_harness
from projections.engines.letta import delete_agent

from .common import Figure, Timer, report
from .projection_bench import VOCAB, build_tree, text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--one-by-one", type=int, default=200, help="passages inserted one by one for the baseline")
    parser.add_argument("--crowd", type=int, default=2000)
    args = parser.parse_args(argv)
    server = letta_harness.server() or letta_harness.up()
    os.environ["LETTA_BASE_URL"] = server.base_url
    os.environ["ARI_MEMORY_EMBED_URL"] = server.embedding_url
    from projections.api.backend import MemoryBackend

    work = Path(tempfile.mkdtemp(prefix="ari-letta-bench-"))
    backends: list[MemoryBackend] = []
    try:
        # -- replay by batches vs one by one
        rng = random.Random(3)
        nodes = max(1, args.passages // 100)
        tree = build_tree(max(nodes, 21), rng)
        ckpt = work / "big"
        with Ledger.open(ckpt) as ledger, ledger.batch() as batch:
            for node, ancestors in tree.items():
                batch.append(node, "node_started", {"parent_id": ancestors[-1] if ancestors else None, "ancestor_ids": ancestors, "depth": len(ancestors)}, current_node=node)
            names = list(tree)
            for i in range(args.passages):
                node = names[i % len(names)]
                batch.append(node, "memory_added", {"text": text(rng, i)}, current_node=node)
        backend = MemoryBackend(ckpt)
        backends.append(backend)
        backend.session.projector.catch_up()  # the local projection folds first, outside the timing
        letta = backend.session.letta.projection
        letta.attach(create=True)
        with Timer() as t:
            letta.catch_up()
        batched = args.passages / t.seconds

        client = letta.client
        baseline_name = f"ari_bench_one_by_one_{os.getpid()}"
        agent = client.agents.create(name=baseline_name, model="letta/letta-free", embedding_config=letta.embedding,
                                     include_base_tools=False)
        try:
            with Timer() as t:
                for i in range(args.one_by_one):
                    client.agents.passages.create(agent.id, text=text(rng, i), tags=[letta.node_tag, "n:x", "k:note", f"e:{i}"])
            one_by_one = args.one_by_one / t.seconds
        finally:
            delete_agent(client, baseline_name)

        # -- search p50 at the full count, from the deep node (limit 5)
        scope = tree["deep"] + ["deep"]
        queries = [" ".join(rng.choices(VOCAB, k=12)) for _ in range(40)]
        latencies, rounds = [], []
        for q in queries:
            started = time.perf_counter()
            hits = backend.search_memory(q, scope, 5)["results"]
            latencies.append((time.perf_counter() - started) * 1000)
            rounds.append(letta.last_search["rounds"])
            assert len(hits) == 5 and all(h["node_id"] in scope for h in hits)
        p50 = statistics.median(latencies)

        # -- crowded pool: ARI's fixed over-fetch vs widening
        crowd_ckpt = work / "crowd"
        with Ledger.open(crowd_ckpt) as ledger, ledger.batch() as batch:
            for i in range(args.crowd):
                batch.append("crowd", "memory_added", {"text": f"stencil GFlops roofline bandwidth result {i}"}, current_node="crowd")
            own = [batch.append("mine", "memory_added", {"text": f"grocery list item {i}: apples and bread"}, current_node="mine").id for i in range(5)]
        crowd = MemoryBackend(crowd_ckpt)
        backends.append(crowd)
        query = "stencil GFlops roofline bandwidth result"
        ours = {h["entry_id"] for h in crowd.search_memory(query, ["mine"], 5)["results"]}
        cl = crowd.session.letta.projection
        ari = cl.client.agents.passages.search(cl.agent_id, query=query, top_k=max(200, 5 * 40))
        ari_hits = [eid for r in ari.results for eid in [next(t[2:] for t in r.tags if t.startswith("e:"))]
                    if crowd.session.projector.catalog.entries[eid].node_id == "mine"]
        recall_ours = len(ours & set(own)) / len(own)
        recall_ari = len(set(ari_hits[:5]) & set(own)) / len(own)
    finally:
        for b in backends:
            delete_agent(b.session.letta.projection.client, b.session.letta.projection.agent_name)
            b.close()
        shutil.rmtree(work, ignore_errors=True)
    return report([
        Figure("replay by batches (create_many, 200/batch)", batched, "passages/s", one_by_one, ">= 5 x one-by-one passages.create", batched >= 5 * one_by_one),
        Figure(f"search_memory p50 at {args.passages:,} passages, depth-20 scope, limit 5 (max rounds {max(rounds)})", p50, "ms", None, "reported", True),
        Figure(f"recall, crowded pool ({args.crowd:,} better-matching sibling passages), this projection", recall_ours, "", None, "== 1.0 (exact)", recall_ours == 1.0),
        Figure("recall, same pool, ARI's fixed over-fetch top_k=max(200, limit*40) + post-filter", recall_ari, "", None, "reported (for comparison)", True),
    ])


if __name__ == "__main__":
    raise SystemExit(main())
