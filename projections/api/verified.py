"""Verified context (R21): the claims a paper may state, ranked by how well artifacts back them.

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

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, cast, get_args

from ledger import InvalidInput
from ledger.anchor import Anchor
from ledger.consolidation import SUCCESS
from ledger.layout import VERIFIED_CONTEXT_NAME as VERIFIED_CONTEXT_NAME  # the API names it for its callers
from ledger.safe_io import SIDE_FILE_LIMIT, UnsafeFile, read_file
from ledger.typed import evidence_refs
from ledger.vocabulary import is_sha256
from projections import settings
from projections.access.log import ReadTool
from projections.api import checks
from projections.api.shapes import Claim, ClaimExclusion, Evidence, ValuesView, VerifiedContextView
from projections.models.verdicts import NOTHING_NUMERIC

# The session, grounding, catalog and views (numpy, the unit tables, the projection engines)
# load with the first claim ranked, not with this module: ``ari-ledger verify`` and the rest of
# the command line read only the file name, the anchor and the evidence levels from here.
if TYPE_CHECKING:
    from projections.api.context import ExperimentContext
    from projections.api.grounding import Grounding
    from projections.api.session import Session
    from projections.models.catalog import Catalog, Entry

CLAIM_KINDS = ("experiment_result", "paper_claim")
EVIDENCE: tuple[Evidence, ...] = get_args(Evidence)
# consolidation's finding on a result whose report said ``self_assessment.succeeded: false``
JUDGED_UNSUCCESSFUL = "node_report.self_assessment.succeeded"
QUOTE_CHARS = 200


def verified_context_anchor(checkpoint_dir: Path) -> tuple[Anchor | None, str | None]:
    """The anchor the checkpoint's ``verified_context.json`` records (see :func:`context_anchor`)."""
    return context_anchor(checkpoint_dir / VERIFIED_CONTEXT_NAME)


def context_anchor(path: Path) -> tuple[Anchor | None, str | None]:
    """The anchor a verified context file records (``{"anchor": {"seq", "hash"}}``, written by
    :meth:`VerifiedContext.save`), or why it cannot be read; (None, None) when the file or its
    anchor is absent. Read only when it is a regular file of at most 64 MiB
    (``ledger.safe_io.read_file``): a link, a FIFO or a device in its place is a problem named in
    one line, never followed and never waited on."""
    try:
        data = json.loads(read_file(path, SIDE_FILE_LIMIT).decode("utf-8"))
    except FileNotFoundError:
        return None, None
    except UnsafeFile as exc:
        return None, f"{path.name} is unreadable: {exc}"
    except (OSError, ValueError) as exc:
        return None, f"{path.name} is unreadable ({exc})"
    anchor = data.get("anchor") if isinstance(data, dict) else None
    if anchor is None:
        return None, None
    seq, hash_ = (anchor.get("seq"), anchor.get("hash")) if isinstance(anchor, dict) else (None, None)
    if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(hash_, str):
        return None, f'{path.name}: anchor must be {{"seq": int, "hash": str}}, got {anchor!r}'
    return Anchor(path.name, hash_, seq), None


def borrowed_report(entry: Entry) -> str | None:
    """The node whose report the entry cites when that is not the entry's own node, else None."""
    ref = entry.metadata.get("node_report_ref")
    cited = ref.get("node_id") if isinstance(ref, Mapping) else None
    if cited is None or cited == "" or cited == entry.node_id:
        return None
    return str(cited)


# ---------------------------------------------------------------------------- the node's own verdict


@dataclass(frozen=True)
class Verdict:
    """What a node said of its own result, and where it said it."""

    succeeded: bool
    why: str  # the source and what it says, with the headline quoted


def node_verdict(
    report: Mapping[str, Any] | None, entries: Iterable[Entry], *, outcomes: bool = True
) -> Verdict | None:
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
    from projections.api.working import is_result_summary

    entries = list(entries)
    for entry in reversed(entries):
        if is_result_summary(entry):
            said = _summary_verdict(entry)
            if said is not None:
                return said
    for entry in reversed(entries):
        if entry.label == "failure_case" and outcomes:
            return Verdict(False, f"it ended in a failure_case: {_quote(entry.text)}")
        if entry.label == "experiment_result":
            if any(isinstance(f, Mapping) and f.get("field") == JUDGED_UNSUCCESSFUL for f in entry.findings):
                return Verdict(False, f"its node report said succeeded=false when consolidated: {_quote(entry.text)}")
            return Verdict(True, "it recorded an experiment_result")
    return None


def self_judged_failure(report: Mapping[str, Any] | None, entries: Iterable[Entry]) -> str | None:
    """Why the node judged its own result unsuccessful (:func:`node_verdict`), or None."""
    said = node_verdict(report, entries, outcomes=False)
    return said.why if said is not None and not said.succeeded else None


def _verdict(status: object, succeeded: object, headline: object, source: str) -> Verdict | None:
    spelled = str(status).strip() if isinstance(status, str) else ""
    failed = [f"status={spelled}"] if spelled and spelled.lower() not in SUCCESS else []
    failed += ["succeeded=false"] if succeeded is False else []
    quoted = f": {_quote(headline)}" if isinstance(headline, str) and headline.strip() else ""
    if failed:
        return Verdict(False, f"{source} says {', '.join(failed)}{quoted}")
    if spelled or succeeded is True:
        return Verdict(True, f"{source} says {f'status={spelled}' if spelled else 'succeeded=true'}")
    return None


def _report_verdict(report: Mapping[str, Any]) -> Verdict | None:
    assessment = report.get("self_assessment")
    assessment = assessment if isinstance(assessment, Mapping) else {}
    return _verdict(
        report.get("status"), assessment.get("succeeded"), assessment.get("headline"), "its node_report.json"
    )


_METRICS = re.compile(r"metrics=\[[^\]]*\]")
_HEADLINE = re.compile(r'headline="((?:[^"\\]|\\.)*)"|headline=(.*)$', re.S)
_STATUS = re.compile(r"(?<![\w.])status=\"?([\w-]+)")
_SUCCEEDED = re.compile(r"(?<![\w.])succeeded=\"?(true|false)\b", re.I)


def _summary_verdict(entry: Entry) -> Verdict | None:
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
    from projections.api.grounding import run_and_node

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


def is_grounded(entry: Entry) -> bool:
    """ARI's rule: the claim cites artifacts."""
    return bool(entry.metadata.get("artifact_refs"))


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
    from projections.api.views import research_view
    from projections.models.repro import repro_status

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


def is_evidence(level: object) -> TypeGuard[Evidence]:
    return level in EVIDENCE


def check_evidence(level: str | None, field: str = "min_evidence") -> Evidence:
    """``level`` as an evidence level, or InvalidInput naming ``field``."""
    if not is_evidence(level):
        raise InvalidInput(field, f"unknown evidence level {level!r}; expected one of {', '.join(EVIDENCE)}")
    return level


def repro_events(catalog: Catalog, as_of: int | None = None) -> list[Entry]:
    """Every visible reproducibility event of the checkpoint (re-runs count from anywhere)."""
    return [e for e in catalog.entries.values() if e.kind == "reproducibility_event" and e.visible(as_of)]


def render_grounded_block(ctx: Mapping[str, Any]) -> str:
    """The prompt block listing usable claims with status, evidence and artifacts, or "" when none.
    A claim that carries an exclusion is never listed, whatever the context file says."""
    usable = [c for c in ctx.get("usable_for_claims") or [] if not c.get("exclusions")]
    if not usable:
        return ""
    lines = [
        "## Verified results (artifact-grounded)",
        "State quantitative claims only from this list; cite the artifacts. "
        "Re-run status and evidence level (cited < hashed < verified < values_checked < rerun_passed) in brackets.",
    ]
    for claim in usable:
        arts = ", ".join(
            f"{r.get('path')} (sha256 {r['sha256'][:12]})"
            if is_sha256(r.get("sha256"))
            else f"{r.get('path')} (not pinned)"
            for r in claim["artifact_refs"]
            if isinstance(r, Mapping)
        )
        ptr = claim.get("metric_ptr")
        metric = f" [{ptr.get('name')}={ptr.get('value')}]" if isinstance(ptr, Mapping) and ptr.get("name") else ""
        status = claim.get("repro_status") or "unverified"
        values = claim.get("values") if isinstance(claim.get("values"), Mapping) else {}
        unchecked = [u for u in values.get("unchecked") or [] if isinstance(u, Mapping)]
        caveat = (
            " — numbers not checked (do not state them as measured): "
            + "; ".join(f"{u.get('value')} ({u.get('why')})" for u in unchecked)
            if unchecked
            else ""
        )
        lines.append(
            f"- [{status}; evidence {claim.get('evidence', 'cited')}] {claim['node_id']}{metric}: {claim['text']} — artifacts: {arts}{caveat}"
        )
    limitations = ctx.get("limitations") or []
    if limitations:
        lines.append("## Known limitations (failed attempts; do not present as results)")
        lines.extend(f"- {lim['node_id']}: {lim['text']}" for lim in limitations)
    return "\n".join(lines) + "\n"


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


class VerifiedContext:
    """The verified context of a lineage, and ``verified_context.json`` for the paper stage."""

    def __init__(self, session: Session, context: ExperimentContext) -> None:
        self.session, self.context = session, context

    def get(
        self,
        ancestor_ids: list[str],
        purpose: str,
        limit: int | None,
        min_evidence: str | None,
        experiments_root: str | Path | None,
        as_of: int | None,
        keep_mismatches: bool = False,
    ) -> VerifiedContextView:
        """ARI's verified context (``claims``, ``limitations``, ``usable_for_claims``), each claim
        with its evidence level and ``values`` verdict; artifacts are re-hashed under
        ``experiments_root`` (default: ARI's layout beside the checkpoint)."""
        from projections.api.grounding import Grounding

        scope = checks.node_ids(ancestor_ids)
        if limit is not None:
            checks.limit(limit)
        roots = self._experiments_roots(experiments_root)
        with self.session.reading() as catalog:
            experiment = self.context.get(as_of)
            grounding = Grounding(roots, experiment.get("metric_ranges"), experiment, self.session.cited_files)
            ctx = verified_context(
                catalog.scope_entries(scope, as_of),
                repro_events(catalog, as_of),
                limit,
                grounding=grounding,
                min_evidence=min_evidence,
                keep_mismatches=keep_mismatches,
            )
            stamp = self.session.read_stamp(as_of)
        ctx["purpose"] = purpose
        ctx["lineage"] = scope
        ctx["min_evidence"], ctx["limit"], ctx["keep_mismatches"] = min_evidence, limit, keep_mismatches
        self.session.access.read(
            "node_scope",
            f"verified_context:{purpose}",
            scope,
            len(ctx["claims"]),
            [{"entry_id": c["entry_id"], "src_node_id": c["node_id"]} for c in ctx["claims"]],
            tool=ReadTool.GET_VERIFIED_CONTEXT,
            as_of=as_of,
            **stamp,
            args={"purpose": purpose, "limit": limit},
        )
        return ctx

    def _experiments_roots(self, given: str | Path | None) -> list[Path]:
        """Where node work dirs may be: the given root, else :func:`experiments_roots`."""
        from projections.api.grounding import experiments_roots

        return [Path(given)] if given is not None else experiments_roots(self.session.checkpoint_dir)

    def write(self, nodes: Iterable[Mapping[str, Any]], experiments_root: str | Path | None) -> Path | None:
        """Pick the best node, take its root→best lineage, write ``verified_context.json``.

        ``nodes`` are ARI's node dicts (``node_id`` or ``id``, ``metrics``, optional
        ``has_real_data`` and ``status``). Nothing is written when there are no claims or
        when ``ARI_MEMORY_CONSOLIDATE`` is off; the path is returned when written. The file
        carries the log's head (``anchor``: seq and hash), so ``ari-ledger verify`` can tell
        if the log was later cut back or rewritten.
        """
        if not settings.consolidation_enabled():
            return None
        with self.session.reading() as catalog:
            candidates = [dict(n, node_id=n.get("node_id") or n.get("id")) for n in nodes]
            if any(not c["node_id"] for c in candidates):
                raise InvalidInput("nodes", "every node needs a node_id (or id)")
            context = self.context.get()
            best = best_node(
                candidates, context.get("primary_metric"), context.get("higher_is_better", True) is not False
            )
            if best is None:
                return None
            ctx = self.get(catalog.lineage(best["node_id"]), "paper", None, None, experiments_root, None)
            if not ctx["claims"]:
                return None
            best_id = best["node_id"]
            return self.save({**ctx, "best_node": best_id, "best_node_id": best_id}, self.session.checkpoint_dir)

    def save(self, ctx: VerifiedContextView | dict[str, Any], where: Path) -> Path:
        """Write a verified context with the log's head (``anchor``) and each claim's event hash
        (``event_hash``, what ``prove`` traces it by) to ``where`` (a directory: its
        ``verified_context.json``; else the file), atomically."""
        ledger = self.session.ledger
        with self.session.reading():
            found = self.session.event_hashes(c["seq"] for c in ctx.get("claims", []))  # one pass over the log
            hashes = {seq: hash for seq, (_id, hash) in found.items()}
            for claim in ctx.get("claims", []):
                claim["event_hash"] = hashes.get(claim["seq"])
            written = {
                **ctx,
                "as_of_seq": ledger.last_seq,
                "anchor": {"seq": ledger.last_seq, "hash": ledger.last_hash},
            }
        path = where / VERIFIED_CONTEXT_NAME if where.is_dir() else where
        # The old file or the whole new one after any crash, a power loss included: written beside
        # it and synced, renamed over it, the directory synced (ledger.output.replace_file).
        from ledger.output import replace_file

        data = (json.dumps(written, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
        replace_file(path, data)  # through verified_context.json.tmp, as before
        return path
