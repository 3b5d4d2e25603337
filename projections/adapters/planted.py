"""Planted faults: claims beside the realistic run that a reviewer's check must catch.

On a replayed fixture run (:mod:`projections.adapters.demo`), every node with metrics gets
clean claims — its report's metric by name and by unit (rounded as a paper would), its time,
a row of its ``results.csv``, its speed-up over its parent — and one claim of each fault class:

- ``fabricated_number``: the text states a metric its report does not hold;
- ``metric_ptr_disagrees``: the denormalised ``metric_ptr`` is not the report's value;
- ``out_of_range``: the report itself holds an impossible value (a ratio above 1, a negative
  time, a percentage above 100) and the claim states it;
- ``artifact_edited``: a cited file was changed after it was hashed.

The answer key is returned (and written by ``ari-ledger demo --planted``), so detection and
false positives are counted, not eyeballed.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from projections.adapters.demo import FIXTURE_RUN, Replay
from projections.api import MemoryBackend

FAULTS = ("fabricated_number", "metric_ptr_disagrees", "out_of_range", "artifact_edited")
PRIMARY = "GFlops_per_s"
# (metric planted into the report, its impossible value, how the claim states it)
_IMPOSSIBLE = (
    ("cache_hit_ratio", 1.37, "cache_hit_ratio {v} on the L2 sweep"),
    ("warmup_time_s", -0.42, "the first-touch warm-up took {v} s"),
    ("lane_utilisation_pct", 112.0, "vector lane utilisation of {v:g}% in the inner loop"),
)


@dataclass(frozen=True)
class Planted:
    """One claim of the fixture and the fault planted in it (None: a clean claim)."""

    entry_id: str
    node_id: str
    fault: str | None
    text: str


def plant_reports(experiments: Path, run_dir: Path = FIXTURE_RUN) -> None:
    """Before the run is replayed: each node's report gets an impossible metric, as a buggy
    evaluation would write it (so consolidation records the report that holds it)."""
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    works = [experiments / run["run_id"] / node["node_id"] for node in run["nodes"]]
    for i, work in enumerate(w for w in works if _report_metrics(w)):
        name, impossible, _template = _IMPOSSIBLE[i % len(_IMPOSSIBLE)]
        path = work / "node_report.json"
        report = json.loads(path.read_text(encoding="utf-8"))
        report["metrics"][name] = impossible
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def plant_faults(backend: MemoryBackend, replay: Replay) -> list[Planted]:
    """Write the clean and faulty claims of every node with metrics (its reports planted by
    :func:`plant_reports` before the replay); returns the answer key."""
    planted: list[Planted] = []
    nodes = [nid for nid in replay.tree if _metrics(replay, nid)]
    for i, nid in enumerate(nodes):
        work = replay.experiments_root / replay.run_id / nid
        metrics = _metrics(replay, nid)
        parent = replay.tree[nid][-1] if replay.tree[nid] else None
        claim = _Claims(backend, replay.run_id, nid, planted)
        value = metrics[PRIMARY]
        csv_ref = _pin(work, "results.csv", "data_output") if (work / "results.csv").is_file() else None
        log_ref = _pin(work, "build.log", "log")
        ptr = {"name": PRIMARY, "value": value}
        # clean
        claim(f"{PRIMARY}={value} on the 256^3 grid", None, ptr, [log_ref])
        claim(f"{nid} sustains {value:.1f} GFlops/s", None, ptr, [log_ref])
        claim(
            f"one timed run of {nid} takes {metrics['time_s']} s",
            None,
            {"name": "time_s", "value": metrics["time_s"]},
            [log_ref],
        )
        row = _other_row(work / "results.csv", value) if csv_ref else None
        if csv_ref and row is not None:
            claim(f"another configuration in results.csv ran at {row} GFlops/s", None, None, [csv_ref])
        parent_value = _metrics(replay, parent).get(PRIMARY) if parent else None
        if parent_value:
            claim(f"{value / parent_value:.2f}x the GFlops/s of {parent}", None, ptr, [log_ref])
        # faulty
        claim(f"{nid} reaches {value * 1.17:.2f} GFlops/s", "fabricated_number", ptr, [log_ref])
        wrong = {"name": PRIMARY, "value": round(value * 0.8, 2)}
        claim(f"{nid} is the variant this lineage builds on", "metric_ptr_disagrees", wrong, [log_ref])
        name, impossible, template = _IMPOSSIBLE[i % len(_IMPOSSIBLE)]
        if metrics.get(name) != impossible:
            raise ValueError(f"{nid}'s report has no planted {name}: call plant_reports before the replay")
        claim(template.format(v=impossible), "out_of_range", {"name": name, "value": impossible}, [log_ref])
        edited = _write(work, f"planted/measure_{nid}.log", f"{PRIMARY}={value}\n")
        claim(f"{value} GFlops/s as measured in planted/measure_{nid}.log", "artifact_edited", ptr, [edited])
        (work / edited["path"]).write_text(f"{PRIMARY}={value * 1.5:.2f}\n", encoding="utf-8")
    return planted


class _Claims:
    """Writes one node's paper claims as that node, keeping the answer key."""

    def __init__(self, backend: MemoryBackend, run_id: str, node_id: str, key: list[Planted]) -> None:
        self.backend, self.ref, self.key = backend, {"run_id": run_id, "node_id": node_id}, key

    def __call__(self, text: str, fault: str | None, ptr: Any, refs: list[dict[str, Any]]) -> None:
        nid = self.ref["node_id"]
        out = self.backend.add_typed_memory(
            nid, "paper_claim", text, metric_ptr=ptr, artifact_refs=refs, node_report_ref=self.ref, current_node=nid
        )
        self.key.append(Planted(str(out["id"]), nid, fault, text))


def write_answer_key(planted: list[Planted], path: Path) -> None:
    path.write_text(json.dumps([asdict(p) for p in planted], indent=2) + "\n", encoding="utf-8")


def _metrics(replay: Replay, nid: str | None) -> dict[str, float]:
    return _report_metrics(replay.experiments_root / replay.run_id / nid) if nid is not None else {}


def _report_metrics(work: Path) -> dict[str, float]:
    report = json.loads((work / "node_report.json").read_text(encoding="utf-8"))
    return dict(report.get("metrics") or {})


def _pin(work: Path, path: str, role: str) -> dict[str, Any]:
    """An artifact ref pinning the file as it is now."""
    return {"path": path, "sha256": hashlib.sha256((work / path).read_bytes()).hexdigest(), "role": role}


def _write(work: Path, path: str, text: str) -> dict[str, Any]:
    (work / path).parent.mkdir(parents=True, exist_ok=True)
    (work / path).write_text(text, encoding="utf-8")
    return _pin(work, path, "log")


def _other_row(results: Path, best: float) -> str | None:
    """A GFlops_per_s cell of results.csv as written, preferring one that is not the report's."""
    with results.open(newline="") as f:
        cells = [row[PRIMARY] for row in csv.DictReader(f) if row.get(PRIMARY)]
    others = [c for c in cells if float(c) != best]
    return (others or cells or [None])[0]


def detection(planted: list[Planted], verdicts: dict[str, tuple[str, list[str]]]) -> dict[str, dict[str, int]]:
    """Per fault class (and ``clean``): claims planted, caught for that fault, and claims that
    failed though clean. ``verdicts``: entry id → (prove verdict, failure reasons)."""
    table = {fault: {"planted": 0, "detected": 0, "false_positives": 0} for fault in (*FAULTS, "clean")}
    for p in planted:
        verdict, reasons = verdicts.get(p.entry_id, ("missing", []))
        row = table[p.fault or "clean"]
        row["planted"] += 1
        if p.fault is None:
            row["false_positives"] += verdict != "holds"
        else:
            row["detected"] += verdict == "fails" and any(_SIGNS[p.fault](r) for r in reasons)
    return table


_SIGNS = {  # how `prove` words each fault
    "fabricated_number": lambda r: r.startswith("value ") and not r.startswith("value metric_ptr"),
    "metric_ptr_disagrees": lambda r: r.startswith("value metric_ptr") and "node report says" in r,
    "out_of_range": lambda r: r.startswith("value ") and ("outside" in r or "negative" in r),
    "artifact_edited": lambda r: "sha256 on disk is not the one recorded" in r,
}
