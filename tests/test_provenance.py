"""Artifact refs: reuse recorded hashes, hash the rest, and never leave the node's work dir."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.errors import InvalidInput
from ledger.node_report import load_node_report
from ledger.provenance import (
    ArtifactRef,
    artifact_refs,
    resolve_inside,
    sha256_file,
    validate_artifact_refs,
)

RUN_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "ari_run" / "experiments" / "run_20261128_stencil"
SECRET = b"outside the work dir: must never be hashed\n"


def _refs(node_id: str) -> dict[str, ArtifactRef]:
    work = RUN_DIR / node_id
    prov = artifact_refs(load_node_report(work / "node_report.json"), work)
    assert prov.refused == []
    return {r.path: r for r in prov.refs}


def _report_with(filenames: list[str], **extra) -> dict:
    """A minimal valid report whose artifacts are ``filenames`` (no recorded hashes)."""
    return {
        "schema_version": 1, "node_id": "node_X", "parent_id": None, "ancestor_ids": [], "label": "draft",
        "depth": 0, "status": "success", "self_assessment": {"succeeded": True},
        "artifacts": [{"filename": f, "role": "data_output"} for f in filenames], **extra,
    }


@pytest.fixture
def escape_setup(tmp_path):
    """work/ with an inside file and symlinks out to outside/secret.txt (file and parent dir)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "results.csv").write_text("n,GFlops_per_s\n256,15.82\n", encoding="utf-8")
    (work / "leak.csv").symlink_to(outside / "secret.txt")
    (work / "data").symlink_to(outside, target_is_directory=True)
    (work / "sub" / "latest.csv").symlink_to(Path("..") / "results.csv")
    return work


def test_files_changed_hashes_are_reused_with_role_source():
    report = load_node_report(RUN_DIR / "node_A2" / "node_report.json")
    refs = _refs("node_A2")
    added, = report.files_changed.added
    assert refs[added.path] == ArtifactRef(added.path, added.sha256, "source")
    for m in report.files_changed.modified:
        assert refs[m.path] == ArtifactRef(m.path, m.sha256_after, "source")


def test_deleted_and_inherited_files_get_no_ref():
    refs = _refs("node_A2")
    assert "src/timer.h" not in refs
    assert "Makefile" not in refs and "src/stencil.h" not in refs


def test_recorded_artifact_hashes_and_roles_are_kept():
    report = load_node_report(RUN_DIR / "node_A2" / "node_report.json")
    refs = _refs("node_A2")
    for a in report.artifacts:
        assert refs[a.filename].role == a.role
        if a.sha256 is not None:
            assert refs[a.filename].sha256 == a.sha256


def test_artifacts_without_a_hash_are_hashed_at_index_time():
    refs = _refs("node_A2")
    assert refs["roofline.png"].sha256 == sha256_file(RUN_DIR / "node_A2" / "roofline.png")
    assert _refs("node_A1")["run.log"].sha256 == sha256_file(RUN_DIR / "node_A1" / "run.log")


def test_absent_file_without_a_hash_keeps_sha_none():
    assert _refs("node_A")["stencil_bench"] == ArtifactRef("stencil_bench", None, "binary")


def test_all_fixture_refs_are_relative_posix_paths():
    for work in sorted(RUN_DIR.iterdir()):
        for ref in _refs(work.name).values():
            assert not ref.path.startswith("/") and ".." not in ref.path.split("/")
            assert (work / ref.path).resolve().is_relative_to(work.resolve())


def test_recorded_hash_is_not_overwritten_when_the_file_changed(tmp_path):
    work = tmp_path / "node_A2"
    shutil.copytree(RUN_DIR / "node_A2", work)
    (work / "results.csv").write_text("tampered\n", encoding="utf-8")
    report = load_node_report(work / "node_report.json")
    recorded = next(a.sha256 for a in report.artifacts if a.filename == "results.csv")
    ref = next(r for r in artifact_refs(report, work).refs if r.path == "results.csv")
    assert ref.sha256 == recorded != sha256_file(work / "results.csv")


def test_a_path_listed_twice_gives_one_ref(tmp_path):
    (tmp_path / "results.csv").write_text("x\n", encoding="utf-8")
    digest = sha256_file(tmp_path / "results.csv")
    data = _report_with(["results.csv", "./results.csv"],
                        files_changed={"added": [{"path": "results.csv", "sha256": digest}]})
    refs = artifact_refs(load_node_report(data), tmp_path).refs
    assert refs == [ArtifactRef("results.csv", digest, "data_output")]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/etc/passwd", "absolute path outside the work dir"),
        ("../../etc/passwd", "'..' escapes the work dir"),
        ("sub/../../outside/secret.txt", "'..' escapes the work dir"),
        ("leak.csv", "symlink"),
        ("data/secret.txt", "symlink"),
        ("", "empty path"),
        (".", "work dir itself"),
    ],
)
def test_escaping_paths_are_refused_and_never_read(escape_setup, path, reason):
    work = escape_setup
    prov = artifact_refs(load_node_report(_report_with([path, "results.csv"])), work)
    assert [r.path for r in prov.refs] == ["results.csv"]
    assert len(prov.refused) == 1 and prov.refused[0].path == path
    assert reason in prov.refused[0].reason
    assert hashlib.sha256(SECRET).hexdigest() not in {r.sha256 for r in prov.refs}


def test_escapes_in_files_changed_are_refused_too(escape_setup):
    work = escape_setup
    fake = "0" * 64
    data = _report_with([], files_changed={
        "added": [{"path": "/etc/shadow", "sha256": fake}],
        "modified": [{"path": "data/secret.txt", "sha256_before": fake, "sha256_after": fake}],
    })
    prov = artifact_refs(load_node_report(data), work)
    assert prov.refs == []
    assert [r.path for r in prov.refused] == ["/etc/shadow", "data/secret.txt"]


def test_absolute_path_inside_the_work_dir_becomes_relative(escape_setup):
    work = escape_setup
    prov = artifact_refs(load_node_report(_report_with([str(work / "sub" / ".." / "results.csv")])), work)
    assert prov.refused == []
    assert prov.refs == [ArtifactRef("results.csv", sha256_file(work / "results.csv"), "data_output")]


def test_symlink_that_stays_inside_is_followed(escape_setup):
    work = escape_setup
    prov = artifact_refs(load_node_report(_report_with(["sub/latest.csv"])), work)
    assert prov.refs == [ArtifactRef("sub/latest.csv", sha256_file(work / "results.csv"), "data_output")]


def test_resolve_inside(escape_setup):
    work = escape_setup
    assert resolve_inside(work, "sub/latest.csv") == (work / "results.csv").resolve()
    assert resolve_inside(work, str(work / "results.csv")) == (work / "results.csv").resolve()
    for bad in ("/etc/passwd", "../x", "leak.csv", "data/secret.txt"):
        with pytest.raises(InvalidInput) as info:
            resolve_inside(work, bad)
        assert info.value.field == "path"


_SEGMENTS = st.sampled_from(["a", "b", "..", ".", "data", "leak.csv", "sub", "latest.csv", ""])


@given(st.lists(_SEGMENTS, min_size=1, max_size=6), st.booleans())
def test_anything_resolve_inside_accepts_is_inside(segments, absolute):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "outside").mkdir()
        work = root / "work"
        (work / "sub").mkdir(parents=True)
        (work / "data").symlink_to(root / "outside", target_is_directory=True)
        (work / "leak.csv").symlink_to(root / "outside" / "x")
        (work / "sub" / "latest.csv").symlink_to(Path("..") / "a")
        path = "/".join(segments)
        if absolute:
            path = os.path.join(str(work), path)
        try:
            resolved = resolve_inside(work, path)
        except InvalidInput:
            return
        assert resolved.is_relative_to(work.resolve())


def test_sha256_file_streams_large_files(tmp_path):
    blob = os.urandom(3 * 1024 * 1024 + 17)
    (tmp_path / "big.bin").write_bytes(blob)
    assert sha256_file(tmp_path / "big.bin") == hashlib.sha256(blob).hexdigest()


GOOD_SHA = "a" * 64


def test_validate_artifact_refs_accepts_and_normalises():
    refs = validate_artifact_refs([
        {"path": "results.csv", "sha256": GOOD_SHA, "role": "data_output"},
        {"path": "./src//stencil.c", "sha256": None, "role": "source"},
        {"path": "run.log", "role": "log"},
        ArtifactRef("fig/roofline.png", None, "figure"),
    ])
    assert refs == [
        ArtifactRef("results.csv", GOOD_SHA, "data_output"),
        ArtifactRef("src/stencil.c", None, "source"),
        ArtifactRef("run.log", None, "log"),
        ArtifactRef("fig/roofline.png", None, "figure"),
    ]


def test_validate_artifact_refs_round_trips_fixture_refs():
    refs = list(_refs("node_A2").values())
    assert validate_artifact_refs(json.loads(json.dumps([{"path": r.path, "sha256": r.sha256, "role": r.role} for r in refs]))) == refs


@pytest.mark.parametrize(
    ("bad", "field", "reason"),
    [
        ({"path": "x", "sha256": "ABC", "role": "log"}, "artifact_refs[2].sha256", "64 lowercase hex"),
        ({"path": "x", "sha256": GOOD_SHA.upper(), "role": "log"}, "artifact_refs[2].sha256", "64 lowercase hex"),
        ({"path": "/etc/passwd", "role": "log"}, "artifact_refs[2].path", "absolute"),
        ({"path": "a/../../etc/passwd", "role": "log"}, "artifact_refs[2].path", "'..' escapes"),
        ({"path": "", "role": "log"}, "artifact_refs[2].path", "non-empty"),
        ({"path": 3, "role": "log"}, "artifact_refs[2].path", "non-empty"),
        ({"role": "log"}, "artifact_refs[2].path", "required field is missing"),
        ({"path": "x"}, "artifact_refs[2].role", "required field is missing"),
        ({"path": "x", "role": "evidence"}, "artifact_refs[2].role", "expected one of"),
        ({"path": "x", "role": "log", "sha": GOOD_SHA}, "artifact_refs[2].sha", "unknown key"),
        ({"path": "./a.csv", "role": "log"}, "artifact_refs[2].path", "duplicate of artifact_refs[0].path"),
        ("a.csv", "artifact_refs[2]", "expected an object"),
    ],
)
def test_validate_artifact_refs_names_index_and_field(bad, field, reason):
    refs = [{"path": "a.csv", "sha256": GOOD_SHA, "role": "data_output"}, {"path": "b.log", "role": "log"}, bad]
    with pytest.raises(InvalidInput) as info:
        validate_artifact_refs(refs)
    assert info.value.field == field
    assert reason in info.value.reason


def test_validate_artifact_refs_uses_the_callers_field_name():
    with pytest.raises(InvalidInput) as info:
        validate_artifact_refs([{"path": "x", "role": "nope"}], field="evidence")
    assert info.value.field == "evidence[0].role"


@pytest.mark.parametrize("not_a_list", ["results.csv", {"path": "x", "role": "log"}, None, 3])
def test_validate_artifact_refs_wants_a_list(not_a_list):
    with pytest.raises(InvalidInput) as info:
        validate_artifact_refs(not_a_list)
    assert info.value.field == "artifact_refs"
