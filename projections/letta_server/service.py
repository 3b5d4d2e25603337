"""Who the servers run as, and what of the caller's environment they may see.

Run by a normal user, every server runs as that user. Run by root, none does: Postgres refuses
root, and Letta's ``/v1/tools/run`` executes Python as whoever runs the server, so Postgres and
Letta run as ``nobody`` through ``setpriv`` and the embedding endpoint drops to ``nobody`` itself
once its model is loaded (its interpreter may live where ``nobody`` cannot go, e.g. under /root).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from .errors import LettaHarnessError

NOBODY = 65534  # uid and gid (nogroup) of the service user when root runs the harness

# Caller variables that look like credentials never reach a server: names with these words, and
# any value that is a URL carrying a user and password (a proxy, a database, a package index).
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASS", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")
_URL_WITH_PASSWORD = re.compile(r"://[^/@\s:]+:[^/@\s]*@")


def service_ids() -> tuple[int, int]:
    """(uid, gid) the servers run as: ours, or ``nobody``'s when we are root."""
    if os.geteuid() == 0:
        return NOBODY, NOBODY
    return os.geteuid(), os.getegid()


def dropping() -> bool:
    """True when the servers run as another user than the harness (the harness runs as root)."""
    return os.geteuid() == 0


def as_service_user(cmd: list[str]) -> list[str]:
    """``cmd`` as the service user: unchanged, or behind ``setpriv`` (no groups, no new privileges) as root."""
    if not dropping():
        return cmd
    setpriv = shutil.which("setpriv")
    if not setpriv:
        raise LettaHarnessError(
            "run as root, the Letta servers must run as nobody and `setpriv` (util-linux) is missing: "
            "apt-get install util-linux, or run as a normal user"
        )
    uid, gid = service_ids()
    return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs", *cmd]


# What an interpreter sees of itself. setpriv keeps root's capabilities up to the exec, so an
# interpreter under /root still starts as nobody -- and then cannot read its own prefix (a Python
# of /root/.pyenv ran with Debian's /usr/lib/python3.11 so). Usable means: seen the same as by us.
_SELF_VIEW = "import os, sys; print(sys.base_prefix, os.__file__, os.access(os.path.realpath(sys.executable), os.X_OK))"


def _self_view(cmd: list[str]) -> str | None:
    try:
        proc = subprocess.run(
            [*cmd, "-I", "-c", _SELF_VIEW],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def runs_as_service_user(python: Path | str) -> bool:
    """True when the service user can run ``python`` as we do: reach it, and read its own prefix."""
    if not dropping():
        return True
    ours = _self_view([str(python)])
    return ours is not None and ours.endswith("True") and _self_view(as_service_user([str(python)])) == ours


def is_secret(name: str, value: str) -> bool:
    """A caller variable that may hold a credential (by its name, or a URL with a password)."""
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS) or bool(_URL_WITH_PASSWORD.search(value))


def server_env(drop_prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    """The caller's environment without credentials (and without names starting with ``drop_prefixes``):
    the base every server starts from, before the harness adds the secrets it means to pass."""
    return {k: v for k, v in os.environ.items() if not is_secret(k, v) and not k.startswith(drop_prefixes)}


def own_dir(path: Path) -> None:
    """``path`` as a 0700 directory of the service user (re-made empty when someone else owns it).

    Only for directories of disposable server state (Letta's working directory): chowning a tree
    the service user could write into as root would follow its links."""
    uid, gid = service_ids()
    if path.is_symlink():
        path.unlink()
    if path.exists() and path.stat().st_uid != uid:
        shutil.rmtree(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if dropping():
        os.chown(path, uid, gid)
    os.chmod(path, 0o700)


def open_to_others(root: Path) -> None:
    """Every directory under ``root`` world-searchable, every file world-readable (executables
    executable): the service user must read a tree root installed, whatever root's umask was."""
    for d, _dirs, files in os.walk(root):
        mode = os.stat(d).st_mode
        if mode & 0o555 != 0o555:
            os.chmod(d, mode | 0o555)
        for f in files:
            fp = os.path.join(d, f)
            if os.path.islink(fp):
                continue
            mode = os.stat(fp).st_mode
            want = mode | 0o444 | (0o111 if mode & 0o100 else 0)
            if want != mode:
                os.chmod(fp, want)
