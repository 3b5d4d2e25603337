"""Crash recovery at every torn offset, and tamper evidence (R6, R28)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import Ledger, LogCorrupted
from ledger.errors import RollbackDetected
from ledger.layout import store_dir
from ledger.log import LOG_NAME, scan_members
from ledger.maintenance.rollback import accept_rollback


def build_log(ckpt: Path, batches: list[int]) -> list[tuple[int, int, int]]:
    """Write one member per entry of ``batches`` (its event count); return (start, end, events_before)."""
    with Ledger.open(ckpt) as ledger:
        for n, size in enumerate(batches):
            with ledger.batch() as batch:
                for i in range(size):
                    batch.append("root", "memory_added", {"text": f"member {n} event {i}"}, current_node="root")
    with open(store_dir(ckpt) / LOG_NAME, "rb") as f:
        members = list(scan_members(f))
    bounds, before = [], 0
    for member, size in zip(members, batches):
        bounds.append((member.offset, member.end, before))
        before += size
    return bounds


def torn_files(ckpt: Path) -> list[Path]:
    return sorted(store_dir(ckpt).glob(LOG_NAME + ".torn-*"))


@pytest.mark.parametrize("keep_index", [False, True], ids=["no-index", "stale-index"])
def test_truncation_at_every_offset_of_the_last_two_members(tmp_path: Path, keep_index: bool) -> None:
    source = tmp_path / "source"
    batches = [3, 1, 2, 1, 4]
    bounds = build_log(source, batches)
    original = (store_dir(source) / LOG_NAME).read_bytes()
    index = (store_dir(source) / (LOG_NAME + ".idx")).read_bytes()
    first_cut = bounds[-2][0]
    for cut in range(first_cut, len(original)):
        ckpt = tmp_path / f"cut{cut}"
        store_dir(ckpt).mkdir(parents=True)
        (store_dir(ckpt) / LOG_NAME).write_bytes(original[:cut])
        if keep_index:
            (store_dir(ckpt) / (LOG_NAME + ".idx")).write_bytes(index)
        # the events that survive are exactly those of members complete before the cut
        start, _end, kept = max(b for b in bounds if b[0] <= cut)
        with Ledger.open(ckpt) as ledger:
            assert ledger.last_seq == kept, cut
            torn = torn_files(ckpt)
            if cut == start:
                assert torn == [] and ledger.recovered == []
            else:
                assert len(torn) == 1 and torn[0].read_bytes() == original[start:cut], cut
                assert ledger.recovered[0].torn_offset == start
            assert (store_dir(ckpt) / LOG_NAME).read_bytes() == original[:start]
            event = ledger.append("root", "memory_added", {"text": "after recovery"}, current_node="root")
            assert event.seq == kept + 1
            assert [e.seq for e in ledger.events()] == list(range(1, kept + 2))
            assert ledger.verify().ok


def torn_append(ckpt: Path, text: str = "never acknowledged") -> bytes:
    """Leave what a crash mid-append leaves: the first half of a member, after every
    acknowledged event (the head file is not updated). Returns the torn bytes."""
    from ledger.log import compress_member

    member = compress_member(b'{"a line that was being written": "' + text.encode() + b'"}\n')
    torn = member[: len(member) // 2]
    with open(store_dir(ckpt) / LOG_NAME, "ab") as f:
        f.write(torn)
    return torn


@pytest.mark.parametrize("head", [True, False], ids=["with-head-file", "without-head-file"])
def test_damaged_trailer_of_last_member_is_damage_not_torn(ckpt: Path, head: bool) -> None:
    """Issue 10.4: a complete member that fails its CRC was written whole: report, never cut."""
    bounds = build_log(ckpt, [2, 2])
    if not head:
        (store_dir(ckpt) / (LOG_NAME + ".head")).unlink()
    raw = bytearray((store_dir(ckpt) / LOG_NAME).read_bytes())
    raw[-5] ^= 0xFF  # inside the CRC/length trailer of the last member
    (store_dir(ckpt) / LOG_NAME).write_bytes(bytes(raw))
    # Python's gzip would still hand back the last member's lines; we must not.
    with pytest.raises(gzip.BadGzipFile):
        gzip.decompress(bytes(raw))
    with pytest.raises(LogCorrupted, match=r"written whole .* damaged, not torn") as exc:
        Ledger.open(ckpt)
    assert exc.value.seq == 3 and exc.value.offset == bounds[1][0]
    report = Ledger.open_readonly(ckpt).verify()
    assert not report.ok and not report.torn_tail and report.first_bad_seq == 3
    assert (store_dir(ckpt) / LOG_NAME).read_bytes() == bytes(raw) and torn_files(ckpt) == []


def test_flip_inside_last_member_is_damage_when_the_head_file_acknowledged_it(ckpt: Path) -> None:
    """A flip that makes the last member look cut short (or invalid) is still damage: the
    head file says its events were acknowledged."""
    build_log(ckpt, [2, 2])
    raw = (store_dir(ckpt) / LOG_NAME).read_bytes()
    (store_dir(ckpt) / LOG_NAME).write_bytes(raw[:-3])  # cut inside the acknowledged last member
    with pytest.raises(LogCorrupted, match="records seq 4 as acknowledged"):
        Ledger.open(ckpt)
    report = Ledger.open_readonly(ckpt).verify()
    assert not report.ok and not report.torn_tail and report.first_bad_seq == 3
    assert (store_dir(ckpt) / LOG_NAME).read_bytes() == raw[:-3] and torn_files(ckpt) == []


def test_torn_append_after_acknowledged_events_is_moved_aside(ckpt: Path) -> None:
    build_log(ckpt, [2, 2])
    good = (store_dir(ckpt) / LOG_NAME).read_bytes()
    torn = torn_append(ckpt)
    with Ledger.open(ckpt) as ledger:
        assert ledger.last_seq == 4 and len(ledger.recovered) == 1
        assert torn_files(ckpt)[0].read_bytes() == torn
        assert (store_dir(ckpt) / LOG_NAME).read_bytes() == good
        assert ledger.append("root", "memory_added", {"text": "after"}, current_node="root").seq == 5


def test_appended_garbage_after_a_valid_log_is_moved_aside(ckpt: Path) -> None:
    build_log(ckpt, [2])
    with open(store_dir(ckpt) / LOG_NAME, "ab") as f:
        f.write(b'{"half": "a line that never got compres')
    with Ledger.open(ckpt) as ledger:
        assert ledger.last_seq == 2 and len(ledger.recovered) == 1
        assert torn_files(ckpt)[0].read_bytes().startswith(b'{"half"')


def test_verify_is_read_only_and_reports_a_torn_tail(ckpt: Path) -> None:
    build_log(ckpt, [2, 2])
    torn_append(ckpt)
    raw = (store_dir(ckpt) / LOG_NAME).read_bytes()
    report = Ledger.open_readonly(ckpt).verify()
    assert not report.ok and report.torn_tail and report.first_bad_seq == 5
    assert (store_dir(ckpt) / LOG_NAME).read_bytes() == raw and torn_files(ckpt) == []


def test_a_read_only_open_says_once_that_it_left_a_torn_tail(ckpt: Path, caplog) -> None:
    """A person's search refreshes the log several times; the torn tail is one warning."""
    build_log(ckpt, [2, 2])
    torn_append(ckpt)
    with caplog.at_level("WARNING"), Ledger.open(ckpt, readonly=True) as ledger:
        for _ in range(3):
            ledger.refresh()
        assert ledger.torn_tail is not None and ledger.last_seq == 4
    assert sum("torn tail at byte offset" in r.getMessage() for r in caplog.records) == 1


def _cli_verify(ckpt: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "projections", "verify", str(ckpt)], capture_output=True, text=True)


def test_flipped_byte_in_the_middle_names_the_first_bad_seq(ckpt: Path) -> None:
    bounds = build_log(ckpt, [3, 3, 3, 3])
    raw = bytearray((store_dir(ckpt) / LOG_NAME).read_bytes())
    start, end, before = bounds[1]
    raw[(start + end) // 2] ^= 0x01
    (store_dir(ckpt) / LOG_NAME).write_bytes(bytes(raw))
    report = Ledger.open_readonly(ckpt).verify()
    assert not report.ok and not report.torn_tail
    assert report.first_bad_seq == before + 1 and report.offset == start
    result = _cli_verify(ckpt)
    assert result.returncode == 1 and f"first bad seq {before + 1} at byte offset {start}" in result.stdout
    with (
        pytest.raises(LogCorrupted) as exc,
        Ledger.open(ckpt, create=False) as ledger,
    ):  # damage before the tail: refused for writing
        list(ledger.events())
    assert exc.value.seq == before + 1 and exc.value.offset == start


def _rewrite_lines(ckpt: Path, edit) -> None:
    lines = gzip.decompress((store_dir(ckpt) / LOG_NAME).read_bytes()).splitlines(keepends=True)
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    (store_dir(ckpt) / LOG_NAME).write_bytes(c.compress(b"".join(edit(lines))) + c.flush())


@pytest.mark.parametrize(
    "edit,bad_seq",
    [
        (lambda lines: lines[:4] + lines[5:], 5),  # delete seq 5
        (lambda lines: lines[:3] + [lines[4], lines[3]] + lines[5:], 4),  # swap 4 and 5
        (lambda lines: lines[:6] + [lines[6].replace(b"event", b"EVENT")] + lines[7:], 7),  # edit text
        (lambda lines: lines[:-1], None),  # drop the last: a valid shorter chain, caught by the head anchor
    ],
    ids=["delete", "reorder", "edit", "truncate-clean"],
)
def test_deleted_reordered_or_edited_lines_are_detected(ckpt: Path, edit, bad_seq: int | None) -> None:
    build_log(ckpt, [4, 4])
    _rewrite_lines(ckpt, edit)
    report = Ledger.open_readonly(ckpt).verify()
    if bad_seq is None:
        assert not report.ok and report.reason is None and report.last_seq == 7
        assert report.rollback == (
            "the log ends at seq 7, but memory_ledger.jsonl.gz.head records seq 8 "
            f"(hash {report.rollback[0].split('hash ')[1][:12]}…): acknowledged events were removed",
        )
        result = _cli_verify(ckpt)
        assert result.returncode == 1 and "rolled back: the log ends at seq 7" in result.stdout
        with pytest.raises(RollbackDetected, match=r"ends at seq 7.*accept-rollback"):
            Ledger.open(ckpt)
        return
    assert not report.ok and report.first_bad_seq == bad_seq, report
    result = _cli_verify(ckpt)
    assert result.returncode == 1 and f"first bad seq {bad_seq}" in result.stdout


def _cli(*args: str) -> subprocess.CompletedProcess:
    from support.env import subprocess_env

    return subprocess.run(
        [sys.executable, "-m", "projections", *args], capture_output=True, text=True, env=subprocess_env()
    )


def test_rollback_is_an_alarm_that_a_search_does_not_erase(ckpt: Path) -> None:
    """Issue 10.6: the newest events cut off is caught by the head file and by the snapshot,
    refused by every open for projection, and stays an alarm until a person accepts it."""
    from projections.api import MemoryBackend
    from projections.engines.snapshot import SNAPSHOT_NAME

    backend = MemoryBackend(ckpt)
    for i in range(6):
        backend.add_memory("root", f"entry {i}", current_node="root")
    backend.close()  # leaves a snapshot anchored at seq 6
    _rewrite_lines(ckpt, lambda lines: lines[:-2])
    result = _cli_verify(ckpt)
    assert result.returncode == 1
    assert "rolled back: the log ends at seq 4, but memory_ledger.jsonl.gz.head records seq 6" in result.stdout
    assert "rolled back: the log ends at seq 4, but memory_projection.snapshot records seq 6" in result.stdout
    snapshot = (store_dir(ckpt) / SNAPSHOT_NAME).read_bytes()
    for attempt in ("with the head file", "without it"):
        search = _cli("search", str(ckpt), "--as", "root", "entry")
        assert search.returncode == 2 and search.stderr.startswith("error: the log ends at seq 4"), (
            attempt,
            search.stderr,
        )
        assert "accept-rollback" in search.stderr and "Traceback" not in search.stderr
        assert (store_dir(ckpt) / SNAPSHOT_NAME).read_bytes() == snapshot  # nothing rebuilt over the evidence
        assert _cli_verify(ckpt).returncode == 1
        (store_dir(ckpt) / (LOG_NAME + ".head")).unlink(missing_ok=True)  # an attacker removes the head file too
    status = _cli("status", str(ckpt), "--json")
    assert (
        status.returncode == 1 and "memory_projection.snapshot records seq 6" in json.loads(status.stdout)["alarms"][0]
    )
    accepted = _cli("verify", str(ckpt), "--accept-rollback")
    assert accepted.returncode == 0 and "memory_projection.snapshot moved to" in accepted.stdout
    [aside] = store_dir(ckpt).glob(SNAPSHOT_NAME + ".rolled-back-*")
    assert aside.read_bytes() == snapshot  # the lost texts are still in it
    record = json.loads((store_dir(ckpt) / (LOG_NAME + ".rollbacks")).read_text())
    assert record["anchored_at"]["seq"] == 4 and len(record["accepted"]) == 1
    assert _cli_verify(ckpt).returncode == 0
    reopened = MemoryBackend(ckpt)
    assert [e["text"] for e in reopened.get_node_memory("root")["entries"]] == [f"entry {i}" for i in range(4)]
    reopened.close()


def _resign(ckpt: Path, edit) -> None:
    """A full rewrite with recomputed hashes: every event re-signed after ``edit``."""
    from ledger.chain import sign
    from ledger.events import UnsignedEvent

    raw = [json.loads(line) for line in gzip.decompress((store_dir(ckpt) / LOG_NAME).read_bytes()).splitlines()]
    prev, lines = "", []
    for obj in raw:
        obj.pop("hash")
        obj["prev"] = prev
        obj = edit(obj)
        event, line = sign(UnsignedEvent(**obj))
        prev = event.hash
        lines.append(line)
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    (store_dir(ckpt) / LOG_NAME).write_bytes(c.compress(b"".join(lines)) + c.flush())


def test_a_rewrite_with_recomputed_hashes_is_caught_by_anchors_outside_the_log(ckpt: Path, tmp_path: Path) -> None:
    from ledger.maintenance.bundle import export_bundle

    build_log(ckpt, [3, 3])
    manifest = export_bundle(ckpt, tmp_path / "bundle.tar")
    with Ledger.open(ckpt) as ledger:
        middle = ledger.event_at(3)
    (ckpt / "verified_context.json").write_text(json.dumps({"anchor": {"seq": middle.seq, "hash": middle.hash}}))
    head = _cli_verify(ckpt)
    assert head.returncode == 0
    both = _cli("verify", str(ckpt), "--head", manifest["last_hash"], "--head", middle.hash[:16])
    assert both.returncode == 0 and f"head {middle.hash[:12]}…: seq 3 of 6" in both.stdout
    _resign(ckpt, lambda e: {**e, "body": {**e["body"], "text": e["body"]["text"].replace("member 0", "MEMBER 0")}})
    (store_dir(ckpt) / (LOG_NAME + ".head")).unlink()  # the rewriter removes the head file too
    (store_dir(ckpt) / (LOG_NAME + ".idx")).unlink()
    assert Ledger.open_readonly(ckpt).verify().ok  # a valid chain on its own
    result = _cli("verify", str(ckpt), "--head", manifest["last_hash"])
    assert result.returncode == 1
    assert "verified_context.json records seq 3 with hash" in result.stdout and "the log was rewritten" in result.stdout
    assert (
        f"rolled back: {manifest['last_hash'][:12]}… (--head) is not the hash of any event of this log" in result.stdout
    )
    bad = _cli("verify", str(ckpt), "--head", "not-a-hash")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --head: 'not-a-hash' is not an event hash")


def test_a_log_removed_under_its_head_file_is_refused_not_recreated(ckpt: Path) -> None:
    build_log(ckpt, [2])
    (store_dir(ckpt) / LOG_NAME).unlink()
    with pytest.raises(
        RollbackDetected, match=r"memory_ledger.jsonl.gz is missing, but memory_ledger.jsonl.gz.head records seq 2"
    ):
        Ledger.open(ckpt)
    assert not (store_dir(ckpt) / LOG_NAME).exists()
    assert accept_rollback(ckpt)[0].startswith("memory_ledger.jsonl.gz is missing")
    with Ledger.open(ckpt) as ledger:
        assert ledger.last_seq == 0


def test_a_log_deleted_with_its_head_file_is_still_caught_by_the_snapshot(ckpt: Path) -> None:
    from projections.api import MemoryBackend
    from projections.engines.snapshot import SNAPSHOT_NAME

    backend = MemoryBackend(ckpt)
    backend.add_memory("root", "remembered by the snapshot", current_node="root")
    backend.close()
    (store_dir(ckpt) / LOG_NAME).unlink()
    (store_dir(ckpt) / (LOG_NAME + ".head")).unlink()
    with pytest.raises(RollbackDetected, match=r"the log ends at seq 0, but memory_projection.snapshot records seq 1"):
        MemoryBackend(ckpt)
    accepted = _cli("verify", str(ckpt), "--accept-rollback")
    assert accepted.returncode == 0 and "memory_projection.snapshot moved to" in accepted.stdout, accepted
    assert list(store_dir(ckpt).glob(SNAPSHOT_NAME + ".rolled-back-*"))
    MemoryBackend(ckpt).close()


def test_a_log_cut_back_under_an_open_writer_is_refused(ckpt: Path) -> None:
    build_log(ckpt, [2, 2])
    raw = (store_dir(ckpt) / LOG_NAME).read_bytes()
    with Ledger.open(ckpt) as ledger:
        with open(store_dir(ckpt) / LOG_NAME, "r+b") as f:
            f.truncate(len(raw) // 2)
        with pytest.raises(RollbackDetected, match="shrank from"):
            ledger.append("root", "memory_added", {"text": "would fork the chain"}, current_node="root")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.integers(1, 4), min_size=2, max_size=6), where=st.floats(0, 1, exclude_max=True))
def test_recovery_at_any_torn_offset_property(tmp_path: Path, batches: list[int], where: float) -> None:
    import tempfile

    with tempfile.TemporaryDirectory(dir=tmp_path) as tmp:
        source, ckpt = Path(tmp) / "s", Path(tmp) / "c"
        bounds = build_log(source, batches)
        original = (store_dir(source) / LOG_NAME).read_bytes()
        cut = bounds[-2][0] + int(where * (len(original) - bounds[-2][0]))
        store_dir(ckpt).mkdir(parents=True)
        (store_dir(ckpt) / LOG_NAME).write_bytes(original[:cut])
        start, _end, kept = max(b for b in bounds if b[0] <= cut)
        with Ledger.open(ckpt) as ledger:
            assert ledger.last_seq == kept
            assert (store_dir(ckpt) / LOG_NAME).read_bytes() == original[:start]
            saved = b"".join(p.read_bytes() for p in torn_files(ckpt))
            assert saved == original[start:cut]
            assert ledger.append("root", "memory_added", {"text": "next"}, current_node="root").seq == kept + 1
            assert ledger.verify().ok
