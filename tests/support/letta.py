"""The ``letta_server`` fixture: a real Letta 0.16.7 server for the tests that need one.

Import it from conftest (``from support.letta import letta_server``). It reuses a server that
is already up and healthy for the harness home (``$ARI_LETTA_HOME`` or
``~/.cache/ari-ledger/letta``; e.g. one started with ``ari-ledger letta up``), otherwise it brings
one up with :func:`projections.letta_server.up` -- the first time that installs Letta into its
own venv, about 2 minutes -- and stops it again at the end of the session (set
``ARI_LETTA_KEEP=1`` to leave it running for the next run).

It never skips under CI (env ``CI`` set): there a server that does not come up is a test error.
Elsewhere it skips only when the one-time install of Letta fails for lack of network.

The server wants its password (issue 27): a test's client sends ``api_key=server.api_key``, and a
test that configures the library exports ``server.client_env`` (``LETTA_BASE_URL``,
``LETTA_API_KEY``, ``ARI_MEMORY_EMBED_URL``), as a user does with ``eval "$(ari-ledger letta env)"``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from projections import letta_server as letta_harness
from projections.letta_server import LettaInstallError, LettaServer


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def letta_server() -> Iterator[LettaServer]:
    """A healthy owner-only Letta server (``base_url``, ``api_key``, ``client_env``, ``embedding_config``, …)."""
    running = letta_harness.server()
    if running is not None:
        yield running
        return
    try:
        started = letta_harness.up()
    except LettaInstallError as exc:
        if exc.network and not _truthy("CI"):
            pytest.skip(f"Letta {letta_harness.LETTA_VERSION} could not be installed: no network ({exc.log})")
        raise
    try:
        yield started
    finally:
        if not _truthy("ARI_LETTA_KEEP"):
            letta_harness.down()
