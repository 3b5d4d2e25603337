"""Value grounding and the access-log chain, as functions: what a number in a sentence must be
to hold, and that no edit of a chained line goes unnoticed."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.anchor import HeadFile
from projections.access.chain import GENESIS, chain_onto, link
from projections.access.reader import check_chain
from projections.access.writer import HEAD_ID
from projections.evidence.grammar.values import Evidence, Fact, check_claim, check_metric_ptr, numbers_in

REPORT = {"GFlops_per_s": 13.64, "time_s": 0.9611, "effective_bandwidth_GB_per_s": 40.92, "accuracy": 0.913}
LINEAGE = {"root": {"GFlops_per_s": 2.41, "time_s": 5.4397}, "node_A": {"GFlops_per_s": 9.87, "time_s": 1.3282}}
FACTS = [Fact(2.1, "gigahertz", None, "hardware_spec"), Fact(16.0, None, "thread", "run_command (OMP_NUM_THREADS)")]


def evidence(metrics: dict[str, float] = REPORT) -> Evidence:
    return Evidence(
        metrics, LINEAGE, node_id="node_A1", others=frozenset({"node_B"}), facts=FACTS, primary="GFlops_per_s"
    )


def verdicts(text: str, metrics: dict[str, float] = REPORT) -> dict[str, str]:
    return {v.written: v.verdict for v in check_claim(text, evidence(metrics))}


def misses(text: str, metrics: dict[str, float] = REPORT) -> list[str]:
    return [v.text for v in check_claim(text, evidence(metrics)) if v.verdict == "mismatch"]


@pytest.mark.parametrize(
    "text",
    [
        "13.64 GFlops/s with 3-D blocking 32x8x64 on 16 threads",  # shapes are names; the threads are a fact
        "13.6 GFlops/s",  # rounded as written
        "GFlops_per_s=13.64, time_s=0.9611",
        "+38% over node_A",  # 13.64 / 9.87 - 1, against the named base
        "1.38x node_A",
        "40.92 GB/s effective bandwidth",
        "40920 MB/s",  # converted by pint
        "961.1 ms per sweep",
        "accuracy 91.3%",  # a fraction written as a percentage
        "on 256^3 with DDR4-2933 and 2.1 GHz cores",  # powers and part numbers are names; the clock a fact
        "about 14 GFlops/s, under 1 s",  # approximate (10 %), a bound
        "from 5.44 s to 0.96 s",  # the first end an ancestor's
        "+3.77 GFlops/s over node_A",  # a signed difference against a named base
        "0.37 s faster than node_A",  # less time is faster
    ],
)
def test_numbers_that_hold(text: str) -> None:
    got = verdicts(text)
    assert got and set(got.values()) == {"checked"}, got


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("13.65 GFlops/s", "13.65 GFlops/s"),  # the report says 13.64, written to the same digits
        ("+45% over node_A", "+45%"),
        ("0.87 s per run", "0.87 s"),
        ("accuracy 1.3", "1.3"),  # a ratio above 1 is not the report's 0.913
        ("warm-up took -0.4 s", "-0.4 s"),
        ("node_A1 is 13.8% faster than node_A", "13.8%"),  # the truth is +38 %
        ("3.0x faster than node_A with 16 threads", "3.0x"),  # a bare number is never the base
        ("about 25 GFlops/s", "25 GFlops/s"),
        ("under 0.9 s", "0.9 s"),
        ("9.87 GFlops/s", "9.87 GFlops/s"),  # node_A's value, and node_A is not named
        ("on 32 threads", "32 threads"),
        ("+4.77 GFlops/s over node_A", "+4.77 GFlops/s"),  # a signed difference: 13.64 - 9.87 = 3.77
        ("0.50 s slower than node_A", "0.50 s"),  # node_A1 is 0.37 s faster
    ],
)
def test_numbers_that_do_not(text: str, bad: str) -> None:
    assert misses(text) == [bad]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("L2_miss_ratio=0.12", "no metric 'L2_miss_ratio'"),
        ("1.4x faster than node_B", "not in node_A1's lineage"),
        ("a 38% gain", "no named base"),
        ("18.2k", "a bare number"),
        ("28 GiB of memory", "no metric or fact"),
    ],
)
def test_numbers_out_of_reach_are_unchecked_with_their_reason(text: str, why: str) -> None:
    (found,) = check_claim(text, evidence())
    assert found.verdict == "unchecked" and why in (found.why or "")


def test_metric_ptr_holds_within_the_coarser_precision() -> None:
    evidence = Evidence(REPORT)
    assert check_metric_ptr({"name": "GFlops_per_s", "value": 13.6}, evidence) is None
    wrong = check_metric_ptr({"name": "GFlops_per_s", "value": 12.0}, evidence)
    assert wrong is not None and "node report says GFlops_per_s=13.64" in wrong.reason
    absent = check_metric_ptr({"name": "speedup", "value": 2.0}, evidence)
    assert absent is not None and "no metric 'speedup'" in absent.reason


def test_artifact_numbers_are_keyed_by_column_and_key() -> None:
    csv_place = numbers_in(b"TI,GFlops_per_s\n16,9.80\n32,13.64\n", "results.csv")
    assert csv_place.by_key["GFlops_per_s"] == [9.8, 13.64]
    log_place = numbers_in(b"# host\nverify: max_abs_error = 0.0 OK\nn,time_s\n256,1.33\n", "run.log")
    assert log_place.by_key["time_s"] == [1.33] and log_place.by_key["max_abs_error"] == [0.0]
    json_place = numbers_in(b'{"runs": [{"loss": 0.25}, {"loss": 0.5}]}', "m.json")
    assert json_place.by_key["runs.loss"] == [0.25, 0.5]  # the dotted path: a parent key qualifies it
    found = check_claim("9.80 GFlops/s at TI=16", Evidence(REPORT, sources=[lambda: csv_place]))
    assert [v.verdict for v in found] == ["checked"] * 2  # the row the sentence points at, in the cited CSV only
    found = check_claim("13.64 GFlops/s at TI=16", Evidence(REPORT, sources=[lambda: csv_place]))
    assert found[0].verdict == "mismatch"  # the report's number, but not that row's
    found = check_claim("9.80 GFlops/s in the sweep", Evidence(REPORT, sources=[lambda: csv_place]))
    assert [v.verdict for v in found] == ["mismatch"]  # no row named: the report's GFlops_per_s decides


@settings(max_examples=300, deadline=None)
@given(st.floats(0.001, 1e6, allow_nan=False), st.integers(0, 4))
def test_a_value_written_to_any_precision_holds_and_one_off_by_a_unit_does_not(value: float, digits: int) -> None:
    written = f"{value:.{digits}f}"
    assert misses(f"{written} GFlops/s", {"GFlops_per_s": value}) == []
    off = f"{value + 2 * 10.0**-digits:.{digits}f}"  # written: at least 1.5 units of its last digit away
    assert misses(f"{off} GFlops/s", {"GFlops_per_s": value}) == [f"{off} GFlops/s"]


def _chained(values: list[dict]) -> list[bytes]:
    lines, prev = [], GENESIS
    for n, value in enumerate(values, 1):
        line, prev = chain_onto(json.dumps(value, separators=(",", ":")).encode(), n, prev)
        lines.append(line)
    return lines


_lines = st.lists(
    st.fixed_dictionaries({"op": st.sampled_from(["read", "write"]), "q": st.text(max_size=20)}), min_size=2, max_size=8
)


@settings(max_examples=100, deadline=None)
@given(_lines, st.data())
def test_any_edit_removal_or_reorder_of_a_chained_line_is_found(values: list[dict], data: st.DataObject) -> None:
    lines = _chained(values)  # a cut tail is found against the head file, written as appends write it
    i = data.draw(st.integers(0, len(lines) - 1))
    how = data.draw(st.sampled_from(["edit", "remove", "swap"]))
    if how == "edit":
        at = data.draw(st.integers(1, len(lines[i]) - 80))  # a byte of ARI's fields
        lines[i] = lines[i][:at] + bytes([lines[i][at] ^ 1]) + lines[i][at + 1 :]
    elif how == "remove":
        del lines[i]
    else:
        j = (i + 1) % len(lines)
        lines[i], lines[j] = lines[j], lines[i]
    with tempfile.TemporaryDirectory() as tmp:
        _write(Path(tmp), lines, head=_chained(values)[-1])
        assert not check_chain(tmp)[0].ok


@settings(max_examples=50, deadline=None)
@given(_lines)
def test_an_intact_chain_checks(values: list[dict]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        lines = _chained(values)
        _write(Path(tmp), lines, head=lines[-1])
        check, decoded = check_chain(tmp)
        assert check.ok and check.chained == len(values) and len(decoded) == len(values)


def _write(ckpt: Path, lines: list[bytes], head: bytes) -> None:
    (ckpt / "memory_access.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    (ckpt / "memory_ledger").mkdir()
    last = link(head)
    assert last.n is not None
    head_file = HeadFile(ckpt / "memory_ledger" / "memory_access.jsonl")
    head_file.write(HEAD_ID, last.n, last.hash)
    head_file.close()


def test_the_grounded_block_names_the_numbers_it_could_not_check() -> None:
    from projections.evidence.grounded_block import render_grounded_block

    claim = {
        "node_id": "node_A2",
        "text": "15.82 GFlops/s over 18.2k points",
        "artifact_refs": [{"path": "results.csv", "sha256": "0" * 64}],
        "values": {"verdict": "unchecked", "checked": 1, "unchecked": [{"value": "18.2k", "why": "a bare number"}]},
    }
    block = render_grounded_block({"usable_for_claims": [claim]})
    assert "numbers not checked (do not state them as measured): 18.2k (a bare number)" in block
