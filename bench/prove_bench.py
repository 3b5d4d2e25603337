"""Provable memory (issue 18): what value checks and recorded reads cost, beside what they add to.

    python -m bench.prove_bench [--entries 5000] [--searches 400] [--runs 5] [--pad-mb 4]

Value checks. On the planted-fault fixture (the realistic run plus 71 claims), with each
node's ``run.log`` padded to ``--pad-mb`` MiB so hashing has real bytes to read, the audit
runs twice in the same process state: hashes only (every cited artifact re-hashed, as the
audit did before values) and in full (hashes and every claim's values, artifacts searched
only when a number is not its report's). The limit: the values' share — full minus hashes —
is at most the hashing itself.

Recorded reads. On a checkpoint of ``--entries`` entries over a 40-node tree, ``search_memory``
from a leaf, its p50 over ``--searches`` calls with the access log off (``ARI_MEMORY_ACCESS_LOG=0``)
and on (a chained line with position, ids and args, and its head). The limit: recording costs
at most 10 % of the search's p50. Each run ends as a user checks: ``reads --replay`` agrees.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from .common import Figure, report
from .projection_bench import write_checkpoint

RECORD_SHARE = 0.10  # recording a read <= this x a search's p50
VALUES_MULTIPLE = 1.0  # value checks <= this x the hashing the audit already does


def planted_fixture(out: Path, pad_mb: int) -> Path:
    from projections.adapters.demo import FIXTURE_RUN, copy_run, replay_run
    from projections.adapters.planted import plant_faults, plant_reports
    from projections.api.backend import MemoryBackend

    experiments = copy_run(FIXTURE_RUN, out)
    plant_reports(experiments)
    for log in experiments.glob("*/*/run.log"):  # real bytes to hash; run.log is cited, never searched here
        with log.open("a") as f:
            line = "n,iters,threads,time_s,GFlops_per_s\n" + "256,100,16,1.3377,9.80\n" * 200
            while f.tell() < pad_mb << 20:
                f.write(line)
    backend = MemoryBackend(out / "checkpoint")
    replay = replay_run(backend, FIXTURE_RUN, experiments)
    plant_faults(backend, replay)
    backend.close()
    return experiments


def audit_seconds(ckpt: Path, experiments: Path, *, values: bool) -> tuple[float, int]:
    """One audit's wall time (hashes only, or hashes and values) and the claims it checked."""
    from ledger.typed import evidence_refs
    from projections.api.audit import is_claim
    from projections.api.backend import MemoryBackend
    from projections.api.grounding import Grounding, run_and_node

    backend = MemoryBackend(ckpt, readonly=True)
    with backend.session.reading() as catalog:
        entries = list(catalog.entries.values())
    claims = 0
    began = time.perf_counter()
    grounding = Grounding([experiments])
    grounding.learn(entries)
    for entry in entries:
        pair = run_and_node(entry.metadata.get("node_report_ref"))
        if pair is not None:
            for ref in evidence_refs(entry.metadata):
                grounding.artifact(experiments / pair[0] / pair[1], str(ref.get("path", "")), ref.get("sha256"))
        if values and is_claim(entry):
            grounding.values(entry, grounding.work_dir(entry))
            claims += 1
    took = time.perf_counter() - began
    backend.close()
    return took, claims


def search_p50(ckpt: Path, leaf: list[str], searches: int, *, record: bool) -> float:
    from projections.api.backend import MemoryBackend

    os.environ["ARI_MEMORY_ACCESS_LOG"] = "1" if record else "0"
    backend = MemoryBackend(ckpt)
    queries = [f"temporal blocking of the halo exchange {i % 37}" for i in range(searches)]
    backend.search_memory(queries[0], leaf, 5)  # warm
    times = []
    for query in queries:
        began = time.perf_counter()
        backend.search_memory(query, leaf, 5)
        times.append(time.perf_counter() - began)
    backend.close()
    return statistics.median(times)


def replay_agrees(ckpt: Path) -> bool:
    from projections.api.backend import MemoryBackend
    from projections.api.reads import check_chain, read_records, replay_all

    chain, lines = check_chain(ckpt)
    records = read_records(lines)[-50:]
    backend = MemoryBackend(ckpt, readonly=True)
    same = all(r.verdict == "same" for r in replay_all(backend, records))
    backend.close()
    return chain.ok and same and len(records) == 50


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.prove_bench")
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--searches", type=int, default=400)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pad-mb", type=int, default=4)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    work = Path(args.dir or tempfile.mkdtemp(prefix="prove-bench-"))
    try:
        experiments = planted_fixture(work / "planted", args.pad_mb)
        ckpt = work / "planted" / "checkpoint"
        hashes, full = [], []
        claims = 0
        for _ in range(args.runs):  # interleaved, so both see the same page cache and machine
            hashes.append(audit_seconds(ckpt, experiments, values=False)[0])
            seconds, claims = audit_seconds(ckpt, experiments, values=True)
            full.append(seconds)
        hash_s, full_s = statistics.median(hashes), statistics.median(full)
        values_s = max(0.0, full_s - hash_s)

        big = work / "reads"
        write_checkpoint(big, 40, args.entries // 40, seed=7)
        import json

        tree = json.loads((big / "tree.json").read_text())
        leaf_id = max(tree, key=lambda n: len(tree[n]))
        leaf = [*tree[leaf_id], leaf_id]
        off, on = [], []
        for _ in range(args.runs):
            off.append(search_p50(big, leaf, args.searches, record=False))
            on.append(search_p50(big, leaf, args.searches, record=True))
        off_s, on_s = statistics.median(off), statistics.median(on)
        record_s = max(0.0, on_s - off_s)
        agrees = replay_agrees(big)
    finally:
        os.environ.pop("ARI_MEMORY_ACCESS_LOG", None)
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    figures = [
        Figure(
            f"audit: value checks of {claims} claims (full audit minus hashes)",
            values_s * 1e3,
            "ms",
            hash_s * 1e3,
            f"<= {VALUES_MULTIPLE:g}x the audit's hashing ({hash_s * 1e3:.1f} ms; full audit {full_s * 1e3:.1f} ms)",
            values_s <= VALUES_MULTIPLE * hash_s,
        ),
        Figure(
            f"search_memory p50, {args.entries:,} entries: recording the read (chained line, head)",
            record_s * 1e6,
            "µs",
            off_s * 1e6,
            f"<= {RECORD_SHARE:.0%} of the search's p50 ({off_s * 1e6:.0f} µs off, {on_s * 1e6:.0f} µs on)",
            record_s <= RECORD_SHARE * off_s,
        ),
        Figure("reads --replay of the last 50 recorded searches agrees", float(agrees), "", None, "1", agrees),
    ]
    return report(figures)


if __name__ == "__main__":
    raise SystemExit(main())
