"""Everything the harness keeps lives under one home directory; this says where, and guards it.

The home holds the Letta venv, logs, the server's working directory, the two programs it runs and
``state.json`` (what was started, by pid). Postgres data moves to ``/var/tmp`` only when running
as root and ``nobody`` could not reach the home.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def resolve_home(home: Path | str | None = None) -> Path:
    """``home``, else ``$ARI_LETTA_HOME``, else ``~/.cache/ari-ledger/letta`` (absolute)."""
    if home is None or str(home) == "":
        env = os.environ.get("ARI_LETTA_HOME")
        home = Path(env) if env else Path.home() / ".cache" / "ari-ledger" / "letta"
    return Path(home).expanduser().absolute()


@dataclasses.dataclass(frozen=True)
class Layout:
    home: Path

    @property
    def venv(self) -> Path:
        return self.home / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def state_file(self) -> Path:
        return self.home / "state.json"

    @property
    def run_dir(self) -> Path:
        """Working directory and HOME of the Letta server (it writes openapi_letta.json there)."""
        return self.home / "run"

    @property
    def launcher(self) -> Path:
        """Where ``launcher.py`` is copied to and run from; this path marks the home's Letta process."""
        return self.home / "letta_launcher.py"

    @property
    def schema_script(self) -> Path:
        return self.home / "create_schema.py"

    @property
    def pg_root(self) -> Path:
        """Where Postgres data (and, if needed, its binaries) live; readable by the pg user."""
        if os.geteuid() != 0 or nobody_can_reach(self.home):
            return self.home / "pg"
        digest = hashlib.sha256(str(self.home).encode()).hexdigest()[:12]
        return Path("/var/tmp") / f"ari-ledger-letta-pg-{digest}"

    @property
    def pg_data(self) -> Path:
        return self.pg_root / "data"


def nobody_can_reach(path: Path) -> bool:
    """True when every directory from / down to ``path``'s nearest existing ancestor is world-x."""
    p = path
    while not p.exists():
        p = p.parent
    for d in [p, *p.parents]:
        try:
            if not (d.stat().st_mode & 0o001):
                return False
        except OSError:
            return False
    return True


def read_state(layout: Layout) -> dict[str, Any]:
    try:
        return json.loads(layout.state_file.read_text())
    except (OSError, ValueError):
        return {}


def write_state(layout: Layout, state: dict[str, Any]) -> None:
    tmp = layout.state_file.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, layout.state_file)


@contextlib.contextmanager
def locked(layout: Layout) -> Iterator[None]:
    """One ``up``/``down`` at a time per home (pytest workers, a user's shell, CI)."""
    layout.home.mkdir(parents=True, exist_ok=True)
    with open(layout.home / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of the latest run in ``path`` (runs start with a ``====`` line)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    latest = text.rsplit("\n==== ", 1)
    if len(latest) == 2:
        text = "==== " + latest[1]
    tail = text.splitlines()[-lines:]
    return "\n".join("    " + line for line in tail) or "    (log is empty)"


def note(message: str) -> None:
    print(f"[ari-ledger letta] {message}", file=sys.stderr, flush=True)
