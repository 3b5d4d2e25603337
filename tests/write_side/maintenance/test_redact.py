"""Redaction in the append-only log (issue 20): stubs that still verify, a rewrite that is atomic
under SIGKILL, and other processes that keep writing through it; and (issue 26) the one rule for
what else it removes, outside the log: the selector's matches, the chosen events' records, whole
values equal to a removed free text the log no longer holds, never a chain field."""

from __future__ import annotations

import gzip
import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import InvalidInput, Ledger
from ledger.chain import canonical, decode_line, sign, stub_line
from ledger.events import UnsignedEvent, new_event_id, utc_now
from ledger.layout import REDACT_TMP_SUFFIX, store_dir
from ledger.log import LOG_NAME, compress_member
from ledger.maintenance.redact import MARK, MIN_TEXT, Scrub, Selector, redact
from support.env import subprocess_env
from support.leaks import every_file_bytes

SECRET = "sk-SECRET-4242"


def log_bytes(ckpt: Path) -> bytes:
    """Everything the log holds, decompressed."""
    return gzip.decompress((store_dir(ckpt) / LOG_NAME).read_bytes())


def canonical_by_seq(ckpt: Path) -> dict[int, bytes]:
    with Ledger.open_readonly(ckpt) as ledger:
        return {e.seq: canonical(e) for e in ledger.events()}


def test_a_version_3_stub_checks_against_its_own_hash_and_an_edited_one_does_not() -> None:
    event, line = sign(
        UnsignedEvent(3, 1, new_event_id(), utc_now(), "ck", "root", "memory_added", {"text": SECRET}, "")
    )
    stub = stub_line(line)
    assert SECRET.encode() not in stub and decode_line(stub[:-1]).hash == event.hash
    assert decode_line(stub[:-1]).body == {"sha256": hashlib.sha256(b'{"text":"' + SECRET.encode() + b'"}').hexdigest()}
    edited = stub.replace(b'"node":"root"', b'"node":"rooT"')
    with pytest.raises(ValueError, match="hash does not match"):
        decode_line(edited[:-1])


def test_redaction_by_text_keeps_the_chain_and_every_other_event_byte_for_byte(ckpt: Path) -> None:
    with Ledger.open(ckpt) as ledger:
        for i in range(40):
            text = f"entry {i}" + (f" key={SECRET}" if i % 9 == 4 else "")
            ledger.append("root", "memory_added", {"text": text, "metadata": {"type": "note"}}, current_node="root")
        with ledger.batch() as batch:
            for i in range(5):
                batch.append("n1", "memory_added", {"text": f"batch {i} {SECRET}"}, current_node="n1")
    before = canonical_by_seq(ckpt)
    report = redact(ckpt, Selector(text=SECRET), reason="leaked key", by="tester")
    assert report.event is not None and len(report.chosen) == 9
    assert SECRET.encode() not in log_bytes(ckpt)
    after = canonical_by_seq(ckpt)
    chosen = {e.seq for e in report.chosen}
    assert {s for s in before if before[s] != after[s]} == chosen  # only the redacted ones changed
    assert after.keys() == before.keys() | {report.event.seq}
    with Ledger.open_readonly(ckpt) as ledger:
        assert ledger.verify().ok
        redaction = ledger.event_at(report.event.seq)
        assert redaction is not None and redaction.body["reason"] == "leaked key"
        assert [r["seq"] for r in redaction.body["redacted"]] == sorted(chosen)
        assert SECRET not in str(redaction.body)  # the selector is described, never the text


def test_a_stub_no_redaction_accounts_for_fails_verify(ckpt: Path) -> None:
    """Someone replaces an event's line by its stub by hand (no redaction event): the hash still
    checks for a version-3 event, but verify refuses the log: a body was removed unrecorded."""
    with Ledger.open(ckpt) as ledger:
        for i in range(3):
            ledger.append("root", "memory_added", {"text": f"entry {i}"}, current_node="root")
    raw = log_bytes(ckpt).split(b"\n")[:-1]
    raw[1] = stub_line(raw[1] + b"\n")[:-1]
    (store_dir(ckpt) / LOG_NAME).write_bytes(b"".join(compress_member(line + b"\n") for line in raw))
    with Ledger.open_readonly(ckpt) as ledger:
        report = ledger.verify()
    assert not report.ok and "no redaction event records it" in (report.reason or "")


def test_version_2_events_are_redacted_and_their_stubs_vouched_for_by_the_redaction(ckpt: Path) -> None:
    """A log written before version 3 (each hash covers its body): its stubs cannot check their own
    hash, so the redaction event records each stub's digest, and an edited stub fails verify."""
    lines, prev, ckpt_id = [], "", new_event_id()
    for seq in range(1, 6):
        body = {"text": f"old entry {seq}" + (f" {SECRET}" if seq == 3 else "")}
        event, line = sign(
            UnsignedEvent(2, seq, new_event_id(), utc_now(), ckpt_id, "root", "memory_added", body, prev)
        )
        lines.append(line)
        prev = event.hash
    (store_dir(ckpt)).mkdir()
    (store_dir(ckpt) / LOG_NAME).write_bytes(b"".join(compress_member(line, single_event=True) for line in lines))
    report = redact(ckpt, Selector(text=SECRET), reason="leak", by="tester")
    assert [e.seq for e in report.chosen] == [3] and SECRET.encode() not in log_bytes(ckpt)
    with Ledger.open_readonly(ckpt) as ledger:
        assert ledger.verify().ok
    raw = log_bytes(ckpt).split(b"\n")[:-1]
    raw[2] = raw[2].replace(b'"node":"root"', b'"node":"rooT"')
    (store_dir(ckpt) / LOG_NAME).write_bytes(b"".join(compress_member(line + b"\n") for line in raw))
    with Ledger.open_readonly(ckpt) as ledger:
        found = ledger.verify()
    assert not found.ok and "bytes changed since the redaction" in (found.reason or "")


def test_bad_requests_write_nothing(ckpt: Path) -> None:
    with Ledger.open(ckpt) as ledger:
        ledger.append("root", "memory_added", {"text": SECRET}, current_node="root")
    before = (store_dir(ckpt) / LOG_NAME).read_bytes()
    with pytest.raises(InvalidInput, match="reason"):
        redact(ckpt, Selector(text=SECRET), reason="  ", by="tester")
    with pytest.raises(InvalidInput, match="regular expression"):
        Selector(text="(unclosed", regex=True)
    with pytest.raises(InvalidInput, match="say what to redact"):
        Selector()
    with pytest.raises(InvalidInput, match="matches the empty string"):
        Selector(text="(tok-)?", regex=True)  # would choose every event, and mark every gap between letters
    dry = redact(ckpt, Selector(text=SECRET), reason="r", by="tester", dry_run=True)
    assert len(dry.chosen) == 1 and dry.event is None
    assert (store_dir(ckpt) / LOG_NAME).read_bytes() == before


texts = st.lists(st.tuples(st.booleans(), st.integers(0, 3)), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=texts, pick=st.sampled_from(["text", "node", "ids"]), seed=st.integers(0, 2**16))
def test_random_logs_random_redactions(tmp_path: Path, plan: list[tuple[bool, int]], pick: str, seed: int) -> None:
    """Random logs (single appends and batches on 4 nodes, some texts holding the secret) and a
    random redaction (by text, by node, by ids): the log verifies, no redacted text is left in it,
    and every event not redacted is byte-identical in canonical form."""
    rnd = random.Random(seed)
    ckpt = Path(tempfile.mkdtemp(dir=tmp_path))
    with Ledger.open(ckpt) as ledger:
        for i, (secret, node) in enumerate(plan):
            text = f"entry {i} {rnd.randbytes(8).hex()}" + (f" {SECRET}" if secret else "")
            if rnd.random() < 0.3:
                with ledger.batch() as batch:
                    for j in range(rnd.randint(1, 4)):
                        batch.append(f"n{node}", "memory_added", {"text": f"{text} b{j}"}, current_node=f"n{node}")
            else:
                ledger.append(f"n{node}", "memory_added", {"text": text}, current_node=f"n{node}")
        events = list(ledger.events())
    selector = {
        "text": Selector(text=SECRET),
        "node": Selector(node=f"n{rnd.randint(0, 3)}"),
        "ids": Selector(ids=tuple(e.id for e in rnd.sample(events, min(3, len(events))))),
    }[pick]
    before = canonical_by_seq(ckpt)
    report = redact(ckpt, selector, reason="property", by="hypothesis")
    gone = {e.seq: e.body["text"] for e in report.chosen}
    after = canonical_by_seq(ckpt)
    with Ledger.open_readonly(ckpt) as ledger:
        assert ledger.verify().ok
    assert all(before[s] == after[s] for s in before if s not in gone)
    content = log_bytes(ckpt)
    assert not any(text.encode() in content for text in gone.values())
    if pick == "text":
        assert SECRET.encode() not in content


REDACTOR = r"""
import sys
from ledger.maintenance.redact import Selector, redact
redact(sys.argv[1], Selector(text=sys.argv[2]), reason="kill test", by="tester")
print("done", flush=True)
"""


def _big_log(ckpt: Path, n: int) -> None:
    with Ledger.open(ckpt) as ledger:
        for start in range(0, n, 100):
            with ledger.batch() as batch:
                for i in range(start, start + 100):
                    text = f"entry {i} " + "halo exchange " * 20 + (SECRET if i % 50 == 7 else "")
                    batch.append("root", "memory_added", {"text": text}, current_node="root")


def test_sigkill_at_a_random_point_of_the_rewrite_leaves_the_old_log_or_the_new(tmp_path: Path) -> None:
    """The redaction of a 6,000-event log is killed at a random moment of its run, 12+ times: each time the log
    verifies (the old one, or the redacted one) and no temporary copy outlives the next open;
    running the redaction again then leaves no secret anywhere in the checkpoint."""
    outcomes = {"old": 0, "new": 0}
    rnd = random.Random(20)
    calibrate = tmp_path / "calibrate"
    calibrate.mkdir()
    _big_log(calibrate, 6000)
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", REDACTOR, str(calibrate), SECRET], check=True, env=subprocess_env())
    whole = time.monotonic() - began  # start-up, then the rewrite: the kills fall anywhere in it
    run = 0
    while run < 12 or (not all(outcomes.values()) and run < 30):  # until kills landed on both sides
        run += 1
        ckpt = tmp_path / f"k{run}"
        ckpt.mkdir()
        _big_log(ckpt, 6000)
        proc = subprocess.Popen(
            [sys.executable, "-c", REDACTOR, str(ckpt), SECRET], stdout=subprocess.PIPE, env=subprocess_env()
        )
        time.sleep(rnd.uniform(0.3, 1.3) * whole)  # some after it ended: the new log must verify too
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with Ledger.open_readonly(ckpt) as ledger:
            assert ledger.verify().ok
            outcomes["new" if ledger.redacted_at or SECRET.encode() not in log_bytes(ckpt) else "old"] += 1
        with Ledger.open(ckpt):
            pass  # a writable open removes a killed redaction's temporary file
        assert not (store_dir(ckpt) / (LOG_NAME + REDACT_TMP_SUFFIX)).exists()
        redact(ckpt, Selector(text=SECRET), reason="again", by="tester")
        assert SECRET.encode() not in every_file_bytes(ckpt)
        with Ledger.open_readonly(ckpt) as ledger:
            assert ledger.verify().ok
    print(outcomes)
    assert outcomes["old"] and outcomes["new"], outcomes  # the kills landed before and after the rename


WRITER = r"""
import signal, sys
from ledger import Ledger
ckpt, tag = sys.argv[1], sys.argv[2]
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))  # stop between appends, as ARI's shutdown does
with Ledger.open(ckpt) as ledger:
    i = 0
    while not stop:
        print(ledger.append("root", "memory_added", {"text": f"{tag} {i}"}, current_node="root").id, flush=True)
        i += 1
"""


def test_two_processes_writing_through_a_redaction_lose_nothing(ckpt: Path) -> None:
    """Two writer processes hold the log open and append without pause while a redaction
    rewrites it: each notices the new file at its next lock and appends there; every acknowledged
    append is in the redacted log once, and it verifies. (The writers stop between appends: a
    writer killed inside its write(2) leaves a torn tail, which verify rightly reports until the
    next writable open moves it aside; the SIGKILL tests in test_torture cover that.)"""
    _big_log(ckpt, 3000)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(ckpt), f"w{w}"], stdout=subprocess.PIPE, text=True, env=subprocess_env()
        )
        for w in range(2)
    ]
    try:
        for w in writers:
            assert w.stdout is not None and w.stdout.readline()  # writing
        report = redact(ckpt, Selector(text=SECRET), reason="live", by="tester")
        time.sleep(0.5)  # they keep writing into the new file
    finally:
        for w in writers:
            w.send_signal(signal.SIGTERM)
    acked = [line.strip() for w in writers for line in w.communicate()[0].splitlines()]
    with Ledger.open_readonly(ckpt) as ledger:
        assert ledger.verify().ok
        ids = [e.id for e in ledger.events()]
        seq_of = {e.id: e.seq for e in ledger.events()}
    assert report.event is not None and len(report.chosen) == 60
    assert all(w.returncode == 0 for w in writers)
    assert acked and all(ids.count(i) == 1 for i in acked) and len(set(ids)) == len(ids)
    assert any(seq_of[i] > report.event.seq for i in acked if i in seq_of)  # writes landed after it
    assert SECRET.encode() not in log_bytes(ckpt)


def test_a_ledger_open_before_the_redaction_continues_on_the_new_file(ckpt: Path) -> None:
    with Ledger.open(ckpt) as ledger:
        ledger.append("root", "memory_added", {"text": SECRET}, current_node="root")
        redact(ckpt, Selector(text=SECRET), reason="r", by="tester")  # as another process would
        assert ledger.refresh() == 2 and ledger.redacted_at == 2
        assert ledger.append("root", "memory_added", {"text": "after"}, current_node="root").seq == 3
        assert next(ledger.events()).body.keys() == {"sha256"}
    with Ledger.open_readonly(ckpt) as reader:
        assert reader.verify().ok and reader.last_seq == 3
    assert os.path.getsize(store_dir(ckpt) / LOG_NAME) > 0


def test_an_older_copy_renamed_over_the_log_is_a_rollback_for_a_ledger_that_saw_more(ckpt: Path) -> None:
    """A redaction's new file keeps every hash, so an open ledger follows it; an older copy of the
    log renamed over it (a restored backup) lacks what the ledger saw: refused, not continued."""
    from ledger.errors import RollbackDetected

    log = store_dir(ckpt) / LOG_NAME
    with Ledger.open(ckpt) as ledger:
        for i in range(3):
            ledger.append("root", "memory_added", {"text": f"entry {i}"}, current_node="root")
        older = log.read_bytes()
        for i in range(3, 6):
            ledger.append("root", "memory_added", {"text": f"entry {i}"}, current_node="root")
        copy = log.with_name("older-copy")
        copy.write_bytes(older)
        os.replace(copy, log)
        with pytest.raises(RollbackDetected, match="acknowledged events were removed"):
            ledger.append("root", "memory_added", {"text": "lost?"}, current_node="root")
    assert log.read_bytes() == older  # nothing was appended to the older copy


# ---------------------------------------------------------------------------- issue 26: the rule


def test_what_is_searched_for_elsewhere_is_the_removed_free_text_the_log_no_longer_holds(ckpt: Path) -> None:
    """Rule 3: of the removed bodies, only free text (a memory's text, a step's content) that is a
    phrase (8+ characters, 2+ words) no kept event says is a removed text; never metadata, labels
    or keys, never a text shorter than 8 or of one word (a tool name, a run id), never one another
    entry still holds (its own text or a value)."""
    with Ledger.open(ckpt) as ledger:
        unique = ledger.append(
            "root",
            "memory_added",
            {
                "text": "the unique leaked sentence",
                "metadata": {"type": "note", "tool": "bash_tool_name", "metric": "GFlops_per_s"},
            },
            current_node="root",
        )
        short = ledger.append("root", "memory_added", {"text": "short"}, current_node="root")
        twin = ledger.append("root", "memory_added", {"text": "a sentence two entries share"}, current_node="root")
        ledger.append("root", "memory_added", {"text": "a sentence two entries share"}, current_node="root")
        label = ledger.append("_checkpoint", "react_step", {"content": "run_20261128_stencil"})
        ledger.append(
            "root",
            "memory_added",
            {"text": "kept", "metadata": {"run_id": "run_20261128_stencil"}},
            current_node="root",
        )
        step = ledger.append(
            "_checkpoint", "react_step", {"content": "bash: export TOKEN=tok-42", "metadata": {"tool": "bash"}}
        )
        word = ledger.append("_checkpoint", "react_step", {"content": "build_working_context"})
    chosen = (unique.id, short.id, twin.id, label.id, step.id, word.id)
    report = redact(ckpt, Selector(ids=chosen), reason="rule", by="tester")
    assert len(report.chosen) == 6 and MIN_TEXT == 8
    assert report.rule.texts == {"the unique leaked sentence", "bash: export TOKEN=tok-42"}
    assert report.rule.ids == set(chosen) and report.rule.pattern is None


def test_the_rule_on_records_replaces_only_what_the_selection_removed() -> None:
    """A match anywhere (keys too); a removed text only as a whole string value, never a part of
    one or a key; a chosen entry's records lose text, preview, metadata, the typed pointers copied
    from it and values; chain and anchor fields never change; everything else stays."""
    zeros = "0" * 64
    rule = Scrub(
        frozenset({"e1"}),
        re.compile(re.escape("tok-42")),
        frozenset({"a removed sentence", zeros}),
        {"e1": frozenset({"metric_ptr", "artifact_refs"})},
    )
    line = {
        "op": "read",
        "tool": "search_memory",
        "query": "a removed sentence",
        "args": {"eval_summary": "not a removed sentence, but holds tok-42 and a removed sentence"},
        "results": [{"entry_id": "e1", "src_node_id": "root", "score": 0.5}],
        "a removed sentence": "a key equal to a removed text stays",
        "tok-42 as a key": 1,
        "n": 1,
        "prev": zeros,
        "hash": "ab" * 32,
    }
    out, changed = rule(line)
    assert changed
    expected = {k: v for k, v in line.items() if k != "tok-42 as a key"}
    expected.update(
        query=MARK,
        args={"eval_summary": f"not a removed sentence, but holds {MARK} and a removed sentence"},
    )
    expected[f"{MARK} as a key"] = 1
    assert out == expected
    claim = {
        "entry_id": "e1",
        "node_id": "root",
        "text": "anything",
        "metadata": {"type": "experiment_result"},
        "metric_ptr": {"name": "GFlops_per_s", "value": 1.0},
        "artifact_refs": [{"path": "r.csv", "sha256": zeros}],
        "node_report_ref": {"run_id": "run1", "node_id": "root"},
        "values": {"numbers": [{"text": "1.0 GFlops/s"}]},
        "kind": "experiment_result",
        "event_hash": zeros,
    }
    out, changed = rule({"anchor": {"seq": 3, "hash": zeros}, "claims": [claim], "lineage": ["root"]})
    assert changed and out["anchor"] == {"seq": 3, "hash": zeros} and out["lineage"] == ["root"]
    assert out["claims"] == [
        {**claim, "text": MARK, "metadata": {}, "metric_ptr": {}, "artifact_refs": [], "values": {}}
    ]  # node_report_ref was not in the removed body's metadata (the rule says which were)
    other = {"entry_id": "e2", "text": "GFlops_per_s on root", "metadata": {"tool": "bash", "node": "root"}}
    assert rule(other) == (other, False)
    assert rule.quotes(line) and not rule.quotes(other)


def test_a_file_set_aside_is_deleted_only_when_it_holds_what_was_removed(ckpt: Path) -> None:
    """Files set aside beside the log are deleted when they hold a chosen event's id, a removed
    text or a match; one that only holds other events (the same keys, labels, node ids) stays."""
    with Ledger.open(ckpt) as ledger:
        kept = ledger.append(
            "root", "memory_added", {"text": "a kept entry", "metadata": {"type": "note"}}, current_node="root"
        )
        gone = ledger.append(
            "root", "memory_added", {"text": "a removed sentence", "metadata": {"type": "note"}}, current_node="root"
        )
    store = store_dir(ckpt)
    other = compress_member(
        b'{"seq":9,"node":"root","type":"memory_added","body":{"text":"a torn entry","metadata":{"type":"note"}}}\n'
    )
    aside = {
        f"{LOG_NAME}.torn-1": other[:-6],  # another event, cut short: kept
        f"{LOG_NAME}.rolled-back-2": f'{{"id":"{kept.id}","body":{{"text":"a kept entry"}}}}'.encode(),  # kept
        f"{LOG_NAME}.damaged-3": f'{{"id":"{gone.id}","body":{{"sha256":"ab"}}}}'.encode(),  # names it: deleted
        f"{LOG_NAME}.torn-4": compress_member(b'{"text":"a removed sentence"}\n')[:-6],  # its text: deleted
    }
    for name, data in aside.items():
        (store / name).write_bytes(data)
    report = redact(ckpt, Selector(ids=(gone.id,)), reason="rule", by="tester")
    assert sorted(report.removed_files) == [f"{LOG_NAME}.damaged-3", f"{LOG_NAME}.torn-4"]
    assert (store / f"{LOG_NAME}.torn-1").exists() and (store / f"{LOG_NAME}.rolled-back-2").exists()
