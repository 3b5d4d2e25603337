"""The projection snapshot file: catalog, semantic index and cursor, checksummed.

Format 5: one zstandard frame (level 3) holding::

    b"ARISNAP\\x00"                        magic
    u64 LE length | preamble (JSON)       format, ckpt, cursor, cursor_hash, model, dim, rebuilt
    u64 LE length | body (JSON)           catalog state, blocks [name, ids, hidden]
    per block, in body order:             seqs int64[n], cleared int64[n], matrix float16[n x dim]

followed, outside the frame, by the 32-byte sha256 of the frame's bytes. A snapshot is
derived data: one flipped byte anywhere (zstd's own header included) fails that checksum,
checked before anything is decoded (one pass over the compressed bytes, cheap enough for
``status``), and the reader raises SnapshotError, so it is rebuilt from the log, never served. The records are JSON, not
msgpack: the log is JSON, so whatever the log accepts (integers beyond 64 bits included)
the snapshot can hold. The arrays are streamed in and out, so no second copy of the vectors
is held in memory. The file is written to a temporary name (``<name>.<pid>.tmp``) and
renamed into place; a temporary file left by a killed process is removed by the next save.
"""
from __future__ import annotations

import hashlib
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np
import zstandard

from projections.models.catalog import CatalogState
from projections.models.semantic import VECTOR_DTYPE, Block, BlockMeta

SNAPSHOT_NAME = "memory_projection.snapshot.zst"
SNAPSHOT_FORMAT = 5
MAGIC = b"ARISNAP\x00"
_LEN = struct.Struct("<Q")
_CHUNK = 1 << 24
_DIGEST = 32  # sha256 of the frame, at the end of the file
STALE_TEMP_SECONDS = 3600  # a temporary file this old is stale even if its pid was reused


class SnapshotPreamble(msgspec.Struct):
    """The snapshot's first record: small, so ``status`` reads it without the rest."""

    format: int
    ckpt: str | None
    cursor: int
    cursor_hash: str
    model: str
    dim: int
    rebuilt: str | None = None  # when and why the state was last rebuilt from the log instead of loaded


class SnapshotBody(msgspec.Struct):
    catalog: CatalogState
    blocks: list[BlockMeta]


@dataclass
class Snapshot:
    """A snapshot read back whole, every check passed."""

    preamble: SnapshotPreamble
    catalog: CatalogState
    blocks: dict[str, Block]


class SnapshotError(ValueError):
    """The snapshot file is cut short, damaged, or not a format-5 snapshot."""


def write_snapshot(path: Path, preamble: SnapshotPreamble, catalog: CatalogState, blocks: dict[str, Block]) -> None:
    """Write atomically (temporary file, rename). Raises OSError (disk full, read-only) and
    leaves no temporary file behind when it does."""
    remove_stale_temps(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    body = SnapshotBody(catalog, [BlockMeta(name, b.ids, b.hidden) for name, b in blocks.items()])
    try:
        with open(tmp, "wb") as f:
            hashed = _HashingWriter(f)
            with zstandard.ZstdCompressor(level=3).stream_writer(hashed, closefd=False) as out:
                head = msgspec.json.encode(preamble)
                out.write(MAGIC + _LEN.pack(len(head)) + head)
                data = msgspec.json.encode(body)
                out.write(_LEN.pack(len(data)) + data)
                for block in blocks.values():
                    n = block.n
                    for array in (block.seqs[:n], block.cleared[:n], block.matrix[:n]):
                        out.write(np.ascontiguousarray(array).data)
            f.write(hashed.digest.digest())
        os.replace(tmp, path)  # not fsynced: after a power loss a garbled file fails its checksum and is rebuilt
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_snapshot(path: Path) -> Snapshot:
    """Read and check the whole snapshot. Raises FileNotFoundError, or SnapshotError for
    anything else wrong with it (cut short, a flipped byte, another format)."""
    try:
        with open(path, "rb") as f:
            _check_file_digest(f)
            with zstandard.ZstdDecompressor().stream_reader(f, closefd=False) as src:
                preamble = _read_preamble(src)
                body = msgspec.json.decode(_read_record(src), type=SnapshotBody)
                blocks = {}
                for meta in body.blocks:
                    n, block = len(meta.ids), Block(preamble.dim, list(meta.ids), hidden=meta.hidden)
                    block.seqs, block.cleared = _read_array(src, (n,), np.int64), _read_array(src, (n,), np.int64)
                    block.matrix = _read_array(src, (n, preamble.dim), VECTOR_DTYPE)
                    blocks[meta.name] = block
    except FileNotFoundError:
        raise
    except (OSError, zstandard.ZstdError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SnapshotError(str(exc)) from None
    return Snapshot(preamble, body.catalog, blocks)


def read_preamble(path: Path) -> SnapshotPreamble:
    """Only the preamble (cursor, model, …) of a snapshot whose checksum is right: for
    ``status``. Raises FileNotFoundError or SnapshotError."""
    try:
        with open(path, "rb") as f:
            _check_file_digest(f)
            with zstandard.ZstdDecompressor().stream_reader(f, closefd=False) as src:
                return _read_preamble(src)
    except FileNotFoundError:
        raise
    except (OSError, zstandard.ZstdError) as exc:
        raise SnapshotError(str(exc)) from None


def remove_stale_temps(path: Path) -> list[Path]:
    """Remove temporary files of ``path`` left by a writer that died (its pid is gone, or
    the file is older than an hour); return them."""
    removed = []
    for tmp in path.parent.glob(f"{path.name}.*.tmp"):
        pid = tmp.name[len(path.name) + 1 : -len(".tmp")]
        try:
            alive = pid.isdigit() and int(pid) != os.getpid() and _pid_alive(int(pid))
            if not alive or time.time() - tmp.stat().st_mtime > STALE_TEMP_SECONDS:
                tmp.unlink()
                removed.append(tmp)
        except OSError:
            continue
    return removed


class _HashingWriter:
    """A file that hashes what is written to it (the compressed frame)."""

    def __init__(self, f) -> None:
        self._f = f
        self.digest = hashlib.sha256()

    def write(self, data) -> int:
        self.digest.update(data)
        return self._f.write(data)

    def flush(self) -> None:
        self._f.flush()


def _check_file_digest(f) -> None:
    """Compare the trailing sha256 with the bytes before it; leave ``f`` at the start."""
    size = os.fstat(f.fileno()).st_size
    if size < _DIGEST:
        raise SnapshotError("cut short")
    digest, left = hashlib.sha256(), size - _DIGEST
    while left:
        chunk = f.read(min(left, _CHUNK))
        if not chunk:
            raise SnapshotError("cut short")
        digest.update(chunk)
        left -= len(chunk)
    if f.read(_DIGEST) != digest.digest():
        raise SnapshotError("checksum mismatch: changed or cut short after it was written, or older than format 5")
    f.seek(0)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_preamble(src) -> SnapshotPreamble:
    if _read_exact(src, len(MAGIC)) != MAGIC:
        raise SnapshotError("not a projection snapshot")
    try:
        preamble = msgspec.json.decode(_read_record(src), type=SnapshotPreamble)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SnapshotError(f"unreadable preamble ({exc})") from None
    if preamble.format != SNAPSHOT_FORMAT:
        raise SnapshotError(f"format {preamble.format}, expected {SNAPSHOT_FORMAT}")
    return preamble


def _read_record(src) -> bytes:
    return _read_exact(src, _LEN.unpack(_read_exact(src, _LEN.size))[0])


def _read_exact(src, size: int) -> bytes:
    """Exactly ``size`` bytes, read in bounded chunks (a damaged length is "cut short", not a
    huge allocation)."""
    parts, left = [], size
    while left:
        part = src.read(min(left, _CHUNK))
        if not part:
            raise SnapshotError("cut short")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _read_array(src, shape: tuple[int, ...], dtype) -> np.ndarray:
    """Stream an array straight into its own buffer (no intermediate bytes object)."""
    array = np.empty(shape, dtype)
    if not array.size:
        return array
    view = memoryview(array).cast("B")
    filled = 0
    while filled < len(view):
        got = src.readinto(view[filled:])
        if not got:
            raise SnapshotError("cut short")
        filled += got
    return array
