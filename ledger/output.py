"""Writing a file whole: an export (a bundle, ARI's backup) to a path a person names, or a file
of the checkpoint replaced atomically.

Either way the new bytes go to a temporary file made exclusively beside the target under an
unpredictable name (:func:`ledger.safe_io.create_temp`), which is renamed over it: a link in the
target's place is replaced, never written through, and the new file keeps the permission bits
of the one it replaces.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from .log import fsync_dir
from .safe_io import create_temp, kept_mode, write_all


def write_output(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Run ``write`` on ``path``: atomically for a file (a temporary file beside it, synced,
    renamed over it, so a reader sees the old file or the whole new one; it keeps the old
    file's mode), straight through for a target that exists but is not a regular file
    (``/dev/stdout``, a pipe, ``/dev/null``: renaming over ``/dev/null`` as root would replace
    the device with a file)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        with open(path, "wb") as raw:
            write(raw)
        return
    mode = kept_mode(path)
    fd, tmp = create_temp(path, mode=0o666 if mode is None else 0o600, hidden=True)
    try:
        with os.fdopen(fd, "wb") as raw:
            write(raw)
            raw.flush()
            if mode is not None:
                os.fchmod(raw.fileno(), mode)
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def replace_file(path: Path, data: bytes, *, mode: int | None = None, hidden: bool = False) -> None:
    """Replace ``path`` with ``data`` so a crash at any point leaves the old file or the whole new
    one, never an empty or partial one: a temporary file (``<name>.tmp-<random>`` beside it, made
    exclusively; with a leading dot when ``hidden``, so no glob of the real files takes it)
    written and fsynced, renamed over ``path``, the directory fsynced (the rename is durable
    when this returns). The new file has ``mode`` when given (a set-aside copy: 0600), else the
    old file's permission bits, else 0644 (less the umask). A link at ``path`` is replaced,
    never followed. A killed run's temporary file is left (a ``<name>.tmp-*`` beside it), never
    written over."""
    keep = mode if mode is not None else kept_mode(path)
    fd, tmp = create_temp(path, mode=0o644 if keep is None else 0o600, hidden=hidden)
    try:
        try:
            write_all(fd, data)
            if keep is not None:
                os.fchmod(fd, keep)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
