"""Issue 27 item 4, the import side: a backup written before a redaction (``export-ari``'s
default, ARI's end-of-run ``memory_backup.jsonl.gz``) restored into the checkpoint never brings
the removed body back through ``import-ari``: the entry is skipped and counted
``skipped (redacted)``, and every other entry still imports once (importing twice adds nothing)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.ari.importer import BACKUP_NAME
from projections.api import MemoryBackend
from support.env import ari_ledger
from support.leaks import every_file_bytes

SECRET = "ghp_IMPORTBACK0123456789abcdef"


def run(*args: object) -> str:
    done = ari_ledger(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def redacted(ckpt: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A checkpoint whose secret entry was redacted after export-ari wrote its backup; the old
    backup (holding the secret) copied aside as it was."""
    backend = MemoryBackend(ckpt)
    backend.seed_core_memory("You are ARI.", "An HPC researcher.", {"primary_metric": "GFlops_per_s"})
    backend.add_memory(
        "root", "RESULT SUMMARY metrics=[GFlops_per_s=2.41]", {"type": "result_summary"}, current_node="root"
    )
    backend.add_memory("root", f"bash: export GITHUB_TOKEN={SECRET}", {"step": 3}, current_node="root")
    backend.add_memory("root", "tiling by 32 doubles the rate", {"nan": float("nan")}, current_node="root")
    backend.react_add("Thought: start with the naive loop", {"node_id": "root", "step": 1})
    backend.close()
    assert run("export-ari", ckpt).startswith(f"wrote {ckpt / BACKUP_NAME}: 3 node_scope, 1 react_step, 1 core_seed")
    old = tmp_path / "old_backup.jsonl.gz"
    shutil.copyfile(ckpt / BACKUP_NAME, old)
    assert SECRET.encode() in every_file_bytes(old.parent)
    run("redact", ckpt, "--match", SECRET, "--reason", "leaked token")
    return ckpt, old


def test_import_of_a_backup_older_than_the_redaction_skips_the_removed_entry(redacted: tuple[Path, Path]) -> None:
    ckpt, old = redacted
    backup = ckpt / BACKUP_NAME
    shutil.copyfile(old, backup)  # ARI's end-of-run backup, or an export, from before the redaction
    out = run("import-ari", ckpt)
    assert out.strip() == (
        f"{backup} (v0.6 {BACKUP_NAME}): node_scope 0 imported, 2 already there, 1 skipped (redacted); "
        "react_step 0 imported, 1 already there; core_seed 0 imported, 1 already there"
    )
    again = json.loads(run("import-ari", ckpt, "--json"))
    assert again[0]["kinds"]["node_scope"] == {"imported": 0, "kind": "node_scope", "skipped": 3, "redacted": 1}
    backup.unlink()  # the file restored by hand holds it: everything else must not
    assert SECRET.encode() not in every_file_bytes(ckpt)
    with Ledger.open_readonly(ckpt) as ledger:
        assert all(SECRET not in json.dumps(e.body) for e in ledger.events())
    backend = MemoryBackend(ckpt)
    try:
        texts = [e["text"] for e in backend.list_all_nodes()["by_node"]["root"]]
    finally:
        backend.close()
    assert texts == ["RESULT SUMMARY metrics=[GFlops_per_s=2.41]", "tiling by 32 doubles the rate"]


def test_the_other_entries_of_the_old_backup_still_import_once(redacted: tuple[Path, Path], tmp_path: Path) -> None:
    ckpt, old = redacted
    fresh = tmp_path / "fresh"
    out = run("import-ari", fresh, "--source", old)  # a checkpoint that never had the entry imports it
    assert "node_scope 3 imported, 0 already there;" in out and "redacted" not in out
    # into the redacted checkpoint, under another name: the other entries' import adds nothing twice
    for _ in range(2):
        out = run("import-ari", ckpt, "--source", old)
        assert "node_scope 0 imported, 2 already there, 1 skipped (redacted)" in out
