"""Each claim of a verified context traced to the bytes it came from: its event in the log (by
hash), its text and metric pointer, its re-run status, its node report and pinned artifacts
(re-hashed) and its values (checked again), for ``ari-ledger prove``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.typed import evidence_refs
from ledger.vocabulary import is_sha256
from projections.api import MemoryBackend
from projections.evidence.grounding import CitedFiles, Grounding
from projections.evidence.repro import repro_status
from projections.evidence.usable import evidence_level
from projections.models.catalog import Entry
from projections.models.verdicts import NOTHING_NUMERIC

WORK_DIR_ABSENT = "its node's work dir is not present: artifacts and values not checked"


@dataclass
class ClaimProof:
    """One claim of the context, traced to the bytes it came from."""

    entry_id: str
    node_id: str
    text: str
    verdict: str  # holds, fails
    event: dict[str, Any] | None = None  # seq and hash of the event that wrote it
    evidence: str | None = None
    repro_status: str | None = None
    values: dict[str, Any] | None = None
    artifacts: dict[str, int] = field(default_factory=dict)  # status → count
    failures: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # said, but nothing the claim states rests on it

    def fail(self, why: str) -> None:
        self.failures.append(why)
        self.verdict = "fails"


def trace_claims(
    backend: MemoryBackend,
    claims: Sequence[Mapping[str, Any]],
    roots: list[Path],
    at: int | None,
    known: Mapping[str, Any],
    cited_files: CitedFiles | None = None,
) -> tuple[list[ClaimProof], set[str]]:
    """Each claim traced; and the ids of claims whose work dir is not here. ``known``: the
    ``values`` verdicts the library's build already found (entry id → values), checked once."""
    catalog = backend.fresh_catalog()
    entries = list(catalog.entries.values())
    experiment = backend.get_experiment_context()
    grounding = Grounding(roots, experiment.get("metric_ranges"), experiment, cited_files)
    grounding.learn(entries)
    events = [e for e in entries if e.kind == "reproducibility_event"]  # repro_events(), before visibility
    now = repro_status(e for e in events if e.visible(None))
    then = repro_status(e for e in events if e.visible(at)) if at is not None else now
    found = [catalog.entries.get(str(c.get("entry_id"))) if c.get("entry_id") else None for c in claims]
    hashes = backend.event_hashes(e.seq for e in found if e is not None)
    out = [_claim(e, c, grounding, hashes, now, then, known) for e, c in zip(found, claims)]
    absent = {e.entry_id for e in found if e is not None and grounding.work_dir(e) is None}
    return out, absent


def _claim(
    entry: Entry | None,
    claim: Mapping[str, Any],
    grounding: Grounding,
    hashes: Mapping[int, tuple[str, str]],
    status: Mapping[str, str],
    stated: Mapping[str, str],
    known: Mapping[str, Any],
) -> ClaimProof:
    """One claim against its entry; ``status`` is the re-run status now, ``stated`` the one the
    context should state (as of its anchor, when it has one); ``known``: values found already."""
    proof = ClaimProof(str(claim.get("entry_id")), str(claim.get("node_id")), str(claim.get("text") or ""), "holds")
    if entry is None:
        proof.fail("no entry of this id in the log (the context names a claim the log never held)")
        return proof
    event = hashes.get(entry.seq)
    proof.event = {"seq": entry.seq, "hash": event[1] if event else None}
    if event is None or event[0] != entry.entry_id:
        proof.failures.append(f"the log's event at seq {entry.seq} is not this entry")
    elif claim.get("event_hash") not in (None, event[1]):
        proof.failures.append(
            f"the context names event {str(claim['event_hash'])[:12]}…, the log holds {event[1][:12]}…"
        )
    if claim.get("text") != entry.text:
        proof.failures.append("the context's text differs from the text the log holds")
    if claim.get("metric_ptr") != entry.metadata.get("metric_ptr"):
        proof.failures.append("the context's metric_ptr differs from the log's")
    proof.repro_status = status.get(entry.entry_id)
    if proof.repro_status == "rerun_failed":
        proof.failures.append("a re-run failed")
    if claim.get("repro_status") != stated.get(entry.entry_id):
        proof.failures.append(
            f"the context says re-run {claim.get('repro_status')}, the log says {stated.get(entry.entry_id)}"
        )
    work_dir = grounding.work_dir(entry)
    if work_dir is None:
        proof.unchecked.append(WORK_DIR_ABSENT)
    else:
        unchanged = grounding.report_unchanged(entry, work_dir)
        if unchanged is False:
            proof.failures.append("node_report.json is not the report its node consolidated (edited since)")
        elif unchanged is None:
            proof.unchecked.append("node_report.json: no consolidation of its node recorded a hash to compare")
        for ref in evidence_refs(entry.metadata):
            path, sha = ref.get("path"), ref.get("sha256")
            state = grounding.artifact(work_dir, path if isinstance(path, str) else "", sha)
            proof.artifacts[state.status] = proof.artifacts.get(state.status, 0) + 1
            pinned = is_sha256(sha)
            if state.status == "mismatch":
                proof.failures.append(f"{path}: sha256 on disk is not the one recorded (edited after it was hashed)")
            elif state.status == "missing" and pinned:
                proof.failures.append(f"{path}: pinned by sha256 but missing")
            elif state.status in ("missing", "unhashed"):
                proof.notes.append(f"{path}: not pinned by sha256 ({state.status} on disk)")
    values = known.get(entry.entry_id) or grounding.values(entry, work_dir)
    proof.values = dict(values)
    if values["verdict"] == "mismatch":
        proof.failures += [f"value {m['value']}: {m['reason']}" for m in values.get("mismatches", [])]
    elif values["verdict"] == "unchecked" and values.get("why") != NOTHING_NUMERIC:
        proof.unchecked.append(f"values: {values.get('why')}")
    proof.evidence = evidence_level(entry, proof.repro_status, grounding, values)
    if proof.evidence == "none":
        proof.failures.append("it cites no artifact (evidence none): nothing backs it, so it cannot be proved")
    if proof.failures:
        proof.verdict = "fails"
    return proof
