"""Backends on each search engine, for the suites that must hold on every engine."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from projections.api import MemoryBackend

ENGINES = ["embedded", pytest.param("letta", marks=pytest.mark.letta)]


@contextmanager
def backends_on(
    engine: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[Path], MemoryBackend]]:
    """A factory of fresh MemoryBackends whose searches the engine under test answers; closes
    them (and deletes their Letta agents) afterwards."""
    if engine == "letta":
        server = request.getfixturevalue("letta_server")
        monkeypatch.setenv("LETTA_BASE_URL", server.base_url)
        monkeypatch.setenv("LETTA_API_KEY", server.api_key)
        monkeypatch.setenv("ARI_MEMORY_EMBED_URL", server.embedding_url)
        monkeypatch.setenv("ARI_MEMORY_SEARCH_ENGINE", "letta")
    made: list[MemoryBackend] = []

    def make(checkpoint_dir: Path) -> MemoryBackend:
        backend = MemoryBackend(checkpoint_dir)
        made.append(backend)
        return backend

    try:
        yield make
    finally:
        for backend in made:
            letta = backend.session.letta
            backend.close()
            if letta is not None:
                delete_agent(letta.projection)


def delete_agent(projection) -> None:
    """Remove a test's agent (with its archive and blocks)."""
    from projections.engines.letta import delete_agent as delete

    delete(projection.client, projection.agent_name)
