"""A third held-out set of claims against the value-grounding grammar (docs/grounding.md).

``fixtures/claims/heldout3.json`` has the format of ``fixtures/claims/claims.json`` and is written in
the voice of a paper's results and discussion sections and of an agent's summary: multi-clause
sentences with two to four numbers, hedges (``roughly``, ``about``, ``on the order of``), nodes cited
in parentheses, comparisons stated with ``relative to``/``against``/``compared with``/``over``/``on``,
comparisons against children, siblings and cousins (outside the lineage), percentages of the written
roofline, hardware and setup facts, differences in seconds and GB/s, ``k``-suffixed units, findings
citing another node's report, and wrong numbers of every kind (digit swaps, wrong scale, inverted
ratios, ``100·r`` given as an increase, wrong base, a sibling's number, wrong direction word, false
bounds). Every expectation was written from the grammar before the tool was run. The machinery is
``test_claim_heldout2``'s (itself ``test_claim_fixture``'s); the same thresholds are held, and the
agreement with the grammar is reported, not asserted.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_claim_fixture import COLUMNS, TRUTHS, VERDICTS, _pin, match, table, verdict_of

from projections.adapters.demo import FIXTURE_RUN, copy_run, replay_run
from projections.api.backend import MemoryBackend

HELDOUT3 = Path(__file__).resolve().parents[2] / "fixtures" / "claims" / "heldout3.json"


def load_heldout3() -> list[dict[str, Any]]:
    claims: list[dict[str, Any]] = json.loads(HELDOUT3.read_text(encoding="utf-8"))
    return claims


@pytest.fixture(scope="module")
def graded_heldout3(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """As ``test_claim_heldout.graded_heldout``, for the third held-out set."""
    out = tmp_path_factory.mktemp("claim_heldout3")
    experiments = copy_run(FIXTURE_RUN, out)
    backend = MemoryBackend(out / "checkpoint")
    replay = replay_run(backend, FIXTURE_RUN, experiments)
    claims = load_heldout3()
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


def test_the_heldout3_set_is_well_formed() -> None:
    claims = load_heldout3()
    assert 80 <= len(claims) <= 100
    assert len({c["id"] for c in claims}) == len(claims)
    for claim in claims:
        written = [n["written"] for n in claim["numbers"]]
        assert written and len(written) == len(set(written)), claim["id"]
        for number in claim["numbers"]:
            assert number["written"] in claim["text"], (claim["id"], number["written"])
            assert number["truth"] in TRUTHS and number["expect"] in VERDICTS and number["note"], claim["id"]
            assert number["truth"] != "no_evidence" or number["expect"] == "unchecked", claim["id"]


def test_the_heldout3_confusion_tables_and_disagreements(
    graded_heldout3: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    by_truth: Counter[tuple[str, str]] = Counter()
    by_expect: Counter[tuple[str, str]] = Counter()
    problems: list[str] = []
    disagree: list[str] = []
    total = 0
    for claim in graded_heldout3:
        pairs = match(claim)
        for number, found in pairs:
            got = verdict_of(found)
            total += 1
            by_truth[(number["truth"], got)] += 1
            by_expect[(number["expect"], got)] += 1
            if got != number["expect"]:
                why = (found or {}).get("why") or ""
                disagree.append(
                    f"{claim['id']} [{claim['node_id']}, {claim['form']}] {claim['text']!r}\n"
                    f"    written {number['written']!r} ({number['truth']}): expect {number['expect']}, got {got}"
                    f" (read as {(found or {}).get('text')!r}) why: {why}\n    fixture: {number['note']}"
                )
            if got != "checked" and found is not None and not str(found.get("why") or "").strip():
                problems.append(f"{claim['id']}: {number['written']!r} is {got} without a why")
        for t in claim["values"]["numbers"]:
            if t.get("verdict") in ("unchecked", "mismatch") and not str(t.get("why") or "").strip():
                problems.append(f"{claim['id']}: {t.get('written')!r} is {t.get('verdict')} without a why")
        if claim["values"].get("verdict") == "checked":
            not_checked = [verdict_of(f) for _, f in pairs if verdict_of(f) != "checked"]
            not_checked += [t.get("verdict") for t in claim["values"]["numbers"] if t.get("verdict") != "checked"]
            if not_checked:
                problems.append(f"{claim['id']}: claim verdict checked, but numbers are {not_checked}")
    report = table(TRUTHS, by_truth, "truth \\ verdict") + "\n\n" + table(VERDICTS, by_expect, "expect \\ verdict")
    agreement = (total - len(disagree)) / total
    listing = (
        f"{len(disagree)} of {total} numbers disagree with the grammar's verdict "
        f"(agreement {agreement:.1%}, reported, not asserted):\n" + "\n".join(disagree)
    )
    with capsys.disabled():
        print("\n\nheld-out set 3, every number:\n" + report + "\n\n" + listing + "\n")
    counts = {t: sum(by_truth[(t, c)] for c in COLUMNS) for t in TRUTHS}
    wrong_caught = by_truth[("wrong", "mismatch")] / counts["wrong"]
    correct_flagged = by_truth[("correct", "mismatch")] / counts["correct"]
    stated = counts["correct"] + counts["wrong"]
    not_decided = sum(by_truth[(t, c)] for t in ("correct", "wrong") for c in ("unchecked", "missing")) / stated
    failures = []
    if wrong_caught < 0.95:
        failures.append(f"only {wrong_caught:.1%} of wrong numbers are mismatches (need ≥ 95%)")
    if correct_flagged > 0.03:
        failures.append(f"{correct_flagged:.1%} of correct numbers are mismatches (need ≤ 3%)")
    if not_decided > 0.10:
        failures.append(f"{not_decided:.1%} of correct+wrong numbers are unchecked or missing (need ≤ 10%)")
    if by_truth[("no_evidence", "checked")]:
        failures.append(f"{by_truth[('no_evidence', 'checked')]} number(s) without evidence were checked")
    failures += problems
    assert not failures, "\n".join(failures) + "\n" + report
