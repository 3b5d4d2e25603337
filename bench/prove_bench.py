"""Provable memory (issue 18): what value checks and recorded reads cost, beside what they add to.

    python -m bench.prove_bench [--entries 5000] [--searches 400] [--runs 5] [--pad-mb 4]

Value checks. On the planted-fault fixture (the realistic run plus 71 claims; ``--pad-mb``
pads each node's ``run.log``, default 0: the fixture as it is), the audit runs twice in the
same process state, interleaved: its hashing only (the log's chain verified, every cited
artifact re-hashed: what it did before values) and in full (and every claim's values,
artifacts searched only when a number is not its report's). The limit: the values' share —
full minus hashing — is at most the hashing itself.

Recorded reads. On a checkpoint of ``--entries`` entries over a 40-node tree, ``--searches``
calls of ``search_memory`` from a leaf with the access log off (``ARI_MEMORY_ACCESS_LOG=0``)
and on (a chained line with position, ids and args, and its head), alternating call by call
(medians of separate runs drift by more than the cost on this machine); the cost of recording
is the p50 with it on minus the p50 with it off, the median of ``--runs`` runs. The limit:
recording costs at most 10 % of the search's p50. Each run ends as a user checks:
``reads --replay`` agrees.
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
    """One audit's wall time and the claims it checked: its hashing (the log's chain and every
    cited artifact, what ``audit_memory`` did before values), then, with ``values``, the
    value checks too."""
    from ledger.typed import evidence_refs
    from projections.api.audit import is_claim
    from projections.api.backend import MemoryBackend
    from projections.api.grounding import Grounding, run_and_node

    backend = MemoryBackend(ckpt, readonly=True)
    with backend.session.reading() as catalog:
        entries = list(catalog.entries.values())
    claims = 0
    began = time.perf_counter()
    if not backend.session.ledger.verify().ok:  # the audit checks the log's chain too: every event re-hashed
        raise SystemExit("the benchmark's log does not verify")
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


def searches(ckpt: Path, leaf: list[str], n: int) -> tuple[float, float]:
    """p50 wall seconds of a search with the access log off and on, the two alternating call
    by call in one process (the variable is read at every call), so the machine's drift and
    the writer thread's batches fall on both alike."""
    from projections.api.backend import MemoryBackend

    backend = MemoryBackend(ckpt)
    backend.search_memory("warm up", leaf, 5)
    times: dict[bool, list[float]] = {False: [], True: []}
    for i in range(2 * n):
        record = bool(i % 2)
        os.environ["ARI_MEMORY_ACCESS_LOG"] = "1" if record else "0"
        query = f"temporal blocking of the halo exchange {i % 37}"
        began = time.perf_counter()
        backend.search_memory(query, leaf, 5)
        times[record].append(time.perf_counter() - began)
    backend.close()
    return statistics.median(times[False]), statistics.median(times[True])


def recording_cpu(ckpt: Path, leaf: list[str], n: int) -> float:
    """CPU seconds per recorded read, the caller's and the writer thread's together: the line
    of one real search recorded ``n`` times, the queue drained before the clock stops."""
    from projections.api.backend import MemoryBackend

    os.environ["ARI_MEMORY_ACCESS_LOG"] = "1"
    backend = MemoryBackend(ckpt)
    hits = backend.search_memory("temporal blocking of the halo exchange", leaf, 5)["results"]
    access = backend.session.access
    access.flush()
    began = time.process_time()
    for _ in range(n):
        access.node_search(
            "temporal blocking", leaf, 5, hits, tool="search_memory", as_of=None, at=1, engine="embedded"
        )
    access.flush()
    took = (time.process_time() - began) / n
    backend.close()
    return took


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
    parser.add_argument("--pad-mb", type=int, default=0)
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
        pairs = [searches(big, leaf, args.searches) for _ in range(args.runs)]
        off_s = statistics.median(off for off, _ in pairs)
        on_s = statistics.median(on for _, on in pairs)
        record_s = max(0.0, statistics.median(on - off for off, on in pairs))
        agrees = replay_agrees(big)  # before the lines recorded below, which claim reads at seq 1
        cpu_s = statistics.median(recording_cpu(big, leaf, 4 * args.searches) for _ in range(args.runs))
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
            f"search_memory p50, {args.entries:,} entries: recording the read (on minus off, interleaved)",
            record_s * 1e6,
            "µs",
            off_s * 1e6,
            f"<= {RECORD_SHARE:.0%} of the search's p50 (p50 {off_s * 1e6:.0f} µs off, {on_s * 1e6:.0f} µs on)",
            record_s <= RECORD_SHARE * off_s,
        ),
        Figure(
            "CPU per recorded read, caller and writer thread (alone, queue drained)",
            cpu_s * 1e6,
            "µs",
            off_s * 1e6,
            "reported: the work the writer thread does off the call's path included",
            True,
        ),
        Figure("reads --replay of the last 50 recorded searches agrees", float(agrees), "", None, "1", agrees),
    ]
    return report(figures)


if __name__ == "__main__":
    raise SystemExit(main())
