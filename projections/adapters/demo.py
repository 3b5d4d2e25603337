"""Replay a recorded ARI run into a checkpoint the way ARI's loop hooks would.

Per node, in tree order, with the node as ARI's current node: the working context it
starts with, its ``RESULT SUMMARY`` (``metadata.type == "result_summary"``, as ARI's loop
writes it) and, at node end, ``consolidate_node_memory`` with the report dict, work dir and
run id ARI passes. ARI never announces a node: the tree is learned from the reports. Then a
validation child re-runs its parent's result, the verified context of the best lineage is
written and the artifacts are audited. Used by ``ari-ledger demo`` (the README's first
command) and by the tests.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from ledger import layout
from ledger.ari.node_report import NodeReport, load_node_report
from ledger.ari.provenance import sha256_file
from ledger.errors import InvalidInput
from projections.api import AuditResult, MemoryBackend

# shipped as package data (pyproject.toml maps fixtures/ to this package), so it is a real
# directory in a checkout, an editable install and a wheel alike
FIXTURE_RUN = Path(str(files("projections.adapters.fixtures") / "ari_run"))


@dataclass
class Replay:
    """What the replay produced, for printing and for tests."""

    checkpoint: Path
    experiments_root: Path
    run_id: str
    tree: dict[str, list[str]]  # node → ancestors (root→parent)
    queries: dict[str, str]  # node → its eval_summary
    consolidated: dict[str, list[str]] = field(default_factory=dict)
    reruns: list[dict[str, Any]] = field(default_factory=list)
    verified_path: Path | None = None
    audit: AuditResult | None = None


@contextmanager
def demo_output(out: Path, *, fresh: bool = False) -> Iterator[Path]:
    """The demo's output directory, all or nothing: refused before anything is written when it
    cannot hold a demo (a file, a path that is not UTF-8: the checkpoint records paths as UTF-8
    text), created when missing, and when the block fails, everything it created is removed
    again (the directories this created, or the entries new in one that existed), so the next
    run does not find half a demo. ``fresh``: ``out`` is a new empty directory made for the demo
    (a temp dir), removed as well."""
    if out.exists() and not out.is_dir():
        raise InvalidInput("dir", f"{layout.shown(out)} is a file, not a directory; pass a new directory")
    problem = layout.not_utf8(out, "the checkpoint records its paths")
    if problem is not None:
        raise InvalidInput("dir", problem)
    first_new = None if out.exists() else next(p for p in [out, *out.parents] if p.parent.exists())
    before = None if fresh or first_new is not None else set(os.listdir(out))
    try:
        out.mkdir(parents=True, exist_ok=True)
        yield out
    except BaseException:
        if before is None:
            shutil.rmtree(out if first_new is None else first_new, ignore_errors=True)
        else:
            for name in set(os.listdir(out)) - before:
                entry = out / name
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        raise


def copy_run(run_dir: Path, dest: Path) -> Path:
    """Copy the run's experiments next to the checkpoint (the audit re-hashes these files)."""
    target = dest / "experiments"
    shutil.copytree(run_dir / "experiments", target, symlinks=True)
    return target


def replay_run(backend: MemoryBackend, run_dir: Path = FIXTURE_RUN, experiments_root: Path | None = None) -> Replay:
    """Drive ``backend`` through the recorded run in tree order, as ARI's hooks would."""
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    run_id = run["run_id"]
    root = experiments_root or run_dir / "experiments"
    replay = Replay(backend.checkpoint_dir, root, run_id, {}, {})
    exp = run["experiment"]
    for node in run["nodes"]:
        nid, ancestors = node["node_id"], node["ancestor_ids"]
        replay.tree[nid], replay.queries[nid] = ancestors, node["eval_summary"]
        backend.build_working_context(nid, ancestors, node["eval_summary"])
        if nid == "root":  # the goal and primary metric are known once the root has planned
            backend.seed_core_memory("", "", exp)
        work_dir = root / run_id / nid
        report = json.loads((work_dir / "node_report.json").read_text(encoding="utf-8"))
        metrics = {k: v for k, v in report["metrics"].items() if not k.startswith("_")}
        backend.add_memory(
            nid, node["result_summary"], {"type": "result_summary", "metrics": metrics}, current_node=nid
        )
        result = backend.consolidate_node_memory(nid, report, str(work_dir), run_id, current_node=nid)
        replay.consolidated[nid] = [w["id"] for w in result.get("written", []) if w["id"] is not None]
    reports = {nid: load_node_report(root / run_id / nid / "node_report.json") for nid in replay.tree}
    _rerun_best(backend, replay, reports)
    nodes = [
        {
            "node_id": r.node_id,
            "metrics": r.metrics,
            "status": r.status,
            "has_real_data": bool(r.metrics) and r.status == "success" and r.self_assessment.succeeded,
        }
        for r in reports.values()
    ]
    replay.verified_path = backend.write_verified_context(nodes)
    replay.audit = backend.audit_memory(root, run_id)
    return replay


def _rerun_best(backend: MemoryBackend, replay: Replay, reports: dict[str, NodeReport]) -> None:
    """Validation children re-run their parent's result: a passed re-run is recorded as such."""
    for nid, ancestors in replay.tree.items():
        report = reports[nid]
        if report.label != "validation" or not ancestors or not report.self_assessment.succeeded:
            continue
        parent = ancestors[-1]
        results = backend.search_research_memory("experiment result", [parent], kinds=["experiment_result"], limit=1)[
            "results"
        ]
        if results:
            target = results[0]["entry_id"]
            refs = [{"path": "results.csv", "sha256": _sha(replay, nid, "results.csv"), "role": "data_output"}]
            out = backend.add_reproducibility_event(
                nid,
                target,
                "rerun_passed",
                refs,
                f"{nid} re-ran {parent}: {report.self_assessment.headline}",
                current_node=nid,
            )
            replay.reruns.append({"by": nid, "target": target, "status": "rerun_passed", "id": out.get("id")})


def _sha(replay: Replay, nid: str, path: str) -> str | None:
    file = replay.experiments_root / replay.run_id / nid / path
    return sha256_file(file) if file.is_file() else None
