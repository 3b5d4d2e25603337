"""Provable memory (issue 18): what value checks and recorded reads cost, beside what they add to.

    python -m bench.prove_bench [--entries 5000] [--searches 400] [--runs 5] [--pad-mb 4]
                                [--prove-entries 10000] [--prove-claims 900] [--prove-runs 3]

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

Prove at scale. A checkpoint of ``--prove-entries`` entries imported through the library
(``bulk_import``, ARI's backup format) over 40 nodes, each node's report consolidated and
its work dir on disk (report, ``run.log``), ``--prove-claims`` claims among the entries
(paper claims pinning ``run.log`` and stating their node's metric, plus each node's
consolidated result), and their verified context exported beside the log, anchored. Timed:
``prove`` of that checkpoint, in process, the median of ``--prove-runs`` runs (the chain
verified, every claim traced to its event, report, artifacts and values, the context
recomputed as of its anchor and compared, the access log's reads replayed). The limit:
3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from projections.adapters.cli.framework import Parser

from .common import Figure, report
from .projection_bench import write_checkpoint

RECORD_SHARE = 0.10  # recording a read <= this x a search's p50
VALUES_MULTIPLE = 1.0  # value checks <= this x the hashing the audit already does
PROVE_LIMIT_S = 3.0  # prove of --prove-claims claims over --prove-entries entries
CLAIM_LIMIT_MS = 0.5  # one claim's check, its evidence loaded
PROVE_NODES = 40


def planted_fixture(out: Path, pad_mb: int) -> Path:
    from projections.adapters.demo import FIXTURE_RUN, copy_run, replay_run
    from projections.adapters.planted import plant_faults, plant_reports
    from projections.api import MemoryBackend

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
    from projections.api import MemoryBackend
    from projections.evidence.claims import is_claim
    from projections.evidence.grounding import Grounding, run_and_node

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
    from projections.api import MemoryBackend

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
    from projections.api import MemoryBackend

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
    from projections.access.reader import check_chain, read_records
    from projections.api import MemoryBackend
    from projections.tools.reads import replay_all

    chain, lines = check_chain(ckpt)
    records = read_records(lines)[-50:]
    backend = MemoryBackend(ckpt, readonly=True)
    same = all(r.verdict == "same" for r in replay_all(backend, records))
    backend.close()
    return chain.ok and same and len(records) == 50


def prove_fixture(work: Path, entries: int, claims: int) -> Path:
    """A checkpoint of ``entries`` imported entries, ``claims`` of them claims, its node work
    dirs beside it (``work/experiments``) and its verified context anchored inside it."""
    import hashlib

    from projections.api import MemoryBackend

    run_id = "run_bench"
    ckpt = work / "checkpoint"
    backend = MemoryBackend(ckpt)
    nodes = [f"node_{i:02d}" for i in range(PROVE_NODES)]
    reports: dict[str, dict] = {}
    pins: dict[str, str] = {}
    for i, nid in enumerate(nodes):
        wd = work / "experiments" / run_id / nid
        wd.mkdir(parents=True)
        value = round(2.0 + 0.37 * i, 2)
        log = "n,iters,threads,time_s,GFlops_per_s\n" + f"256,100,16,{1.3 + i / 100:.4f},{value}\n" * 50
        (wd / "run.log").write_text(log, encoding="utf-8")
        pins[nid] = hashlib.sha256(log.encode()).hexdigest()
        reports[nid] = {
            "schema_version": 1,
            "node_id": nid,
            "parent_id": nodes[i - 1] if i else None,
            "ancestor_ids": nodes[:i],
            "label": "improve",
            "depth": i,
            "status": "success",
            "metrics": {"GFlops_per_s": value, "time_s": round(1.3 + i / 100, 4)},
            "self_assessment": {"succeeded": True, "headline": f"{nid}: {value} GFlops/s"},
            "artifacts": [{"filename": "run.log", "role": "log", "sha256": pins[nid]}],
        }
        (wd / "node_report.json").write_text(json.dumps(reports[nid], indent=2), encoding="utf-8")
    imported_claims = max(0, claims - len(nodes))  # each consolidation adds one experiment_result
    rows = []
    for k in range(entries - imported_claims - 2 * len(nodes)):  # consolidations add two entries a node
        nid = nodes[k % len(nodes)]
        rows.append({"node_id": nid, "text": f"{nid} note {k}: tried tile {k % 64} x {k % 17}", "metadata": {}})
    for k in range(imported_claims):
        nid = nodes[k % len(nodes)]
        value = reports[nid]["metrics"]["GFlops_per_s"]
        metadata = {
            "type": "paper_claim",
            "mem_kind": "paper_claim",
            "metric_ptr": {"name": "GFlops_per_s", "value": value},
            "artifact_refs": [{"path": "run.log", "sha256": pins[nid], "role": "log"}],
            "node_report_ref": {"run_id": run_id, "node_id": nid},
        }
        text = f"{nid} sustains {value} GFlops/s in the {_word(k)} configuration"  # one number, its metric's
        rows.append({"node_id": nid, "text": text, "metadata": metadata})
    backend.bulk_import(rows, "node_scope")
    for nid in nodes:
        wd = work / "experiments" / run_id / nid
        backend.consolidate_node_memory(nid, reports[nid], str(wd), run_id, current_node=nid)
    backend.export_verified_context(nodes, ckpt / "verified_context.json")
    backend.close()
    return ckpt


def _word(k: int) -> str:
    """A name without digits for the k-th configuration (distinct texts, one number each)."""
    letters = ""
    while True:
        k, r = divmod(k, 26)
        letters += "abcdefghijklmnopqrstuvwxyz"[r]
        if not k:
            return letters


def prove_seconds(ckpt: Path) -> tuple[float, float, int, bool]:
    """One ``prove`` of the checkpoint: wall and CPU seconds, claims traced, whether it proved."""
    from projections.tools.prove import prove

    began, cpu = time.perf_counter(), time.process_time()
    proof = prove(ckpt)
    return time.perf_counter() - began, time.process_time() - cpu, len(proof.claims), proof.ok


def audit_and_reads(work: Path, args: argparse.Namespace) -> list[Figure]:
    """The value checks beside the audit's hashing, and recording a read beside a search."""
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
    return [
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


def prove_at_scale(work: Path, args: argparse.Namespace) -> Figure:
    """``prove`` of ``--prove-claims`` claims over ``--prove-entries`` entries, against 3 s."""
    ckpt = prove_fixture(work, args.prove_entries, args.prove_claims)
    runs = [prove_seconds(ckpt) for _ in range(args.prove_runs)]
    took = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[1] for r in runs)
    claims, proved = runs[0][2], all(r[3] for r in runs)
    return Figure(
        f"prove: {claims} claims over {args.prove_entries:,} entries, wall (median of {len(runs)}; proved: {proved})",
        took,
        "s",
        PROVE_LIMIT_S,
        f"<= {PROVE_LIMIT_S:g} s, the limit as the baseline: ratio <= 1; CPU {cpu:.2f} s",
        took <= PROVE_LIMIT_S and proved,
    )


def claim_checks(args: argparse.Namespace) -> Figure:
    """A claim's check on the blind corpora (every claim of every field, its evidence loaded once
    per node and its cited artifacts read once, as one command's reads share them): the mean
    time of ``check_claim`` per claim over ``--claim-rounds`` rounds after a warm one, against
    0.5 ms."""
    import hashlib
    from types import SimpleNamespace

    from projections.evidence.grammar.values import check_claim
    from projections.evidence.grounding import Grounding

    root = Path(__file__).resolve().parents[1] / "fixtures" / "corpora" / "grounding"
    work: list[tuple[str, object]] = []
    corpora = sorted(p for p in root.iterdir() if (p / "claims.json").is_file())
    fields = len(corpora)
    for field in corpora:
        run = json.loads((field / "run.json").read_text(encoding="utf-8"))
        experiments = field / "experiments"
        grounding = Grounding([experiments], None, run["experiment"])
        cache: dict[tuple[str, str, tuple[str, ...] | None], object] = {}
        for claim in json.loads((field / "claims.json").read_text(encoding="utf-8"))["claims"]:
            node, cited = claim["node_id"], claim.get("report_of", claim["node_id"])
            cites = tuple(claim["cites"]) if "cites" in claim else None
            key = (node, cited, cites)
            if key not in cache:
                own_dir = experiments / run["run_id"] / node
                cited_dir = experiments / run["run_id"] / cited
                report = json.loads((cited_dir / "node_report.json").read_text(encoding="utf-8"))
                listed = [a for a in report.get("artifacts", []) if a.get("sha256")]
                refs = [
                    {
                        "path": a["filename"],
                        "sha256": hashlib.sha256((cited_dir / a["filename"]).read_bytes()).hexdigest(),
                    }
                    for a in listed
                    if cites is None or a["filename"] in cites
                ]
                meta = {"artifact_refs": refs, "node_report_ref": {"run_id": run["run_id"], "node_id": cited}}
                entry = SimpleNamespace(node_id=node, metadata=meta, body={}, text="")
                own = json.loads((own_dir / "node_report.json").read_text(encoding="utf-8"))
                cache[key] = grounding._evidence(entry, own_dir, own)  # the check alone is timed
            work.append((claim["text"], cache[key]))
    for text, evidence in work:  # warm: pint's registry, each node's artifacts read once
        check_claim(text, evidence)  # type: ignore[arg-type]
    from projections.evidence.grammar import text_caches

    rounds, cpus = [], []
    for _ in range(args.claim_rounds):
        text_caches.forget()  # a claim's text is new to each round, as each claim is to one command
        start, cpu = time.perf_counter(), time.process_time()
        for text, evidence in work:
            check_claim(text, evidence)  # type: ignore[arg-type]
        rounds.append((time.perf_counter() - start) / len(work) * 1000)
        cpus.append((time.process_time() - cpu) / len(work) * 1000)
    took = statistics.median(rounds)
    # the wall time decides; the CPU time beside it says how much of a slow round was the machine's
    return Figure(
        f"a claim's check: mean over {len(work):,} blind-corpus claims of {fields} fields (median of {len(rounds)} rounds)",
        took,
        "ms",
        CLAIM_LIMIT_MS,
        f"<= {CLAIM_LIMIT_MS:g} ms, the limit as the baseline: ratio <= 1; CPU {statistics.median(cpus):.2f} ms",
        took <= CLAIM_LIMIT_MS,
    )


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="bench.prove_bench")
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--searches", type=int, default=400)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pad-mb", type=int, default=0)
    parser.add_argument("--prove-entries", type=int, default=10_000)
    parser.add_argument("--prove-claims", type=int, default=900)
    parser.add_argument("--prove-runs", type=int, default=3)
    parser.add_argument("--claim-rounds", type=int, default=5)
    parser.add_argument("--only-prove", action="store_true", help="only the prove-at-scale and claim-check figures")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    work = Path(args.dir or tempfile.mkdtemp(prefix="prove-bench-"))
    figures: list[Figure] = []
    try:
        if not args.only_prove:
            figures += audit_and_reads(work, args)
        figures.append(prove_at_scale(work / "prove", args))
        figures.append(claim_checks(args))
    finally:
        os.environ.pop("ARI_MEMORY_ACCESS_LOG", None)
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    return report(figures)


if __name__ == "__main__":
    raise SystemExit(main())
