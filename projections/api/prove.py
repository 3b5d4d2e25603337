"""``ari-ledger prove``: one answer for a reviewer holding a copied checkpoint.

In one process, offline: the log's chain and every anchor (head file, snapshot, the context
file's head, ``--head``); each claim of the verified context traced to its event (by hash),
its node report and artifacts (hashes and values) and its re-run status; the access log's
chain, and every recorded read replayed. One verdict per claim — ``holds``, ``fails`` (with
the reasons) — and what could not be checked, said plainly: that is never a pass in
disguise, and ``strict`` makes it a failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ledger import InvalidInput
from ledger.typed import evidence_refs
from ledger.vocabulary import is_sha256
from projections.api.backend import MemoryBackend
from projections.api.checkpoint import verify
from projections.api.grounding import Grounding, experiments_roots
from projections.api.reads import check_chain, read_records, replay_all
from projections.api.verified import VERIFIED_CONTEXT_NAME, evidence_level, repro_events
from projections.models.catalog import Entry
from projections.models.repro import repro_status


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


@dataclass
class Proof:
    checkpoint: str
    context: str | None
    chain: dict[str, Any]
    anchors: list[str]  # what the log was checked against
    claims: list[ClaimProof]
    access: dict[str, Any]
    reads: dict[str, int]  # replay verdict → count
    read_failures: list[dict[str, Any]]
    failures: list[str]  # checkpoint-level
    unchecked: list[str]
    strict: bool = False

    @property
    def ok(self) -> bool:
        failed = self.failures or self.read_failures or any(c.verdict == "fails" for c in self.claims)
        return not failed and not (self.strict and (self.unchecked or any(c.unchecked for c in self.claims)))

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def prove(
    checkpoint_dir: str | Path,
    context: str | Path | None = None,
    experiments_root: str | Path | None = None,
    heads: Iterable[str] = (),
    *,
    strict: bool = False,
) -> Proof:
    """Check everything a reviewer would about a checkpoint (see the module docstring)."""
    ckpt = Path(checkpoint_dir)
    context_path = Path(context) if context is not None else ckpt / VERIFIED_CONTEXT_NAME
    heads = list(heads)
    failures: list[str] = []
    unchecked: list[str] = []
    found = verify(ckpt, heads, context_path if context is not None else None)
    chain = found.as_dict()
    failures += [f"log: {line}" for line in found.rollback + found.problems]
    if found.report.reason is not None:
        failures.append(f"log: {found.report.summary()}")
    anchors = ["head file"] + (["snapshot"] if found.snapshot else []) + [f"--head {h[:12]}…" for h in heads]
    ctx = _load_context(context_path)
    if ctx is None:
        unchecked.append(f"no verified context at {context_path}: no claims to trace")
    elif isinstance(ctx.get("anchor"), Mapping):
        anchors.append(context_path.name)
    else:  # ARI's pipeline writes its own verified_context.json, without one
        unchecked.append(
            f"{context_path.name} carries no anchor (ARI's pipeline writes none): the log position it was "
            "built at is not known; its claims are still traced to their events"
        )
    outside = heads or (context is not None and ckpt.resolve() not in context_path.resolve().parents)
    if not outside:
        unchecked.append(
            "no anchor kept outside the checkpoint: a copy replaced whole (log, head file and context together) "
            "cannot be told from the original; pass --head HASH or --context FILE kept elsewhere"
        )
    roots = [Path(experiments_root)] if experiments_root is not None else experiments_roots(ckpt)
    if not any(r.is_dir() for r in roots):
        unchecked.append(f"no experiments directory ({', '.join(map(str, roots))}): artifacts and values not checked")
    backend = MemoryBackend(ckpt, readonly=True)
    try:
        claims = _claims(backend, ctx, roots) if ctx is not None and found.report.reason is None else []
        access, lines = check_chain(ckpt)
        failures += [f"access log: {p}" for p in access.problems]
        unchecked += [f"access log: {n}" for n in access.notes]
        replayed = replay_all(backend, read_records(lines))
    finally:
        backend.close()
    reads = {v: sum(1 for r in replayed if r.verdict == v) for v in ("same", "differs", "not_replayable")}
    if reads["not_replayable"]:
        whys = sorted({r.why for r in replayed if r.verdict == "not_replayable"})
        unchecked.append(f"{reads['not_replayable']} recorded read(s) not replayable: {'; '.join(whys)}")
    return Proof(
        str(ckpt),
        str(context_path) if ctx is not None else None,
        chain,
        anchors,
        claims,
        access.as_dict(),
        reads,
        [r.as_dict() for r in replayed if r.verdict == "differs"],
        failures,
        unchecked,
        strict,
    )


def _load_context(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InvalidInput("--context", f"{path} is not a readable verified context ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise InvalidInput("--context", f"{path} has no claims list: not a verified_context.json")
    return data


def _claims(backend: MemoryBackend, ctx: Mapping[str, Any], roots: list[Path]) -> list[ClaimProof]:
    session = backend.session
    with session.reading() as catalog:
        entries = list(catalog.entries.values())
        grounding = Grounding(roots, backend.get_experiment_context().get("metric_ranges"))
        grounding.learn(entries)
        status = repro_status(repro_events(catalog))
        out = []
        for claim in ctx["claims"]:
            if not isinstance(claim, Mapping):
                continue
            entry = catalog.entries.get(str(claim.get("entry_id"))) if claim.get("entry_id") else None
            out.append(_claim(session.ledger, entry, claim, grounding, status))
    return out


def _claim(
    ledger: Any, entry: Entry | None, claim: Mapping[str, Any], grounding: Grounding, status: dict[str, str]
) -> ClaimProof:
    proof = ClaimProof(str(claim.get("entry_id")), str(claim.get("node_id")), str(claim.get("text") or ""), "holds")
    if entry is None:
        proof.verdict = "fails"
        proof.failures.append("no entry of this id in the log (the context names a claim the log never held)")
        return proof
    event = ledger.event_at(entry.seq)
    proof.event = {"seq": entry.seq, "hash": event.hash if event else None}
    if event is None or event.id != entry.entry_id:
        proof.failures.append(f"the log's event at seq {entry.seq} is not this entry")
    elif claim.get("event_hash") not in (None, event.hash):
        proof.failures.append(
            f"the context names event {str(claim['event_hash'])[:12]}…, the log holds {event.hash[:12]}…"
        )
    if claim.get("text") != entry.text:
        proof.failures.append("the context's text differs from the text the log holds")
    if claim.get("metric_ptr") != entry.metadata.get("metric_ptr"):
        proof.failures.append("the context's metric_ptr differs from the log's")
    proof.repro_status = status.get(entry.entry_id)
    if proof.repro_status == "rerun_failed":
        proof.failures.append("a re-run failed")
    if claim.get("repro_status") != proof.repro_status:
        proof.failures.append(f"the context says re-run {claim.get('repro_status')}, the log says {proof.repro_status}")
    work_dir = grounding.work_dir(entry)
    if work_dir is None:
        proof.unchecked.append("its node's work dir is not present: artifacts and values not checked")
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
                proof.unchecked.append(f"{path}: not pinned by sha256 ({state.status} on disk)")
    values = grounding.values(entry, work_dir)
    proof.values = dict(values)
    if values["verdict"] == "mismatch":
        proof.failures += [f"value {m['value']}: {m['reason']}" for m in values.get("mismatches", [])]
    elif values["verdict"] == "unchecked" and values.get("why") != "nothing numeric to check":
        proof.unchecked.append(f"values: {values.get('why')}")
    proof.evidence = evidence_level(entry, proof.repro_status, grounding, values)
    if proof.failures:
        proof.verdict = "fails"
    return proof
