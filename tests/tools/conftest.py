"""Fixtures of the tools' tests: the recorded run replayed, as its tests read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from projections.adapters.demo import FIXTURE_RUN, copy_run, replay_run
from projections.api import MemoryBackend
from support.env import ari_ledger


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The realistic run replayed as ARI's hooks would, experiments beside the checkpoint."""
    out = tmp_path_factory.mktemp("demo")
    experiments = copy_run(FIXTURE_RUN, out)
    backend = MemoryBackend(out / "checkpoint")
    replay_run(backend, FIXTURE_RUN, experiments)
    backend.close()
    return out


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ari-ledger demo DIR``: 9 nodes, 3 claims that prove, 20 recorded reads."""
    out = tmp_path_factory.mktemp("demo") / "run"
    made = ari_ledger("demo", out)
    assert made.returncode == 0, made.stdout + made.stderr
    return out
