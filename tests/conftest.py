"""Fixtures only (helpers live in ``support``): a clean ARI environment for every test, a
checkpoint directory, backends on every engine, and the real Letta server."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from support.engines import ENGINES, backends_on
from support.env import ARI_VARS
from support.letta import letta_server  # noqa: F401 - the session fixture, for every test module

# Property tests are judged on what they find, not on how fast one example runs: on a machine of
# two cores another process's work (a benchmark, a second pytest) can stall any example past
# hypothesis' default 200 ms deadline, which then fails a test whose property held.
settings.register_profile("ledger", deadline=None)
settings.load_profile("ledger")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "letta: needs the real Letta server the test setup brings up")


@pytest.fixture(autouse=True)
def clean_ari_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test inherits ARI configuration from the shell that runs pytest."""
    for name in ARI_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    path = tmp_path / "ckpt"
    path.mkdir()
    return path


@pytest.fixture(params=ENGINES)
def engine_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """One abstract suite, every engine: tests taking this run on the embedded engine and on
    a real Letta server."""
    with backends_on(request.param, request, monkeypatch) as make:
        yield make
