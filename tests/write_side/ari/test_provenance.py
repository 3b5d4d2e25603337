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

from ledger.ari.node_report import load_node_report
from ledger.ari.provenance import artifact_refs, resolve_inside, sha256_file
from ledger.errors import InvalidInput
from ledger.typed import inspect_metadata
from support.env import FIXTURES

RUN_DIR = FIXTURES / "ari_run" / "experiments" / "run_20261128_stencil"
SECRET = b"outside the work dir: must never be hashed\n"


def ArtifactRef(path: str, sha256: str | None, role: str) -> dict:
    """A ref as ARI stores it."""
    return {"path": path, "sha256": sha256, "role": role}


def _report(work: Path) -> dict:
    return json.loads((work / "node_report.json").read_text(encoding="utf-8"))


def _refs(node_id: str) -> dict[str, dict]:
    work = RUN_DIR / node_id
    prov = artifact_refs(_report(work), work)
    assert prov.findings == []
    return {r["path"]: r for r in prov.refs}


def _report_with(filenames: list[str], **extra) -> dict:
    """A minimal valid report whose artifacts are ``filenames`` (no recorded hashes)."""
    return {
        "schema_version": 1,
        "node_id": "node_X",
        "parent_id": None,
        "ancestor_ids": [],
        "label": "draft",
        "depth": 0,
        "status": "success",
        "self_assessment": {"succeeded": True},
        "artifacts": [{"filename": f, "role": "data_output"} for f in filenames],
        **extra,
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
    (added,) = report.files_changed.added
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
        assert refs[a.filename]["role"] == a.role
        if a.sha256 is not None:
            assert refs[a.filename]["sha256"] == a.sha256


def test_artifacts_without_a_hash_are_hashed_at_index_time():
    refs = _refs("node_A2")
    assert refs["roofline.png"]["sha256"] == sha256_file(RUN_DIR / "node_A2" / "roofline.png")
    assert _refs("node_A1")["run.log"]["sha256"] == sha256_file(RUN_DIR / "node_A1" / "run.log")


def test_absent_file_without_a_hash_keeps_sha_none():
    assert _refs("node_A")["stencil_bench"] == ArtifactRef("stencil_bench", None, "binary")


def test_all_fixture_refs_are_relative_posix_paths():
    for work in sorted(RUN_DIR.iterdir()):
        for ref in _refs(work.name).values():
            assert not ref["path"].startswith("/") and ".." not in ref["path"].split("/")
            assert (work / ref["path"]).resolve().is_relative_to(work.resolve())


def test_recorded_hash_is_not_overwritten_when_the_file_changed(tmp_path):
    work = tmp_path / "node_A2"
    shutil.copytree(RUN_DIR / "node_A2", work)
    (work / "results.csv").write_text("tampered\n", encoding="utf-8")
    report = _report(work)
    recorded = next(a["sha256"] for a in report["artifacts"] if a["filename"] == "results.csv")
    ref = next(r for r in artifact_refs(report, work).refs if r["path"] == "results.csv")
    assert ref["sha256"] == recorded != sha256_file(work / "results.csv")


def test_a_path_listed_twice_gives_one_ref(tmp_path):
    (tmp_path / "results.csv").write_text("x\n", encoding="utf-8")
    digest = sha256_file(tmp_path / "results.csv")
    data = _report_with(
        ["results.csv", "./results.csv"], files_changed={"added": [{"path": "results.csv", "sha256": digest}]}
    )
    refs = artifact_refs(data, tmp_path).refs
    assert refs == [ArtifactRef("results.csv", digest, "data_output")]


@pytest.mark.parametrize(
    ("path", "stored", "reason"),
    [
        ("/etc/passwd", "passwd", "kept by its name, as ARI does"),
        ("../../etc/passwd", "../../etc/passwd", "'..' escapes the work dir"),
        ("sub/../../outside/secret.txt", "sub/../../outside/secret.txt", "'..' escapes the work dir"),
        ("leak.csv", "leak.csv", "symlink"),
        ("data/secret.txt", "data/secret.txt", "symlink"),
        (".", ".", "work dir itself"),
    ],
)
def test_escaping_paths_are_stored_flagged_and_never_read(escape_setup, path, stored, reason):
    work = escape_setup
    prov = artifact_refs(_report_with([path, "results.csv"]), work)
    refs = {r["path"]: r for r in prov.refs}
    assert set(refs) == {stored, "results.csv"} and refs[stored]["sha256"] is None
    assert [f.field for f in prov.findings] == ["artifacts[0].path"] and reason in prov.findings[0].reason
    assert hashlib.sha256(SECRET).hexdigest() not in {r["sha256"] for r in prov.refs}


def test_escapes_in_files_changed_are_flagged_too(escape_setup):
    work = escape_setup
    fake = "0" * 64
    data = _report_with(
        [],
        files_changed={
            "added": [{"path": "/etc/shadow", "sha256": fake}],
            "modified": [{"path": "data/secret.txt", "sha256_before": fake, "sha256_after": fake}],
        },
    )
    prov = artifact_refs(data, work)
    assert [r["path"] for r in prov.refs] == ["shadow", "data/secret.txt"]  # recorded hashes kept, files never read
    assert [f.field for f in prov.findings] == ["files_changed.added[0].path", "files_changed.modified[0].path"]


def test_a_fifo_or_device_is_never_opened(escape_setup):
    work = escape_setup
    os.mkfifo(work / "pipe")
    prov = artifact_refs(_report_with(["pipe"]), work)  # opening a FIFO would block forever
    assert prov.refs == [ArtifactRef("pipe", None, "data_output")] and "not a regular file" in prov.findings[0].reason


def test_absolute_path_inside_the_work_dir_becomes_relative(escape_setup):
    work = escape_setup
    prov = artifact_refs(_report_with([str(work / "sub" / ".." / "results.csv")]), work)
    assert prov.findings == []
    assert prov.refs == [ArtifactRef("results.csv", sha256_file(work / "results.csv"), "data_output")]


def test_symlink_that_stays_inside_is_followed(escape_setup):
    work = escape_setup
    prov = artifact_refs(_report_with(["sub/latest.csv"]), work)
    assert prov.refs == [ArtifactRef("sub/latest.csv", sha256_file(work / "results.csv"), "data_output")]


def test_refs_from_aris_builder_shapes(tmp_path):
    """ARI's builder: inherited_unchanged as {path, sha256}, sha256_before may be "", artifacts
    with their own sha256 and size, and ``path`` as well as ``filename`` (ARI's provenance reads both)."""
    (tmp_path / "k.c").write_text("int main(){}\n", encoding="utf-8")
    (tmp_path / "out.csv").write_text("a,b\n", encoding="utf-8")
    digest = sha256_file(tmp_path / "out.csv")
    data = _report_with(
        [],
        files_changed={
            "added": [],
            "deleted": ["old.c"],
            "modified": [{"path": "k.c", "sha256_before": "", "sha256_after": sha256_file(tmp_path / "k.c")}],
            "inherited_unchanged": [{"path": "Makefile", "sha256": "1" * 64}],
        },
    )
    data["artifacts"] = [
        {"filename": "out.csv", "role": "data_output", "sha256": digest, "size": 4},
        {"path": "fig.png", "role": "figure"},
    ]
    prov = artifact_refs(data, tmp_path)
    assert prov.refs == [
        ArtifactRef("k.c", sha256_file(tmp_path / "k.c"), "source"),
        ArtifactRef("out.csv", digest, "data_output"),
        ArtifactRef("fig.png", None, "figure"),
    ]


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


@pytest.mark.parametrize(
    ("ref", "field", "reason"),
    [
        ({"path": "x", "sha256": "ABC", "role": "log"}, "metadata.artifact_refs[1].sha256", "not a sha256"),
        ({"path": "x", "sha256": GOOD_SHA.upper(), "role": "log"}, "metadata.artifact_refs[1].sha256", "not a sha256"),
        ({"path": "/etc/passwd", "role": "log"}, "metadata.artifact_refs[1].path", "absolute"),
        ({"path": "a/../../etc/passwd", "role": "log"}, "metadata.artifact_refs[1].path", "'..'"),
        ({"path": "", "role": "log"}, "metadata.artifact_refs[1].path", "missing"),
        ({"path": 3, "role": "log"}, "metadata.artifact_refs[1].path", "missing"),
        ({"path": "x", "role": "evidence"}, "metadata.artifact_refs[1].role", "unknown role"),
        ("a.csv", "metadata.artifact_refs[1]", "expected an object"),
    ],
)
def test_typed_refs_findings_name_index_and_field(ref, field, reason):
    metadata = {
        "mem_kind": "experiment_result",
        "artifact_refs": [{"path": "a.csv", "sha256": GOOD_SHA, "role": "data_output"}, ref],
    }
    [finding] = inspect_metadata(metadata)
    assert finding.field == field and reason in finding.reason


def test_good_refs_and_free_text_have_no_findings():
    assert (
        inspect_metadata(
            {
                "mem_kind": "experiment_result",
                "artifact_refs": [{"path": "a.csv", "sha256": GOOD_SHA, "role": "data_output"}],
                "node_report_ref": {"run_id": "r", "node_id": "n"},
                "metric_ptr": {"name": "g", "value": 1.0},
            }
        )
        == []
    )
    assert inspect_metadata({"type": "result_summary", "metrics": {"g": "not checked"}}) == []


def test_memory_files_copied_into_the_work_dir_are_never_evidence(tmp_path):
    """ARI's loop copied an older layout's top-level memory files into every node's work dir, its
    node report listed them, and consolidation cited them: they are left out, with a finding."""
    (tmp_path / "run.c").write_text("int main(void) { return 0; }\n")
    memory = ["memory_ledger.jsonl.gz", "memory_ledger.jsonl.gz.head", "memory_projection.snapshot.zst"]
    for name in memory:
        (tmp_path / name).write_bytes(b"")
    report = {
        "files_changed": {
            "added": [{"path": p, "sha256": hashlib.sha256(b"").hexdigest()} for p in [*memory, "run.c"]]
        },
        "artifacts": [{"path": "memory_backup.jsonl.gz", "role": "log"}, {"path": "memory_ledger/x", "role": "log"}],
    }
    prov = artifact_refs(report, tmp_path)
    assert [r["path"] for r in prov.refs] == ["run.c"]
    assert len(prov.findings) == 5 and all("is a memory file" in f.reason for f in prov.findings)
