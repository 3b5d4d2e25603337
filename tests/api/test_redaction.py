"""``ari-ledger redact`` over a whole checkpoint (issue 20): after it, no file the project writes
holds the removed text, reads never return it, and the redacted entries stay visible as such."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.layout import SNAPSHOT_NAME, store_dir
from ledger.log import LOG_NAME, compress_member
from ledger.redact import Selector
from projections.api.ari_export import write_ari_backup
from projections.api.backend import MemoryBackend
from projections.api.lineage import lineage_data
from projections.api.redaction import redact_checkpoint
from support.env import ari_ledger
from support.leaks import every_file_bytes

SECRET = "ghp_TOKEN0123456789abcdef"


@pytest.fixture
def leaky(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkpoint where the secret reached every file: entries, a ReAct step, the access log's
    previews and a search query, the snapshot, verified_context.json and a torn tail set aside."""
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "root")
    backend = MemoryBackend(ckpt)
    for i in range(30):
        text = f"entry {i} on halo exchange" + (f" export GITHUB_TOKEN={SECRET}" if i % 10 == 3 else "")
        backend.add_memory("root", text, {"i": i}, current_node="root")
    backend.react_add(f"bash: env | grep TOKEN -> GITHUB_TOKEN={SECRET}")
    backend.add_experiment_result(
        "root", f"result with {SECRET} in it", artifact_refs=[{"path": "r.csv", "sha256": "0" * 64}]
    )
    backend.search_memory(f"where is {SECRET}", ["root"], 5)
    backend.write_verified_context([{"id": "root"}])
    backend.session.projector.save()
    backend.close()
    torn = store_dir(ckpt) / f"{LOG_NAME}.torn-20261201T000000Z"
    torn.write_bytes(compress_member(f'{{"text":"unacknowledged {SECRET}"}}\n'.encode())[:-6])
    assert SECRET.encode() in every_file_bytes(ckpt)
    return ckpt


def test_after_a_redaction_no_file_holds_the_text_and_reads_never_return_it(leaky: Path) -> None:
    as_of = 10
    done = redact_checkpoint(leaky, Selector(text=SECRET), reason="leaked token", by="tester")
    assert len(done.log.chosen) == 5  # 3 entries, the ReAct step, the result
    assert any(name.startswith(SNAPSHOT_NAME) for name in done.scrubbed)
    assert "memory_access.jsonl" in done.scrubbed and "verified_context.json" in done.scrubbed
    assert done.log.removed_files == [f"{LOG_NAME}.torn-20261201T000000Z"]
    assert SECRET.encode() not in every_file_bytes(leaky)
    backend = MemoryBackend(leaky)
    try:
        # (a query holding the secret would put it in the access log again: that is the caller's)
        found = backend.search_memory("export GITHUB_TOKEN", ["root"], 50)["results"]
        assert found and all(SECRET not in r["text"] for r in found)
        assert all(
            SECRET not in json.dumps(r) for r in backend.search_memory("token", ["root"], 50, as_of=as_of)["results"]
        )
        assert all(SECRET not in s["content"] for s in backend.react_get_all())
        assert SECRET not in json.dumps(backend.get_node_memory("root")) + json.dumps(
            backend.get_verified_context(["root"])
        )
        redacted = backend.session.projector.catalog.redacted
        assert len(redacted) == 5 and {r.reason for r in redacted.values()} == {"leaked token"}
        assert {r.kind for r in redacted.values() if r.type == "memory_added"} == {"", "experiment_result"}
        (root,) = [n for n in lineage_data(backend)["nodes"] if n["node_id"] == "root"]
        assert root["memory_counts"]["redacted"] == 4 and {r["reason"] for r in root["redacted"]} == {"leaked token"}
        backend.session.projector.save()
    finally:
        backend.close()
    assert SECRET.encode() not in every_file_bytes(leaky)  # the snapshot written afterwards neither
    assert ari_ledger("verify", leaky).returncode == 0


def test_exports_and_ari_backups_written_afterwards_hold_stubs(leaky: Path, tmp_path: Path) -> None:
    redact_checkpoint(leaky, Selector(text=SECRET), reason="leak", by="tester")
    bundle = tmp_path / "bundle"
    assert ari_ledger("export", leaky, bundle).returncode == 0
    backend = MemoryBackend(leaky)
    try:
        write_ari_backup(backend, tmp_path / "memory_backup.jsonl.gz")
    finally:
        backend.close()
    assert SECRET.encode() not in every_file_bytes(tmp_path)


def test_a_process_open_during_the_redaction_forgets_the_text(leaky: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An open backend (ARI's own process) folded the secret before the redaction: at its next
    read it rebuilds from the redacted log, and the snapshot it saves at close holds no secret."""
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "root")
    backend = MemoryBackend(leaky)
    query = "export GITHUB_TOKEN"
    assert any(SECRET in r["text"] for r in backend.search_memory(query, ["root"], 5)["results"])
    redact_checkpoint(leaky, Selector(text=SECRET), reason="leak", by="tester")
    try:
        assert all(SECRET not in r["text"] for r in backend.search_memory(query, ["root"], 50)["results"])
        backend.add_memory("root", "written after the redaction", {}, current_node="root")
        backend.session.projector.save()
    finally:
        backend.close()
    assert SECRET.encode() not in every_file_bytes(leaky)
    with Ledger.open_readonly(leaky) as ledger:
        assert ledger.verify().ok
        assert [e.body.get("text") for e in ledger.events() if e.type == "memory_added"][
            -1
        ] == "written after the redaction"


def test_the_command_dry_run_json_and_errors(leaky: Path) -> None:
    before = (store_dir(leaky) / LOG_NAME).read_bytes()
    dry = ari_ledger("redact", leaky, "--match", SECRET, "--reason", "leak", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    out = json.loads(dry.stdout)
    assert out["redact"]["dry_run"] and len(out["redact"]["chosen"]) == 5 and SECRET not in dry.stdout
    assert (store_dir(leaky) / LOG_NAME).read_bytes() == before
    bad = ari_ledger("redact", leaky, "--regex", "(unclosed", "--reason", "x")
    assert bad.returncode == 2 and bad.stderr.startswith("error: text: not a valid regular expression")
    nothing = ari_ledger("redact", leaky, "--reason", "x")
    assert nothing.returncode == 2 and "say what to redact" in nothing.stderr
    done = ari_ledger("redact", leaky, "--regex", r"ghp_[A-Za-z0-9]+", "--reason", "token", "--by", "alice")
    assert done.returncode == 0, done.stderr
    assert "redacted 5 event(s) chosen by a regular expression match" in done.stdout and "verify: ok" in done.stdout
    with Ledger.open_readonly(leaky) as ledger:
        redaction = next(e for e in ledger.events() if e.type == "events_redacted")
    assert redaction.body["by"] == "alice" and redaction.body["reason"] == "token"
