"""The stack's three random secrets, each in a 0600 file of ``<home>/secrets`` (0700), made once.

``letta_api_key`` is the Letta server's password: clients send it as ``LETTA_API_KEY`` (ARI's
name; letta-client sends it as ``Authorization: Bearer``). ``postgres_password`` is the
database role's (scram-sha-256). ``embed_key`` is the embedding endpoint's bearer key, which
Letta sends as its OpenAI key. They persist across ``down``/``up`` so an exported key stays valid.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import stat
from pathlib import Path

from .errors import LettaHarnessError
from .layout import Layout

NAMES = ("letta_api_key", "postgres_password", "embed_key")


@dataclasses.dataclass(frozen=True)
class Credentials:
    letta_api_key: str
    postgres_password: str
    embed_key: str


def secret_file(layout: Layout, name: str) -> Path:
    return layout.secrets / name


def _check_private(path: Path, kind: str) -> None:
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid():
        raise LettaHarnessError(f"{path} is a symlink or not ours; remove it and run `letta up` again")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700 if kind == "dir" else 0o600)


def _read(path: Path) -> str | None:
    try:
        value = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LettaHarnessError(f"cannot read the secret {path}: {exc.strerror or exc}") from None
    return value or None


def _make(path: Path) -> str:
    value = secrets.token_urlsafe(32)  # URL-safe: it goes into a database URI as it is
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(value + "\n")
    os.replace(tmp, path)
    return value


def ensure(layout: Layout) -> Credentials:
    """The secrets of this home, made where missing; every file checked to be ours and 0600."""
    d = layout.secrets
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    _check_private(d, "dir")
    values = {}
    for name in NAMES:
        path = secret_file(layout, name)
        if path.exists() or path.is_symlink():
            _check_private(path, "file")
        values[name] = _read(path) or _make(path)
    return Credentials(**values)


def load(layout: Layout) -> Credentials | None:
    """The secrets of this home, or None when any is missing (a stack an older harness started)."""
    try:
        values = {name: _read(secret_file(layout, name)) for name in NAMES}
    except LettaHarnessError:
        return None
    if any(v is None for v in values.values()):
        return None
    return Credentials(**values)  # type: ignore[arg-type]
