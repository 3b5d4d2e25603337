"""An independent fixture of claims against the value-grounding grammar (docs/grounding.md).

``fixtures/claims/claims.json`` holds claims about the demo run, each number with its truth
(``correct``/``wrong``/``no_evidence``) and the verdict the grammar prescribes, written down
from the grammar before the tool was run. Here every claim is written as a typed
``experiment_result`` of its node (as ``projections.adapters.planted`` writes its claims), the
verified context of each node's lineage is read, and each number's verdict is compared with
the fixture: the confusion tables are printed, then held to the thresholds below.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from projections.adapters.demo import FIXTURE_RUN, copy_run, replay_run
from projections.api.backend import MemoryBackend

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "claims" / "claims.json"
TRUTHS = ("correct", "wrong", "no_evidence")
VERDICTS = ("checked", "mismatch", "unchecked")
COLUMNS = (*VERDICTS, "missing")  # missing: the tool listed no number written so


def load_claims() -> list[dict[str, Any]]:
    claims: list[dict[str, Any]] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return claims


def _pin(work: Path, path: str, role: str) -> dict[str, Any]:
    return {"path": path, "sha256": hashlib.sha256((work / path).read_bytes()).hexdigest(), "role": role}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The demo run replayed, every fixture claim written as its node, and the ``values`` the
    verified context of the node's lineage gives each one."""
    out = tmp_path_factory.mktemp("claim_fixture")
    experiments = copy_run(FIXTURE_RUN, out)
    backend = MemoryBackend(out / "checkpoint")
    replay = replay_run(backend, FIXTURE_RUN, experiments)
    claims = load_claims()
    ids: dict[str, str] = {}
    for claim in claims:
        nid = claim["node_id"]
        cited = claim.get("report_of", nid)
        work = experiments / replay.run_id / cited
        refs = [_pin(work, "results.csv", "data_output")] if (work / "results.csv").is_file() else []
        added = backend.add_typed_memory(
            nid,
            "experiment_result",
            claim["text"],
            artifact_refs=refs,
            node_report_ref={"run_id": replay.run_id, "node_id": cited},
            current_node=nid,
        )
        ids[claim["id"]] = str(added["id"])
    views: dict[str, dict[str, Any]] = {}
    for nid in sorted({c["node_id"] for c in claims}):
        lineage = [*replay.tree[nid], nid]
        ctx = backend.get_verified_context(lineage, experiments_root=experiments)
        views.update({c["entry_id"]: dict(c) for c in ctx["claims"]})
    backend.close()
    return [{**claim, "values": views[ids[claim["id"]]].get("values")} for claim in claims]


def _norm(written: str) -> str:
    return written.replace(",", "").lstrip("+-−±")


def match(claim: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each fixture number with the tool's number written the same way (None: not listed)."""
    values = claim["values"] or {}
    assert "numbers" in values, f"{claim['id']}: the tool's values carry no 'numbers' list: {values}"
    tool = values["numbers"]
    pairs = []
    for number in claim["numbers"]:
        found = next((t for t in tool if t.get("written") == number["written"]), None)
        if found is None:
            found = next((t for t in tool if _norm(str(t.get("written", ""))) == _norm(number["written"])), None)
        pairs.append((number, found))
    return pairs


def verdict_of(found: dict[str, Any] | None) -> str:
    return "missing" if found is None else str(found.get("verdict"))


def table(rows: tuple[str, ...], counts: Counter[tuple[str, str]], title: str) -> str:
    width = max(len(r) for r in (*rows, title)) + 2
    lines = [title.ljust(width) + "".join(c.rjust(11) for c in COLUMNS) + "      total"]
    for row in rows:
        cells = [counts[(row, c)] for c in COLUMNS]
        lines.append(row.ljust(width) + "".join(str(n).rjust(11) for n in cells) + str(sum(cells)).rjust(11))
    return "\n".join(lines)


def test_the_fixture_is_well_formed() -> None:
    claims = load_claims()
    assert len(claims) >= 120
    assert len({c["id"] for c in claims}) == len(claims)
    for claim in claims:
        written = [n["written"] for n in claim["numbers"]]
        assert written and len(written) == len(set(written)), claim["id"]
        for number in claim["numbers"]:
            assert number["written"] in claim["text"], (claim["id"], number["written"])
            assert number["truth"] in TRUTHS and number["expect"] in VERDICTS and number["note"], claim["id"]
            assert number["truth"] != "no_evidence" or number["expect"] == "unchecked", claim["id"]


def test_the_confusion_table_of_the_claim_fixture(
    graded: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    by_truth: Counter[tuple[str, str]] = Counter()
    by_expect: Counter[tuple[str, str]] = Counter()
    problems: list[str] = []
    for claim in graded:
        pairs = match(claim)
        for number, found in pairs:
            got = verdict_of(found)
            by_truth[(number["truth"], got)] += 1
            by_expect[(number["expect"], got)] += 1
        for t in claim["values"]["numbers"]:
            if t.get("verdict") in ("unchecked", "mismatch") and not str(t.get("why") or "").strip():
                problems.append(f"{claim['id']}: {t.get('written')!r} is {t.get('verdict')} without a why")
        if claim["values"].get("verdict") == "checked":
            not_checked = [verdict_of(f) for _, f in pairs if verdict_of(f) != "checked"]
            not_checked += [t.get("verdict") for t in claim["values"]["numbers"] if t.get("verdict") != "checked"]
            if not_checked:
                problems.append(f"{claim['id']}: claim verdict checked, but numbers are {not_checked}")
    report = table(TRUTHS, by_truth, "truth \\ verdict") + "\n\n" + table(VERDICTS, by_expect, "expect \\ verdict")
    with capsys.disabled():
        print("\n\nclaim fixture, every number:\n" + report + "\n")
    total = {t: sum(by_truth[(t, c)] for c in COLUMNS) for t in TRUTHS}
    wrong_caught = by_truth[("wrong", "mismatch")] / total["wrong"]
    correct_flagged = by_truth[("correct", "mismatch")] / total["correct"]
    stated = total["correct"] + total["wrong"]
    not_decided = sum(by_truth[(t, c)] for t in ("correct", "wrong") for c in ("unchecked", "missing")) / stated
    assert wrong_caught >= 0.95, f"only {wrong_caught:.1%} of wrong numbers are mismatches\n{report}"
    assert correct_flagged <= 0.03, f"{correct_flagged:.1%} of correct numbers are mismatches\n{report}"
    assert not_decided <= 0.10, f"{not_decided:.1%} of correct+wrong numbers are unchecked or missing\n{report}"
    assert by_truth[("no_evidence", "checked")] == 0, f"a number without evidence was checked\n{report}"
    assert not problems, "\n".join(problems)


def test_the_tool_agrees_with_the_grammar_on_nearly_every_number(
    graded: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    total, disagree = 0, []
    for claim in graded:
        for number, found in match(claim):
            total += 1
            got = verdict_of(found)
            if got != number["expect"]:
                why = (found or {}).get("why") or ""
                disagree.append(
                    f"{claim['id']} [{claim['node_id']}, {claim['form']}] {claim['text']!r}\n"
                    f"    written {number['written']!r}: expect {number['expect']}, got {got}"
                    f" (read as {(found or {}).get('text')!r}) why: {why}\n    fixture: {number['note']}"
                )
    listing = f"{len(disagree)} of {total} numbers disagree with the grammar's verdict:\n" + "\n".join(disagree)
    with capsys.disabled():
        print("\n\n" + listing + "\n")
    assert (total - len(disagree)) / total >= 0.97, listing
