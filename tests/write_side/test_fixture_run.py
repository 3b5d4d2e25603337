"""The ARI run fixture is internally consistent: real hashes, one tree, the shapes other tests rely on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.ari.node_report import NodeReport, load_node_report
from ledger.ari.provenance import sha256_file
from support.env import FIXTURES

FIXTURE = FIXTURES / "ari_run"
RUN_JSON = json.loads((FIXTURE / "run.json").read_text(encoding="utf-8"))
RUN_DIR = FIXTURE / "experiments" / RUN_JSON["run_id"]


def _reports() -> dict[str, NodeReport]:
    return {p.parent.name: load_node_report(p) for p in sorted(RUN_DIR.glob("*/node_report.json"))}


REPORTS = _reports()


def _node_dir(node_id: str) -> Path:
    return RUN_DIR / node_id


def test_every_report_loads_and_sits_in_its_node_dir():
    assert len(REPORTS) >= 7
    for dir_name, report in REPORTS.items():
        assert report.node_id == dir_name


@pytest.mark.parametrize("node_id", sorted(REPORTS))
def test_every_recorded_hash_is_the_real_hash(node_id):
    report = REPORTS[node_id]
    here = _node_dir(node_id)
    for f in report.files_changed.added:
        assert sha256_file(here / f.path) == f.sha256, f.path
    for f in report.files_changed.modified:
        assert sha256_file(here / f.path) == f.sha256_after, f.path
        assert sha256_file(_node_dir(report.parent_id) / f.path) == f.sha256_before, f.path
    for a in report.artifacts:
        if a.sha256 is not None:
            assert sha256_file(here / a.filename) == a.sha256, a.filename
        if a.size is not None:
            assert (here / a.filename).stat().st_size == a.size, a.filename


@pytest.mark.parametrize("node_id", sorted(REPORTS))
def test_inherited_and_deleted_files_agree_with_the_parent(node_id):
    report = REPORTS[node_id]
    if report.parent_id is None:
        return
    here, parent = _node_dir(node_id), _node_dir(report.parent_id)
    for path in report.files_changed.inherited_unchanged:
        assert sha256_file(here / path) == sha256_file(parent / path), path
    for path in report.files_changed.deleted:
        assert not (here / path).exists() and (parent / path).is_file(), path


def test_some_artifacts_must_be_hashed_at_index_time():
    unhashed = [(n, a.filename) for n, r in REPORTS.items() for a in r.artifacts if a.sha256 is None]
    present = [(n, f) for n, f in unhashed if (_node_dir(n) / f).is_file()]
    absent = [(n, f) for n, f in unhashed if not (_node_dir(n) / f).exists()]
    assert present, "an artifact without sha256 whose file exists"
    assert absent, "an artifact without sha256 whose file is gone (hash stays None)"
    hashed = sum(a.sha256 is not None for r in REPORTS.values() for a in r.artifacts)
    assert hashed > len(unhashed)


def test_run_json_tree_matches_the_reports():
    nodes = RUN_JSON["nodes"]
    assert [p.name for p in (FIXTURE / "experiments").iterdir()] == [RUN_JSON["run_id"]]
    assert sorted(n["node_id"] for n in nodes) == sorted(REPORTS)
    for n in nodes:
        report = REPORTS[n["node_id"]]
        assert (n["parent_id"], n["ancestor_ids"], n["depth"], n["label"]) == (
            report.parent_id,
            report.ancestor_ids,
            report.depth,
            report.label,
        )
        assert n["eval_summary"].strip()
        assert n["result_summary"].startswith("RESULT SUMMARY metrics=[")


def test_run_json_is_in_bfs_order():
    seen: set[str] = set()
    depths = []
    for n in RUN_JSON["nodes"]:
        assert n["parent_id"] is None or n["parent_id"] in seen
        seen.add(n["node_id"])
        depths.append(n["depth"])
    assert depths == sorted(depths)


def test_ancestor_chains_are_consistent():
    for report in REPORTS.values():
        if report.parent_id is None:
            assert report.ancestor_ids == [] and report.depth == 0
        else:
            parent = REPORTS[report.parent_id]
            assert report.ancestor_ids == parent.ancestor_ids + [parent.node_id]


def test_tree_has_the_shapes_the_memory_tests_need():
    labels = {r.label for r in REPORTS.values()}
    assert {"draft", "improve", "ablation", "validation"} <= labels
    assert max(r.depth for r in REPORTS.values()) == 3
    failed = [r for r in REPORTS.values() if r.status == "failed"]
    assert len(failed) == 1
    (bad,) = failed
    assert bad.self_assessment.succeeded is False and bad.metrics == {}
    build_log = next(a.filename for a in bad.artifacts if a.role == "log")
    assert "error:" in (_node_dir(bad.node_id) / build_log).read_text(encoding="utf-8")


def test_sibling_ids_share_prefixes():
    pairs = [
        (a.node_id, b.node_id)
        for a in REPORTS.values()
        for b in REPORTS.values()
        if a.node_id != b.node_id and a.parent_id == b.parent_id and b.node_id.startswith(a.node_id)
    ]
    assert ("node_A1", "node_A12") in pairs


def _ari_best_node(reports: dict[str, NodeReport]) -> str:
    """ARI's choice: highest _scientific_score if any node has one, else the largest numeric metric."""
    scored = {n: r.metrics["_scientific_score"] for n, r in reports.items() if "_scientific_score" in r.metrics}
    if scored:
        return max(scored, key=scored.__getitem__)
    with_metrics = {n: max(r.metrics.values()) for n, r in reports.items() if r.metrics}
    return max(with_metrics, key=with_metrics.__getitem__)


def test_best_node_is_the_verified_one_not_the_fastest():
    primary = RUN_JSON["experiment"]["primary_metric"]
    assert _ari_best_node(REPORTS) == "node_A2"
    fastest = max((r for r in REPORTS.values() if primary in r.metrics), key=lambda r: r.metrics[primary])
    assert fastest.node_id == "node_A12" and fastest.self_assessment.succeeded is False


def test_fixture_stays_small():
    total = sum(p.stat().st_size for p in FIXTURE.rglob("*") if p.is_file())
    assert total < 300_000
