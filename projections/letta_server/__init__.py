"""A real Letta 0.16.7 server on this machine, offline, for tests, CI, benchmarks and users.

A tool beside the layers, not a read model: nothing in ``projections`` imports it. ``up()``
assembles, under one home (``--home``, else ``$ARI_LETTA_HOME``, else ``~/.cache/ari-ledger/letta``),
what 0.16.7 needs and no longer brings itself: a pinned venv (:mod:`.install`), Postgres with
pgvector (:mod:`.postgres`), its tables (:mod:`.schema`), an offline embedding endpoint
(:mod:`.embeddings`), and the server with an fd-bug fix (:mod:`.letta_process`). ``launcher.py``
and ``create_schema.py`` are programs for the Letta venv, not modules: never import them.

Reachable by its owner only: Letta with its password on (clients send it as ARI's
``LETTA_API_KEY``: :attr:`LettaServer.api_key`, ``client_env``), Postgres on a 0700 Unix socket
only with a password, the embedding endpoint behind a bearer key Letta sends; the three random
secrets in ``<home>/secrets`` (:mod:`.credentials`). Run by root, no server runs as root and
none gets the caller's credentials (:mod:`.service`).

CLI: ``ari-ledger letta up|down|status|env`` (or ``python -m projections.letta_server``).
"""

from __future__ import annotations

from .cli import add_arguments, main, run
from .embeddings import EMBED_DIM, EMBED_MODEL
from .errors import LettaHarnessError, LettaInstallError
from .install import LETTA_VERSION
from .layout import resolve_home
from .lifecycle import (
    DEFAULT_EMBED_PORT,
    DEFAULT_LETTA_PORT,
    DEFAULT_PG_PORT,
    LettaServer,
    down,
    is_installed,
    server,
    status,
    up,
)
from .postgres import pg_uri

__all__ = [
    "DEFAULT_EMBED_PORT",
    "DEFAULT_LETTA_PORT",
    "DEFAULT_PG_PORT",
    "EMBED_DIM",
    "EMBED_MODEL",
    "LETTA_VERSION",
    "LettaHarnessError",
    "LettaInstallError",
    "LettaServer",
    "add_arguments",
    "down",
    "is_installed",
    "main",
    "pg_uri",
    "resolve_home",
    "run",
    "server",
    "status",
    "up",
]
