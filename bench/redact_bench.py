"""Redaction (issue 20): removing one entry from a large log, beside a plain copy of the log file.

    python -m bench.redact_bench [--events 100000] [--runs 3] [--dir DIR]

A redaction reads the whole log from the redacted member on (every member decoded and checked,
so that what it leaves verifies), copies the members before it byte for byte, rewrites the rest
into a new file, syncs it and renames it over the log. The figures: one entry redacted near the
start (the whole log rewritten after it), in the middle, and near the end, each the median of
``--runs``, beside ``shutil.copyfile`` + fsync of the same log measured in the same run (the
floor of any rewrite that leaves a whole new file). Each run ends as a user checks: ``verify``.
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

COPY_MULTIPLE = 40.0  # one redaction at most this many plain copies of the log file


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


def redact_seconds(master: Path, work: Path, seq: int) -> float:
    from ledger import Ledger
    from ledger.layout import STORE_DIR
    from ledger.redact import Selector, redact

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
    shutil.rmtree(ckpt / STORE_DIR)
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
        figures = [
            Figure(
                f"plain copy + fsync of the log ({log.stat().st_size / 1e6:.1f} MB)",
                copy * 1000,
                "ms",
                None,
                "the baseline",
                True,
            )
        ]
        for where, seq in (
            ("near the start", 10),
            ("in the middle", args.events // 2),
            ("near the end", args.events - 10),
        ):
            took = statistics.median(redact_seconds(master, work, seq) for _ in range(args.runs))
            figures.append(
                Figure(
                    f"redact one entry {where} (seq {seq} of {args.events:,})",
                    took * 1000,
                    "ms",
                    copy * 1000,
                    f"<= {COPY_MULTIPLE:.0f} x the copy",
                    took <= COPY_MULTIPLE * copy,
                )
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report(figures)


if __name__ == "__main__":
    raise SystemExit(main())
