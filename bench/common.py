"""Small helpers shared by the benchmark scripts."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass
class Figure:
    """One measured figure, its baseline or limit, and the target it is held to."""

    name: str
    value: float
    unit: str
    baseline: float | None
    target: str
    ok: bool

    def line(self) -> str:
        base = (
            f"  baseline {self.baseline:,.1f} {self.unit}  ratio {self.value / self.baseline:.2f}"
            if self.baseline
            else ""
        )
        verdict = "PASS" if self.ok else "FAIL"
        return f"{verdict}  {self.name}: {self.value:,.2f} {self.unit}{base}  (target {self.target})"


RESULTS: list[Figure] = []  # every figure report() printed in this process (``ari-ledger bench --json``)


def report(figures: list[Figure]) -> int:
    RESULTS.extend(figures)
    for fig in figures:
        print(fig.line(), flush=True)
    return 0 if all(f.ok for f in figures) else 1


class Timer:
    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start


def run_child(code: str, *args: str) -> str:
    """Run ``code`` in a fresh interpreter (so its peak RSS is its own); return its stdout."""
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"benchmark child failed:\n{done.stderr[-3000:]}")
    return done.stdout


def own_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
