"""Shared test set-up: a clean ARI environment for every test."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator
from pathlib import Path

import pytest

from letta_support import letta_server  # noqa: F401 - the session fixture, for every test module

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
PYTHON = sys.executable

_ARI_VARS = (
    "ARI_CHECKPOINT_DIR",
    "ARI_CURRENT_NODE_ID",
    "LETTA_BASE_URL",
    "LETTA_API_KEY",
    "LETTA_EMBEDDING_CONFIG",
    "ARI_MEMORY_LETTA_OVERFETCH",
    "ARI_MEMORY_AUTO_RESTORE",
    "ARI_MEMORY_CONSOLIDATE",
    "ARI_MEMORY_ACCESS_LOG",
    "ARI_MEMORY_SEARCH_ENGINE",
    "ARI_MEMORY_BACKEND",
)


@pytest.fixture(autouse=True)
def clean_ari_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test inherits ARI configuration from the shell that runs pytest."""
    for name in _ARI_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    path = tmp_path / "ckpt"
    path.mkdir()
    return path


def subprocess_env(**extra: str) -> dict[str, str]:
    """Environment for a child process running this project's code."""
    env = {k: v for k, v in os.environ.items() if k not in _ARI_VARS}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "letta: needs the real Letta server the test setup brings up")


ENGINES = ["embedded", pytest.param("letta", marks=pytest.mark.letta)]


@contextmanager
def backends_on(engine: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """A factory of fresh MemoryBackends on one engine; closes them (and deletes their Letta
    agents) afterwards."""
    from projections.api.backend import MemoryBackend

    if engine == "letta":
        server = request.getfixturevalue("letta_server")
        monkeypatch.setenv("LETTA_BASE_URL", server.base_url)
        monkeypatch.setenv("ARI_MEMORY_EMBED_URL", server.embedding_url)
        monkeypatch.setenv("ARI_MEMORY_SEARCH_ENGINE", "letta")  # the engine under test answers
    made: list[MemoryBackend] = []

    def make(checkpoint_dir: Path) -> MemoryBackend:
        backend = MemoryBackend(checkpoint_dir)
        made.append(backend)
        return backend

    try:
        yield make
    finally:
        for backend in made:
            backend.close()
            if engine == "letta":
                delete_agent(backend.session.letta.projection)


@pytest.fixture(params=ENGINES)
def engine_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """One abstract suite, every engine: tests taking this run on the embedded engine and on
    a real Letta server."""
    with backends_on(request.param, request, monkeypatch) as make:
        yield make


def delete_agent(letta) -> None:
    """Remove a test's agent (with its archive and blocks)."""
    from projections.engines.letta import delete_agent as delete

    delete(letta.client, letta.agent_name)
