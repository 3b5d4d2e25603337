"""Portable bundles: the log and a manifest, nothing that cannot be rebuilt.

``export_bundle`` writes a tar holding ``memory_ledger.jsonl.gz`` and ``manifest.json``
(checkpoint id, event count, last hash, sha256 of the log), compressed as its name asks
(:func:`bundle_compression`: zstd unless the name says otherwise). The log's bytes are kept
exactly (its sha256 is in the manifest); a log of single appends is mostly stored gzip
members (uncompressed JSON), which zstd shrinks ~3.4x. The manifest's ``last_hash`` is
an anchor kept outside the checkpoint: ``ari-ledger verify CKPT --head <last_hash>`` later
proves the log still holds that event. ``import_bundle`` checks all of it before the log is
placed into an empty checkpoint (anchored at the manifest's last event); projections
rebuild on first open.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, assert_never

import zstandard

from .. import layout
from ..anchor import HeadFile
from ..ari.provenance import sha256_file
from ..errors import InvalidInput, LogCorrupted, kind_of, os_reason
from ..events import Event
from ..ledger import Ledger
from ..log import LOG_NAME
from ..output import write_output
from ..progress import Progress
from ..safe_io import INFLATE_ENV, SIDE_FILE_LIMIT, UnsafeFile, max_inflated_bytes, open_file
from ..verify import VerifyReport

MANIFEST = "manifest.json"
FORMAT = "ari-memory-ledger-bundle/1"
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "format": str,
    "ckpt": (str, type(None)),
    "events": int,
    "last_hash": str,
    "log_sha256": str,
}


def export_bundle(checkpoint_dir: Path, out: Path) -> dict[str, Any]:
    """Write the verified log and its manifest to ``out`` (a tar); refuse a damaged or rolled-back log."""
    check_output_path(out, "out")
    with Ledger.open_readonly(checkpoint_dir) as ledger:
        report = ledger.verify()
        if not report.ok:
            raise LogCorrupted(
                f"refusing to export: {report.summary()}", seq=report.first_bad_seq, offset=report.offset
            )
        last = ledger.event_at(report.last_seq)
        manifest = {
            "format": FORMAT,
            "ckpt": last.ckpt if last else None,
            "events": report.events,
            "last_hash": last.hash if last else "",
            "log_sha256": sha256_file(ledger.path),
        }
        log_path = ledger.path

        def write_tar(raw: IO[bytes], mode: Literal["w|", "w|gz", "w|bz2", "w|xz"] = "w|") -> None:
            with tarfile.open(fileobj=raw, mode=mode) as tar:  # a stream: also into a pipe
                tar.add(log_path, arcname=LOG_NAME)
                data = json.dumps(manifest, indent=2).encode()
                info = tarfile.TarInfo(MANIFEST)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))

        write_output(out, _compressing(bundle_compression(out), write_tar))
    return manifest


def bundle_compression(out: Path) -> Compression | None:
    """The compression ``export`` writes to ``out``, told by its name: ``.tar`` is a plain tar
    (what earlier versions wrote), ``.tar.gz``/``.tgz``, ``.tar.bz2`` and ``.tar.xz`` are what
    they say; any other name (``.tar.zst``, a pipe, ``/dev/stdout``) is zstd, the smallest and
    fastest of them for a log. ``import`` reads all five by their first bytes."""
    name = out.name.lower()
    for suffixes, kind in _BY_SUFFIX:
        if name.endswith(suffixes):
            return kind
    return None if name.endswith(".tar") else "zstd"


def _compressing(
    kind: Compression | None, write_tar: Callable[[IO[bytes], Literal["w|", "w|gz", "w|bz2", "w|xz"]], None]
) -> Callable[[BinaryIO], None]:
    """The writer of a bundle compressed as ``kind`` (tarfile's own streams, or zstd's)."""

    def write(raw: BinaryIO) -> None:
        match kind:
            case None:
                write_tar(raw, "w|")
            case "gzip":
                write_tar(raw, "w|gz")
            case "bzip2":
                write_tar(raw, "w|bz2")
            case "xz":
                write_tar(raw, "w|xz")
            case "zstd":
                with zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True).stream_writer(
                    raw, closefd=False
                ) as zst:
                    write_tar(zst, "w|")  # a binary writer tarfile streams into
            case _:
                assert_never(kind)

    return write


def import_bundle(bundle: Path, checkpoint_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    """Place a bundle's log into an empty checkpoint after checking it against its manifest.

    ``progress(events checked, events the manifest names)`` as the staged log is verified; the
    log is moved into place only once all of it verified, so an interrupt before leaves the
    checkpoint without a ledger, and one after leaves the whole log."""
    if checkpoint_dir.exists():
        layout.move_legacy_files(checkpoint_dir)
    target = layout.log_path(checkpoint_dir)
    if target.exists():
        raise InvalidInput("checkpoint", f"{checkpoint_dir} already has a ledger; import into an empty checkpoint")
    head = HeadFile(target)
    if head.path.exists():
        raise InvalidInput(
            "checkpoint",
            f"{checkpoint_dir} holds {head.source} but no log (its log was removed); import into an empty checkpoint",
        )
    try:
        with ExitStack() as stack:
            raw: IO[bytes] = stack.enter_context(os.fdopen(open_file(bundle, os.O_RDONLY), "rb"))
            compressed = _compression(raw)
            if compressed is None:  # what `export` writes: checked before anything is made
                tar = stack.enter_context(tarfile.open(fileobj=raw, mode="r:"))
                manifest = _manifest(bundle, tar)
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=target.parent)))
            if compressed is not None:
                tar = stack.enter_context(_inflated(bundle, raw, compressed, staging / "bundle.tar"))
                manifest = _manifest(bundle, tar)
            log_member = tar.extractfile(LOG_NAME)
            if log_member is None:
                raise InvalidInput("bundle", f"{bundle}: {LOG_NAME} is not a regular file")
            staged = staging / LOG_NAME
            with open(staged, "xb") as out:  # a chunk at a time: the log is checked once it is on disk
                shutil.copyfileobj(log_member, out, 1 << 20)
            if sha256_file(staged) != manifest["log_sha256"]:
                raise InvalidInput("bundle", "the log's sha256 does not match the manifest's log_sha256")
            with Ledger.open_readonly(staging) as ledger:
                report = ledger.verify(progress=_of_total(progress, manifest["events"]))
                last = ledger.event_at(report.last_seq) if report.ok else None
            _check_against_manifest(report, last, manifest)
            os.replace(staged, target)
    except UnsafeFile as exc:
        raise InvalidInput("bundle", str(exc)) from None
    except (tarfile.TarError, KeyError, OSError, EOFError, zstandard.ZstdError) as exc:
        raise InvalidInput("bundle", f"cannot read {bundle}: {os_reason(exc)}") from None
    if last is not None:
        head.write(last.ckpt, last.seq, last.hash, both=True, durable=True)
        head.close()
    return manifest


def _of_total(progress: Progress | None, total: int) -> Progress | None:
    """``progress`` with ``total`` as its total (never less than what is done)."""
    if progress is None:
        return None
    report = progress

    def counted(done: int, _total: int) -> None:
        report(done, max(done, total))

    return counted


# The bundles' compressions, by their first bytes (zstd's frame magic, then tarfile's own three)
Compression = Literal["gzip", "bzip2", "xz", "zstd"]
_COMPRESSED: tuple[tuple[bytes, Compression], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)
_BY_SUFFIX: tuple[tuple[tuple[str, ...], Compression], ...] = (
    ((".tar.gz", ".tgz"), "gzip"),
    ((".tar.bz2", ".tbz2"), "bzip2"),
    ((".tar.xz", ".txz"), "xz"),
    ((".tar.zst", ".tzst"), "zstd"),
)
ZSTD_LEVEL = 3  # zstd's default: 3.4x smaller than the plain tar of a log of single appends, ~30 MB/s


def _compression(raw: IO[bytes]) -> Compression | None:
    """The compression of the bundle read from ``raw``, or None for a plain tar."""
    magic = raw.read(6)
    raw.seek(0)
    return next((kind for start, kind in _COMPRESSED if magic.startswith(start)), None)


def _inflating(kind: Compression, raw: IO[bytes]) -> io.BufferedIOBase | zstandard.ZstdDecompressionReader:
    match kind:
        case "gzip":
            return gzip.GzipFile(fileobj=raw, mode="rb")
        case "bzip2":
            return bz2.BZ2File(raw, "rb")
        case "xz":
            return lzma.LZMAFile(raw, "rb")
        case "zstd":
            return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        case _:
            assert_never(kind)


@contextmanager
def _inflated(bundle: Path, raw: IO[bytes], kind: Compression, plain: Path) -> Iterator[tarfile.TarFile]:
    """A compressed bundle as a plain tar in ``plain`` (beside the staged log), inflated a chunk at
    a time and refused beyond :func:`ledger.safe_io.max_inflated_bytes`: a bomb costs neither
    memory nor more disk than that."""
    limit = max_inflated_bytes()
    with _inflating(kind, raw) as inflating, open(plain, "xb") as out:
        size = 0
        while chunk := inflating.read(1 << 20):
            size += len(chunk)
            if size > limit:
                raise InvalidInput(
                    "bundle", f"{bundle} inflates to more than {limit} bytes (the limit, {INFLATE_ENV}); not read"
                )
            out.write(chunk)
    with tarfile.open(plain, mode="r:") as tar:
        yield tar


def check_output_path(out: Path, field: str) -> None:
    """Refuse, before any work, an output file whose folder does not exist, or one that is a
    file of a checkpoint's memory (:func:`ledger.layout.memory_file_problem`)."""
    problem = layout.memory_file_problem(out)
    if problem is not None:
        raise InvalidInput(field, problem)
    if not out.parent.is_dir():
        raise InvalidInput(field, f"{out.parent} is not an existing directory (create it first)")
    if out.is_dir():
        raise InvalidInput(field, f"{out} is a directory; name the file to write (a path inside it)")


def _manifest(bundle: Path, tar: tarfile.TarFile) -> dict[str, Any]:
    """The manifest, every field present with its type (else InvalidInput naming it)."""
    try:
        member = tar.extractfile(MANIFEST)
    except KeyError:
        member = None
    if member is None:  # missing, or not a regular file
        raise InvalidInput("bundle", f"{bundle} has no {MANIFEST}; it is not an {FORMAT} bundle")
    info = tar.getmember(MANIFEST)
    if info.size > SIDE_FILE_LIMIT:
        raise InvalidInput("bundle", f"{bundle}: {MANIFEST} is {info.size} bytes; the limit is {SIDE_FILE_LIMIT}")
    try:
        manifest = json.load(member)
    except ValueError as exc:
        raise InvalidInput("bundle", f"{bundle}: {MANIFEST} is not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise InvalidInput("bundle", f"{bundle}: {MANIFEST} must be a JSON object, got {kind_of(manifest)}")
    if manifest.get("format") != FORMAT:
        raise InvalidInput("bundle", f"{bundle} is not an {FORMAT} bundle (format {manifest.get('format')!r})")
    for name, kind in _FIELDS.items():
        if name not in manifest or isinstance(manifest[name], bool) or not isinstance(manifest[name], kind):
            raise InvalidInput(f"bundle.{MANIFEST}.{name}", f"missing or of the wrong type ({manifest.get(name)!r})")
    if LOG_NAME not in tar.getnames():
        raise InvalidInput("bundle", f"{bundle} holds no {LOG_NAME}")
    return manifest


def _check_against_manifest(report: VerifyReport, last: Event | None, manifest: dict[str, Any]) -> None:
    """Say exactly what differs between the staged log and its manifest."""
    if not report.ok:
        raise InvalidInput("bundle", f"the log does not verify: {report.summary()}")
    if report.events != manifest["events"]:
        raise InvalidInput("bundle", f"the manifest says {manifest['events']} events, the log has {report.events}")
    if last is not None and last.hash != manifest["last_hash"]:
        raise InvalidInput(
            "bundle",
            f"the log's last event (seq {last.seq}) has hash {last.hash[:12]}…, the manifest says {manifest['last_hash'][:12]}…",
        )
    if last is not None and last.ckpt != manifest["ckpt"]:
        raise InvalidInput("bundle", f"the log is checkpoint {last.ckpt}, the manifest says {manifest['ckpt']}")
