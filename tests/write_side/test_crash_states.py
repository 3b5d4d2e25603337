"""Crash states (issue 26 item 3): every state a crash could leave, from the recorded system
calls of each workload, opens and keeps its promises (``tests/support/crashes.py`` says how the
states are made and what each must give). Each workload prints its counts (``pytest -s``)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from support.crashes import WORKLOADS, Workload, opened_as_ari_does, run_workload

MAX_STATES = 600  # per workload; the whole module stays under 3,000 states


@pytest.mark.parametrize("work", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_every_crash_state_opens_and_keeps_what_was_acknowledged(
    work: Workload, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)  # recoveries warn on every state; the counts say what happened
    out = run_workload(work, tmp_path, max_states=min(MAX_STATES, work.max_states or MAX_STATES))
    print(out.summary())
    assert out.states > 0
    shown = [f"{label}: {problems}" for label, problems in out.violations[:5]]
    assert not out.violations, f"{out.summary()}\n" + "\n".join(shown)


AS_ARI = [w for w in WORKLOADS if "opened as ARI opens it" not in w.name]
AS_ARI_STATES = 100  # per workload: each state is opened three times through the backend


@pytest.mark.parametrize("work", AS_ARI, ids=[w.name for w in AS_ARI])
def test_every_crash_state_opens_as_ari_opens_it(
    work: Workload, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 39: every workload's crash states also opened as ARI and people open them — read-only
    (a person's ``search``), by ``verify``, then writable (ARI's next process): no false rollback,
    an unfinished operation named with the command that finishes it, the writable open finishing
    it and answering a search."""
    caplog.set_level(logging.ERROR)
    opened = Workload(
        f"{work.name}, opened as ARI opens it",
        work.prepare,
        work.run,
        lambda ckpt, _acks, _prep: opened_as_ari_does(ckpt),
    )
    out = run_workload(opened, tmp_path, max_states=min(AS_ARI_STATES, work.max_states or AS_ARI_STATES))
    print(out.summary())
    assert out.states > 0
    shown = [f"{label}: {problems}" for label, problems in out.violations[:5]]
    assert not out.violations, f"{out.summary()}\n" + "\n".join(shown)
