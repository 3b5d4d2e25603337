"""What makes a claim usable (R21): the claims a paper may state, ranked by how well artifacts back them.

Claims are the ``experiment_result`` and ``paper_claim`` entries of a lineage. ARI's rules
hold: a claim is *grounded* when it cites artifacts, its reproducibility status is the
latest repro event (``None`` when there is none), and only grounded claims that did not fail
a re-run are ``usable_for_claims``. Ranking: rerun_passed > grounded > ungrounded >
rerun_failed (ties in log order). Failure cases become limitations.

On top, every claim carries this library's *evidence level*, how far its citation can be
trusted — ``none`` (cites nothing) < ``cited`` (cites files, but nothing pinned) < ``hashed``
(points at its node report and pins a file by sha256) < ``verified`` (every pinned file
re-hashes equal on disk now) < ``values_checked`` (verified, and the numbers it states are
its report's and its artifacts') < ``rerun_passed`` (hashed, and a re-run passed) — and the
paper stage can ask for a minimum (``min_evidence``). Each claim's ``values`` verdict says
whether its numbers matched; a claim whose numbers do not is left out of
``usable_for_claims`` (and so of the grounded block) unless asked for. Re-runs count from
anywhere in the checkpoint: a validation child re-running its parent's result is the usual case.

Two more exclusions, on top of ARI's rule, each carried on the claim as an ``exclusions`` item
(``code``, ``text``); the claim stays in ``claims``. ``borrowed_report``: its
``node_report_ref`` names another node (a sibling's report, a failed run's) — its pins say
nothing about its own node's result, so its evidence stays at ``cited``.
``self_judged_failure``: its node judged its own result unsuccessful (:func:`node_verdict`:
its ``node_report.json`` says ``status`` other than a success or ``self_assessment.succeeded:
false``; without a report on disk, its newest ``RESULT SUMMARY`` says so, or its consolidated
result was flagged so, or it ended in a failure_case). No minimum and no ``keep_mismatches``
lets such a claim back in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ledger.ari.consolidation import SUCCESS
from ledger.typed import evidence_refs
from ledger.vocabulary import is_sha256
from projections.evidence.claims import CLAIM_KINDS, borrowed_report, is_grounded, is_result_summary
from projections.evidence.grounding import run_and_node
from projections.evidence.repro import repro_status
from projections.models.shapes import Claim, ClaimExclusion, Evidence, ValuesView, VerifiedContextView
from projections.models.verdicts import EVIDENCE, NOTHING_NUMERIC, check_evidence
from projections.models.views import research_view

if TYPE_CHECKING:
    from projections.evidence.grounding import Grounding
    from projections.models.catalog import Catalog, Entry

# consolidation's finding on a result whose report said ``self_assessment.succeeded: false``
JUDGED_UNSUCCESSFUL = "node_report.self_assessment.succeeded"
QUOTE_CHARS = 200


# ---------------------------------------------------------------------------- the node's own verdict


@dataclass(frozen=True)
class NodeVerdict:
    """What a node said of its own result, and where it said it."""

    succeeded: bool
    why: str  # the source and what it says, with the headline quoted


def node_verdict(
    report: Mapping[str, Any] | None, entries: Iterable[Entry], *, outcomes: bool = True
) -> NodeVerdict | None:
    """The node's own verdict on its result, or None when nothing says.

    Its ``node_report.json`` (``report``, when one is on disk) decides: a ``status`` that is not
    a success spelling (``success``/``succeeded``/``ok``, as consolidation reads it) or
    ``self_assessment.succeeded: false`` is a failure. Without one, the newest ``RESULT
    SUMMARY`` of its entries that says ``status=`` or ``succeeded=``; without that, the newest of
    its outcomes: a failure_case fails, a result its consolidation flagged succeeded=false fails,
    any other result succeeds (a node that failed and succeeded on ``ari resume`` is a success).
    ``outcomes=False`` asks only what the node said of itself: a failure_case is a limitation ARI
    records beside results, not the node's verdict on them (ARI's usable rule stands).
    """
    if report is not None:
        said = _report_verdict(report)
        if said is not None:
            return said
    entries = list(entries)
    for entry in reversed(entries):
        if is_result_summary(entry):
            said = _summary_verdict(entry)
            if said is not None:
                return said
    for entry in reversed(entries):
        if entry.label == "failure_case" and outcomes:
            return NodeVerdict(False, f"it ended in a failure_case: {_quote(entry.text)}")
        if entry.label == "experiment_result":
            if any(isinstance(f, Mapping) and f.get("field") == JUDGED_UNSUCCESSFUL for f in entry.findings):
                return NodeVerdict(
                    False, f"its node report said succeeded=false when consolidated: {_quote(entry.text)}"
                )
            return NodeVerdict(True, "it recorded an experiment_result")
    return None


def self_judged_failure(report: Mapping[str, Any] | None, entries: Iterable[Entry]) -> str | None:
    """Why the node judged its own result unsuccessful (:func:`node_verdict`), or None."""
    said = node_verdict(report, entries, outcomes=False)
    return said.why if said is not None and not said.succeeded else None


def _verdict(status: object, succeeded: object, headline: object, source: str) -> NodeVerdict | None:
    spelled = str(status).strip() if isinstance(status, str) else ""
    failed = [f"status={spelled}"] if spelled and spelled.lower() not in SUCCESS else []
    failed += ["succeeded=false"] if succeeded is False else []
    quoted = f": {_quote(headline)}" if isinstance(headline, str) and headline.strip() else ""
    if failed:
        return NodeVerdict(False, f"{source} says {', '.join(failed)}{quoted}")
    if spelled or succeeded is True:
        return NodeVerdict(True, f"{source} says {f'status={spelled}' if spelled else 'succeeded=true'}")
    return None


def _report_verdict(report: Mapping[str, Any]) -> NodeVerdict | None:
    assessment = report.get("self_assessment")
    assessment = assessment if isinstance(assessment, Mapping) else {}
    return _verdict(
        report.get("status"), assessment.get("succeeded"), assessment.get("headline"), "its node_report.json"
    )


_METRICS = re.compile(r"metrics=\[[^\]]*\]")
_HEADLINE = re.compile(r'headline="((?:[^"\\]|\\.)*)"|headline=(.*)$', re.S)
_STATUS = re.compile(r"(?<![\w.])status=\"?([\w-]+)")
_SUCCEEDED = re.compile(r"(?<![\w.])succeeded=\"?(true|false)\b", re.I)


def _summary_verdict(entry: Entry) -> NodeVerdict | None:
    """ARI's ``RESULT SUMMARY metrics=[…] status=… succeeded=… headline="…"`` (or the same keys
    in its metadata)."""
    md, text = entry.metadata, entry.text
    found = _HEADLINE.search(text)
    headline = (found[1] if found[1] is not None else found[2]) if found else None
    rest = _METRICS.sub("", text[: found.start()] + text[found.end() :] if found else text)
    status = md.get("status") if isinstance(md.get("status"), str) else None
    succeeded = md.get("succeeded") if isinstance(md.get("succeeded"), bool) else None
    if status is None and (match := _STATUS.search(rest)):
        status = match[1]
    if succeeded is None and (match := _SUCCEEDED.search(rest)):
        succeeded = match[1].lower() == "true"
    return _verdict(status, succeeded, headline, "its RESULT SUMMARY")


def _quote(text: object) -> str:
    flat = " ".join(str(text).split())
    return '"' + (flat if len(flat) <= QUOTE_CHARS else flat[: QUOTE_CHARS - 1] + "…") + '"'


def own_report(node_id: str, entries: Iterable[Entry], grounding: Grounding | None) -> Mapping[str, Any] | None:
    """The node's own ``node_report.json`` (``<root>/<run_id>/<node_id>``, the run from its
    entries' pointers, its own first), or None."""
    if grounding is None:
        return None
    refs = [r for e in entries if isinstance(r := e.metadata.get("node_report_ref"), Mapping)]
    runs = [r.get("run_id") for r in refs if r.get("node_id") == node_id] + [r.get("run_id") for r in refs]
    for run in dict.fromkeys(runs):
        pair = run_and_node({"run_id": run, "node_id": node_id})
        if pair is None:
            continue
        for root in grounding.roots:
            work = root / pair[0] / pair[1]
            if work.is_dir():
                return grounding.report(work)
    return None


def exclusions(entry: Entry, failed: str | None, values: ValuesView | None = None) -> list[ClaimExclusion]:
    """Why a claim may not be stated although ARI's rule would let it (see the module docstring)."""
    out: list[ClaimExclusion] = []
    other = borrowed_report(entry)
    if other is not None:
        out.append({"code": "borrowed_report", "text": f"cites {other}'s report, not its own ({entry.node_id})"})
    if failed:
        out.append(
            {"code": "self_judged_failure", "text": f"{entry.node_id} judged its own result unsuccessful — {failed}"}
        )
    unchecked = unchecked_numbers(values)
    if unchecked:
        out.append({"code": "unchecked_numbers", "text": f"numbers not checked against its evidence: {unchecked}"})
    return out


def unchecked_numbers(values: Mapping[str, Any] | None) -> str | None:
    """The numbers of a claim that could not be checked, said in one line, or None when every
    number it states was checked (or it states none). The paper stage renders a usable claim's
    text under "VERIFIED CONTEXT" with nothing but its re-run status beside it, so a number
    there that nothing checked would be presented as verified: such a claim is not usable.
    A mismatch is the stronger finding and is said by the ``values`` verdict itself."""
    if values is None or values.get("verdict") != "unchecked" or values.get("why") == NOTHING_NUMERIC:
        return None
    listed = [u for u in values.get("unchecked") or [] if isinstance(u, Mapping)]
    if not listed:
        return str(values.get("why") or "not checked")
    return "; ".join(f"{u.get('value')} ({u.get('why')})" for u in listed)


def not_usable(claim: Mapping[str, Any], floor: int = 0, keep_mismatches: bool = False) -> str | None:
    """Why a claim of a verified context is not in ``usable_for_claims``, or None when it is:
    the one rule the library builds the list by and ``prove`` holds a context's list to."""
    excluded = [x.get("code") for x in claim.get("exclusions") or [] if isinstance(x, Mapping)]
    if excluded:
        return f"excluded: {', '.join(map(str, excluded))}"
    if not claim.get("grounded"):
        return "it cites no artifacts"
    if claim.get("repro_status") == "rerun_failed":
        return "a re-run failed"
    values = claim.get("values")
    if not keep_mismatches and isinstance(values, Mapping) and values.get("verdict") == "mismatch":
        return "its values do not match its evidence"
    level = claim.get("evidence")
    if floor and (level not in EVIDENCE or EVIDENCE.index(level) < floor):
        return f"evidence {level} is below the context's minimum {EVIDENCE[floor]}"
    return None


def evidence_level(
    entry: Entry, status: str | None, grounding: Grounding | None, values: ValuesView | None
) -> Evidence:
    """How far a claim's citation can be trusted (see the module docstring)."""
    if not is_grounded(entry):
        return "none"
    if borrowed_report(entry) is not None:
        return "cited"  # pins in another node's work dir say nothing about this node's result
    ref = entry.metadata.get("node_report_ref")
    pinned = [r for r in evidence_refs(entry.metadata) if is_sha256(r.get("sha256")) and isinstance(r.get("path"), str)]
    if not (isinstance(ref, Mapping) and ref.get("run_id") and ref.get("node_id")) or not pinned:
        return "cited"
    if status == "rerun_passed":
        return "rerun_passed"
    work_dir = grounding.work_dir(entry) if grounding is not None else None
    if grounding is None or work_dir is None:
        return "hashed"
    if not all(grounding.artifact(work_dir, r["path"], r["sha256"]).status == "verified" for r in pinned):
        return "hashed"
    return "values_checked" if values is not None and values["verdict"] == "checked" else "verified"


def _rank(claim: Claim) -> int:
    if claim["repro_status"] == "rerun_failed":
        return 3
    if claim["repro_status"] == "rerun_passed":
        return 0
    return 1 if claim["grounded"] else 2


def verified_context(
    entries: list[Entry],
    repro_events: Iterable[Entry],
    limit: int | None = None,
    *,
    grounding: Grounding | None = None,
    min_evidence: str | None = None,
    keep_mismatches: bool = False,
    judged: Mapping[str, str | None] | None = None,
) -> VerifiedContextView:
    """Claims, limitations and usable claims from the visible entries of a lineage (log order).

    ``repro_events`` come from the whole checkpoint: a re-run is evidence about its target
    whoever ran it (typically a validation child re-running its parent's result).
    ``grounding`` locates a claim's files for the ``verified`` level and its ``values``
    verdict (without it, claims carry neither), and each claim's node's own report.
    ``judged``: node id → why it judged its own result unsuccessful (None: it did not), for
    callers that already asked :func:`node_verdict`; other nodes are judged here.
    """
    floor = EVIDENCE.index(check_evidence(min_evidence)) if min_evidence else 0
    status = repro_status(repro_events)
    if grounding is not None:
        grounding.learn(entries)
    by_node: dict[str, list[Entry]] = {}
    for entry in entries:
        by_node.setdefault(entry.node_id, []).append(entry)
    failed = dict(judged or {})
    for nid in {e.node_id for e in entries if e.label in CLAIM_KINDS} - failed.keys():
        failed[nid] = self_judged_failure(own_report(nid, by_node[nid], grounding), by_node[nid])
    claims = []
    for entry in entries:
        if entry.label in CLAIM_KINDS:
            claim = cast(Claim, research_view(entry))
            claim["grounded"] = is_grounded(entry)
            claim["repro_status"] = status.get(entry.entry_id)
            values = grounding.values(entry, grounding.work_dir(entry)) if grounding is not None else None
            if values is not None:
                claim["values"] = values
            claim["evidence"] = evidence_level(entry, claim["repro_status"], grounding, values)
            excluded = exclusions(entry, failed.get(entry.node_id), values)
            if excluded:
                claim["exclusions"] = excluded
            claims.append(claim)
    claims.sort(key=lambda c: (_rank(c), c["seq"]))
    if limit is not None:
        claims = claims[:limit]
    limitations = [research_view(e) for e in entries if e.label == "failure_case"]
    usable = [c for c in claims if not_usable(c, floor, keep_mismatches) is None]
    return {"claims": claims, "limitations": limitations, "usable_for_claims": usable}


def repro_events(catalog: Catalog, as_of: int | None = None) -> list[Entry]:
    """Every visible reproducibility event of the checkpoint (re-runs count from anywhere)."""
    return [e for e in catalog.entries.values() if e.kind == "reproducibility_event" and e.visible(as_of)]


# ---------------------------------------------------------------------------- best node


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def best_node(
    nodes: Iterable[Mapping[str, Any]], primary_metric: str | None = None, higher_is_better: bool = True
) -> Mapping | None:
    """ARI's choice: nodes with real data first; then ``_scientific_score``; then the primary metric;
    then the largest numeric metric."""

    def key(node: Mapping[str, Any]) -> tuple:
        metrics = node.get("metrics") or {}
        real = bool(node.get("has_real_data", bool(metrics) and node.get("status", "success") == "success"))
        score = _finite(metrics.get("_scientific_score"))
        primary = _finite(metrics.get(primary_metric)) if primary_metric else None
        if primary is not None and not higher_is_better:
            primary = -primary
        largest = max((v for v in map(_finite, metrics.values()) if v is not None), default=None)
        return (
            real,
            score is not None,
            score or 0.0,
            primary is not None,
            primary or 0.0,
            largest is not None,
            largest or 0.0,
        )

    candidates = list(nodes)
    return max(candidates, key=key) if candidates else None
