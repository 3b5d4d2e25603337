"""The lineage of a checkpoint: its tree, with per-node memory counts, metrics and claims.

One data structure feeds the ``tree`` command, the HTML report (R30) and the demo. Status is
the node's own verdict (:func:`projections.api.verified.node_verdict`: its node_report.json
when an experiments directory is given, else its newest RESULT SUMMARY, else its newest
outcome): ``failed``, with the reason in ``failure``, when it judged its result unsuccessful —
then none of its claims is usable. The headline metric comes from its node_report.json.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from ledger import InvalidInput
from ledger.ari.consolidation import headline_metric
from ledger.ari.report_file import read_report_file
from ledger.checkpoint_format import VERIFIED_CONTEXT_NAME
from ledger.safe_io import read_json
from ledger.typed import evidence_refs
from projections.api import MemoryBackend
from projections.evidence.grounding import CitedFiles, Grounding
from projections.evidence.usable import node_verdict, repro_events, self_judged_failure, verified_context
from projections.models.catalog import Catalog, NodeInfo
from projections.models.views import research_view


class TracedClaim(Protocol):
    """What a proof says of one claim (``projections.tools.claim_trace.ClaimProof``)."""

    entry_id: str
    verdict: str
    failures: list[str]
    unchecked: list[str]


def lineage_data(
    backend: MemoryBackend,
    experiments_root: Path | None = None,
    *,
    traced: Iterable[TracedClaim] = (),
    cited_files: CitedFiles | None = None,
    as_of: int | None = None,
) -> dict[str, Any]:
    """Everything the tree views show, computed from the log (and the reports, if given). Each
    claim a proof ``traced`` carries its verdict and reasons; ``cited_files``: what reading the
    cited files found already (a proof's), so no file is hashed twice.

    ``as_of``: the tree as the log stood after that seq, as a checkpoint holding only its
    first ``as_of`` events shows it: the nodes, entries, verdicts and claims of then, and the
    best lineage only if ``verified_context.json`` was anchored by then (an entry of then
    redacted since counts as redacted: its text is gone from the log). The files read from
    disk (node reports, cited artifacts) are today's: files cannot travel in time."""
    proved = {c.entry_id: c for c in traced}
    experiment = backend.get_experiment_context(as_of=as_of)
    grounding = Grounding(
        [experiments_root] if experiments_root is not None else [],
        experiment.get("metric_ranges"),
        experiment,
        cited_files,
    )
    catalog = backend.fresh_catalog()
    primary = experiment.get("primary_metric")
    verified = _read_verified(backend.checkpoint_dir, as_of)
    repro = repro_events(catalog, as_of)  # once for the whole tree, not once per node
    nodes = []
    for nid, info in _nodes_as_of(catalog, as_of):
        entries = catalog.node_entries(nid, as_of)
        kinds = Counter(e.kind or "note" for e in entries)
        gone = [
            r
            for r in catalog.redacted.values()
            if r.node_id == nid and r.type == "memory_added" and (as_of is None or r.seq <= as_of)
        ]
        if gone:  # a redacted entry keeps its place in the counts (ari-ledger redact)
            kinds["redacted"] = len(gone)
        refs = [r for e in entries if isinstance(r := e.metadata.get("node_report_ref"), dict) and r.get("run_id")]
        own = [r for r in refs if r.get("node_id") == nid]  # a cited sibling's report names its run too
        run_id = (own or refs)[0]["run_id"] if refs else None
        report = _report(experiments_root, run_id, nid)
        verdict = node_verdict(report, entries)
        failure = verdict.why if verdict is not None and not verdict.succeeded else None
        status = "unknown" if verdict is None else "failed" if failure else "success"
        metric = headline_metric(report.get("metrics") or {}, primary) if report is not None else None
        ctx = verified_context(entries, repro, judged={nid: self_judged_failure(report, entries)})
        usable = {c["entry_id"] for c in ctx["usable_for_claims"]}
        nodes.append(
            {
                "node_id": nid,
                "parent_id": info.parent_id if info else None,
                "depth": info.depth if info else 0,
                "label": info.label if info else "other",
                "status": status,
                "failure": failure,
                "headline_metric": metric,
                "memory_counts": dict(sorted(kinds.items())),
                "claims": [
                    {
                        "memory_id": c["entry_id"],
                        "text": c["text"],
                        "grounded": c["grounded"],
                        "evidence": c["evidence"],
                        "repro_status": c["repro_status"] or "unverified",
                        "usable": c["entry_id"] in usable,
                        "exclusions": c.get("exclusions", []),
                        **_proved(proved.get(c["entry_id"])),
                    }
                    for c in ctx["claims"]
                ],
                "entries": [_entry(e, experiments_root, grounding) for e in entries],
                "redacted": [
                    {"memory_id": r.event_id, "seq": r.seq, "kind": r.kind or "note", "reason": r.reason} for r in gone
                ],
            }
        )
    return {
        "title": f"ARI memory lineage — {backend.checkpoint_dir.name}",
        "checkpoint": str(backend.checkpoint_dir),
        "as_of_seq": backend.folded_seq if as_of is None else as_of,
        "best_node": verified.get("best_node"),
        "best_lineage": verified.get("lineage", []),
        "nodes": nodes,
    }


def _proved(claim: TracedClaim | None) -> dict[str, Any]:
    if claim is None:
        return {}
    return {"proof": claim.verdict, "proof_failures": claim.failures, "proof_unchecked": claim.unchecked}


def _nodes_as_of(catalog: Catalog, as_of: int | None) -> list[tuple[str, NodeInfo | None]]:
    """The tree's nodes in order, each with its recorded ``node_started`` (None without one):
    the started ones, then those known only by their entries. ``as_of``: only what the log
    held up to that seq (a node started later is, until then, known by its entries alone)."""
    started = {n: i for n, i in catalog.nodes.items() if as_of is None or i.seq <= as_of}
    written = [n for n in catalog.by_node if n not in started and _wrote_by(catalog, n, as_of)]
    return [*started.items(), *((n, None) for n in written)]


def _wrote_by(catalog: Catalog, node_id: str, as_of: int | None) -> bool:
    first = catalog.first_seq(node_id)
    return first is not None and (as_of is None or first <= as_of)


def _read_verified(checkpoint: Path, as_of: int | None = None) -> dict[str, Any]:
    """``verified_context.json``; ``as_of``: only when its anchor (the log's head when it was
    written) is at or before that seq, else it did not exist then (one without an anchor
    cannot be placed in time)."""
    path = checkpoint / VERIFIED_CONTEXT_NAME
    try:
        data = read_json(path)  # a regular file of bounded size, JSON, or an error naming it
    except FileNotFoundError:
        return {}
    if not isinstance(data, dict):
        return {}
    if as_of is not None and not _anchored_by(data, as_of):
        return {}
    return data


def _anchored_by(data: dict[str, Any], as_of: int) -> bool:
    anchor = data.get("anchor")
    seq = anchor.get("seq") if isinstance(anchor, dict) else None
    return isinstance(seq, int) and not isinstance(seq, bool) and seq <= as_of


def _report(experiments_root: Path | None, run_id: str | None, node_id: str) -> dict[str, Any] | None:
    """The node's report as ARI wrote it (read safely), or None."""
    if experiments_root is None or run_id is None:
        return None
    work = experiments_root / run_id / node_id
    try:
        report = read_report_file(work / "node_report.json", inside=work)
    except InvalidInput:
        return None
    return report if isinstance(report, dict) else None


def _entry(entry, experiments_root: Path | None, grounding: Grounding) -> dict[str, Any]:
    d = research_view(entry)
    ref = d["node_report_ref"]
    refs = []
    for art in evidence_refs(d["metadata"]):
        audit = "unhashed" if art.get("sha256") is None else "unknown"
        if experiments_root is not None and isinstance(ref, dict) and ref.get("run_id") and ref.get("node_id"):
            audit = grounding.artifact(  # a file cited by several entries is hashed once
                experiments_root / ref["run_id"] / ref["node_id"], str(art.get("path", "")), art.get("sha256")
            ).status
        refs.append({**art, "audit": audit})
    when = datetime.fromtimestamp(d["ts"], UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return {
        "entry_id": d["entry_id"],
        "kind": d["kind"] or "note",
        "text": d["text"],
        "ts": when,
        "artifact_refs": refs,
    }


def render_tree(data: dict[str, Any]) -> str:
    """The tree as indented text, one line per node; a failed node says FAILED, and why."""
    children: dict[str | None, list[dict]] = {}
    for node in data["nodes"]:
        children.setdefault(node["parent_id"], []).append(node)
    best = set(data.get("best_lineage") or [])
    lines: list[str] = []

    def walk(node: dict, prefix: str, last: bool, top: bool) -> None:
        metric = node["headline_metric"]
        m = f" {metric['name']}={metric['value']}" if metric else ""
        counts = ", ".join(f"{v} {k}" for k, v in node["memory_counts"].items()) or "no memory"
        star = " *" if node["node_id"] in best else ""
        branch = "" if top else ("└─ " if last else "├─ ")
        status = "FAILED" if node["status"] == "failed" else node["status"]
        why = f" — {node['failure']}" if node.get("failure") else ""
        lines.append(f"{prefix}{branch}{node['node_id']} [{node['label']}, {status}]{m} ({counts}){star}{why}")
        kids = children.get(node["node_id"], [])
        for i, kid in enumerate(kids):
            walk(kid, prefix + ("" if top else ("   " if last else "│  ")), i == len(kids) - 1, False)

    known = {n["node_id"] for n in data["nodes"]}
    roots = [n for n in data["nodes"] if n["parent_id"] is None or n["parent_id"] not in known]
    for r in roots:
        walk(r, "", True, True)
    if best:
        lines.append("* best lineage")
    return "\n".join(lines)
