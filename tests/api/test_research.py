"""Verifiable research memory on the fixture run (R17–R23): typed entries, consolidation,
exact scope, verified context, re-runs, audit, working context."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import InvalidInput
from ledger.checkpoint_format import VERIFIED_CONTEXT_NAME
from ledger.layout import store_dir
from ledger.log import LOG_NAME
from ledger.vocabulary import REPRO_STATUSES
from projections.adapters.demo import copy_run, replay_run
from projections.api import MemoryBackend
from projections.evidence.grounded_block import render_grounded_block
from support.env import FIXTURES

RUN = FIXTURES / "ari_run"


@pytest.fixture
def replayed(tmp_path: Path):
    experiments = copy_run(RUN, tmp_path)
    backend = MemoryBackend(tmp_path / "checkpoint")
    replay = replay_run(backend, RUN, experiments)
    yield backend, replay
    backend.close()


def leaves(tree: dict[str, list[str]]) -> list[str]:
    parents = {a[-1] for a in tree.values() if a}
    return [n for n in tree if n not in parents]


def test_consolidation_writes_typed_entries_with_provenance(replayed) -> None:
    backend, replay = replayed
    kinds = {nid: [e["kind"] for e in backend.get_node_memory(nid)["entries"] if e["kind"]] for nid in replay.tree}
    assert kinds["node_A2"][0] == "experiment_result"
    assert kinds["node_B1"][0] == "failure_case"  # build error
    # ARI decides by status and metrics: node_A12 ran (status success) although its own
    # verification failed — an experiment_result, flagged with what this library knows
    a12 = backend.get_node_memory("node_A12")["entries"]
    assert kinds["node_A12"][0] == "experiment_result" and "reflection" in kinds["node_A12"]
    assert any(f["field"] == "node_report.self_assessment.succeeded" for f in a12[1]["findings"])
    [result] = backend.search_research_memory("stencil GFlops", ["node_A2"], kinds=["experiment_result"])["results"]
    assert result["node_report_ref"] == {"run_id": replay.run_id, "node_id": "node_A2"}
    assert result["metric_ptr"] == {"name": "GFlops_per_s", "value": 15.82}
    assert result["metadata"]["type"] == result["metadata"]["mem_kind"] == "experiment_result"
    assert any(r["path"] == "results.csv" and r["sha256"] for r in result["artifact_refs"])
    assert "metrics" not in result and "files_changed" not in result  # an index, not a copy
    reflections = backend.search_research_memory("next step", ["node_A12"], kinds=["reflection"])["results"]
    assert reflections[0]["confidence"] == 0.4 and reflections[0]["artifact_refs"] == []


def test_reconsolidating_the_same_report_writes_nothing(replayed) -> None:
    backend, replay = replayed
    before = (store_dir(backend.checkpoint_dir) / LOG_NAME).read_bytes()
    work = replay.experiments_root / replay.run_id / "node_A2"
    again = backend.consolidate_node_memory("node_A2", work / "node_report.json", work, current_node="node_A2")
    assert again["written"] == [] and [a["id"] for a in again["already"]] == replay.consolidated["node_A2"]
    as_dict = json.loads((work / "node_report.json").read_text())
    assert backend.consolidate_node_memory("node_A2", as_dict, work, current_node="node_A2")["written"] == []
    assert (store_dir(backend.checkpoint_dir) / LOG_NAME).read_bytes() == before


def test_search_from_each_leaf_never_leaks_a_sibling(replayed) -> None:
    backend, replay = replayed
    for leaf in leaves(replay.tree):
        scope = replay.tree[leaf] + [leaf]
        everything = {e["entry_id"] for es in backend.bulk_get_node_memory(scope)["by_node"].values() for e in es}
        for search in (backend.search_memory, backend.search_research_memory):
            hits = search(replay.queries[leaf], scope, limit=1000)["results"]
            assert {h["node_id"] for h in hits} <= set(scope)
            assert {h["entry_id"] for h in hits} == everything


def test_typed_search_fills_limit_despite_higher_ranked_other_kinds(ckpt: Path) -> None:
    backend = MemoryBackend(ckpt)
    for i in range(40):  # many free-text notes that match the query better
        backend.add_memory("root", f"roofline bandwidth GFlops measurement note {i}", current_node="root")
    ids = [
        backend.add_procedure_memory("root", f"procedure {i}: rebuild with -O3", current_node="root")["id"]
        for i in range(3)
    ]
    hits = backend.search_research_memory("roofline bandwidth GFlops", ["root"], kinds=["procedure"], limit=3)[
        "results"
    ]
    assert sorted(h["entry_id"] for h in hits) == sorted(ids)
    assert backend.search_research_memory("x", ["root"], require_artifacts=True)["results"] == []
    backend.close()


def test_verified_context_lists_exactly_the_grounded_claims_of_the_best_lineage(replayed) -> None:
    backend, _replay = replayed
    ctx = json.loads((backend.checkpoint_dir / VERIFIED_CONTEXT_NAME).read_text())
    assert ctx["best_node"] == "node_A2"  # by _scientific_score, not node_A12's higher raw GFlops
    assert ctx["lineage"] == ["root", "node_A", "node_A2"]
    lineage_results = {
        e["entry_id"]
        for nid in ctx["lineage"]
        for e in backend.get_node_memory(nid)["entries"]
        if e["kind"] == "experiment_result"
    }
    assert {c["entry_id"] for c in ctx["claims"]} == lineage_results
    assert all(c["grounded"] for c in ctx["claims"])
    assert ctx["claims"][0]["node_id"] == "node_A2" and ctx["claims"][0]["repro_status"] == "rerun_passed"
    assert {c["entry_id"] for c in ctx["usable_for_claims"]} == lineage_results
    block = render_grounded_block(ctx)
    assert "[rerun_passed; evidence rerun_passed] node_A2" in block and "results.csv" in block
    assert {c["node_id"]: c["evidence"] for c in ctx["claims"]} == {
        "node_A2": "rerun_passed",
        "root": "values_checked",  # its files re-hash equal and its numbers are its report's
        "node_A": "values_checked",
    }
    # "2.41 GFlops/s (7% of the ~35 ...)", "9.87 GFlops/s, 4.1x the baseline", "6.6x baseline"
    assert {c["node_id"]: c["values"]["verdict"] for c in ctx["claims"]} == dict.fromkeys(ctx["lineage"], "checked")


def test_rerun_failed_removes_the_claim_but_not_the_entry(replayed) -> None:
    backend, _replay = replayed
    lineage = ["root", "node_A", "node_A2"]
    target = backend.get_verified_context(lineage)["claims"][1]  # node_A or root, unverified
    raw_before = gzip.decompress((store_dir(backend.checkpoint_dir) / LOG_NAME).read_bytes())
    original_line = next(line for line in raw_before.splitlines() if target["entry_id"].encode() in line)
    out = backend.add_reproducibility_event(
        "node_A21", target["entry_id"], "rerun_failed", text="could not reproduce", current_node="node_A21"
    )
    assert out["ok"]
    ctx = backend.get_verified_context(lineage)
    assert target["entry_id"] not in {c["entry_id"] for c in ctx["usable_for_claims"]}
    assert ctx["claims"][-1]["entry_id"] == target["entry_id"] and ctx["claims"][-1]["repro_status"] == "rerun_failed"
    raw_after = gzip.decompress((store_dir(backend.checkpoint_dir) / LOG_NAME).read_bytes())
    assert raw_after.startswith(raw_before) and original_line in raw_after.splitlines()


def test_repro_event_outside_the_lineage_is_stored_and_flagged(replayed) -> None:
    backend, replay = replayed
    sibling_result = replay.consolidated["node_A1"][0]
    out = backend.add_reproducibility_event("node_A2", sibling_result, "rerun_passed", current_node="node_A2")
    assert out["ok"] and "outside the lineage" in out["findings"][0]["reason"]
    own = replay.consolidated["node_A2"][0]
    with pytest.raises(InvalidInput, match="status"):
        backend.add_reproducibility_event("node_A2", own, "kinda_passed", current_node="node_A2")
    refused = backend.add_reproducibility_event("node_A2", own, "rerun_passed", current_node="node_A21")
    assert refused == {"ok": False, "error": "node_id does not match current node (CoW violation)"}


@pytest.mark.parametrize(
    "call,field",
    [
        (
            lambda b: b.add_experiment_result(
                "root", "x", artifact_refs=[{"path": "/etc/passwd", "sha256": None, "role": "log"}]
            ),
            "metadata.artifact_refs[0].path",
        ),
        (
            lambda b: b.add_experiment_result(
                "root", "x", artifact_refs=[{"path": "a.csv", "sha256": "zz", "role": "log"}]
            ),
            "metadata.artifact_refs[0].sha256",
        ),
        (
            lambda b: b.add_failure_case("root", "x", node_report_ref={"run_id": "r"}),
            "metadata.node_report_ref.node_id",
        ),
        (lambda b: b.add_reflection("root", "x", confidence=2.0), "metadata.confidence"),
    ],
)
def test_typed_writes_ari_accepts_are_stored_and_flagged(ckpt: Path, call, field: str) -> None:
    backend = MemoryBackend(ckpt)
    os.environ["ARI_CURRENT_NODE_ID"] = "root"
    try:
        out = call(backend)
        assert out["ok"] and field in [f["field"] for f in out["findings"]]
        [entry] = backend.get_node_memory("root")["entries"]
        assert entry["findings"] == out["findings"]
        assert backend.search_research_memory("q", ["root"], kinds=["rumour"]) == {
            "results": []
        }  # ARI filters, never refuses
    finally:
        del os.environ["ARI_CURRENT_NODE_ID"]
        backend.close()


def test_audit_finds_exactly_one_mismatch_one_missing_one_unhashed(replayed) -> None:
    backend, replay = replayed
    base = backend.audit_memory(replay.experiments_root, replay.run_id)
    # the fixture's node_A lists a binary it never kept: missing, as ARI's audit says
    assert base["summary"]["mismatch"] == 0 and base["summary"]["missing"] == 1 and base["chain"]["ok"]
    assert [r["path"] for r in base["results"] if r["status"] == "missing"] == ["stencil_bench"]
    work = replay.experiments_root / replay.run_id
    (work / "node_A2" / "results.csv").write_text("GFlops_per_s\n99.0\n")  # edited after the fact
    (work / "node_A" / "run.log").unlink()  # lost
    (work / "node_A2" / "extra.csv").write_text("late,artifact\n")
    backend.add_experiment_result(
        "node_A2",
        "an extra table",
        artifact_refs=[{"path": "extra.csv", "sha256": None, "role": "data_output"}],
        node_report_ref={"run_id": replay.run_id, "node_id": "node_A2"},
        current_node="node_A2",
    )
    audit = backend.audit_memory(replay.experiments_root, replay.run_id)
    assert audit["summary"]["mismatch"] == 1 and audit["summary"]["missing"] == 2
    assert audit["summary"]["unhashed"] == base["summary"]["unhashed"] + 1
    assert not audit["ok"]
    odd = {(r["status"], r["node_id"], r["path"]) for r in audit["results"] if r["status"] != "verified"}
    assert odd == {
        ("mismatch", "node_A2", "results.csv"),
        ("missing", "node_A", "run.log"),
        ("missing", "node_A", "stencil_bench"),
        ("unhashed", "node_A2", "extra.csv"),
    }
    with pytest.raises(InvalidInput, match="run_id"):
        backend.audit_memory(replay.experiments_root, "/etc")  # a run id is a directory name, never a path


def test_path_escapes_are_stored_as_ari_would_and_nothing_outside_is_read(tmp_path: Path) -> None:
    experiments = copy_run(RUN, tmp_path)
    work = experiments / "run_20261128_stencil" / "node_A"
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the work dir")
    (work / "escape").symlink_to(secret)
    os.mkfifo(work / "pipe")
    report = json.loads((work / "node_report.json").read_text())
    report["artifacts"] += [
        {"filename": "/etc/passwd", "role": "log"},
        {"filename": "../../../../etc/passwd", "role": "log"},
        {"filename": "escape", "role": "data_output"},
        {"filename": "pipe", "role": "data_output"},
    ]
    backend = MemoryBackend(tmp_path / "checkpoint")
    out = backend.consolidate_node_memory("node_A", report, work, current_node="node_A")
    flagged = {f["field"]: f["reason"] for f in out["findings"]}
    assert "kept by its name" in flagged["artifacts[4].path"]  # ARI keeps an outside absolute path by name
    assert "never read" in flagged["artifacts[5].path"] and "never read" in flagged["artifacts[6].path"]
    assert "not a regular file" in flagged["artifacts[7].path"]
    [entry] = backend.search_research_memory("openmp", ["node_A"], kinds=["experiment_result"])["results"]
    refs = {r["path"]: r["sha256"] for r in entry["artifact_refs"]}
    assert (
        refs["passwd"] is None
        and refs["../../../../etc/passwd"] is None
        and refs["escape"] is None
        and refs["pipe"] is None
    )
    secret_hash = hashlib.sha256(secret.read_bytes()).hexdigest()
    assert secret_hash not in refs.values()
    backend.close()


def test_gate_off_disables_consolidation_and_verified_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_MEMORY_CONSOLIDATE", "off")
    experiments = copy_run(RUN, tmp_path)
    backend = MemoryBackend(tmp_path / "checkpoint")
    replay = replay_run(backend, RUN, experiments)
    assert all(ids == [] for ids in replay.consolidated.values())
    assert replay.verified_path is None and not (backend.checkpoint_dir / VERIFIED_CONTEXT_NAME).exists()
    assert render_grounded_block(backend.get_verified_context(["root"])) == ""
    backend.close()


def test_working_context_is_deterministic_and_complete(replayed) -> None:
    backend, replay = replayed
    ancestors = replay.tree["node_A21"]
    first = backend.build_working_context("node_A21", ancestors, replay.queries["node_A21"])
    assert first == backend.build_working_context("node_A21", ancestors, replay.queries["node_A21"])
    assert [s["node_id"] for s in first["ancestor_summaries"]] == ancestors  # root → parent, whole
    assert first["core"]["primary_metric"] == "GFlops_per_s"
    texts = [s["text"] for s in first["ancestor_summaries"] + first["supplement"]]
    assert len(texts) == len(set(texts)) and 0 < len(first["supplement"]) <= 3
    assert all(s["node_id"] in ancestors for s in first["supplement"])
    assert first["messages"][0]["role"] == "system" and "GFlops_per_s" in first["messages"][0]["content"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(REPRO_STATUSES)), min_size=1, max_size=12))
def test_repro_status_is_the_last_event_by_seq(events) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        backend = MemoryBackend(Path(tmp))
        targets = [backend.add_experiment_result("root", f"result {i}", current_node="root")["id"] for i in range(3)]
        last: dict[str, str] = {}
        for target, status in events:
            backend.add_reproducibility_event("root", targets[target], status, current_node="root")
            last[targets[target]] = status
        claims = backend.get_verified_context(["root"])["claims"]
        assert {c["entry_id"]: c["repro_status"] for c in claims} == {t: last.get(t) for t in targets}
        backend.close()
