"""Clean edges of the CLI (issue 10 item 8): every failure is one ``error:`` line and exit 2,
and a refused bundle says what differs."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.layout import store_dir
from ledger.log import LOG_NAME
from ledger.maintenance.bundle import MANIFEST, export_bundle
from projections.adapters.cli import main


def run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_error(code: int, err: str, starts: str) -> None:
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"error: {starts}"), err


@pytest.fixture
def bundle(ckpt: Path, tmp_path: Path) -> Path:
    with Ledger.open(ckpt) as ledger:
        for i in range(21):
            ledger.append("root", "memory_added", {"text": f"entry {i}"}, current_node="root")
    out = tmp_path / "bundle.tar"
    export_bundle(ckpt, out)
    return out


def rebundle(bundle: Path, manifest: object) -> Path:
    """The same log with another manifest."""
    out = bundle.with_name("edited.tar")
    with tarfile.open(bundle) as src, tarfile.open(out, "w") as tar:
        log = src.extractfile(LOG_NAME).read()
        for name, data in ((LOG_NAME, log), (MANIFEST, json.dumps(manifest).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def test_a_manifest_that_is_not_an_object_is_one_error_line(capsys, bundle: Path, tmp_path: Path) -> None:
    code, _, err = run(capsys, "import", str(rebundle(bundle, [])), str(tmp_path / "new"))
    one_error(code, err, "bundle: ")
    assert "manifest.json must be a JSON object, got an array" in err
    assert not (store_dir(tmp_path / "new") / LOG_NAME).exists()


def read_manifest(bundle: Path) -> dict:
    with tarfile.open(bundle) as tar:
        member = tar.extractfile(MANIFEST)
        assert member is not None
        return json.loads(member.read())


def test_a_wrong_event_count_says_what_differs(capsys, bundle: Path, tmp_path: Path) -> None:
    manifest = read_manifest(bundle)
    code, _, err = run(capsys, "import", str(rebundle(bundle, {**manifest, "events": 20})), str(tmp_path / "new"))
    one_error(code, err, "bundle: the manifest says 20 events, the log has 21")
    code, _, err = run(capsys, "import", str(rebundle(bundle, {**manifest, "events": "21"})), str(tmp_path / "new"))
    one_error(code, err, "bundle.manifest.json.events: missing or of the wrong type ('21')")


def test_an_import_is_anchored_at_the_manifest(capsys, bundle: Path, tmp_path: Path) -> None:
    code, out, _ = run(capsys, "import", str(bundle), str(tmp_path / "new"))
    assert code == 0 and out.startswith("imported 21 events")
    manifest = read_manifest(bundle)
    with Ledger.open_readonly(tmp_path / "new") as ledger:
        assert ledger.head_anchor().hash == manifest["last_hash"] and ledger.head_anchor().seq == 21


def test_not_a_bundle_is_one_error_line(capsys, tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not a tar file at all")
    code, _, err = run(capsys, "import", str(junk), str(tmp_path / "new"))
    one_error(code, err, "bundle: cannot read")


@pytest.mark.parametrize(
    "args", [["report", "{ckpt}", "-o", "{tmp}/missing/r.html"], ["export", "{ckpt}", "-o", "{tmp}/missing/b.tar"]]
)
def test_output_into_a_missing_folder_is_one_error_line(
    capsys, args: list[str], bundle: Path, ckpt: Path, tmp_path: Path
) -> None:
    code, _, err = run(capsys, *[a.format(ckpt=ckpt, tmp=tmp_path) for a in args])
    one_error(code, err, "")
    assert "missing is not an existing directory" in err
    assert list(tmp_path.glob("**/*.tmp")) == []


def test_an_oserror_escaping_a_command_is_one_error_line(capsys, tmp_path: Path) -> None:
    ckpt = tmp_path / "odd"
    (store_dir(ckpt) / LOG_NAME).mkdir(parents=True)  # the log is a directory
    for command in ("status", "log", "verify"):
        code, _, err = run(capsys, command, str(ckpt))
        one_error(code, err, f"{store_dir(ckpt) / LOG_NAME}: is a directory")
