"""Bad input, through the library and the command line: a clear error naming the field and
the reason, and nothing written (issue 10). The same table runs through the MCP server in
``test_mcp.py``.

What ARI itself would store is not bad input: it is stored and flagged (``test_ari_contract``).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import InvalidInput, LedgerError
from ledger.ari.node_report import MAX_REPORT_BYTES
from ledger.layout import store_dir
from ledger.log import LOG_NAME
from projections.api import MemoryBackend
from support.env import subprocess_env

HUGE = "y" * (1024 * 1024 + 1)

# (call, field, reason): each must raise InvalidInput (a ValueError) and write nothing
LIBRARY = [
    (lambda b: b.add_memory("", "x"), "node_id", "must not be empty"),
    (lambda b: b.add_memory("a/b", "x"), "node_id", "forbidden character"),
    (lambda b: b.add_memory("a\x00b", "x"), "node_id", "forbidden character"),
    (lambda b: b.add_memory("root", 3), "text", "must be a string, got a number"),
    (lambda b: b.add_memory("root", "bad \udc80"), "body.text", "UTF-8"),
    (lambda b: b.add_memory("root", "x", 0), "metadata", "must be an object"),
    (lambda b: b.add_memory("root", "x", []), "metadata", "must be an object"),
    (lambda b: b.add_memory("root", "x", {"k": b"raw"}), "body.metadata.k", "not a JSON value"),
    (lambda b: b.add_memory("root", "x", {"k": {1, 2}}), "body.metadata.k", "not a JSON value"),
    (lambda b: b.add_memory("root", "x", {"k": HUGE}), "body.metadata.k", "the limit is"),
    (lambda b: b.add_memory("root", "x", {"k": ["y" * 1000] * 1100}), "body.metadata", "the limit is"),
    (
        lambda b: b.add_experiment_result(
            "root", "x", artifact_refs=[{"path": f"out/{i}.csv", "sha256": "a" * 64} for i in range(12000)]
        ),
        "body.metadata",
        "the limit is",
    ),
    (lambda b: b.add_experiment_result("root", "x", artifact_refs="a.csv"), "artifact_refs", "list"),
    (lambda b: b.add_typed_memory("root", "rumour", "x"), "kind", "unknown kind"),
    (lambda b: b.add_reproducibility_event("root", "e1", "maybe"), "status", "unknown status"),
    (lambda b: b.add_reproducibility_event("root", "", "rerun_passed"), "target_memory_id", "id of a memory"),
    (lambda b: b.search_memory("q", "root"), "ancestor_ids", "list"),
    (lambda b: b.search_memory("q", ["root"], limit=-1), "limit", "non-negative"),
    (lambda b: b.search_memory("q", ["root"], limit=True), "limit", "non-negative"),
    (lambda b: b.search_memory(None, ["root"]), "query", "string"),
    (lambda b: b.search_research_memory("q", ["root"], kinds="experiment_result"), "kinds", "list"),
    (lambda b: b.react_add(5), "content", "string"),
    (lambda b: b.react_add("x", ["step"]), "metadata", "must be an object"),
    (lambda b: b.list_react_entries(limit=-2), "limit", "non-negative"),
    (lambda b: b.seed_core_memory("", "", []), "context", "must be an object"),
    (
        lambda b: b.bulk_import([{"node_id": "a/b", "text": "x"}], "node_scope"),
        "entries[0].node_id",
        "forbidden character",
    ),
    (lambda b: b.bulk_import([{"node_id": "n", "text": 3}], "node_scope"), "entries[0].text", "string"),
    (lambda b: b.bulk_import({"node_id": "n"}, "node_scope"), "entries", "list"),
    (lambda b: b.bulk_import([], "global"), "kind", "unknown kind"),
    (lambda b: b.get_verified_context(["root"], min_evidence="solid"), "min_evidence", "unknown evidence level"),
    (lambda b: b.get_verified_context("root"), "ancestor_ids", "list"),
    (
        lambda b: b.consolidate_node_memory("root", {"node_id": "other", "status": "ok"}, "/tmp"),
        "node_report.node_id",
        "consolidating 'root'",
    ),
    (lambda b: b.consolidate_node_memory("root", 42, "/tmp"), "node_report", "expected a report object"),
    (lambda b: b.audit_memory("/nonexistent/experiments"), "experiments_root", "not a directory"),
    (lambda b: b.audit_memory("/tmp", "/etc"), "run_id", "directory name"),
    (lambda b: b.audit_memory("/tmp", "../x"), "run_id", "directory name"),
]


@pytest.mark.parametrize("call,field,reason", LIBRARY, ids=[f"{i}-{c[1]}" for i, c in enumerate(LIBRARY)])
def test_library_refuses_naming_the_field_and_writes_nothing(ckpt: Path, call, field: str, reason: str) -> None:
    backend = MemoryBackend(ckpt)
    try:
        backend.add_memory("root", "before", current_node="root")
        before = (store_dir(ckpt) / LOG_NAME).read_bytes()
        with pytest.raises(InvalidInput) as info:
            call(backend)
        assert isinstance(info.value, ValueError)
        assert info.value.field == field, str(info.value)
        assert reason in info.value.reason, str(info.value)
        assert (store_dir(ckpt) / LOG_NAME).read_bytes() == before
    finally:
        backend.close()


def test_oversized_or_special_report_files_are_refused_fast(ckpt: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "big.json").write_bytes(b"{" + b" " * MAX_REPORT_BYTES + b"}")
    backend = MemoryBackend(ckpt)
    try:
        for path, reason in (
            (work / "big.json", "the limit is"),
            (work / "missing.json", "file not found"),
            (work, "not a regular file"),
        ):
            with pytest.raises(InvalidInput, match=reason):
                backend.consolidate_node_memory("root", path, work, current_node="root")
        assert backend.session.ledger.last_seq == 0
    finally:
        backend.close()


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "projections", *args],
        capture_output=True,
        env=subprocess_env(),
        input=stdin,
        timeout=120,
    )


def _tree_hash(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and p.name != "memory_access.jsonl"):
        digest.update(path.relative_to(directory).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.fixture
def filled(ckpt: Path) -> Path:
    backend = MemoryBackend(ckpt)
    backend.add_memory("root", "a note", current_node="root")
    backend.close()
    return ckpt


CLI = [
    (["search", "{ckpt}", "q", "--as", "nobody"], "--as: unknown node"),
    (["search", "{ckpt}", "q", "--as", "root", "--limit", "-1"], "limit: must be a non-negative integer"),
    (["search", "{ckpt}-missing", "q", "--as", "root"], "no ledger at"),
    (["context", "{ckpt}", "--as", "nobody"], "--as: unknown node"),
    (["verified", "{ckpt}"], "--as: no verified_context.json yet"),
    (["audit", "{ckpt}", "--experiments", "{ckpt}/nowhere"], "--experiments: "),
    (["audit", "{ckpt}", "--experiments", "{ckpt}", "--run-id", "/etc"], "--run-id"),
    (["log", "{ckpt}-missing"], "no ledger at"),
    (["import-ari", "{ckpt}", "--source", "{ckpt}/none.jsonl"], "cannot read"),
]


@pytest.mark.parametrize("argv,message", CLI, ids=[" ".join(a[:1] + a[3:4]) for a, _ in CLI])
def test_cli_gives_one_error_line_and_exit_2(filled: Path, argv: list[str], message: str) -> None:
    before = _tree_hash(filled)
    done = cli(*[a.replace("{ckpt}", str(filled)) for a in argv])
    err = done.stderr.decode()
    assert done.returncode == 2, (done.stdout, err)
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert _tree_hash(filled) == before


def test_library_errors_are_one_hierarchy() -> None:
    assert issubclass(InvalidInput, LedgerError) and issubclass(InvalidInput, ValueError)
