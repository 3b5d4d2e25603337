"""Projection benchmark (issues 3 and 12): scoped search latency at a million entries, its cost
in a 10x smaller checkpoint, reopen, cold rebuild, and peak RSS of each.

    python -m bench.projection_bench [--nodes 1000] [--per-node 100] [--scale 10] [--repeats 5]
                                     [--keep DIR] [--only-cold]

A synthetic BFTS checkpoint (a depth-20 spine plus random branches) is written to the log,
and a ``--scale`` times larger one with the same spine; each measurement runs in a fresh
interpreter so its peak RSS is its own. Searches in the two checkpoints alternate
(``--repeats`` times each), so both see the same machine; every figure is printed beside
its limit, with the range over the repeats. ``--keep DIR`` builds the two checkpoints in DIR
once and reuses them on later runs (the 1M one takes minutes to write); ``--only-cold`` measures
only the cold folds (time beside one core's embed, peak RSS, snapshot size).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
from pathlib import Path

from ledger import Ledger
from projections.adapters.cli.framework import Parser

from .common import Figure, report, run_child

DEPTH = 20
VOCAB = [
    "stencil",
    "tiling",
    "cache",
    "blocking",
    "openmp",
    "threads",
    "vectorisation",
    "avx2",
    "avx512",
    "roofline",
    "loopline",
    "bandwidth",
    "latency",
    "halo",
    "exchange",
    "numa",
    "first-touch",
    "prefetch",
    "unroll",
    "fusion",
    "gflops",
    "speedup",
    "regression",
    "baseline",
    "ablation",
    "validation",
    "build",
    "failed",
    "linker",
    "error",
    "compiler",
    "flags",
    "O3",
    "march",
    "native",
    "memory",
    "bound",
    "compute",
    "bound",
    "kernel",
    "sweep",
    "grid",
    "256",
    "512",
    "repetitions",
    "variance",
    "verified",
    "mismatch",
    "reference",
    "solution",
    "residual",
]


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
                body = {
                    "parent_id": ancestors[-1] if ancestors else None,
                    "ancestor_ids": ancestors,
                    "depth": len(ancestors),
                }
                batch.append(node, "node_started", body, current_node=node)
        for node in tree:
            with ledger.batch() as batch:
                for _ in range(per_node):
                    batch.append(node, "memory_added", {"text": text(rng, i)}, current_node=node)
                    i += 1
    (ckpt / "tree.json").write_text(json.dumps(tree))


EMPTY = """
import json, sys
from bench.common import own_peak_rss_mb
from projections.api import MemoryBackend
from projections.models.embedder import get_embedder
b = MemoryBackend(sys.argv[1])
b.health(), b.get_node_memory("root"), b.get_experiment_context(), b.list_all_nodes()
empty = {"rss": own_peak_rss_mb(), "loaded": get_embedder().loaded}
b.add_memory("root", "roofline of the stencil kernel", current_node="root")
b.search_memory("stencil", ["root"], 5)
print(json.dumps({**empty, "rss_model": own_peak_rss_mb()}))
"""

COLD = """
import json, sys, time
from ledger import Ledger
from projections.models.embedder import get_embedder
from projections.engines.local import Projector
from projections.engines.snapshot import SNAPSHOT_NAME
from ledger.layout import store_dir
from ledger.log import LOG_NAME
from bench.common import own_peak_rss_mb
embedder = get_embedder()
embedder.embed(["warm up"])
import projections.engines.local as local
writes, write_snapshot = [], local.write_snapshot
def timed_write(*args):  # the snapshots a fold writes as it goes (none before issue 30's item 3)
    t = time.perf_counter()
    write_snapshot(*args)
    writes.append(time.perf_counter() - t)
local.write_snapshot = timed_write
with Ledger.open(sys.argv[1]) as ledger:
    t, c = time.perf_counter(), time.process_time()
    p = Projector(ledger, embedder, use_snapshot=False)
    p._next_save = local.SNAPSHOT_EVERY = float("inf")  # catch_up would save at its end: timed apart below
    p.catch_up()
    cold, cold_cpu = time.perf_counter() - t, time.process_time() - c
    folding_writes = list(writes)
    entries = len(p.catalog.entries)
    t = time.perf_counter()
    p.save()
    save = time.perf_counter() - t
size = (store_dir(ledger.checkpoint_dir) / SNAPSHOT_NAME).stat().st_size
print(json.dumps({"entries": entries, "cold_s": cold, "fold_saves": len(folding_writes), "fold_saves_s": sum(folding_writes), "cold_cpu": cold_cpu, "save_s": save, "rss": own_peak_rss_mb(),
                  "snapshot_mb": size / 2**20, "log_mb": (store_dir(ledger.checkpoint_dir) / LOG_NAME).stat().st_size / 2**20}))
"""

RAW = """
import json, sys, time
from ledger import Ledger
from projections.models.embedder import get_embedder
embedder = get_embedder()
embedder.embed(["warm up"])
with Ledger.open(sys.argv[1]) as ledger:
    texts = [e.body["text"] for e in ledger.events() if e.type == "memory_added"]
t, c = time.perf_counter(), time.process_time()
for i in range(0, len(texts), 2048):  # the same chunking the projector uses
    embedder.raw_embed(texts[i : i + 2048])
print(json.dumps({"raw_s": time.perf_counter() - t, "raw_cpu": time.process_time() - c}))
"""

EMBED = """
import json, sys, time
from ledger import Ledger
from projections.models.embedder import get_embedder
embedder = get_embedder()
embedder.embed(["warm up", "on one thread"])
with Ledger.open(sys.argv[1]) as ledger:
    texts = [e.body["text"] for e in ledger.events() if e.type == "memory_added"]
t = time.perf_counter()
for i in range(0, len(texts), 2048):  # the project's own embedder, one thread, the fold's chunks
    embedder.embed(texts[i : i + 2048])
print(json.dumps({"embed_s": time.perf_counter() - t}))
"""

SEARCH = """
import json, sys, time, random
import numpy as np
from bench.common import own_peak_rss_mb
from projections.models.embedder import get_embedder
get_embedder().embed(["warm up"])  # model load is not part of reopening a checkpoint
t = time.perf_counter()
from projections.api import MemoryBackend
b = MemoryBackend(sys.argv[1])
b.health()
reopen = time.perf_counter() - t
tree = json.load(open(sys.argv[1] + "/tree.json"))
scope = tree["deep"] + ["deep"]
words = sys.argv[2].split()
rng = random.Random(7)
queries = [" ".join(rng.choices(words, k=12)) for _ in range(1200)]
t = time.perf_counter()
b.search_memory(queries[0], scope, 5)  # checks and maps the scope's rows, checks sampled vectors
first = (time.perf_counter() - t) * 1000
for q in queries[1:200]:
    b.search_memory(q, scope, 5)
lat, cpu = [], []
for q in queries[200:]:
    t, c = time.perf_counter(), time.process_time()
    r = b.search_memory(q, scope, 5)
    lat.append((time.perf_counter() - t) * 1000)
    cpu.append((time.process_time() - c) * 1000)
    assert len(r["results"]) == 5 and all(x["node_id"] in scope for x in r["results"])
rss = own_peak_rss_mb()
print(json.dumps({"loaded": b.session.projector.loaded_from_snapshot, "reopen_s": reopen, "first_ms": first, "p50": float(np.percentile(lat, 50)),
                  "p99": float(np.percentile(lat, 99)), "cpu_p50": float(np.percentile(cpu, 50)), "rss": rss,
                  "scope_entries": sum(len(b.session.projector.catalog.node_entries(n)) for n in scope)}))
"""


RANKS = """
import json, random, sys
import numpy as np
from ledger import Ledger
from projections.models.embedder import get_embedder
from projections.models.frozen import dequantise, quantise
from projections.models.semantic import dots
# The vectors' stored precision (snapshot format 7) against float16 (format 6): how many top-5
# answers differ, over the retrieval-quality set and random scoped queries of the checkpoint.
embedder, rng = get_embedder(), random.Random(11)
def top5(rows, query):
    scores = dots(rows, query)
    return np.lexsort((np.arange(len(rows)), -scores))[:5].tolist()  # ties: the older row
def differs(rows, query):
    return top5(dequantise(*quantise(rows)), query) != top5(rows.astype(np.float16).astype(np.float32), query)
cases = json.load(open(sys.argv[2]))
fixed = sum(differs(embedder.embed(c["entries"]), embedder.embed_one(c["query"])) for c in cases)
tree = json.load(open(sys.argv[1] + "/tree.json"))
texts, nodes = [], []
with Ledger.open_readonly(sys.argv[1]) as ledger:
    for e in ledger.events():
        if e.type == "memory_added":
            texts.append(e.body["text"]); nodes.append(e.node)
vectors, rows_of = embedder.embed(texts), {}
for i, node in enumerate(nodes):
    rows_of.setdefault(node, []).append(i)
words, names, scoped = sys.argv[3].split(), list(tree), 0
for _ in range(int(sys.argv[4])):
    node = rng.choice(names)
    rows = [i for n in tree[node] + [node] for i in rows_of.get(n, [])]
    scoped += differs(vectors[rows], embedder.embed_one(" ".join(rng.choices(words, k=12))))
print(json.dumps({"fixed": int(fixed), "fixed_of": len(cases), "scoped": int(scoped), "scoped_of": int(sys.argv[4])}))
"""


def _spread(values: list[float], unit: str) -> str:
    """`` (low–high unit over n runs)`` when there was more than one run."""
    return f" ({min(values):,.2f}–{max(values):,.2f} {unit} over {len(values)} runs)" if len(values) > 1 else ""


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--per-node", type=int, default=100)
    parser.add_argument("--scale", type=int, default=10, help="the larger checkpoint is this many times bigger")
    parser.add_argument("--repeats", type=int, default=5, help="search runs per checkpoint, alternating")
    parser.add_argument("--dir", default=None)
    parser.add_argument("--keep", default=None, help="build the checkpoints here once and reuse them")
    parser.add_argument("--only-cold", action="store_true", help="only the cold folds: time, peak RSS, size")
    parser.add_argument("--rank-queries", type=int, default=300, help="random scoped queries for the top-5 count")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ari-proj-bench-", dir=args.dir))
    kept = Path(args.keep) if args.keep else work
    try:
        small, large = kept / "small", kept / "large"
        reuse(small, args.nodes, args.per_node)
        reuse(large, args.nodes * args.scale, args.per_node)
        cold = json.loads(run_child(COLD, str(small)))
        cold.update(json.loads(run_child(EMBED, str(small))))
        big_cold = json.loads(run_child(COLD, str(large)))
        big_cold.update(json.loads(run_child(EMBED, str(large))))
        if args.only_cold:
            return report(cold_figures(cold, big_cold))
        empty = json.loads(run_child(EMPTY, str(work / "empty")))
        cold.update(json.loads(run_child(RAW, str(small))))
        fixture = Path(__file__).resolve().parent.parent / "fixtures" / "retrieval_quality.json"
        cold.update(json.loads(run_child(RANKS, str(small), str(fixture), " ".join(VOCAB), str(args.rank_queries))))
        runs = searches(small, large, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report(figures(args, empty, cold, big_cold, runs))


def reuse(ckpt: Path, nodes: int, per_node: int) -> None:
    """Write the checkpoint unless this very one is already there (its marker is written last)."""
    marker, shape = ckpt / "bench.json", {"nodes": nodes, "per_node": per_node, "seed": 1}
    if marker.exists() and json.loads(marker.read_text()) == shape:
        return
    shutil.rmtree(ckpt, ignore_errors=True)
    write_checkpoint(ckpt, nodes, per_node, seed=1)
    marker.write_text(json.dumps(shape))


def searches(small: Path, large: Path, repeats: int) -> dict[str, list[dict]]:
    """Searches in the two checkpoints, alternating, ``repeats`` runs each."""
    runs: dict[str, list[dict]] = {"small": [], "large": []}
    for _ in range(repeats):
        for name, path in (("small", small), ("large", large)):
            runs[name].append(json.loads(run_child(SEARCH, str(path), " ".join(VOCAB))))
    return runs


def figures(
    args: argparse.Namespace, empty: dict, cold: dict, big_cold: dict, runs: dict[str, list[dict]]
) -> list[Figure]:
    n, big = cold["entries"], big_cold["entries"]
    small, large = runs["small"], runs["large"]
    p50, p50_small = statistics.median(r["p50"] for r in large), statistics.median(r["p50"] for r in small)
    ratios = [b["p50"] / s["p50"] for s, b in zip(small, large)]
    reopen = max(r["reopen_s"] for r in large)
    rss = max(r["rss"] for r in large)
    cold_rate, raw_rate = n / cold["cold_s"], n / cold["raw_s"]
    return [
        Figure(
            f"search_memory p50, limit 5, depth-20 node ({large[0]['scope_entries']:,} entries in scope of {big:,}), "
            f"query embedding included{_spread([r['p50'] for r in large], 'ms')}",
            p50,
            "ms",
            None,
            "<= 0.3 ms",
            p50 <= 0.3,
        ),
        Figure(
            f"search_memory p99, same{_spread([r['p99'] for r in large], 'ms')}",
            statistics.median(r["p99"] for r in large),
            "ms",
            None,
            "reported",
            True,
        ),
        Figure(
            f"search_memory p50 in CPU time, same{_spread([r['cpu_p50'] for r in large], 'ms')}",
            statistics.median(r["cpu_p50"] for r in large),
            "ms",
            None,
            "reported",
            True,
        ),
        Figure(
            f"same scope, {big:,} entries, p50 (baseline: the same scope in {n:,}; ratio run by run{_spread(ratios, 'x')})",
            p50,
            "ms",
            p50_small,
            "ratio <= 1.2",
            p50 <= 1.2 * p50_small,
        ),
        Figure(
            f"first search after that reopen (checks and maps the scope's rows){_spread([r['first_ms'] for r in large], 'ms')}",
            statistics.median(r["first_ms"] for r in large),
            "ms",
            None,
            "reported",
            True,
        ),
        Figure(
            f"reopen with an up-to-date snapshot, {big:,} entries (slowest run)",
            reopen,
            "s",
            None,
            "<= 1 s",
            all(r["loaded"] for r in large) and reopen <= 1.0,
        ),
        Figure(
            f"peak RSS, reopen + 1,200 searches at {big:,} entries (largest run)",
            rss,
            "MB",
            None,
            "<= 600 MB",
            rss <= 600,
        ),
        Figure(
            f"peak RSS, reopen + 1,200 searches at {n:,} entries (largest run)",
            max(r["rss"] for r in small),
            "MB",
            None,
            "<= 400 MB",
            max(r["rss"] for r in small) <= 400,
        ),
        Figure(
            "peak RSS, an empty backend opened and read (model not loaded)",
            empty["rss"],
            "MB",
            empty["rss_model"],
            "model not loaded; baseline: the same process after its first search",
            not empty["loaded"],
        ),
        Figure(
            f"cold rebuild (decode + fold + embed; in CPU time the ratio is {cold['raw_cpu'] / cold['cold_cpu']:.2f})",
            cold_rate,
            "entries/s",
            raw_rate,
            ">= 0.7 x raw WordLlama embed",
            cold_rate >= 0.7 * raw_rate,
        ),
        *cold_figures(cold, big_cold),
        Figure(
            f"top-5 answers that differ, stored vectors (12-bit) vs float16 (format 6): the retrieval set's "
            f"{cold['fixed_of']} queries ({cold['fixed']} differ) and {cold['scoped_of']} random scoped queries of {n:,}",
            cold["fixed"] + cold["scoped"],
            "queries",
            None,
            "reported",
            True,
        ),
    ]


def cold_figures(cold: dict, big_cold: dict) -> list[Figure]:
    """The cold folds: each beside one core's embed of the same texts, peak RSS, snapshot size."""
    n, big = cold["entries"], big_cold["entries"]
    return [
        *(
            Figure(
                f"cold fold of {c['entries']:,} entries (decode + fold + embed, both cores) against one core "
                "embedding the same texts (StaticEmbedder.embed, the fold's chunks, same run)",
                c["cold_s"],
                "s",
                c["embed_s"],
                "<= 1.0 x one core's embed",
                c["cold_s"] <= c["embed_s"],
            )
            for c in (cold, big_cold)
        ),
        Figure(
            f"peak RSS, cold rebuild of {n:,} entries (incl. writing the snapshot)",
            cold["rss"],
            "MB",
            None,
            "<= 400 MB",
            cold["rss"] <= 400,
        ),
        Figure(
            f"cold first open of {big:,} entries: rebuild ({big / big_cold['cold_s']:,.0f} entries/s) + save ({big_cold['save_s']:.1f} s)",
            big_cold["cold_s"] + big_cold["save_s"],
            "s",
            None,
            "reported",
            True,
        ),
        Figure(
            f"peak RSS, cold first open of {big:,} entries ({big_cold['fold_saves']} snapshots written while "
            f"folding, {big_cold['fold_saves_s']:.1f} s of the fold)",
            big_cold["rss"],
            "MB",
            None,
            "< 500 MB",
            big_cold["rss"] < 500,
        ),
        Figure(
            f"snapshot on disk, {big:,} entries (baseline: 5 x the log's {big_cold['log_mb']:,.0f} MB)",
            big_cold["snapshot_mb"],
            "MB",
            5 * big_cold["log_mb"],
            "<= 5 x the log",
            big_cold["snapshot_mb"] <= 5 * big_cold["log_mb"],
        ),
    ]


if __name__ == "__main__":
    raise SystemExit(main())
