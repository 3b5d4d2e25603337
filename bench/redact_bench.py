"""Redaction (issue 20): removing one entry from a large log, beside a plain copy of the log file.

    python -m bench.redact_bench [--events 100000] [--runs 3] [--dir DIR]

A redaction reads the whole log from the redacted member on (every member decoded and checked,
so that what it leaves verifies), copies the members before it byte for byte, rewrites the rest
into a new file, syncs it and renames it over the log. The figures: one entry redacted near the
start, in the middle and near the end, each the median of ``--runs``, beside two figures of the
same log measured in the same run: ``shutil.copyfile`` + fsync (the floor of any rewrite that
leaves a whole new file) and ``verify`` (the floor of any redaction that leaves a log it has
checked: every event's hash read once). The limit: a redaction, one checked read plus one write,
costs at most 2x a verify. Each run ends as a user checks: ``verify``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from projections.adapters.cli.framework import Parser

from .common import Figure, report

VERIFY_MULTIPLE = 2.0  # one redaction (one checked read and one write of the log) <= this x a verify


def build(ckpt: Path, events: int) -> None:
    from ledger import Ledger

    with Ledger.open(ckpt) as ledger:
        for start in range(0, events, 1000):
            with ledger.batch() as batch:
                for i in range(start, min(start + 1000, events)):
                    text = f"entry {i}: temporal blocking of the halo exchange, step {i % 97}"
                    batch.append(f"node_{i % 50}", "memory_added", {"text": text}, current_node=f"node_{i % 50}")


def copy_seconds(log: Path, work: Path) -> float:
    target = work / "copy.gz"
    began = time.perf_counter()
    shutil.copyfile(log, target)
    with open(target, "rb") as f:
        os.fsync(f.fileno())
    took = time.perf_counter() - began
    target.unlink()
    return took


def verify_seconds(ckpt: Path) -> float:
    from ledger import Ledger

    began = time.perf_counter()
    with Ledger.open_readonly(ckpt) as ledger:
        ok = ledger.verify().ok
    took = time.perf_counter() - began
    if not ok:
        raise SystemExit("the benchmark's log does not verify")
    return took


def redact_seconds(master: Path, work: Path, seq: int) -> float:
    from ledger import Ledger
    from ledger.maintenance.redact import Selector, redact

    ckpt = work / f"r{seq}"
    shutil.copytree(master, ckpt)
    with Ledger.open_readonly(ckpt) as ledger:
        event = ledger.event_at(seq)
    assert event is not None
    began = time.perf_counter()
    done = redact(ckpt, Selector(ids=(event.id,)), reason="benchmark", by="bench")
    took = time.perf_counter() - began
    with Ledger.open_readonly(ckpt) as ledger:
        if not ledger.verify().ok or len(done.chosen) != 1:
            raise SystemExit(f"redaction of seq {seq} did not verify")
    shutil.rmtree(ckpt)
    return took


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events in the log")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (the median is reported)")
    parser.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    args = parser.parse_args(argv)
    from ledger.layout import log_path

    work = Path(tempfile.mkdtemp(prefix="ari-ledger-redact-", dir=args.dir))
    try:
        master = work / "master"
        master.mkdir()
        build(master, args.events)
        log = log_path(master)
        copy = statistics.median(copy_seconds(log, work) for _ in range(args.runs))
        check = statistics.median(verify_seconds(master) for _ in range(args.runs))
        size = f"{log.stat().st_size / 1e6:.1f} MB"
        figures = [
            Figure(f"plain copy + fsync of the log ({size})", copy * 1000, "ms", None, "the baseline", True),
            Figure(
                f"verify of the same log ({args.events:,} events)", check * 1000, "ms", copy * 1000, "reported", True
            ),
        ]
        for where, seq in (
            ("near the start", 10),
            ("in the middle", args.events // 2),
            ("near the end", args.events - 10),
        ):
            took = statistics.median(redact_seconds(master, work, seq) for _ in range(args.runs))
            figures.append(
                Figure(
                    f"redact one entry {where} (seq {seq:,}; {took / copy:,.0f} x the copy)",
                    took * 1000,
                    "ms",
                    check * 1000,
                    f"<= {VERIFY_MULTIPLE:.0f} x verify",
                    took <= VERIFY_MULTIPLE * check,
                )
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report(figures)


if __name__ == "__main__":
    raise SystemExit(main())
