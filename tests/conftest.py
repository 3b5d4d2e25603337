"""Shared test set-up: a clean ARI environment for every test."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

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


ENGINES = ["embedded"]


@pytest.fixture(params=ENGINES)
def engine_backend(request: pytest.FixtureRequest):
    """A factory of fresh MemoryBackends on one search engine; closes them after the test."""
    from projections.backend import MemoryBackend

    made: list[MemoryBackend] = []

    def make(checkpoint_dir: Path) -> MemoryBackend:
        backend = MemoryBackend(checkpoint_dir)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
