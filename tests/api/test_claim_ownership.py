"""A claim's report is its own node's, and a node that judged its own result unsuccessful
offers no claims (issue 25, item 3): the verified context's extra exclusions, on top of ARI's
rule (usable = grounded and not rerun_failed). Each exclusion is carried on the claim
(``exclusions``: ``code`` and ``text``); the claim stays in ``claims``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.ari.provenance import sha256_file
from projections.adapters.demo import copy_run, replay_run
from projections.api import MemoryBackend
from projections.evidence.grounded_block import render_grounded_block
from projections.models.verdicts import EVIDENCE
from projections.tools.lineage import lineage_data, render_tree
from support.env import FIXTURES

RUN = FIXTURES / "ari_run"
A12_HEADLINE = (
    "Temporal blocking (2 fused sweeps per k-tile) runs at 16.94 GFlops/s but FAILS verification (max_abs_error 5.7e-2)"
)


@pytest.fixture
def replayed(tmp_path: Path):
    experiments = copy_run(RUN, tmp_path)
    backend = MemoryBackend(tmp_path / "checkpoint")
    replay = replay_run(backend, RUN, experiments)
    yield backend, replay
    backend.close()


def _by_id(ctx: dict) -> dict[str, dict]:
    return {c["entry_id"]: c for c in ctx["claims"]}


def _usable(ctx: dict) -> set[str]:
    return {c["entry_id"] for c in ctx["usable_for_claims"]}


# ---------------------------------------------------------------------------- a borrowed report


def test_a_claim_citing_a_siblings_report_is_a_finding_never_usable_and_at_most_cited(replayed) -> None:
    backend, replay = replayed
    sibling = replay.experiments_root / replay.run_id / "node_B"
    out = backend.add_experiment_result(
        "node_A2",
        "node_A2 reaches 4.95 GFlops/s",
        {"name": "GFlops_per_s", "value": 4.95},
        [{"path": "results.csv", "sha256": sha256_file(sibling / "results.csv"), "role": "data_output"}],
        {"run_id": replay.run_id, "node_id": "node_B"},
        current_node="node_A2",
    )
    lineage = ["root", "node_A", "node_A2"]
    ctx = backend.get_verified_context(lineage)
    claim = _by_id(ctx)[out["id"]]
    assert claim["exclusions"] == [{"code": "borrowed_report", "text": "cites node_B's report, not its own (node_A2)"}]
    assert EVIDENCE.index(claim["evidence"]) <= EVIDENCE.index("cited")  # its pins prove nothing about node_A2
    assert out["id"] not in _usable(ctx)
    # neither a lower floor nor keeping mismatches lets it back in
    assert out["id"] not in _usable(backend.get_verified_context(lineage, min_evidence="none", keep_mismatches=True))
    assert "reaches 4.95" not in render_grounded_block(ctx)
    # the node's own consolidated result, citing its own report, is untouched
    own = _by_id(ctx)[replay.consolidated["node_A2"][0]]
    assert "exclusions" not in own and own["evidence"] == "rerun_passed" and own["entry_id"] in _usable(ctx)


def test_a_report_of_the_claims_own_node_is_not_borrowed(replayed) -> None:
    backend, replay = replayed
    work = replay.experiments_root / replay.run_id / "node_A2"
    out = backend.add_typed_memory(
        "node_A2",
        "paper_claim",
        "node_A2 sustains 15.82 GFlops/s",
        metric_ptr={"name": "GFlops_per_s", "value": 15.82},
        artifact_refs=[{"path": "results.csv", "sha256": sha256_file(work / "results.csv"), "role": "data_output"}],
        node_report_ref={"run_id": replay.run_id, "node_id": "node_A2"},
        current_node="node_A2",
    )
    ctx = backend.get_verified_context(["root", "node_A", "node_A2"])
    claim = _by_id(ctx)[out["id"]]
    assert "exclusions" not in claim and claim["evidence"] == "values_checked" and out["id"] in _usable(ctx)


# ---------------------------------------------------------------------------- a node that judged itself failed


def test_node_a12s_claims_are_not_usable_and_the_grounded_block_omits_them(replayed) -> None:
    backend, replay = replayed
    lineage = ["root", "node_A", "node_A12"]
    ctx = backend.get_verified_context(lineage)
    a12 = [c for c in ctx["claims"] if c["node_id"] == "node_A12"]
    assert [c["entry_id"] for c in a12] == replay.consolidated["node_A12"][:1]  # its experiment_result
    [exclusion] = a12[0]["exclusions"]
    assert exclusion["code"] == "self_judged_failure"
    assert exclusion["text"].startswith("node_A12 judged its own result unsuccessful")
    assert "succeeded=false" in exclusion["text"] and A12_HEADLINE in exclusion["text"]
    assert a12[0]["grounded"]  # ARI's rule alone would have offered it
    assert {c["node_id"] for c in ctx["usable_for_claims"]} == {"root", "node_A"}
    kept = backend.get_verified_context(lineage, min_evidence="none", keep_mismatches=True)
    assert {c["node_id"] for c in kept["usable_for_claims"]} == {"root", "node_A"}
    block = render_grounded_block(ctx)
    assert "node_A12" not in block and "16.94" not in block
    assert "] root [GFlops_per_s=2.41]" in block and "] node_A [GFlops_per_s=9.87]" in block


def test_a_block_from_a_saved_context_never_offers_an_excluded_claim(replayed) -> None:
    backend, _replay = replayed
    ctx = json.loads(json.dumps(backend.get_verified_context(["root", "node_A", "node_A12"])))
    a12 = next(c for c in ctx["claims"] if c["node_id"] == "node_A12")
    ctx["usable_for_claims"].append(a12)  # a context file edited, or written before the rule
    assert "node_A12" not in render_grounded_block(ctx)


def test_without_its_report_on_disk_the_log_still_says_node_a12_failed(replayed, tmp_path: Path) -> None:
    backend, replay = replayed
    (replay.experiments_root / replay.run_id / "node_A12" / "node_report.json").unlink()
    for root in (None, tmp_path / "elsewhere"):  # the report gone; no experiments directory at all
        if root is not None:
            root.mkdir()
        ctx = backend.get_verified_context(["root", "node_A", "node_A12"], experiments_root=root)
        a12 = next(c for c in ctx["claims"] if c["node_id"] == "node_A12")
        assert a12["exclusions"][0]["code"] == "self_judged_failure" and A12_HEADLINE in a12["exclusions"][0]["text"]
        assert a12["entry_id"] not in _usable(ctx)


def test_a_report_on_disk_that_says_failed_excludes_the_nodes_claims(replayed) -> None:
    backend, replay = replayed
    path = replay.experiments_root / replay.run_id / "node_A1" / "node_report.json"
    report = json.loads(path.read_text())
    report["status"] = "failed"  # ARI's spelling for a node that did not run through
    path.write_text(json.dumps(report))
    ctx = backend.get_verified_context(["root", "node_A", "node_A1"])
    a1 = next(c for c in ctx["claims"] if c["node_id"] == "node_A1")
    assert a1["exclusions"][0]["code"] == "self_judged_failure" and "status=failed" in a1["exclusions"][0]["text"]
    assert a1["entry_id"] not in _usable(ctx)


def test_a_result_summary_alone_judges_a_node(ckpt: Path) -> None:
    """No report anywhere: ARI's RESULT SUMMARY note is the node's own verdict."""
    backend = MemoryBackend(ckpt)
    refs = [{"path": "out.csv", "sha256": "a" * 64, "role": "data_output"}]
    summaries = {
        "n1": 'RESULT SUMMARY metrics=[GFlops_per_s=3.0] status=success succeeded=false headline="fast but wrong"',
        "n2": 'RESULT SUMMARY metrics=[] status=failed headline="the driver crashed"',
        "n3": 'RESULT SUMMARY metrics=[GFlops_per_s=2.0] status=success succeeded=true headline="fine"',
    }
    ids = {}
    for nid, summary in summaries.items():
        backend.add_memory(nid, summary, {"type": "result_summary"}, current_node=nid)
        ids[nid] = backend.add_typed_memory(nid, "paper_claim", f"{nid} runs", artifact_refs=refs, current_node=nid)[
            "id"
        ]
    try:
        ctx = backend.get_verified_context(list(summaries))
    finally:
        backend.close()
    claims = _by_id(ctx)
    assert 'succeeded=false: "fast but wrong"' in claims[ids["n1"]]["exclusions"][0]["text"]
    assert 'status=failed: "the driver crashed"' in claims[ids["n2"]]["exclusions"][0]["text"]
    assert "exclusions" not in claims[ids["n3"]]
    assert _usable(ctx) == {ids["n3"]}


def test_the_newest_verdict_counts_a_resumed_node_that_succeeded_is_not_failed(ckpt: Path) -> None:
    backend = MemoryBackend(ckpt)
    refs = [{"path": "out.csv", "sha256": "a" * 64, "role": "data_output"}]
    for verdict in ("status=failed succeeded=false", "status=success succeeded=true"):
        backend.add_memory("n1", f"RESULT SUMMARY metrics=[] {verdict}", {"type": "result_summary"}, current_node="n1")
    # no number in the text: the unchecked-number rule is not what this test is about
    claim = backend.add_experiment_result("n1", "x converges", artifact_refs=refs, current_node="n1")["id"]
    try:
        ctx = backend.get_verified_context(["n1"])
    finally:
        backend.close()
    assert "exclusions" not in _by_id(ctx)[claim] and _usable(ctx) == {claim}


@pytest.mark.parametrize(
    "report,why",
    [
        ({"status": "failed", "self_assessment": {"succeeded": False, "headline": "h"}}, "status=failed"),
        ({"status": "success", "self_assessment": {"succeeded": False, "headline": "h"}}, "succeeded=false"),
        ({"status": "timeout"}, "status=timeout"),
        ({"status": "success", "self_assessment": {"succeeded": True, "headline": "h"}}, None),
        ({"status": "OK"}, None),  # ARI's success spellings, any case
    ],
)
def test_one_function_says_whether_a_report_judged_its_node_failed(report: dict, why: str | None) -> None:
    from projections.evidence.usable import self_judged_failure  # what verified and lineage both ask

    said = self_judged_failure(report, [])
    assert (said is None) if why is None else (said is not None and why in said)


# ---------------------------------------------------------------------------- the tree says so too


def test_the_tree_draws_node_a12_failed_with_its_reason(replayed) -> None:
    backend, replay = replayed
    for root in (replay.experiments_root, None):  # from its report, and from the log alone
        data = lineage_data(backend, root)
        nodes = {n["node_id"]: n for n in data["nodes"]}
        a12 = nodes["node_A12"]
        assert a12["status"] == "failed" and A12_HEADLINE in a12["failure"]
        assert [c["usable"] for c in a12["claims"]] == [False]
        assert a12["claims"][0]["exclusions"][0]["code"] == "self_judged_failure"
        assert nodes["node_B1"]["status"] == "failed" and "status=failed" in nodes["node_B1"]["failure"]
        assert {n for n, v in nodes.items() if v["status"] == "success"} == set(replay.tree) - {"node_A12", "node_B1"}
        [line] = [ln for ln in render_tree(data).splitlines() if "node_A12" in ln]
        assert "node_A12 [improve, FAILED]" in line and A12_HEADLINE in line
