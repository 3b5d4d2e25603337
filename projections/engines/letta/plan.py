"""Planning a read from Letta: exact scope at a bounded cost.

Letta 0.16.7 ranks an agent's passages by cosine and cuts at ``top_k`` *before* it filters by
tag, so a scope whose entries rank below many others' needs a wide ``top_k``; and every row it
returns costs the server about 1.3 ms (it converts the row's padded 4,096-float embedding),
against about 120 ms for the call itself (measured by ``bench/letta_bench.py``). The one filter it applies before the cut is the
passages' creation time. The projection writes each passage with its event's time
(:func:`letta_time`), and the local index holds the same vectors, so a read can be planned
here: which rows Letta must return (the *targets*: every in-scope row that can be among the
best ``limit``), and which time windows and ``top_k`` make it return them for the fewest rows.

Scores here are cosines. Letta's may differ from the local index's by float rounding (the local
vectors are float16); ``SLACK`` is twice the largest such difference, so a row is a target when
its cosine is within ``SLACK`` of the ``limit``-th in-scope one, and a call covering a target
asks for every row of its window within ``SLACK`` of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

SLACK = 0.01  # cosine; float16 rounding moves a cosine by well under 0.005
CALL_COST_IN_ROWS = 90  # one call costs Letta about as much as returning 90 rows (~120 ms / ~1.3 ms)
MAX_TARGETS = 32  # more near-tied targets than this: one call over the whole agent

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LAST_US = int((datetime(9999, 12, 31, tzinfo=UTC) - _EPOCH).total_seconds()) * 1_000_000


def time_us(ts: float) -> int:
    """An entry's time in whole microseconds (what Postgres keeps), inside datetime's range."""
    return min(max(round(ts * 1_000_000), 0), _LAST_US)


def iso_us(us: int) -> str:
    """Microseconds since the epoch as the ISO time Letta parses (UTC, to the microsecond)."""
    return datetime.fromtimestamp(us // 1_000_000, UTC).replace(microsecond=us % 1_000_000).isoformat()


def letta_time(ts: float) -> str:
    """The ``created_at`` a passage is written with, for an entry's ``ts``."""
    return iso_us(time_us(ts))


@dataclass(frozen=True)
class Call:
    """One Letta search: ``top_k`` over the passages created in ``window`` (first and last
    µs, inclusive), or over the whole agent."""

    top_k: int
    window: tuple[int, int] | None = None


@dataclass(frozen=True)
class Plan:
    calls: list[Call]
    targets: np.ndarray  # row indexes every one of which the calls return, if the slack holds

    @property
    def rows(self) -> int:
        return sum(c.top_k for c in self.calls)


def plan_read(at_us: np.ndarray, cosine: np.ndarray, wanted: np.ndarray, limit: int, *, windows: bool = True) -> Plan:
    """The cheapest calls that return every target, for rows created at ``at_us`` with these
    local ``cosine`` scores, of which ``wanted`` are in scope (and visible).

    One call over the whole agent needs a ``top_k`` as deep as the weakest target's rank. Time
    windows around groups of targets (consecutive in time) need only the rows of their window
    that rank near them; each window costs a call. The grouping that costs least is found by
    dynamic programming over the targets in time order. ``windows=False`` (an agent whose
    passages do not carry their events' times) plans the one call.
    """
    idx = np.flatnonzero(wanted)
    if limit <= 0 or not len(idx):
        return Plan([], np.empty(0, np.int64))
    mine = cosine[idx]
    cut = np.partition(mine, len(mine) - limit)[len(mine) - limit] if len(mine) > limit else mine.min()
    targets = idx[mine >= cut - SLACK]
    floor = cosine[targets].min() - SLACK
    whole = Call(top_k=int(np.count_nonzero(cosine >= floor)))
    if not windows or len(targets) > MAX_TARGETS:
        return Plan([whole], targets)
    windowed = _windows(at_us, cosine, targets, floor)
    if sum(CALL_COST_IN_ROWS + c.top_k for c in windowed) < CALL_COST_IN_ROWS + whole.top_k:
        return Plan(windowed, targets)
    return Plan([whole], targets)


def _windows(at_us: np.ndarray, cosine: np.ndarray, targets: np.ndarray, floor: float) -> list[Call]:
    """Targets grouped into time windows at least cost (``CALL_COST_IN_ROWS`` per call plus
    its ``top_k``); only rows at or above ``floor`` can compete, so only they are counted."""
    near = np.flatnonzero(cosine >= floor)
    order = near[np.argsort(at_us[near], kind="stable")]
    times, scores = at_us[order], cosine[order]
    t = targets[np.argsort(at_us[targets], kind="stable")]
    t_at, t_cos = at_us[t], cosine[t]
    n = len(t)

    def rows_for(i: int, j: int, weakest: float) -> int:
        lo, hi = np.searchsorted(times, t_at[i], "left"), np.searchsorted(times, t_at[j], "right")
        return int(np.count_nonzero(scores[lo:hi] >= weakest - SLACK))

    best = [0] + [0] * n  # best[j]: least cost covering the first j targets
    cut_at = [0] * (n + 1)
    for j in range(1, n + 1):
        weakest = np.inf
        best[j] = -1
        for i in range(j, 0, -1):  # the last group is targets i..j (1-based)
            weakest = min(weakest, float(t_cos[i - 1]))
            cost = best[i - 1] + CALL_COST_IN_ROWS + rows_for(i - 1, j - 1, weakest)
            if best[j] < 0 or cost < best[j]:
                best[j], cut_at[j] = cost, i
    calls: list[Call] = []
    j = n
    while j:
        i = cut_at[j]
        weakest = float(t_cos[i - 1 : j].min())
        calls.append(Call(rows_for(i - 1, j - 1, weakest), (int(t_at[i - 1]), int(t_at[j - 1]))))
        j = i - 1
    return calls[::-1]
