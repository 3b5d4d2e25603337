"""The Projection protocol's contract, run on each projection (the local one and Letta's):
what the Session's list and the runner rely on, and nothing more."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import Ledger
from projections.engines.local import Projector
from projections.engines.protocol import Projection, SharedProjection
from projections.engines.runner import ProjectionRunner
from projections.models.embedder import get_embedder

SHARED = [pytest.param("letta", marks=pytest.mark.letta)]  # held outside the process, driven by a runner
PROJECTIONS = ["local", *SHARED]


def write(ckpt: Path, count: int, start: int = 0) -> None:
    """Entries appended by another writer than the projection's (as another process would)."""
    with Ledger.open(ckpt) as ledger, ledger.batch() as batch:
        for i in range(start, start + count):
            batch.append("root", "memory_added", {"text": f"entry {i} on loop tiling"}, current_node="root")


@pytest.fixture(params=PROJECTIONS)
def projection_on(request, monkeypatch, tmp_path: Path) -> Iterator:
    """A factory: the projection under test over a checkpoint's ledger (opened once, by it)."""
    made: list[tuple[Ledger, Projection]] = []

    def make(ckpt: Path) -> Projection:
        ledger = Ledger.open(ckpt)
        local = Projector(ledger, get_embedder())
        projection: Projection = local
        if request.param == "letta":
            from projections.engines.letta import LettaProjection, make_client

            server = request.getfixturevalue("letta_server")
            monkeypatch.setenv("LETTA_BASE_URL", server.base_url)
            monkeypatch.setenv("LETTA_API_KEY", server.api_key)
            monkeypatch.setenv("ARI_MEMORY_EMBED_URL", server.embedding_url)
            projection = LettaProjection(local, make_client())
        made.append((ledger, projection))
        return projection

    yield make
    for ledger, projection in made:
        if projection.name == "letta":
            from projections.engines.letta import delete_agent

            delete_agent(projection.pusher, projection.agent_name)  # type: ignore[attr-defined]
        ledger.close()


def test_it_is_a_projection_and_says_how_far_it_is(projection_on, tmp_path: Path) -> None:
    write(tmp_path, 30)
    projection = projection_on(tmp_path)
    assert isinstance(projection, Projection)
    assert projection.lag() == 30 and projection.cursor == 0
    health = projection.health()
    assert health["name"] == projection.name and health["cursor"] == 0 and health["lag"] == 30


def test_catch_up_folds_what_the_log_gained_once(projection_on, tmp_path: Path) -> None:
    write(tmp_path, 25)
    projection = projection_on(tmp_path)
    assert projection.catch_up() == 25
    assert projection.cursor == 25 and projection.lag() == 0
    assert projection.catch_up() == 0
    write(tmp_path, 7, start=25)  # another writer: the projection's ledger learns of it on refresh
    assert projection.lag() == 7
    assert projection.catch_up() == 7 and projection.cursor == 32 and projection.health()["lag"] == 0


def test_restore_rebuilds_from_the_log(projection_on, tmp_path: Path) -> None:
    write(tmp_path, 12)
    projection = projection_on(tmp_path)
    projection.catch_up()
    result = projection.restore()
    assert result["name"] == projection.name and projection.cursor == 12 and projection.lag() == 0
    again = projection_on(tmp_path)  # a new process's view: the rebuilt projection holds the whole log
    if isinstance(again, SharedProjection):
        assert again.current()
    else:
        assert again.catch_up() == 0 and again.cursor == 12


@pytest.mark.parametrize("projection_on", SHARED, indirect=True)
def test_a_runner_drives_a_shared_projection_to_the_end_of_the_log(projection_on, tmp_path: Path) -> None:
    write(tmp_path, 9)
    projection = projection_on(tmp_path)
    assert isinstance(projection, SharedProjection)
    runner = ProjectionRunner(projection)
    try:
        assert runner.flush(60) and projection.cursor == 9
        write(tmp_path, 4, start=9)
        assert projection.behind()
        assert runner.flush(60) and projection.cursor == 13 and not projection.behind()
        assert runner.health()["ok"] and runner.health()["name"] == projection.name
    finally:
        runner.close()
