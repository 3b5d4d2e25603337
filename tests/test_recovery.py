"""Crash recovery at every torn offset, and tamper evidence (R6, R28)."""
from __future__ import annotations

import gzip
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import Ledger, LogCorrupted
from ledger.log import LOG_NAME, scan_members


def build_log(ckpt: Path, batches: list[int]) -> list[tuple[int, int, int]]:
    """Write one member per entry of ``batches`` (its event count); return (start, end, events_before)."""
    with Ledger.open(ckpt) as ledger:
        for n, size in enumerate(batches):
            with ledger.batch() as batch:
                for i in range(size):
                    batch.append("root", "memory_added", {"text": f"member {n} event {i}"}, current_node="root")
    with open(ckpt / LOG_NAME, "rb") as f:
        members = list(scan_members(f))
    bounds, before = [], 0
    for member, size in zip(members, batches):
        bounds.append((member.offset, member.end, before))
        before += size
    return bounds


def torn_files(ckpt: Path) -> list[Path]:
    return sorted(ckpt.glob(LOG_NAME + ".torn-*"))


@pytest.mark.parametrize("keep_index", [False, True], ids=["no-index", "stale-index"])
def test_truncation_at_every_offset_of_the_last_two_members(tmp_path: Path, keep_index: bool) -> None:
    source = tmp_path / "source"
    batches = [3, 1, 2, 1, 4]
    bounds = build_log(source, batches)
    original = (source / LOG_NAME).read_bytes()
    index = (source / (LOG_NAME + ".idx")).read_bytes()
    first_cut = bounds[-2][0]
    for cut in range(first_cut, len(original)):
        ckpt = tmp_path / f"cut{cut}"
        ckpt.mkdir()
        (ckpt / LOG_NAME).write_bytes(original[:cut])
        if keep_index:
            (ckpt / (LOG_NAME + ".idx")).write_bytes(index)
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
            assert (ckpt / LOG_NAME).read_bytes() == original[:start]
            event = ledger.append("root", "memory_added", {"text": "after recovery"}, current_node="root")
            assert event.seq == kept + 1
            assert [e.seq for e in ledger.events()] == list(range(1, kept + 2))
            assert ledger.verify().ok


def test_damaged_trailer_of_last_member_is_torn_not_trusted(ckpt: Path) -> None:
    bounds = build_log(ckpt, [2, 2])
    raw = bytearray((ckpt / LOG_NAME).read_bytes())
    raw[-5] ^= 0xFF  # inside the CRC/length trailer of the last member
    (ckpt / LOG_NAME).write_bytes(bytes(raw))
    # Python's gzip would still hand back the last member's lines; we must not.
    with pytest.raises(Exception):
        gzip.decompress(bytes(raw))
    with Ledger.open(ckpt) as ledger:
        assert ledger.last_seq == 2
        assert "invalid gzip data" in ledger.recovered[0].reason
        assert torn_files(ckpt)[0].read_bytes() == bytes(raw[bounds[1][0] :])


def test_appended_garbage_after_a_valid_log_is_moved_aside(ckpt: Path) -> None:
    build_log(ckpt, [2])
    with open(ckpt / LOG_NAME, "ab") as f:
        f.write(b'{"half": "a line that never got compres')
    with Ledger.open(ckpt) as ledger:
        assert ledger.last_seq == 2 and len(ledger.recovered) == 1
        assert torn_files(ckpt)[0].read_bytes().startswith(b'{"half"')


def test_verify_is_read_only_and_reports_a_torn_tail(ckpt: Path) -> None:
    build_log(ckpt, [2, 2])
    raw = (ckpt / LOG_NAME).read_bytes()
    (ckpt / LOG_NAME).write_bytes(raw[:-3])
    report = Ledger.open_readonly(ckpt).verify()
    assert not report.ok and report.torn_tail and report.first_bad_seq == 3
    assert (ckpt / LOG_NAME).read_bytes() == raw[:-3] and torn_files(ckpt) == []


def _cli_verify(ckpt: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ledger", "verify", str(ckpt)], capture_output=True, text=True)


def test_flipped_byte_in_the_middle_names_the_first_bad_seq(ckpt: Path) -> None:
    bounds = build_log(ckpt, [3, 3, 3, 3])
    raw = bytearray((ckpt / LOG_NAME).read_bytes())
    start, end, before = bounds[1]
    raw[(start + end) // 2] ^= 0x01
    (ckpt / LOG_NAME).write_bytes(bytes(raw))
    report = Ledger.open_readonly(ckpt).verify()
    assert not report.ok and not report.torn_tail
    assert report.first_bad_seq == before + 1 and report.offset == start
    result = _cli_verify(ckpt)
    assert result.returncode == 1 and f"first bad seq {before + 1} at byte offset {start}" in result.stdout
    with pytest.raises(LogCorrupted) as exc:  # damage before the tail: refused for writing
        with Ledger.open(ckpt, create=False) as ledger:
            list(ledger.events())
    assert exc.value.seq == before + 1 and exc.value.offset == start


def _rewrite_lines(ckpt: Path, edit) -> None:
    lines = gzip.decompress((ckpt / LOG_NAME).read_bytes()).splitlines(keepends=True)
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    (ckpt / LOG_NAME).write_bytes(c.compress(b"".join(edit(lines))) + c.flush())


@pytest.mark.parametrize(
    "edit,bad_seq",
    [
        (lambda lines: lines[:4] + lines[5:], 5),  # delete seq 5
        (lambda lines: lines[:3] + [lines[4], lines[3]] + lines[5:], 4),  # swap 4 and 5
        (lambda lines: lines[:6] + [lines[6].replace(b"event", b"EVENT")] + lines[7:], 7),  # edit text
        (lambda lines: lines[:-1], None),  # drop the last: undetectable without an anchor, chain still valid
    ],
    ids=["delete", "reorder", "edit", "truncate-clean"],
)
def test_deleted_reordered_or_edited_lines_are_detected(ckpt: Path, edit, bad_seq: int | None) -> None:
    build_log(ckpt, [4, 4])
    _rewrite_lines(ckpt, edit)
    report = Ledger.open_readonly(ckpt).verify()
    if bad_seq is None:
        assert report.ok and report.last_seq == 7
        return
    assert not report.ok and report.first_bad_seq == bad_seq, report
    result = _cli_verify(ckpt)
    assert result.returncode == 1 and f"first bad seq {bad_seq}" in result.stdout


def test_truncated_newest_events_are_caught_by_the_projection_snapshot(ckpt: Path) -> None:
    """The chain alone cannot see its last events cut off; the snapshot's anchor can."""
    from projections.backend import MemoryBackend

    backend = MemoryBackend(ckpt)
    for i in range(6):
        backend.add_memory("root", f"entry {i}", current_node="root")
    backend.close()  # leaves a snapshot anchored at seq 6
    _rewrite_lines(ckpt, lambda lines: lines[:-2])
    result = _cli_verify(ckpt)
    assert result.returncode == 1
    assert "ends at seq 4, but its projection snapshot had folded up to seq 6" in result.stdout


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.integers(1, 4), min_size=2, max_size=6), where=st.floats(0, 1, exclude_max=True))
def test_recovery_at_any_torn_offset_property(tmp_path: Path, batches: list[int], where: float) -> None:
    import tempfile

    with tempfile.TemporaryDirectory(dir=tmp_path) as tmp:
        source, ckpt = Path(tmp) / "s", Path(tmp) / "c"
        bounds = build_log(source, batches)
        original = (source / LOG_NAME).read_bytes()
        cut = bounds[-2][0] + int(where * (len(original) - bounds[-2][0]))
        ckpt.mkdir()
        (ckpt / LOG_NAME).write_bytes(original[:cut])
        start, _end, kept = max(b for b in bounds if b[0] <= cut)
        with Ledger.open(ckpt) as ledger:
            assert ledger.last_seq == kept
            assert (ckpt / LOG_NAME).read_bytes() == original[:start]
            saved = b"".join(p.read_bytes() for p in torn_files(ckpt))
            assert saved == original[start:cut]
            assert ledger.append("root", "memory_added", {"text": "next"}, current_node="root").seq == kept + 1
            assert ledger.verify().ok
