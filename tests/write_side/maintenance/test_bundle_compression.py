"""Export bundles are compressed as their names ask (zstd unless the name says otherwise), keep
the log's bytes exactly, and import from any of the five; a zstd bundle that is cut short or
inflates beyond the limit is one error and writes nothing."""

from __future__ import annotations

import hashlib
import random
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import zstandard

from ledger import Ledger
from ledger.errors import InvalidInput
from ledger.layout import log_path
from ledger.maintenance.bundle import bundle_compression, export_bundle, import_bundle
from ledger.safe_io import INFLATE_ENV

# (name asked for, what its first bytes must be): written from the naming rule, before the tool ran
NAMES = [
    ("bundle.tar", "tar"),
    ("Bundle.TAR", "tar"),
    ("bundle.tar.gz", "gzip"),
    ("bundle.tgz", "gzip"),
    ("bundle.tar.bz2", "bzip2"),
    ("bundle.tar.xz", "xz"),
    ("bundle.tar.zst", "zstd"),
    ("bundle.tzst", "zstd"),
    ("bundle", "zstd"),
    ("bundle.bak", "zstd"),
    ("run-7.ari", "zstd"),
]
MAGIC = {"gzip": b"\x1f\x8b", "bzip2": b"BZh", "xz": b"\xfd7zXZ\x00", "zstd": b"\x28\xb5\x2f\xfd"}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log of single appends (stored gzip members, as ARI's hooks write them)."""
    ckpt = tmp_path_factory.mktemp("bundle") / "ckpt"
    rnd = random.Random(7)
    words = ["loss", "epoch", "lr", "baseline", "ablation", "gflops", "seed", "warmup", "node", "kernel"]
    with Ledger.open(ckpt) as ledger:
        for i in range(600):
            text = " ".join(rnd.choice(words) for _ in range(20)) + f" = {rnd.random():.5f}"
            ledger.append(f"node_{i % 12}", "memory_added", {"text": text}, current_node=f"node_{i % 12}")
    return ckpt


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(("name", "kind"), NAMES)
def test_each_name_gets_its_compression_and_imports_byte_for_byte(
    ckpt: Path, tmp_path: Path, name: str, kind: str
) -> None:
    out = tmp_path / name
    manifest = export_bundle(ckpt, out)
    head = out.read_bytes()[:512]
    if kind == "tar":
        assert head[257:262] == b"ustar" and bundle_compression(out) is None
    else:
        assert head.startswith(MAGIC[kind]) and bundle_compression(out) == kind
    copy = tmp_path / "copy"
    assert import_bundle(out, copy) == manifest
    assert sha(log_path(copy)) == sha(log_path(ckpt)) == manifest["log_sha256"]
    with Ledger.open_readonly(copy) as ledger:
        assert ledger.verify().ok and ledger.last_seq == 600


def test_zstd_bundle_is_smaller_than_the_plain_tar(ckpt: Path, tmp_path: Path) -> None:
    export_bundle(ckpt, tmp_path / "plain.tar")
    export_bundle(ckpt, tmp_path / "small.tar.zst")
    plain, small = (tmp_path / "plain.tar").stat().st_size, (tmp_path / "small.tar.zst").stat().st_size
    assert small * 2 < plain, (small, plain)


@pytest.mark.skipif(shutil.which("zstd") is None, reason="no zstd program for GNU tar to call")
def test_gnu_tar_reads_the_zstd_bundle(ckpt: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle.tar.zst"
    export_bundle(ckpt, out)
    listed = subprocess.run(["tar", "--zstd", "-tf", str(out)], capture_output=True, text=True, check=True)
    assert sorted(listed.stdout.split()) == ["manifest.json", "memory_ledger.jsonl.gz"]


def test_a_zstd_bundle_cut_short_is_one_error_and_writes_nothing(ckpt: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle.tar.zst"
    export_bundle(ckpt, out)
    data = out.read_bytes()
    out.write_bytes(data[: len(data) // 2])
    with pytest.raises(InvalidInput) as raised:
        import_bundle(out, tmp_path / "copy")
    assert raised.value.field == "bundle"
    assert not log_path(tmp_path / "copy").exists()


@pytest.mark.parametrize("at", [0.1, 0.5, 0.9])
def test_a_zstd_bundle_with_flipped_bytes_is_one_error_and_writes_nothing(
    ckpt: Path, tmp_path: Path, at: float
) -> None:
    """The frame carries its checksum: damage anywhere is refused, never imported."""
    out = tmp_path / "bundle.tar.zst"
    export_bundle(ckpt, out)
    data = bytearray(out.read_bytes())
    data[int(len(data) * at)] ^= 0x5A
    out.write_bytes(bytes(data))
    with pytest.raises(InvalidInput) as raised:
        import_bundle(out, tmp_path / "copy")
    assert raised.value.field == "bundle"
    assert not log_path(tmp_path / "copy").exists()


def test_a_zstd_bundle_beyond_the_inflate_limit_is_refused(
    ckpt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frame of zeros that inflates to 3 MiB against a 1 MiB limit (a bomb, in small)."""
    bomb = tmp_path / "bomb.tar.zst"
    bomb.write_bytes(zstandard.ZstdCompressor().compress(bytes(3 << 20)))
    monkeypatch.setenv(INFLATE_ENV, "1")
    with pytest.raises(InvalidInput, match="inflates to more than"):
        import_bundle(bomb, tmp_path / "copy")
    assert not log_path(tmp_path / "copy").exists()


def test_the_zstd_bundle_holds_the_log_unchanged(ckpt: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    export_bundle(ckpt, out)
    plain = tmp_path / "plain.tar"
    plain.write_bytes(zstandard.ZstdDecompressor().stream_reader(out.read_bytes()).read())
    with tarfile.open(plain) as tar:
        member = tar.extractfile("memory_ledger.jsonl.gz")
        assert member is not None and member.read() == log_path(ckpt).read_bytes()
