"""Writing an export (a bundle, ARI's backup) to a path a person names."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from .log import fsync_dir


def write_output(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Run ``write`` on ``path``: atomically for a file (a temporary file beside it, synced,
    renamed over it, so a reader sees the old file or the whole new one), straight through
    for a target that exists but is not a regular file (``/dev/stdout``, a pipe, ``/dev/null``:
    renaming over ``/dev/null`` as root would replace the device with a file)."""
    if path.exists() and not path.is_file():
        with open(path, "wb") as raw:
            write(raw)
        return
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as raw:
            write(raw)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def replace_file(path: Path, data: bytes, *, tmp: Path | None = None) -> None:
    """Replace ``path`` with ``data`` so a crash at any point leaves the old file or the whole new
    one, never an empty or partial one: ``tmp`` (default ``<name>.tmp`` beside it) written and
    fsynced, renamed over ``path``, the directory fsynced (the rename is durable when this
    returns). A killed run's ``tmp`` is written over by the next."""
    tmp = tmp or path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
