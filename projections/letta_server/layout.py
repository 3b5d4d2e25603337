"""Everything the harness keeps lives under one home directory; this says where, and guards it.

The home holds logs, ``secrets/`` and ``state.json`` (what was started, by pid), and the Letta
venv, the server's working directory and the two programs it runs. Run by root, the servers run as
``nobody``: when ``nobody`` cannot reach the home (``/root`` is 0700), what it runs and writes -- the
venv, the working directory, the programs, Postgres -- lives under ``/var/tmp`` instead, owned by
root and readable to all, but for the server state, which is ``nobody``'s and 0700.
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

from .errors import LettaHarnessError


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
    def service_root(self) -> Path:
        """Where what the service user runs and writes lives: the home, unless root runs and
        ``nobody`` cannot reach it."""
        if os.geteuid() != 0 or nobody_can_reach(self.home):
            return self.home
        return Path("/var/tmp") / f"ari-ledger-letta-{self._digest}"

    @property
    def _digest(self) -> str:
        return hashlib.sha256(str(self.home).encode()).hexdigest()[:12]

    @property
    def venv(self) -> Path:
        return self.service_root / "venv"

    @property
    def legacy_venv(self) -> Path:
        """Where an older harness installed the venv (in the home, also when run by root)."""
        return self.home / "venv"

    @property
    def secrets(self) -> Path:
        """The stack's random secrets, one 0600 file each (:mod:`.credentials`)."""
        return self.home / "secrets"

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
        return self.service_root / "run"

    @property
    def launcher(self) -> Path:
        """Where ``launcher.py`` is copied to and run from; this path marks the home's Letta process."""
        return self.service_root / "letta_launcher.py"

    @property
    def legacy_launcher(self) -> Path:
        """The launcher path of a server an older harness started (the marker to stop it by)."""
        return self.home / "letta_launcher.py"

    @property
    def schema_script(self) -> Path:
        return self.service_root / "create_schema.py"

    @property
    def pg_root(self) -> Path:
        """Where Postgres data (and, if needed, its binaries) live; readable by the pg user."""
        if os.geteuid() != 0 or nobody_can_reach(self.home):
            return self.home / "pg"
        return Path("/var/tmp") / f"ari-ledger-letta-pg-{self._digest}"

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


def prepare_home(layout: Layout) -> None:
    """The home (0700 unless the service user must reach into it), its logs 0700, and the shared
    root outside it when there is one. Logs hold the Letta password (the server prints it)."""
    layout.home.mkdir(parents=True, exist_ok=True)
    if layout.service_root != layout.home:
        shared_dir(layout.service_root)
    if os.geteuid() != 0 or layout.service_root != layout.home:
        os.chmod(layout.home, 0o700)
    layout.logs.mkdir(mode=0o700, exist_ok=True)
    os.chmod(layout.logs, 0o700)
    for log in layout.logs.iterdir():
        if log.is_file() and not log.is_symlink():
            os.chmod(log, 0o600)


def shared_dir(path: Path) -> None:
    """``path`` as our directory that others may read (0755): never a symlink or someone else's,
    since a predictable name under /var/tmp could be made by anyone first."""
    if path.is_symlink():
        raise LettaHarnessError(f"{path} is a symlink; refusing to use it")
    path.mkdir(parents=True, exist_ok=True)
    st = path.stat()
    if st.st_uid != os.geteuid():
        raise LettaHarnessError(f"{path} is owned by uid {st.st_uid}, not by us; remove it or pick another --home")
    os.chmod(path, 0o755)


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
