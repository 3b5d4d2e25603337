"""3. Letta's tables, made from its ORM: the wheel ships no migrations and the server makes none.

The DDL runs in ``create_schema.py`` (a program beside this module) with the Letta venv's
interpreter, as the service user, in one transaction, so "the sequence default is set" means "the
schema is complete".
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from .errors import LettaHarnessError
from .install import letta_env
from .layout import Layout, log_tail
from .postgres import letta_pg_uri, pgserver_bin, psql, socket_dir
from .service import as_service_user

PROGRAM = Path(__file__).with_name("create_schema.py")


def schema_ready(layout: Layout, port: int, password: str) -> bool:
    bindir = pgserver_bin(layout)
    out = psql(
        bindir,
        layout,
        port,
        "SELECT column_default FROM information_schema.columns "
        "WHERE table_name = 'messages' AND column_name = 'sequence_id'",
        password,
        check=False,
    )
    return out.returncode == 0 and "message_seq_id" in out.stdout


def create_schema(layout: Layout, port: int, password: str, timeout: float) -> float:
    """Create the tables unless done; returns seconds spent (0 when skipped)."""
    if schema_ready(layout, port, password):
        return 0.0
    t0 = time.monotonic()
    layout.schema_script.write_bytes(PROGRAM.read_bytes())
    os.chmod(layout.schema_script, 0o644)  # the service user runs it; only we write it
    log = layout.logs / "schema.log"
    with open(log, "ab") as fh:
        fh.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} create schema on port {port}\n".encode())
        fh.flush()
        try:
            rc = subprocess.run(
                as_service_user([str(layout.python), str(layout.schema_script)]),
                check=False,
                cwd=layout.run_dir,
                env=letta_env(layout, letta_pg_uri(port, socket_dir(layout), password)),
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                timeout=max(timeout, 120),
            ).returncode
        except subprocess.TimeoutExpired:
            rc = -1
    if rc != 0 or not schema_ready(layout, port, password):
        raise LettaHarnessError(f"creating Letta's tables failed (exit {rc}). Log {log}:\n{log_tail(log)}")
    return time.monotonic() - t0
