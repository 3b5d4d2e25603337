"""Short-lived hook processes (issue 17, item 5): what one process that opens the checkpoint,
writes one entry and exits costs at 1,000 and at 100,000 entries.

    python -m bench.hook_bench [--small 1000] [--large 100000] [--hooks 40]

Each checkpoint is written, opened once (the cold fold and its snapshot), then ``--hooks``
hook processes run on each, alternating between the two, each a fresh interpreter: ``get_backend``, one
``add_memory``, exit (``atexit`` closes the backend). For each it takes the wall time from
spawn to exit and the bytes the process wrote (``/proc/self/io`` wchar). A close saves the
snapshot only once the unsaved tail is worth it (``Projector.worth_saving``), so the bytes
per hook are amortised: a save every ``share x log`` hooks. Printed beside each figure, from
the same run: the limit it is held to (the 1,000-entry figure: flat), and what a hook wrote
before (the whole snapshot at every exit).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ledger import layout
from projections.adapters.cli.framework import Parser

from .common import Figure, report, run_child
from .projection_bench import write_checkpoint

HOOK = """
import json, sys
from projections.api import clear_backend_cache, get_backend
get_backend(sys.argv[1]).add_memory("root", "hook entry " + sys.argv[2], current_node="root")
clear_backend_cache()  # what atexit does at exit
with open("/proc/self/io") as f:
    io = dict(line.split(": ") for line in f.read().splitlines())
print(json.dumps({"wchar": int(io["wchar"])}))
"""

FIRST_OPEN = """
import sys
from projections.api import MemoryBackend
b = MemoryBackend(sys.argv[1])
b.health()  # folds the whole log
b.close()  # and saves it
"""

FLOOR = """
import projections.api
"""


def hook(ckpt: Path, i: int) -> tuple[float, int]:
    """Wall seconds and bytes written of one one-entry hook process."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", HOOK, str(ckpt), str(i)], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise RuntimeError(f"hook failed:\n{done.stderr[-3000:]}")
    return seconds, json.loads(done.stdout.strip().splitlines()[-1])["wchar"]


def floor_seconds(n: int) -> float:
    """An interpreter that imports the library and exits: what no hook can beat."""
    runs = []
    for _ in range(n):
        started = time.perf_counter()
        run_child(FLOOR)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def prepare(root: Path, entries: int) -> Path:
    """A checkpoint of ``entries`` entries, folded once and snapshotted."""
    ckpt = root / f"ckpt{entries}"
    per_node = 100 if entries >= 10_000 else 10
    write_checkpoint(ckpt, max(1, entries // per_node), per_node, seed=1)
    run_child(FIRST_OPEN, str(ckpt))  # the cold fold and the first snapshot
    return ckpt


def measure(ckpts: dict[int, Path], n: int) -> list[dict[str, float]]:
    """``n`` hooks on each checkpoint, alternating (so both see the same machine)."""
    runs: dict[int, list[tuple[float, int]]] = {entries: [] for entries in ckpts}
    sizes = {e: (layout.store_dir(c) / layout.SNAPSHOT_NAME).stat().st_size for e, c in ckpts.items()}
    for i in range(n):
        for entries, ckpt in ckpts.items():
            runs[entries].append(hook(ckpt, i))
    return [
        {
            "entries": entries,
            "snapshot_mb": sizes[entries] / 1e6,
            "p50_s": statistics.median(s for s, _ in done),
            "max_s": max(s for s, _ in done),
            "kb_per_hook": statistics.mean(w for _, w in done) / 1e3,
            "saves": sum(1 for _, w in done if w > sizes[entries] / 2),
        }
        for entries, done in runs.items()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--hooks", type=int, default=40)
    args = parser.parse_args(argv)
    from projections.engines.local import CLOSE_SAVE_SHARE, SNAPSHOT_EVERY

    root = Path(tempfile.mkdtemp(prefix="hook-bench-"))
    try:
        floor = floor_seconds(5)
        ckpts = {args.small: prepare(root, args.small), args.large: prepare(root, args.large)}
        small, large = measure(ckpts, args.hooks)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures = []
    for m in (small, large):
        threshold = max(1, min(SNAPSHOT_EVERY, int(m["entries"] * CLOSE_SAVE_SHARE)))
        amortised = m["kb_per_hook"] + m["snapshot_mb"] * 1e3 / threshold  # one save per `threshold` hooks
        print(
            f"{int(m['entries']):,} entries: snapshot {m['snapshot_mb']:.1f} MB (what each hook rewrote before), "
            f"hook p50 {m['p50_s']:.3f} s (max {m['max_s']:.3f}), {m['kb_per_hook']:.1f} kB written per hook "
            f"({int(m['saves'])} of {args.hooks} saved the snapshot), amortised with one save per {threshold} hooks "
            f"{amortised:.1f} kB; interpreter + import floor {floor:.3f} s",
            flush=True,
        )
        m["amortised_kb"] = amortised
    figures.append(
        Figure(
            f"one-entry hook at {args.large:,} entries, wall p50",
            large["p50_s"],
            "s",
            small["p50_s"],
            f"<= 1.5 x the {args.small:,}-entry hook ({1.5 * small['p50_s']:.3f} s)",
            large["p50_s"] <= 1.5 * small["p50_s"],
        )
    )
    figures.append(
        Figure(
            f"one-entry hook at {args.large:,} entries, bytes written (amortised)",
            large["amortised_kb"],
            "kB",
            small["amortised_kb"],
            f"<= 2 x the {args.small:,}-entry hook ({2 * small['amortised_kb']:.1f} kB); "
            f"before: {large['snapshot_mb'] * 1e3:,.0f} kB per hook",
            large["amortised_kb"] <= 2 * small["amortised_kb"],
        )
    )
    figures.append(
        Figure(
            f"one-entry hook at {args.large:,} entries, wall p50 over the bare interpreter + import",
            large["p50_s"],
            "s",
            floor,
            f"<= floor + 1 s ({floor + 1:.3f} s)",
            large["p50_s"] <= floor + 1.0,
        )
    )
    return report(figures)


if __name__ == "__main__":
    sys.exit(main())
