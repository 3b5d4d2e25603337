"""3. Letta's tables, made from its ORM: the wheel ships no migrations and the server makes none.

The DDL runs in ``create_schema.py`` (a program beside this module) with the Letta venv's
interpreter, in one transaction, so "the sequence default is set" means "the schema is complete".
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from .errors import LettaHarnessError
from .install import letta_env
from .layout import Layout, log_tail
from .postgres import pg_uri, pgserver_bin, psql

PROGRAM = Path(__file__).with_name("create_schema.py")


def schema_ready(layout: Layout, port: int) -> bool:
    bindir = pgserver_bin(layout)
    out = psql(
        bindir,
        layout,
        port,
        "SELECT column_default FROM information_schema.columns "
        "WHERE table_name = 'messages' AND column_name = 'sequence_id'",
        check=False,
    )
    return out.returncode == 0 and "message_seq_id" in out.stdout


def create_schema(layout: Layout, port: int, timeout: float) -> float:
    """Create the tables unless done; returns seconds spent (0 when skipped)."""
    if schema_ready(layout, port):
        return 0.0
    t0 = time.monotonic()
    layout.schema_script.write_bytes(PROGRAM.read_bytes())
    log = layout.logs / "schema.log"
    with open(log, "ab") as fh:
        fh.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} create schema on port {port}\n".encode())
        fh.flush()
        try:
            rc = subprocess.run(
                [str(layout.python), str(layout.schema_script)],
                check=False,
                cwd=layout.run_dir,
                env=letta_env(layout, pg_uri(port)),
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                timeout=max(timeout, 120),
            ).returncode
        except subprocess.TimeoutExpired:
            rc = -1
    if rc != 0 or not schema_ready(layout, port):
        raise LettaHarnessError(f"creating Letta's tables failed (exit {rc}). Log {log}:\n{log_tail(log)}")
    return time.monotonic() - t0
