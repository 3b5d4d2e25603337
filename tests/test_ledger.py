"""The ledger's API: envelope, append, batch, guard, bad input, versions, time travel."""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import msgspec
import pytest

from ledger import CopyOnWriteViolation, InvalidInput, Ledger, LedgerNotFound, UnsupportedVersion
from ledger import events as schema
from ledger.log import LOG_NAME

ENVELOPE_FIELDS = ["v", "seq", "id", "ts", "ckpt", "node", "type", "body", "prev", "hash"]


def started(depth: int = 0, parent: str | None = None, ancestors: list[str] | None = None) -> dict:
    return {"parent_id": parent, "ancestor_ids": ancestors or [], "label": "draft", "depth": depth}


@pytest.fixture
def ledger(ckpt: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "root")
    with Ledger.open(ckpt) as opened:
        yield opened


def test_log_is_multimember_gzip_of_json_lines_readable_by_zcat(ledger: Ledger) -> None:
    ledger.append("root", "node_started", started())
    with ledger.batch() as batch:
        for i in range(3):
            batch.append("root", "memory_added", {"text": f"entry {i} — ünïcödé"})
    raw = ledger.path.read_bytes()
    assert raw.count(b"\x1f\x8b\x08") >= 2  # one member per append/batch
    zcat = subprocess.run(["zcat", str(ledger.path)], capture_output=True, check=True).stdout
    assert zcat == gzip.decompress(raw)
    lines = [json.loads(line) for line in zcat.decode("utf-8").splitlines()]
    assert [line["seq"] for line in lines] == [1, 2, 3, 4]
    assert all(list(line) == ENVELOPE_FIELDS for line in lines)
    assert lines[0]["prev"] == "" and all(b["prev"] == a["hash"] for a, b in zip(lines, lines[1:]))
    assert len({line["ckpt"] for line in lines}) == 1
    assert lines[1]["body"]["text"] == "entry 0 — ünïcödé"


def test_hash_is_sha256_of_the_canonical_line_without_hash(ledger: Ledger) -> None:
    event = ledger.append("root", "memory_added", {"text": "x", "metadata": {"b": 1, "a": 2}})
    line = gzip.decompress(ledger.path.read_bytes()).splitlines()[0]
    obj = json.loads(line)
    del obj["hash"]
    canonical = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    # body keys are sorted in the stored line, so a plain re-encode reproduces the bytes
    assert hashlib.sha256(canonical).hexdigest() == event.hash


def test_ids_are_unique_and_time_ordered(ledger: Ledger) -> None:
    with ledger.batch() as batch:
        ids = [batch.append("root", "memory_added", {"text": str(i)}).id for i in range(500)]
    assert len(set(ids)) == 500 and ids == sorted(ids)
    assert all(ev.ts.endswith("Z") for ev in ledger.events())


def test_ckpt_is_stable_across_copy_and_reopen(ledger: Ledger, tmp_path: Path) -> None:
    ledger.append("root", "node_started", started())
    ckpt_id = ledger.ckpt
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / LOG_NAME).write_bytes(ledger.path.read_bytes())
    with Ledger.open(copy) as other:
        assert other.ckpt == ckpt_id
        other.append("root", "memory_added", {"text": "after copy"})
        assert {ev.ckpt for ev in other.events()} == {ckpt_id}


def test_batch_is_one_member_and_one_commit(ledger: Ledger) -> None:
    ledger.append("root", "node_started", started())
    size_before = ledger.path.stat().st_size
    with ledger.batch() as batch:
        stored = [batch.append("root", "memory_added", {"text": f"b{i}"}) for i in range(100)]
    tail = ledger.path.read_bytes()[size_before:]
    d = zlib.decompressobj(31)
    assert len(d.decompress(tail).splitlines()) == 100 and d.eof and d.unused_data == b""
    assert [ev.seq for ev in stored] == list(range(2, 102))


def test_batch_discarded_on_exception(ledger: Ledger) -> None:
    ledger.append("root", "node_started", started())
    before = ledger.path.read_bytes()
    with pytest.raises(RuntimeError):
        with ledger.batch() as batch:
            batch.append("root", "memory_added", {"text": "never"})
            raise RuntimeError("boom")
    assert ledger.path.read_bytes() == before
    assert ledger.append("root", "memory_added", {"text": "next"}).seq == 2


def test_cow_guard_refuses_other_node_and_unset_variable(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger.append("root", "node_started", started())
    before = ledger.path.read_bytes()
    with pytest.raises(CopyOnWriteViolation) as exc:
        ledger.append("node_A", "memory_added", {"text": "sneaky"})
    assert exc.value.as_dict() == {"ok": False, "error": "node_id does not match current node (CoW violation)"}
    monkeypatch.delenv("ARI_CURRENT_NODE_ID")
    with pytest.raises(CopyOnWriteViolation) as exc:
        ledger.append("root", "memory_added", {"text": "no current"})
    assert exc.value.as_dict() == {"ok": False, "error": "ARI_CURRENT_NODE_ID not set"}
    assert ledger.path.read_bytes() == before
    # explicit current node for in-process callers wins over the environment
    assert ledger.append("node_A", "memory_added", {"text": "ok"}, current_node="node_A").node == "node_A"
    with pytest.raises(CopyOnWriteViolation):
        ledger.append("node_A", "memory_added", {"text": "x"}, current_node="node_B")


def test_checkpoint_wide_events_are_not_node_guarded(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARI_CURRENT_NODE_ID")
    ledger.append(schema.CHECKPOINT_NODE, "react_step", {"content": "Thought: compile"})
    ledger.append(schema.CHECKPOINT_NODE, "core_seeded", {"persona": "p", "human": "h", "context": {"goal": "g"}})
    assert [ev.type for ev in ledger.events()] == ["react_step", "core_seeded"]


BAD_INPUT = [
    ("", "memory_added", {"text": "x"}, "node_id", "empty"),
    ("n" * 257, "memory_added", {"text": "x"}, "node_id", "longer than 256"),
    ("a/b", "memory_added", {"text": "x"}, "node_id", "forbidden character"),
    ("a\\b", "memory_added", {"text": "x"}, "node_id", "forbidden character"),
    ("a\x00b", "memory_added", {"text": "x"}, "node_id", "forbidden character"),
    ("a\nb", "memory_added", {"text": "x"}, "node_id", "forbidden character"),
    (".", "memory_added", {"text": "x"}, "node_id", "not a node id"),
    ("..", "memory_added", {"text": "x"}, "node_id", "not a node id"),
    ("root", "memory_added", {"text": "bad \udc80 surrogate"}, "body.text", "UTF-8"),
    ("root", "memory_added", {"text": "x" * (schema.MAX_TEXT_BYTES + 1)}, "body.text", "limit"),
    ("root", "memory_deleted", {"text": "x"}, "type", "unknown event type"),
    ("root", "memory_added", {"text": "x", "kind": "rumour"}, "body.kind", "unknown kind"),
    ("root", "memory_added", {"text": "x", "kind": "reproducibility_event", "target_id": "e1", "status": "maybe"},
     "body.status", "unknown status"),
    ("root", "memory_added", {"text": "x", "kind": "reproducibility_event", "status": "rerun_passed"},
     "body.target_id", "needs"),
    ("root", "memory_added", {"text": "x", "status": "rerun_passed", "target_id": "e"}, "body.status", "only"),
    ("root", "memory_added", {"text": 3}, "body.text", "Expected `str`"),
    ("root", "memory_added", {}, "body", "missing required field"),
    ("root", "memory_added", ["not", "an", "object"], "body", "must be an object"),
    ("root", "memory_added", {"text": "x", "surprise": 1}, "body.surprise", "unknown field"),
    ("root", "memory_added", {"text": "x", "metadata": {"k": [1, float("inf")]}}, "body.metadata.k[1]", "finite"),
    ("root", "memory_added", {"text": "x", "metadata": {"k": {"\udc80": 1}}}, "body.metadata.k.<key>", "UTF-8"),
    ("root", "memory_added", {"text": "x", "confidence": 1.5}, "body.confidence", "between 0 and 1"),
    ("root", "memory_added", {"text": "x", "artifact_refs": [{"path": "../x", "role": "log"}]},
     "body.artifact_refs[0].path", "relative"),
    ("root", "memory_added", {"text": "x", "artifact_refs": [{"path": "a", "sha256": "XYZ"}]},
     "body.artifact_refs[0].sha256", "hex"),
    ("root", "node_started", {"depth": "1"}, "body.depth", "Expected `int`"),
    ("root", "node_started", {"label": "guess"}, "body.label", "unknown label"),
    ("root", "node_started", {"parent_id": "p", "ancestor_ids": ["q"]}, "body.ancestor_ids", "parent_id"),
    ("root", "node_started", {"parent_id": "p/q", "ancestor_ids": ["p/q"]}, "body.parent_id", "forbidden"),
    ("root", "react_step", {"content": None}, "body.content", "Expected `str`"),
    ("root", "core_seeded", {"context": "not a dict"}, "body.context", "Expected `object`"),
]


@pytest.mark.parametrize("node_id,type_,body,field,reason", BAD_INPUT, ids=[f"{i}-{c[3]}" for i, c in enumerate(BAD_INPUT)])
def test_bad_input_names_the_field_and_writes_nothing(ledger: Ledger, node_id, type_, body, field, reason) -> None:
    ledger.append("root", "node_started", started())
    before = ledger.path.read_bytes()
    with pytest.raises(InvalidInput) as exc:
        ledger.append(node_id, type_, body, current_node=node_id or "root")
    assert exc.value.field == field, str(exc.value)
    assert reason in exc.value.reason, str(exc.value)
    assert str(exc.value).startswith(field + ":")
    assert ledger.path.read_bytes() == before
    assert ledger.last_seq == 1


def test_time_travel_as_of(ledger: Ledger) -> None:
    for i in range(10):
        ledger.append("root", "memory_added", {"text": f"t{i}"})
    assert [ev.seq for ev in ledger.events(as_of=4)] == [1, 2, 3, 4]
    assert [ev.seq for ev in ledger.events(after=7)] == [8, 9, 10]
    assert list(ledger.events(as_of=0)) == []


def test_reads_seek_with_the_side_index(ledger: Ledger) -> None:
    for b in range(40):  # ~1.3 MB of barely compressible members: several index strides
        with ledger.batch() as batch:
            for i in range(50):
                batch.append("root", "memory_added", {"text": f"{b}-{i}-{os.urandom(640).hex()}"})
    assert len(ledger._file.read_index()) > 2
    assert [ev.seq for ev in ledger.events(after=1990)] == list(range(1991, 2001))
    ledger.close()
    with Ledger.open(ledger.checkpoint_dir) as reopened:
        assert reopened.last_seq == 2000
        assert reopened.append("root", "memory_added", {"text": "tail"}).seq == 2001
        assert reopened.verify().ok


def test_missing_or_wrong_side_index_is_rebuilt(ledger: Ledger) -> None:
    for i in range(5):
        ledger.append("root", "memory_added", {"text": f"t{i}"})
    ledger.close()
    idx = ledger._file.idx_path
    idx.write_bytes(b"\x07" * 33)  # garbage
    with Ledger.open(ledger.checkpoint_dir) as reopened:
        assert reopened.last_seq == 5
        assert reopened.append("root", "memory_added", {"text": "t5"}).seq == 6
    idx.unlink()
    with Ledger.open(ledger.checkpoint_dir) as reopened:
        assert [ev.seq for ev in reopened.events()] == [1, 2, 3, 4, 5, 6]


def test_open_without_create_on_missing_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(LedgerNotFound, match="no ledger at"):
        Ledger.open(tmp_path / "nowhere", create=False)
    assert not (tmp_path / "nowhere").exists()


def test_newer_schema_version_is_refused(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "root")
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 2)
    with Ledger.open(ckpt) as ledger:
        ledger.append("root", "memory_added", {"text": "from the future"})
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 1)
    with pytest.raises(UnsupportedVersion, match="schema version 2, newer than this library understands"):
        Ledger.open(ckpt)


def test_older_versions_are_upcast_on_read(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "root")
    with Ledger.open(ckpt) as ledger:
        written = ledger.append("root", "memory_added", {"text": "old"})
    raw_before = (ckpt / LOG_NAME).read_bytes()

    def v1_to_v2(raw: dict) -> dict:
        raw["body"] = {**raw["body"], "metadata": {"upcast_from": raw["v"]}}
        return raw

    monkeypatch.setattr(schema, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(schema.UPCASTERS, 1, v1_to_v2)
    with Ledger.open(ckpt) as ledger:
        [event] = list(ledger.events())
        assert event.v == 2 and event.body["metadata"] == {"upcast_from": 1}
        assert event.hash == written.hash  # the stored bytes are untouched
    assert (ckpt / LOG_NAME).read_bytes() == raw_before


def test_typed_body_round_trip(ledger: Ledger) -> None:
    event = ledger.append(
        "root",
        "memory_added",
        {
            "text": "result",
            "kind": "experiment_result",
            "node_report_ref": {"run_id": "r1", "node_id": "root"},
            "artifact_refs": [{"path": "out/results.csv", "sha256": "a" * 64, "role": "data_output"}],
            "metric_ptr": "GFlops_per_s",
            "confidence": 1,
        },
    )
    body = event.typed_body()
    assert isinstance(body, schema.MemoryAdded)
    assert body.node_report_ref == schema.NodeReportRef("r1", "root")
    assert body.artifact_refs[0].path == "out/results.csv"
    assert msgspec.to_builtins(body) == event.body


def test_cli_verify_status_log(ledger: Ledger) -> None:
    ledger.append("root", "node_started", started())
    ledger.append("root", "memory_added", {"text": "hello"})
    ledger.append("root", "memory_added", {"text": "again"})
    run = lambda *a: subprocess.run([sys.executable, "-m", "ledger", *a], capture_output=True, text=True)  # noqa: E731
    verify = run("verify", str(ledger.checkpoint_dir))
    assert verify.returncode == 0 and "ok: 3 events" in verify.stdout
    status = run("status", str(ledger.checkpoint_dir), "--json")
    data = json.loads(status.stdout)
    assert data["events"] == 3 and data["last_seq"] == 3 and data["nodes"] == 1
    assert data["types"] == {"memory_added": 2, "node_started": 1}
    log = run("log", str(ledger.checkpoint_dir), "--as-of", "2")
    assert [json.loads(x)["seq"] for x in log.stdout.splitlines()] == [1, 2]
    missing = run("status", str(ledger.checkpoint_dir / "nope"))
    assert missing.returncode == 2 and missing.stderr.startswith("error: no ledger at")
    assert "Traceback" not in missing.stderr


def test_read_only_opens_refuse_appends_and_know_the_head(ledger: Ledger) -> None:
    from ledger.errors import LedgerReadOnly

    for i in range(3):
        ledger.append("root", "memory_added", {"text": f"t{i}"})
    before = ledger.path.read_bytes()
    with Ledger.open(ledger.checkpoint_dir, readonly=True) as reader:
        assert reader.readonly and reader.last_seq == 3 and reader.ckpt == ledger.ckpt and reader.last_hash == ledger.last_hash
        with pytest.raises(LedgerReadOnly, match="is open read-only .* nothing was written"):
            reader.append("root", "memory_added", {"text": "no"})
        with pytest.raises(LedgerReadOnly):
            with reader.batch():
                pass
    inspector = Ledger.open_readonly(ledger.checkpoint_dir)
    assert inspector.last_seq == 3 and inspector.damage is None and inspector.head_problem() is None
    assert ledger.path.read_bytes() == before
    with pytest.raises(LedgerNotFound):
        Ledger.open(ledger.checkpoint_dir / "nowhere", readonly=True)


def test_the_head_file_follows_every_acknowledged_append(ledger: Ledger) -> None:
    from ledger.anchor import Anchor

    assert ledger.head_anchor() is None  # nothing acknowledged yet
    first = ledger.append("root", "memory_added", {"text": "one"})
    with ledger.batch() as batch:
        last = [batch.append("root", "memory_added", {"text": f"b{i}"}) for i in range(4)][-1]
    anchor = ledger.head_anchor()
    assert (anchor.seq, anchor.hash, anchor.ckpt) == (5, last.hash, ledger.ckpt)
    report = ledger.verify([Anchor("--head", first.hash[:20]), Anchor("note", last.hash, 5)])
    assert report.ok and report.found == {first.hash[:20]: 1} and report.rollback == () and report.problems == ()
    assert Ledger.accept_rollback(ledger.checkpoint_dir) == []  # nothing to accept
