"""Ledger benchmark (issues 2 and 12): durable appends, group commit, streamed verify of 1M events.

    python -m bench.ledger_bench [--events 1000000] [--dir DIR] [--gaps] [--only-verify]
                                 [--cli-verify [--checkpoint CKPT | --entries 1000000] [--before DIR]]

``--events 0`` leaves the ledger's own verify out (with ``--cli-verify``: only the command's).

Every figure is printed beside the raw limit measured in the same run on the same disk.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ledger import Ledger
from ledger.layout import store_dir
from ledger.log import LOG_NAME
from projections.adapters.cli.framework import Parser

from .common import Figure, Timer, report, run_child

BODY_TEXT_CHARS = 250  # with the envelope, each stored event is ~500 bytes
SINGLE_APPENDS = 2000
GROUP_EVENTS = 200_000
GROUP_SIZE = 1000
# Issue 12, item 5: the limits each figure is held to.
SINGLE_RATIO = 0.85  # durable single appends / raw write+fdatasync of the same member bytes
GROUP_RATE = 100_000  # events/s
VERIFY_RATIO = 0.8  # open + verify / raw gunzip + msgspec decode of every line
CLI_VERIFY_RATIO = 0.5  # ari-ledger verify (log, anchors, snapshot) / raw gunzip + decode of its log (issue 30)


def _text(i: int) -> str:
    return (f"RESULT SUMMARY node {i} metrics=[GFlops_per_s={i % 97 / 3:.2f}] " * 8)[:BODY_TEXT_CHARS]


def bench_single(work: Path, rounds: int = 10) -> list[Figure]:
    """Alternate blocks of durable appends and of raw write+fdatasync of the same bytes, so
    both see the same disk weather; compare the summed times."""
    per_round = SINGLE_APPENDS // rounds
    ours_s = raw_s = 0.0
    ratios = []  # per round: how the weather moved
    with Ledger.open(work / "single") as ledger:
        ledger.append("root", "memory_added", {"text": _text(0)}, current_node="root")
        first = ledger.path.stat().st_size
        ledger.append("root", "memory_added", {"text": _text(1)}, current_node="root")
        member = ledger.path.read_bytes()[first:]  # the bytes of a single append, as on disk
        fd = os.open(work / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for _ in range(rounds):
                with Timer() as t:
                    for i in range(per_round):
                        ledger.append("root", "memory_added", {"text": _text(i)}, current_node="root")
                ours_s += t.seconds
                ours_round = t.seconds
                with Timer() as t:
                    for _ in range(per_round):
                        os.write(fd, member)
                        os.fdatasync(fd)
                raw_s += t.seconds
                ratios.append(t.seconds / ours_round)
        finally:
            os.close(fd)
    ours, raw = SINGLE_APPENDS / ours_s, SINGLE_APPENDS / raw_s
    return [
        Figure(
            f"durable single appends ({len(member)} B members)",
            ours,
            "appends/s",
            raw,
            f">= {SINGLE_RATIO} x raw write+fdatasync of the same bytes",
            ours >= SINGLE_RATIO * raw,
        ),
        Figure(
            f"  per round of {per_round}: ratio {min(ratios):.2f}-{max(ratios):.2f}, median",
            statistics.median(ratios),
            "x",
            None,
            "reported",
            True,
        ),
    ]


def bench_gaps(work: Path, gaps: tuple[int, ...] = (0, 10, 20, 30, 40), rounds: int = 4) -> list[Figure]:
    """Raw write+fdatasync of a 270-byte member with N us of busy CPU before each write: what
    the disk does to a writer that computes between syncs (on a VM, more than the N us)."""
    member = os.urandom(270)
    seconds = dict.fromkeys(gaps, 0.0)
    fd = os.open(work / "gaps.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(rounds):
            for gap in gaps:
                with Timer() as t:
                    for _ in range(150):
                        _spin(gap / 1e6)
                        os.write(fd, member)
                        os.fdatasync(fd)
                seconds[gap] += t.seconds
    finally:
        os.close(fd)
    n = 150 * rounds
    return [
        Figure(
            f"  raw write+fdatasync after {gap} us of CPU",
            n / seconds[gap],
            "syncs/s",
            n / seconds[gaps[0]],
            "reported",
            True,
        )
        for gap in gaps[1:]
    ]


def bench_wake(work: Path, appends: int = 400) -> list[Figure]:
    """The CPU of one append (on tmpfs, so no I/O) timed in a tight loop, and again right after
    a write+fdatasync on the bench's disk: a VM's vCPU that slept through the sync comes back
    to cold caches, and everything an append does takes longer than the tight loop says."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        return []
    hot: list[float] = []
    woken: list[float] = []
    fd = os.open(work / "wake.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    ckpt = Path(tempfile.mkdtemp(prefix="ari-ledger-bench-", dir=shm))
    try:
        with Ledger.open(ckpt) as ledger:
            for i in range(appends):
                for times in (hot, woken):
                    if times is woken:
                        os.write(fd, b"x" * 270)
                        os.fdatasync(fd)
                    with Timer() as t:
                        ledger.append("root", "memory_added", {"text": _text(i)}, current_node="root")
                    times.append(t.seconds * 1e6)
    finally:
        os.close(fd)
        shutil.rmtree(ckpt, ignore_errors=True)
    return [
        Figure(
            "  one append's CPU (tmpfs) right after a sync on this disk, median",
            statistics.median(woken),
            "us",
            statistics.median(hot),
            "reported",
            True,
        )
    ]


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def bench_group(work: Path, runs: int = 5) -> list[Figure]:
    """Group commit in ``runs`` runs of GROUP_EVENTS/runs events; the median run is the figure
    (a burst of other work on the machine moves one run, not the result)."""
    per_run = GROUP_EVENTS // runs
    rates = []
    with Ledger.open(work / "group") as ledger:
        for _ in range(runs):
            with Timer() as t:
                for b in range(per_run // GROUP_SIZE):
                    with ledger.batch() as batch:
                        for i in range(GROUP_SIZE):
                            batch.append(
                                "root", "memory_added", {"text": _text(b * GROUP_SIZE + i)}, current_node="root"
                            )
            rates.append(per_run / t.seconds)
    rate = statistics.median(rates)
    return [
        Figure(
            f"group commit ({GROUP_SIZE} events/member), median of {runs} runs ({min(rates):,.0f}-{max(rates):,.0f})",
            rate,
            "events/s",
            None,
            f">= {GROUP_RATE:,} events/s",
            rate >= GROUP_RATE,
        )
    ]


VERIFY_CHILD = """
import json, resource, sys, time
from ledger import Ledger
from ledger.verify import verify
from bench.common import own_peak_rss_mb
parallel = {"auto": "auto", "one": False}[sys.argv[2]]  # "auto": a second process where a CPU is free
t = time.perf_counter()
with Ledger.open(sys.argv[1], create=False) as ledger:
    report = verify(ledger, parallel=parallel)  # decodes every line, checks its hash and link
dt = time.perf_counter() - t
child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # a second process's
print(json.dumps({"ok": report.ok, "events": report.events, "seconds": dt, "rss": max(own_peak_rss_mb(), child)}))
"""

CLI_CHILD = """
import json, os, subprocess, sys, time
# another checkout's code: first on the path, and where `-m` looks first (the working directory)
env = {**os.environ, "PYTHONPATH": sys.argv[2]} if sys.argv[2] else None
t = time.perf_counter()
done = subprocess.run(
    [sys.executable, "-m", "projections", "verify", "--json", sys.argv[1]],
    capture_output=True, text=True, env=env, cwd=sys.argv[2] or None,
)
dt = time.perf_counter() - t
found = json.loads(done.stdout)
print(json.dumps({"ok": done.returncode == 0, "events": found["events"], "seconds": dt, "out": done.stdout[-2000:]}))
"""

RAW_CHILD = """
import gzip, json, sys, time
import msgspec
from bench.common import own_peak_rss_mb
from ledger.events import Event
decode = (msgspec.json.Decoder(Event) if sys.argv[2] == "typed" else msgspec.json.Decoder()).decode
t = time.perf_counter()
n = 0
with gzip.open(sys.argv[1], "rb") as f:
    for line in f:
        decode(line)
        n += 1
dt = time.perf_counter() - t
print(json.dumps({"events": n, "seconds": dt, "rss": own_peak_rss_mb()}))
"""


def bench_verify(work: Path, events: int, rounds: int = 3) -> list[Figure]:
    ckpt = work / "big"
    with Ledger.open(ckpt) as ledger:
        for b in range(events // GROUP_SIZE):
            with ledger.batch() as batch:
                for i in range(GROUP_SIZE):
                    batch.append("root", "memory_added", {"text": _text(b * GROUP_SIZE + i)}, current_node="root")
    log = str(store_dir(ckpt) / LOG_NAME)
    size_mb = (store_dir(ckpt) / LOG_NAME).stat().st_size / 1e6
    seconds = {"ours": 0.0, "one": 0.0, "generic": 0.0, "typed": 0.0}
    ratios, one_ratios, rss = [], [], 0.0
    for _ in range(rounds):  # alternated, so both sides see the same weather
        ours = json.loads(run_child(VERIFY_CHILD, str(ckpt), "auto"))
        raw = json.loads(run_child(RAW_CHILD, log, "generic"))
        one = json.loads(run_child(VERIFY_CHILD, str(ckpt), "one"))
        typed = json.loads(run_child(RAW_CHILD, log, "typed"))
        assert (
            ours["ok"] and one["ok"] and ours["events"] == one["events"] == events == raw["events"] == typed["events"]
        )
        seconds["ours"] += ours["seconds"]
        seconds["one"] += one["seconds"]
        seconds["generic"] += raw["seconds"]
        seconds["typed"] += typed["seconds"]
        ratios.append(raw["seconds"] / ours["seconds"])
        one_ratios.append(raw["seconds"] / one["seconds"])
        rss = max(rss, ours["rss"])
    verify_rate = rounds * events / seconds["ours"]
    raw_rate = rounds * events / seconds["generic"]
    return [
        Figure(
            f"open + verify + decode, {events:,} events ({size_mb:,.0f} MB log; its pieces shared with a second process "
            f"where {os.cpu_count()} CPUs allow)",
            verify_rate,
            "events/s",
            raw_rate,
            f">= {VERIFY_RATIO} x raw gunzip + msgspec decode of every line",
            verify_rate >= VERIFY_RATIO * raw_rate,
        ),
        Figure(
            f"  per round: ratio {min(ratios):.2f}-{max(ratios):.2f}, median",
            statistics.median(ratios),
            "x",
            None,
            "reported",
            True,
        ),
        Figure(
            f"  the same verify in one process (per round: ratio {min(one_ratios):.2f}-{max(one_ratios):.2f})",
            rounds * events / seconds["one"],
            "events/s",
            raw_rate,
            "reported",
            True,
        ),
        Figure(
            "  the same verify against raw gunzip + decode into the typed Event",
            verify_rate,
            "events/s",
            rounds * events / seconds["typed"],
            "reported",
            True,
        ),
        Figure("peak RSS of that verify (each process; fresh)", rss, "MB", None, "<= 200 MB", rss <= 200),
    ]


def bench_cli_verify(ckpt: Path, rounds: int = 3, before: str | None = None) -> list[Figure]:
    """``ari-ledger verify CKPT`` (a fresh process: the log, its anchors, the snapshot against
    the log) alternated with raw gunzip + decode of the same log, and with the command of the
    checkout ``before`` (its code first on PYTHONPATH) when given."""
    log = str(store_dir(ckpt) / LOG_NAME)
    sides = ["", *([before] if before else [])]
    seconds = dict.fromkeys(sides, 0.0)
    ratios: dict[str, list[float]] = {side: [] for side in sides}
    raw_s, loads = 0.0, []
    for _ in range(rounds):
        for side in sides:
            cli = json.loads(run_child(CLI_CHILD, str(ckpt.resolve()), side and str(Path(side).resolve())))
            raw = json.loads(run_child(RAW_CHILD, log, "generic"))
            if not cli["ok"] or cli["events"] != raw["events"]:
                raise RuntimeError(f"ari-ledger verify {ckpt} did not pass: {cli['out']}")
            seconds[side] += cli["seconds"]
            raw_s += raw["seconds"]
            ratios[side].append(raw["seconds"] / cli["seconds"])
            loads.append(os.getloadavg()[0])
    events = raw["events"]
    raw_rate = len(sides) * rounds * events / raw_s
    return [
        Figure(
            f"ari-ledger verify{' (' + side + ')' if side else ''} of a checkpoint of {events:,} events with its "
            f"snapshot (whole command; per round: ratio {min(ratios[side]):.2f}-{max(ratios[side]):.2f}; "
            f"load average {min(loads):.1f}-{max(loads):.1f})",
            rounds * events / seconds[side],
            "events/s",
            raw_rate,
            f">= {CLI_VERIFY_RATIO} x raw gunzip + msgspec decode of its log" if not side else "reported",
            rounds * events / seconds[side] >= CLI_VERIFY_RATIO * raw_rate or bool(side),
        )
        for side in sides
    ]


def build_checkpoint(work: Path, entries: int) -> Path:
    """A checkpoint of ``entries`` entries (bench.projection_bench's tree, 100 per node) and its
    projection snapshot, as a cold open saves it (minutes at 1M)."""
    from .projection_bench import write_checkpoint

    ckpt = work / "with-snapshot"
    write_checkpoint(ckpt, max(1, entries // 100), 100, seed=1)
    run_child(SNAPSHOT_CHILD, str(ckpt))
    return ckpt


SNAPSHOT_CHILD = """
import sys
from ledger import Ledger
from projections.engines.local import Projector
from projections.models.embedder import get_embedder
with Ledger.open(sys.argv[1]) as ledger:
    projector = Projector(ledger, get_embedder(), use_snapshot=False)
    projector.catch_up()
    projector.save()
"""


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the verify benchmark")
    parser.add_argument("--dir", default=None, help="work directory (default: a temp dir on the same disk)")
    parser.add_argument("--gaps", action="store_true", help="also: what the platform charges for CPU between syncs")
    parser.add_argument("--only-verify", action="store_true", help="only the verify figures (no appends)")
    parser.add_argument(
        "--cli-verify", action="store_true", help="also: `ari-ledger verify` of a checkpoint with a snapshot"
    )
    parser.add_argument("--checkpoint", default=None, help="that checkpoint (default: one built, minutes at 1M)")
    parser.add_argument("--entries", type=int, default=1_000_000, help="entries of the checkpoint built")
    parser.add_argument("--before", default=None, help="also time the command of this checkout (alternated)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ari-ledger-bench-", dir=args.dir))
    try:
        figures = [] if args.only_verify else bench_single(work)
        figures += bench_gaps(work) + bench_wake(work) if args.gaps else []
        figures += ([] if args.only_verify else bench_group(work)) + (
            bench_verify(work, args.events) if args.events else []
        )
        if args.cli_verify:
            ckpt = Path(args.checkpoint) if args.checkpoint else build_checkpoint(work, args.entries)
            figures += bench_cli_verify(ckpt, before=args.before)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report(figures)


if __name__ == "__main__":
    raise SystemExit(main())
