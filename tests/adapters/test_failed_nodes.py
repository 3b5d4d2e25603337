"""What people see of a node that judged its own result unsuccessful (``tree``, ``report``,
``verified``), and selectors naming nothing: one ``error:`` line, exit 2 (issue 25, items 3–5)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from support.env import ari_ledger

A12_HEADLINE = (
    "Temporal blocking (2 fused sweeps per k-tile) runs at 16.94 GFlops/s but FAILS verification (max_abs_error 5.7e-2)"
)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("failed-nodes") / "run"
    run = ari_ledger("demo", out, "--json")
    assert run.returncode == 0, run.stderr
    return out


def _line(text: str, node: str) -> str:
    [line] = [ln for ln in text.splitlines() if re.search(rf"\b{node} \[", ln)]
    return line


def test_tree_text_says_failed_and_why(demo: Path) -> None:
    tree = ari_ledger("tree", demo / "checkpoint")
    assert tree.returncode == 0, tree.stderr
    a12 = _line(tree.stdout, "node_A12")
    assert "node_A12 [improve, FAILED]" in a12 and "succeeded=false" in a12 and A12_HEADLINE in a12
    b1 = _line(tree.stdout, "node_B1")
    assert "node_B1 [improve, FAILED]" in b1 and "status=failed" in b1
    assert "node_A2 [improve, success]" in _line(tree.stdout, "node_A2")
    nodes = {n["node_id"]: n for n in json.loads(ari_ledger("tree", demo / "checkpoint", "--json").stdout)["nodes"]}
    assert nodes["node_A12"]["status"] == "failed" and A12_HEADLINE in nodes["node_A12"]["failure"]
    assert nodes["node_A2"]["failure"] is None


def _node_classes(html: str) -> dict[str, list[str]]:
    return {m[2]: m[1].split() for m in re.finditer(r'<g class="(node [^"]*)" data-node-id="([^"]+)"', html)}


def test_the_report_draws_node_a12_failed_not_green(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    run = ari_ledger("report", demo / "checkpoint", "-o", out)
    assert run.returncode == 0, run.stderr
    for html in (out.read_text(), (demo / "report.html").read_text()):  # `report`, and the demo's own
        classes = _node_classes(html)
        assert len(classes) == 9
        assert "status-failed" in classes["node_A12"] and "status-success" not in classes["node_A12"]
        assert "status-failed" in classes["node_B1"] and "status-success" in classes["node_A2"]
        details = json.loads(
            re.search(r'<script type="application/json" id="node-details">(.*?)</script>', html, re.S)[1]
        )
        [a12] = [d for d in details if d["id"] == "node_A12"]
        assert a12["status"] == "failed" and any(A12_HEADLINE in w for c in a12["claims"] for w in c["why"])
        assert [c["usable"] for c in a12["claims"]] == [False]


def test_verified_text_lists_the_excluded_claims_with_their_finding(demo: Path) -> None:
    run = ari_ledger("verified", demo / "checkpoint", "--node", "node_A12")
    assert run.returncode == 0, run.stderr
    assert "self_judged_failure" in run.stdout and "judged its own result unsuccessful" in run.stdout
    assert "usable for claims: 2;" in run.stdout
    block = ari_ledger("verified", demo / "checkpoint", "--node", "node_A12", "--block").stdout
    assert "node_A12" not in block and "] node_A [GFlops_per_s=9.87]" in block


def _one_error_line(run, starts: str) -> str:
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), lines
    return lines[0]


def test_audit_of_a_run_id_no_run_has_is_exit_2_naming_it_and_where(demo: Path) -> None:
    line = _one_error_line(ari_ledger("audit", demo / "checkpoint", "--run-id", "typo"), "error: --run-id: ")
    assert "'typo'" in line and str(demo / "experiments") in line
    assert ari_ledger("audit", demo / "checkpoint", "--run-id", "run_20261128_stencil").returncode == 1  # the real one


def test_audit_of_a_run_directory_no_entry_names_is_exit_2(demo: Path, tmp_path: Path) -> None:
    experiments = tmp_path / "experiments"
    shutil.copytree(demo / "experiments", experiments)
    (experiments / "run_other").mkdir()
    args = ("audit", demo / "checkpoint", "--experiments", experiments, "--run-id", "run_other")
    line = _one_error_line(ari_ledger(*args), "error: --run-id: ")
    assert "'run_other'" in line and "no entry" in line


@pytest.mark.parametrize(
    "args,starts",
    [
        (["verified", "{ckpt}", "--as", "ghost"], "error: --as: unknown node 'ghost'"),
        (["verified", "{ckpt}", "--min-evidence", "nonsense"], "error: --min-evidence: unknown evidence level"),
        (["search", "{ckpt}", "q", "--as", "root", "--kind", "nonsense"], "error: --kind: unknown kind 'nonsense'"),
        (["search", "{ckpt}", "q", "--as", "root", "--ancestors", "root,ghost"], "error: --ancestors: unknown node"),
    ],
    ids=["verified-node", "min-evidence", "search-kind", "search-ancestors"],
)
def test_a_selector_that_names_nothing_is_one_error_line(demo: Path, args: list[str], starts: str) -> None:
    _one_error_line(ari_ledger(*[a.format(ckpt=demo / "checkpoint") for a in args]), starts)


@pytest.mark.parametrize("kind", ["result_summary", "paper_claim"])
def test_a_kind_this_checkpoint_has_or_ari_defines_is_accepted(demo: Path, kind: str) -> None:
    run = ari_ledger("search", demo / "checkpoint", "q", "--node", "root", "--kind", kind, "--json")
    assert run.returncode == 0, run.stderr
    assert all(r["kind"] == kind or r["metadata"].get("type") == kind for r in json.loads(run.stdout)["results"])
