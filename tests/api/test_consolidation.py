"""Consolidation at node end, from the node reports ARI's builder writes (issue 9, item 4).

The reports below are written from ARI's schema (``ari-core/ari/schemas/node_report.schema.json``)
and builder (``ari/orchestrator/node_report/builder.py``): ``_axis_scores`` is a dict inside
``metrics``, ``inherited_unchanged`` items are ``{path, sha256}``, ``sha256_before`` may be
``""``, artifacts carry the ``sha256`` and ``size`` the builder measured, and a build failure
leaves a fallback stub with only the required fields. The kinds are ARI's
(``ari_skill_memory.consolidation.consolidate_from_node_report``).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from ledger import InvalidInput
from ledger.ari.consolidation import headline_metric, plan
from ledger.ari.node_report import MAX_REPORT_BYTES, report_findings
from projections.api import MemoryBackend


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A node work dir as ARI leaves it: sources, a log, a CSV."""
    work = tmp_path / "experiments" / "run_1" / "node_b4"
    (work / "src").mkdir(parents=True)
    (work / "src" / "spmm.c").write_bytes(b"int main(void) { return 0; }\n")
    (work / "Makefile").write_bytes(b"all:\n\tcc src/spmm.c\n")
    (work / "results.csv").write_bytes(b"threads,GFlops_per_s\n48,6.04\n")
    (work / "slurm-42.out").write_bytes(b"done\n")
    return work


def builder_report(work: Path, **changes) -> dict:
    """What ``build_node_report`` writes for a finished node."""
    report = {
        "schema_version": 1,
        "node_id": "node_b4",
        "parent_id": "node_a1",
        "ancestor_ids": ["root", "node_a1"],
        "label": "improve",
        "raw_label": "improve",
        "depth": 2,
        "status": "success",
        "started_at": "2026-11-28T10:00:00Z",
        "completed_at": "2026-11-28T10:20:00Z",
        "original_direction": None,
        "files_changed": {
            "added": [{"path": "src/spmm.c", "sha256": sha((work / "src" / "spmm.c").read_bytes())}],
            "modified": [
                {"path": "Makefile", "sha256_before": "", "sha256_after": sha((work / "Makefile").read_bytes())}
            ],
            "deleted": ["old.c"],
            "inherited_unchanged": [{"path": "README.md", "sha256": "1" * 64}],
        },
        "what_was_done": "banded SpMM with 48 threads",
        "delta_vs_parent": "threads 16 -> 48",
        "metrics": {
            "rows": 400000,
            "GFlops_per_s_T48": 6.04,
            "speedup_48T": 23.5,
            "_scientific_score": 0.71,
            "_axis_scores": {"novelty": 0.5, "rigor": 0.35},
        },
        "self_assessment": {
            "succeeded": True,
            "headline": "banded SpMM hit 6.04 GFlops/s at 48 threads (scientific_score=0.71)",
            "concerns": ["rigor: one run only"],
        },
        "next_steps_hints": ["novelty: try wider K"],
        "build_command": "make",
        "run_command": "./spmm 48",
        "artifacts": [
            {
                "filename": "results.csv",
                "role": "data_output",
                "size": 29,
                "sha256": sha((work / "results.csv").read_bytes()),
            },
            {"filename": "slurm-42.out", "role": "log", "size": 5, "sha256": sha((work / "slurm-42.out").read_bytes())},
            {"filename": "result", "role": "unknown"},
        ],
        "evaluator_reason": "banded SpMM hit 6.04 GFlops/s",
        "trace_log_summary": "ReAct loop 12 steps.",
        "migration_source": "fresh",
        "executor": "slurm",
        "hostname": "cn042",
        "slurm_job_id": "42",
        "slurm_partition": "cpu",
        "slurm_nodelist": "cn042",
        "cpu_info": {"model": "Xeon", "threads": 48},
        "mem_total_kb": 263000000,
        "compilers": {"gcc": "12.2.0"},
    }
    report.update(changes)
    return report


def stub_report() -> dict:
    """``write_node_report``'s fallback when building the report failed."""
    return {
        "schema_version": 1,
        "node_id": "node_b4",
        "status": "error",
        "error": "KeyError: 'metrics'",
        "migration_source": "fresh",
        "files_changed": {"added": [], "modified": [], "deleted": [], "inherited_unchanged": []},
        "metrics": {},
        "artifacts": [],
        "depth": 2,
        "label": "other",
    }


def kinds(report: dict, work: Path) -> list[str]:
    return [s.kind for s in plan(report, work).specs]


def test_aris_builder_output_is_schema_valid_and_consolidates(work: Path) -> None:
    report = builder_report(work)
    assert report_findings(report) == []
    result = plan(report, work, "run_1")
    assert [s.kind for s in result.specs] == ["experiment_result", "reflection"]
    experiment, reflection = result.specs
    md = experiment.metadata
    assert md["type"] == md["mem_kind"] == "experiment_result"
    assert md["metric_ptr"] == {"name": "GFlops_per_s_T48", "value": 6.04}  # ARI's throughput hint beats the row count
    assert md["node_report_ref"] == {"run_id": "run_1", "node_id": "node_b4"}
    refs = {r["path"]: r for r in md["artifact_refs"]}
    assert set(refs) == {
        "src/spmm.c",
        "Makefile",
        "results.csv",
        "slurm-42.out",
        "result",
    }  # deleted and inherited: not evidence
    assert refs["Makefile"]["sha256"] == sha((work / "Makefile").read_bytes()) and refs["result"]["sha256"] is None
    assert (
        experiment.text == "banded SpMM hit 6.04 GFlops/s at 48 threads (scientific_score=0.71)"
        and experiment.findings == []
    )
    assert reflection.metadata["confidence"] == 0.4 and reflection.text == "novelty: try wider K"
    assert result.lineage == {
        "parent_id": "node_a1",
        "ancestor_ids": ["root", "node_a1"],
        "label": "improve",
        "depth": 2,
    }


def test_the_fallback_stub_is_a_failure_case(work: Path) -> None:
    assert report_findings(stub_report()) == []
    result = plan(stub_report(), work)
    assert [s.kind for s in result.specs] == ["failure_case"] and result.specs[0].text == "node node_b4 report"
    assert result.lineage is None  # the stub does not say where the node sits


@pytest.mark.parametrize(
    ("status", "metrics", "expected"),
    [
        ("success", {"g": 1.0}, ["experiment_result"]),
        ("Succeeded", {"g": 1.0}, ["experiment_result"]),
        ("OK", {"g": 1.0}, ["experiment_result"]),
        ("success", {}, []),  # a success without metrics states nothing
        ("success", {"_axis_scores": {"a": 0.5}}, ["experiment_result"]),  # ARI counts any metrics
        ("failed", {"g": 1.0}, ["failure_case"]),
        ("timeout", {}, ["failure_case"]),
        ("", {"g": 1.0}, []),
    ],
)
def test_kinds_are_decided_as_ari_decides_them(work: Path, status: str, metrics: dict, expected: list[str]) -> None:
    assert kinds(builder_report(work, status=status, metrics=metrics, next_steps_hints=[]), work) == expected


def test_a_success_that_judged_itself_failed_is_a_result_with_a_finding(work: Path) -> None:
    report = builder_report(
        work, self_assessment={"succeeded": False, "headline": "ran, but wrong answers", "concerns": []}
    )
    [experiment, _] = plan(report, work).specs
    assert experiment.kind == "experiment_result"
    assert [f.field for f in experiment.findings] == ["node_report.self_assessment.succeeded"]


def test_a_report_that_fails_the_schema_is_consolidated_and_flagged(work: Path) -> None:
    report = builder_report(work, label="explore", depth="2", metrics={"g": "fast", "GFlops": 3.0})
    result = plan(report, work)
    assert [s.kind for s in result.specs] == ["experiment_result", "reflection"]
    assert {f.field for f in result.findings} == {"node_report.label", "node_report.depth", "node_report.metrics.g"}
    assert result.specs[0].metadata["metric_ptr"] == {"name": "GFlops", "value": 3.0}
    assert result.lineage["label"] == "other"


def test_headline_metric_prefers_the_experiments_primary_metric() -> None:
    metrics = {"rows": 4, "GFlops_per_s_T48": 6.04, "time_s": 1.5, "_scientific_score": 0.9}
    assert headline_metric(metrics, "time_s") == {"name": "time_s", "value": 1.5}
    assert headline_metric(metrics) == {"name": "GFlops_per_s_T48", "value": 6.04}
    assert headline_metric({"_scientific_score": 0.9, "count": 3}) == {"name": "count", "value": 3.0}
    assert headline_metric({"_axis_scores": {"a": 1}}) is None


def test_through_the_backend_ari_shapes_idempotence_and_lineage(work: Path, tmp_path: Path) -> None:
    backend = MemoryBackend(tmp_path / "checkpoint")
    try:
        out = backend.consolidate_node_memory(
            "node_b4", builder_report(work), str(work), "run_1", current_node="node_b4"
        )
        assert [(w["kind"], w["ok"]) for w in out["written"]] == [("experiment_result", True), ("reflection", True)]
        again = backend.consolidate_node_memory(
            "node_b4", builder_report(work), str(work), "run_1", current_node="node_b4"
        )
        assert again["written"] == [] and [a["id"] for a in again["already"]] == [w["id"] for w in out["written"]]
        node = backend.session.projector.catalog.nodes["node_b4"]  # ARI never announces a node: the report told us
        assert (node.parent_id, node.ancestor_ids, node.depth) == ("node_a1", ["root", "node_a1"], 2)
        refused = backend.consolidate_node_memory("node_b4", stub_report(), str(work), current_node="root")
        assert refused["ok"] is False and refused["written"] == [{"kind": "failure_case", "ok": False, "id": None}]
        with pytest.raises(InvalidInput, match=r"node_report.node_id"):
            backend.consolidate_node_memory("node_zz", builder_report(work), str(work), current_node="node_zz")
    finally:
        backend.close()


def test_a_report_path_is_read_only_if_it_is_a_regular_file_inside_the_work_dir(work: Path, tmp_path: Path) -> None:
    backend = MemoryBackend(tmp_path / "checkpoint")
    os.mkfifo(work / "fifo.json")
    (work / "huge.json").write_bytes(b" " * (MAX_REPORT_BYTES + 1))
    outside = tmp_path / "node_report.json"
    outside.write_text("{}")
    cases = [
        (work / "fifo.json", "not a regular file"),
        (work / "huge.json", "the limit is"),
        (outside, "outside the node's work dir"),
        (Path("/dev/zero"), "outside the node's work dir"),
    ]
    try:
        for path, reason in cases:
            done: list[BaseException] = []
            call = threading.Thread(
                target=lambda p=path, d=done: _catch(
                    d, lambda: backend.consolidate_node_memory("node_b4", p, work, current_node="node_b4")
                )
            )
            call.start()
            call.join(timeout=10)
            assert not call.is_alive(), f"{path} hung the call"
            assert isinstance(done[0], InvalidInput) and reason in str(done[0]), done
        assert backend.session.ledger.last_seq == 0
    finally:
        backend.close()


def _catch(into: list[BaseException], fn) -> None:
    try:
        fn()
    except BaseException as exc:
        into.append(exc)
