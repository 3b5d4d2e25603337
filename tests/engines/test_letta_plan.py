"""The Letta read planner: the calls it plans return every row that can be among the best
``limit`` in scope, whatever Letta's rounding and tie order, and cost no more than one call
over the whole agent."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.engines.letta.plan import CALL_COST_IN_ROWS, SLACK, Call, letta_time, plan_read, time_us


def letta_answer(call: Call, at_us: np.ndarray, letta_cos: np.ndarray, rng: np.random.Generator) -> set[int]:
    """What Letta 0.16.7 does: rows created in the window, ranked by its cosine, cut at top_k
    (ties in an arbitrary order)."""
    rows = np.arange(len(at_us))
    if call.window is not None:
        rows = rows[(at_us >= call.window[0]) & (at_us <= call.window[1])]
    shuffled = rng.permutation(rows)
    ranked = shuffled[np.argsort(-letta_cos[shuffled], kind="stable")]
    return set(ranked[: call.top_k].tolist())


@st.composite
def pools(draw):
    n = draw(st.integers(1, 300))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    # few distinct times and scores, so ties in both are common
    at_us = rng.integers(0, draw(st.integers(1, 50)), n) * 1_000_000
    cosine = np.round(rng.uniform(-1, 1, n), draw(st.integers(1, 3)))
    wanted = rng.random(n) < draw(st.floats(0.0, 1.0))
    noise = rng.uniform(-SLACK / 2, SLACK / 2, n)  # Letta's cosines: the same, up to rounding
    return at_us, cosine, wanted, cosine + noise, seed


@settings(max_examples=300, deadline=None)
@given(pools(), st.integers(1, 12))
def test_planned_calls_return_lettas_exact_top(pool, limit):
    at_us, cosine, wanted, letta_cos, seed = pool
    plan = plan_read(at_us, cosine, wanted, limit)
    rng = np.random.default_rng(seed + 1)
    returned: set[int] = set()
    for call in plan.calls:
        returned |= letta_answer(call, at_us, letta_cos, rng)
    mine = np.flatnonzero(wanted)
    # every target came back, and so did Letta's own best `limit` in scope (ties either way)
    assert set(plan.targets.tolist()) <= returned
    if len(mine):
        lettas = mine[np.argsort(-letta_cos[mine], kind="stable")][:limit]
        weakest = letta_cos[lettas].min()
        assert set(mine[letta_cos[mine] > weakest].tolist()) <= returned
        assert any(i in returned for i in mine[letta_cos[mine] == weakest])
    else:
        assert plan.calls == []
    # never dearer than the one call over the whole agent
    whole = int(np.count_nonzero(cosine >= cosine[plan.targets].min() - SLACK)) if len(mine) else 0
    assert sum(CALL_COST_IN_ROWS + c.top_k for c in plan.calls) <= (CALL_COST_IN_ROWS + whole if len(mine) else 0)


def test_a_crowd_of_better_siblings_costs_one_small_window():
    """2,000 better-matching sibling rows written first, then the scope's 6: one call over the
    window of the best 5 (the sixth ranks too low to matter), top_k 5."""
    crowd, own = 2000, 6
    at_us = np.arange(crowd + own) * 1000
    cosine = np.concatenate([np.full(crowd, 0.9), np.linspace(0.1, 0.2, own)])
    wanted = np.arange(crowd + own) >= crowd
    plan = plan_read(at_us, cosine, wanted, 5)
    assert plan.calls == [Call(top_k=5, window=(int(at_us[crowd + 1]), int(at_us[-1])))]


def test_letta_time_is_exact_to_the_microsecond_and_in_range():
    assert letta_time(1764513551.123456) == "2025-11-30T14:39:11.123456+00:00"
    assert time_us(1764513551.123456) == 1764513551123456
    assert letta_time(-5) == "1970-01-01T00:00:00+00:00"
    assert letta_time(1e20).startswith("9999-12-31")
