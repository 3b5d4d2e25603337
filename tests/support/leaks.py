"""Where a removed text could hide: every file under a directory, raw and decompressed."""

from __future__ import annotations

import contextlib
import gzip
from pathlib import Path


def every_file_bytes(root: Path) -> bytes:
    """Every file under ``root``, raw and (for gzip) decompressed as far as it goes."""
    out = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            raw = path.read_bytes()
            out.append(raw)
            if raw[:2] == b"\x1f\x8b":
                with contextlib.suppress(OSError, EOFError):
                    out.append(gzip.decompress(raw))
    return b"\n".join(out)
