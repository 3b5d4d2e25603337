"""Projection benchmark (issue 3): scoped search latency, snapshot reopen, cold rebuild, RSS.

    python -m bench.projection_bench [--nodes 1000] [--per-node 100] [--scale 10]

A synthetic BFTS checkpoint (a depth-20 spine plus random branches) is written to the log;
each measurement then runs in a fresh interpreter so its peak RSS is its own.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
from pathlib import Path

from ledger import Ledger

from .common import Figure, report, run_child

DEPTH = 20
VOCAB = (
    "stencil tiling cache blocking openmp threads vectorisation avx2 avx512 roofline loopline bandwidth "
    "latency halo exchange numa first-touch prefetch unroll fusion gflops speedup regression baseline "
    "ablation validation build failed linker error compiler flags O3 march native memory bound compute "
    "bound kernel sweep grid 256 512 repetitions variance verified mismatch reference solution residual"
).split()


def build_tree(nodes: int, rng: random.Random) -> dict[str, list[str]]:
    """node → ancestors. ``deep`` is the end of a depth-20 spine; the rest hang anywhere above depth 20."""
    tree: dict[str, list[str]] = {"root": []}
    parent = "root"
    for d in range(1, DEPTH + 1):
        node = "deep" if d == DEPTH else f"spine{d}"
        tree[node] = tree[parent] + [parent]
        parent = node
    shallow = [n for n, a in tree.items() if len(a) < DEPTH]
    while len(tree) < nodes:
        parent = rng.choice(shallow)
        node = f"n{len(tree)}"
        tree[node] = tree[parent] + [parent]
        if len(tree[node]) < DEPTH:
            shallow.append(node)
    return tree


def text(rng: random.Random, i: int) -> str:
    return f"RESULT {i}: " + " ".join(rng.choices(VOCAB, k=24))


def write_checkpoint(ckpt: Path, nodes: int, per_node: int, seed: int) -> None:
    rng = random.Random(seed)
    tree = build_tree(nodes, rng)
    i = 0
    with Ledger.open(ckpt) as ledger:
        with ledger.batch() as batch:
            for node, ancestors in tree.items():
                body = {"parent_id": ancestors[-1] if ancestors else None, "ancestor_ids": ancestors, "depth": len(ancestors)}
                batch.append(node, "node_started", body, current_node=node)
        for node in tree:
            with ledger.batch() as batch:
                for _ in range(per_node):
                    batch.append(node, "memory_added", {"text": text(rng, i)}, current_node=node)
                    i += 1
    (ckpt / "tree.json").write_text(json.dumps(tree))


COLD = """
import json, sys, time
from ledger import Ledger
from projections.models.embedder import get_embedder
from projections.engines.local import Projector
from bench.common import own_peak_rss_mb
embedder = get_embedder()
embedder.embed(["warm up"])
with Ledger.open(sys.argv[1]) as ledger:
    t = time.perf_counter()
    p = Projector(ledger, embedder, use_snapshot=False)
    p.catch_up()
    cold = time.perf_counter() - t
    entries = len(p.catalog.entries)
    p.save()
print(json.dumps({"entries": entries, "cold_s": cold, "rss": own_peak_rss_mb()}))
"""

RAW = """
import json, sys, time
from ledger import Ledger
from projections.models.embedder import get_embedder
embedder = get_embedder()
embedder.embed(["warm up"])
with Ledger.open(sys.argv[1]) as ledger:
    texts = [e.body["text"] for e in ledger.events() if e.type == "memory_added"]
t = time.perf_counter()
for i in range(0, len(texts), 2048):  # the same chunking the projector uses
    embedder.raw_embed(texts[i : i + 2048])
print(json.dumps({"raw_s": time.perf_counter() - t}))
"""

SEARCH = """
import json, sys, time, random
import numpy as np
from bench.common import own_peak_rss_mb
from projections.models.embedder import get_embedder
get_embedder().embed(["warm up"])  # model load is not part of reopening a checkpoint
t = time.perf_counter()
from projections.api.backend import MemoryBackend
b = MemoryBackend(sys.argv[1])
b.health()
reopen = time.perf_counter() - t
tree = json.load(open(sys.argv[1] + "/tree.json"))
scope = tree["deep"] + ["deep"]
words = sys.argv[2].split()
rng = random.Random(7)
queries = [" ".join(rng.choices(words, k=12)) for _ in range(1200)]
for q in queries[:200]:
    b.search_memory(q, scope, 5)
lat = []
for q in queries[200:]:
    t = time.perf_counter()
    r = b.search_memory(q, scope, 5)
    lat.append((time.perf_counter() - t) * 1000)
    assert len(r["results"]) == 5 and all(x["node_id"] in scope for x in r["results"])
print(json.dumps({"loaded": b.session.projector.loaded_from_snapshot, "reopen_s": reopen, "p50": float(np.percentile(lat, 50)),
                  "p99": float(np.percentile(lat, 99)), "rss": own_peak_rss_mb(), "scope_entries": sum(len(b.session.projector.catalog.node_entries(n)) for n in scope)}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--per-node", type=int, default=100)
    parser.add_argument("--scale", type=int, default=10, help="the larger checkpoint is this many times bigger")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ari-proj-bench-", dir=args.dir))
    words = " ".join(VOCAB)
    try:
        small, large = work / "small", work / "large"
        write_checkpoint(small, args.nodes, args.per_node, seed=1)
        cold = json.loads(run_child(COLD, str(small)))
        cold.update(json.loads(run_child(RAW, str(small))))
        warm = json.loads(run_child(SEARCH, str(small), words))
        write_checkpoint(large, args.nodes * args.scale, args.per_node, seed=1)
        run_child(COLD, str(large))
        big = json.loads(run_child(SEARCH, str(large), words))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = cold["entries"]
    cold_rate, raw_rate = n / cold["cold_s"], n / cold["raw_s"]
    figures = [
        Figure(f"search_memory p50, limit 5, depth-20 node ({warm['scope_entries']:,} entries in scope of {n:,})", warm["p50"], "ms", None, "<= 2 ms", warm["p50"] <= 2.0),
        Figure("search_memory p99, same", warm["p99"], "ms", None, "reported", True),
        Figure(
            f"same scope in a {args.scale}x checkpoint ({n * args.scale:,} entries), p50",
            big["p50"],
            "ms",
            warm["p50"],
            "<= 1.5 x the small checkpoint's p50",
            big["p50"] <= 1.5 * warm["p50"],
        ),
        Figure("reopen with an up-to-date snapshot", warm["reopen_s"], "s", None, "<= 1 s", warm["loaded"] and warm["reopen_s"] <= 1.0),
        Figure("cold rebuild (decode + fold + embed)", cold_rate, "entries/s", raw_rate, ">= 0.7 x raw WordLlama embed", cold_rate >= 0.7 * raw_rate),
        Figure(f"peak RSS, cold rebuild of {n:,} entries", cold["rss"], "MB", None, "<= 400 MB", cold["rss"] <= 400),
        Figure(f"peak RSS, reopen + 1,200 searches at {n:,} entries", warm["rss"], "MB", None, "<= 400 MB", warm["rss"] <= 400),
    ]
    return report(figures)


if __name__ == "__main__":
    raise SystemExit(main())
