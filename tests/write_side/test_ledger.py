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
from ledger.layout import store_dir
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


def test_hash_is_sha256_of_the_seal_of_the_canonical_line(ledger: Ledger) -> None:
    """Version 3: the hash covers the canonical line with the body replaced by its digest."""
    event = ledger.append("root", "memory_added", {"text": "x", "metadata": {"b": 1, "a": 2}})
    line = gzip.decompress(ledger.path.read_bytes()).splitlines()[0]
    obj = json.loads(line)
    del obj["hash"]
    assert obj["v"] == 3

    def dumps(value: object) -> bytes:  # body keys are sorted in the stored line: a re-encode reproduces it
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

    assert dumps(obj) == line[: -len(',"hash":""}') - 64] + b"}"
    sealed = {**obj, "body": {"sha256": hashlib.sha256(dumps(obj["body"])).hexdigest()}}
    assert hashlib.sha256(dumps(sealed)).hexdigest() == event.hash


def test_ids_are_unique_and_time_ordered(ledger: Ledger) -> None:
    with ledger.batch() as batch:
        ids = [batch.append("root", "memory_added", {"text": str(i)}).id for i in range(500)]
    assert len(set(ids)) == 500 and ids == sorted(ids)
    assert all(ev.ts.endswith("Z") for ev in ledger.events())


def test_a_forked_child_never_repeats_its_parents_random_bits() -> None:
    """Ids draw random bits from a pool; a child must not inherit the parent's pool."""
    from ledger.events import new_event_id

    new_event_id()  # the parent's pool is filled
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.write(write, " ".join(new_event_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 4096).decode().split()
    os.close(read)
    parent = [new_event_id() for _ in range(3)]
    assert {i[-12:] for i in child}.isdisjoint(i[-12:] for i in parent)


@pytest.mark.parametrize("size", [0, 1, 600, 65534, 65535, 65536, 131071, 300_000])
def test_a_stored_member_is_one_gzip_member_holding_its_bytes(size: int) -> None:
    """Single appends are written as stored gzip members built by hand: zlib, gzip and the
    scan all read one complete member with exactly the bytes (blocks cut at 65,535 bytes)."""
    from ledger.log import stored_member

    data = os.urandom(size)
    member = stored_member(data)
    decomp = zlib.decompressobj(31)
    assert decomp.decompress(member) == data and decomp.eof and not decomp.unused_data
    assert gzip.decompress(member) == data
    if size < 16_000:
        assert member == zlib.compress(data, 0, wbits=31)


def test_ckpt_is_stable_across_copy_and_reopen(ledger: Ledger, tmp_path: Path) -> None:
    ledger.append("root", "node_started", started())
    ckpt_id = ledger.ckpt
    copy = tmp_path / "copy"
    store_dir(copy).mkdir(parents=True)
    (store_dir(copy) / LOG_NAME).write_bytes(ledger.path.read_bytes())
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
    with pytest.raises(RuntimeError), ledger.batch() as batch:
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
    ("root", "memory_deleted", {"text": "x"}, "type", "unknown event type"),
    (
        "root",
        "memory_added",
        {"text": "x", "kind": "experiment_result"},
        "body.kind",
        "unknown field",
    ),  # typed fields live in metadata
    ("root", "memory_added", {"text": 3}, "body.text", "expected a string"),
    ("root", "memory_added", {}, "body.text", "missing (it is required)"),
    ("root", "memory_added", ["not", "an", "object"], "body", "must be an object"),
    ("root", "memory_added", {"text": "x", "surprise": 1}, "body.surprise", "unknown field"),
    ("root", "memory_added", {"text": "x", "metadata": {"k": {"\udc80": 1}}}, "body.metadata.k.<key>", "UTF-8"),
    ("root", "memory_added", {"text": "x", "metadata": {"k": b"raw bytes"}}, "body.metadata.k", "not a JSON value"),
    (
        "root",
        "memory_added",
        {"text": "x", "metadata": {"k": "y" * schema.MAX_METADATA_BYTES}},
        "body.metadata",
        "limit",
    ),
    ("root", "memory_added", {"text": "x", "metadata": [1, 2]}, "body.metadata", "expected an object"),
    ("root", "node_started", {"depth": "1"}, "body.depth", "expected an integer"),
    ("root", "node_started", {"label": "guess"}, "body.label", "unknown label"),
    ("root", "node_started", {"parent_id": "p", "ancestor_ids": ["q"]}, "body.ancestor_ids", "parent_id"),
    ("root", "node_started", {"parent_id": "p/q", "ancestor_ids": ["p/q"]}, "body.parent_id", "forbidden"),
    ("root", "react_step", {"content": None}, "body.content", "expected a string"),
    ("root", "core_seeded", {"context": "not a dict"}, "body.context", "expected an object"),
]


@pytest.mark.parametrize(
    "node_id,type_,body,field,reason", BAD_INPUT, ids=[f"{i}-{c[3]}" for i, c in enumerate(BAD_INPUT)]
)
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
    assert len(ledger.file.read_index()) > 2
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
    idx = ledger.file.idx_path
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
    current = schema.SCHEMA_VERSION
    monkeypatch.setattr(schema, "SCHEMA_VERSION", current + 1)
    with Ledger.open(ckpt) as ledger:
        ledger.append("root", "memory_added", {"text": "from the future"})
    monkeypatch.setattr(schema, "SCHEMA_VERSION", current)
    with pytest.raises(UnsupportedVersion, match=f"schema version {current + 1}, newer than this library understands"):
        Ledger.open(ckpt)


def test_registered_upcasters_run_on_read_and_never_rewrite(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "root")
    with Ledger.open(ckpt) as ledger:
        written = ledger.append("root", "memory_added", {"text": "old"})
    raw_before = (store_dir(ckpt) / LOG_NAME).read_bytes()
    current = schema.SCHEMA_VERSION

    def next_version(raw: dict) -> dict:
        raw["body"] = {**raw["body"], "metadata": {"upcast_from": raw["v"]}}
        return raw

    monkeypatch.setattr(schema, "SCHEMA_VERSION", current + 1)
    monkeypatch.setitem(schema.UPCASTERS, current, next_version)
    with Ledger.open(ckpt) as ledger:
        [event] = list(ledger.events())
        assert event.v == current + 1 and event.body["metadata"] == {"upcast_from": current}
        assert event.hash == written.hash  # the stored bytes are untouched
    assert (store_dir(ckpt) / LOG_NAME).read_bytes() == raw_before


def _write_v1_log(ckpt: Path, bodies: list[tuple[str, str, dict]]) -> None:
    """A log as version 1 of this library wrote it (typed fields beside metadata)."""
    from ledger.chain import sign
    from ledger.log import compress_member

    lines, prev, ckpt_id = [], "", schema.new_event_id()
    for seq, (node, type_, body) in enumerate(bodies, 1):
        event, line = sign(
            schema.UnsignedEvent(1, seq, schema.new_event_id(), schema.utc_now(), ckpt_id, node, type_, body, prev)
        )
        lines.append(line)
        prev = event.hash
    store_dir(ckpt).mkdir(parents=True, exist_ok=True)
    (store_dir(ckpt) / LOG_NAME).write_bytes(compress_member(b"".join(lines)))


def test_version_1_typed_bodies_are_upcast_into_aris_metadata(ckpt: Path) -> None:
    sha = "a" * 64
    _write_v1_log(
        ckpt,
        [
            ("root", "memory_added", {"text": "free", "metadata": {"type": "result_summary"}}),
            (
                "root",
                "memory_added",
                {
                    "text": "claim",
                    "kind": "experiment_result",
                    "metadata": {"k": 1},
                    "node_report_ref": {"run_id": "r1", "node_id": "root"},
                    "metric_ptr": "metrics.GFlops_per_s",
                    "artifact_refs": [{"path": "results.csv", "sha256": sha, "role": "data_output"}],
                    "report_hash": sha,
                },
            ),
            (
                "root",
                "memory_added",
                {"text": "re-ran", "kind": "reproducibility_event", "target_id": "e1", "status": "rerun_passed"},
            ),
            ("root", "memory_added", {"text": "hint", "kind": "reflection", "confidence": 0.4}),
        ],
    )
    with Ledger.open(ckpt) as ledger:
        events = list(ledger.events())
        assert ledger.verify().ok
    assert all(e.v == schema.SCHEMA_VERSION for e in events)
    assert events[0].body == {"text": "free", "metadata": {"type": "result_summary"}}
    assert events[1].body == {
        "text": "claim",
        "report_hash": sha,
        "metadata": {
            "k": 1,
            "type": "experiment_result",
            "mem_kind": "experiment_result",
            "metric_ptr": {"name": "GFlops_per_s"},
            "node_report_ref": {"run_id": "r1", "node_id": "root"},
            "artifact_refs": [{"path": "results.csv", "sha256": sha, "role": "data_output"}],
        },
    }
    assert events[2].body["metadata"] == {
        "type": "reproducibility_event",
        "mem_kind": "reproducibility_event",
        "repro_target_id": "e1",
        "repro_status": "rerun_passed",
    }
    assert events[3].body["metadata"] == {"type": "reflection", "mem_kind": "reflection", "confidence": 0.4}


def test_typed_body_round_trip(ledger: Ledger) -> None:
    metadata = {
        "type": "experiment_result",
        "mem_kind": "experiment_result",
        "metric_ptr": {"name": "GFlops_per_s", "value": 9.87},
        "artifact_refs": [{"path": "out/results.csv", "sha256": "a" * 64, "role": "data_output"}],
        "node_report_ref": {"run_id": "r1", "node_id": "root"},
    }
    event = ledger.append("root", "memory_added", {"text": "result", "metadata": metadata})
    body = event.typed_body()
    assert isinstance(body, schema.MemoryAdded)
    assert body.metadata == metadata and body.findings == []
    assert msgspec.to_builtins(body) == event.body
    assert event.body_as(schema.MemoryAdded) == body  # how readers ask for it by type
    with pytest.raises(TypeError, match="a memory_added event's body is not a ReactStep"):
        event.body_as(schema.ReactStep)


STORED_AND_FLAGGED = [
    ({"text": "x" * (schema.MAX_TEXT_BYTES + 10)}, "text", "stored the first"),
    ({"text": "x", "metadata": {"k": [1, float("inf")]}}, "metadata.k[1]", "stored as null"),
    ({"text": "x", "metadata": {"k": {3: "three"}}}, "metadata.k.<key>", "number key 3"),
    ({"text": "x", "metadata": {"mem_kind": "rumour"}}, "metadata.mem_kind", "unknown kind"),
    (
        {
            "text": "x",
            "metadata": {"mem_kind": "experiment_result", "artifact_refs": [{"path": "../x", "role": "log"}]},
        },
        "metadata.artifact_refs[0].path",
        "never read",
    ),
    (
        {"text": "x", "metadata": {"mem_kind": "experiment_result", "artifact_refs": [{"path": "a", "sha256": "XYZ"}]}},
        "metadata.artifact_refs[0].sha256",
        "not a sha256",
    ),
    (
        {"text": "x", "metadata": {"mem_kind": "experiment_result", "artifact_refs": [{"path": "a", "role": "guess"}]}},
        "metadata.artifact_refs[0].role",
        "unknown role",
    ),
    (
        {"text": "x", "metadata": {"mem_kind": "reflection", "confidence": 1.5}},
        "metadata.confidence",
        "between 0 and 1",
    ),
    (
        {
            "text": "x",
            "metadata": {"mem_kind": "reproducibility_event", "repro_target_id": "e", "repro_status": "maybe"},
        },
        "metadata.repro_status",
        "unknown status",
    ),
    (
        {"text": "x", "metadata": {"mem_kind": "experiment_result", "node_report_ref": {"node_id": "root"}}},
        "metadata.node_report_ref.run_id",
        "missing",
    ),
]


@pytest.mark.parametrize("body,field,reason", STORED_AND_FLAGGED, ids=[c[1] for c in STORED_AND_FLAGGED])
def test_what_ari_would_store_is_stored_and_flagged(ledger: Ledger, body, field, reason) -> None:
    event = ledger.append("root", "memory_added", body)
    found = [f for f in event.body["findings"] if f["field"] == field]
    assert found and reason in found[0]["reason"], event.body["findings"]
    [stored] = [e for e in ledger.events() if e.seq == event.seq]
    assert stored.body == event.body  # what was acknowledged is what the log holds


def test_cli_verify_status_log(ledger: Ledger) -> None:
    ledger.append("root", "node_started", started())
    ledger.append("root", "memory_added", {"text": "hello"})
    ledger.append("root", "memory_added", {"text": "again"})
    run = lambda *a: subprocess.run([sys.executable, "-m", "projections", *a], capture_output=True, text=True)  # noqa: E731
    verify = run("verify", str(ledger.checkpoint_dir))
    assert verify.returncode == 0 and "ok: 3 events" in verify.stdout
    status = run("status", str(ledger.checkpoint_dir), "--json")
    data = json.loads(status.stdout)
    assert data["events"] == 3 and data["last_seq"] == 3 and data["nodes"] == 1
    assert data["types"] == {"memory_added": 2, "node_started": 1}
    log = run("log", str(ledger.checkpoint_dir), "--as-of", "2")
    assert [json.loads(x)["seq"] for x in log.stdout.splitlines()] == [1, 2]
    missing = run("status", str(ledger.checkpoint_dir.parent / "nope"))  # a folder inside it is refused as such
    assert missing.returncode == 2 and missing.stderr.startswith("error: no ledger at")
    assert "Traceback" not in missing.stderr


def test_read_only_opens_refuse_appends_and_know_the_head(ledger: Ledger) -> None:
    from ledger.errors import LedgerReadOnly

    for i in range(3):
        ledger.append("root", "memory_added", {"text": f"t{i}"})
    before = ledger.path.read_bytes()
    with Ledger.open(ledger.checkpoint_dir, readonly=True) as reader:
        assert (
            reader.readonly
            and reader.last_seq == 3
            and reader.ckpt == ledger.ckpt
            and reader.last_hash == ledger.last_hash
        )
        with pytest.raises(LedgerReadOnly, match=r"is open read-only .* nothing was written"):
            reader.append("root", "memory_added", {"text": "no"})
        with pytest.raises(LedgerReadOnly), reader.batch():
            pass
    inspector = Ledger.open_readonly(ledger.checkpoint_dir)
    assert inspector.last_seq == 3 and inspector.damage is None and inspector.head_problem() is None
    assert ledger.path.read_bytes() == before
    with pytest.raises(LedgerNotFound):
        Ledger.open(ledger.checkpoint_dir.parent / "nowhere", readonly=True)


def test_the_head_file_follows_every_acknowledged_append(ledger: Ledger) -> None:
    from ledger.anchor import Anchor
    from ledger.maintenance.rollback import accept_rollback

    assert ledger.head_anchor() is None  # nothing acknowledged yet
    first = ledger.append("root", "memory_added", {"text": "one"})
    with ledger.batch() as batch:
        last = [batch.append("root", "memory_added", {"text": f"b{i}"}) for i in range(4)][-1]
    anchor = ledger.head_anchor()
    assert (anchor.seq, anchor.hash, anchor.ckpt) == (5, last.hash, ledger.ckpt)
    report = ledger.verify([Anchor("--head", first.hash[:20]), Anchor("note", last.hash, 5)])
    assert report.ok and report.found == {first.hash[:20]: 1} and report.rollback == () and report.problems == ()
    assert accept_rollback(ledger.checkpoint_dir) == []  # nothing to accept
