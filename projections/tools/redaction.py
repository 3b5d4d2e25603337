"""``ari-ledger redact``: the log redacted (``ledger.maintenance.redact``), then every file the read side
wrote from it made to forget what the redaction removed — by the one rule of
:mod:`ledger.maintenance.redact` (:class:`~ledger.maintenance.redact.Scrub`: the selector's matches anywhere, the
records of the chosen events, whole string values equal to a removed text; never a chain
field), and nothing else:

- the projection snapshot is deleted (a cache: the next open folds the redacted log, whose
  stubs make no rows; a process still open rebuilds when it folds the redaction event);
- the access log and its rotations, and ``verified_context.json``: passed through the rule,
  each file replaced atomically (the access log's lines chained again after the first changed
  line);
- the Letta agent: the redaction event's fold deletes the passages of the redacted events
  (done here at once when Letta is configured; otherwise by the next process that folds it).

Then it checks its own result (:class:`SelfCheck`, unless ``check=False``): the log verifies,
and ``prove`` (:func:`projections.tools.prove.prove`, run in this process before the rewrite and
after it) gives every claim and every recorded read the redaction did not involve the verdict
it gave before — a claim whose entry was not chosen, a read that returned no chosen entry and
quoted no removed text (such a read loses that text from its line, so its replay is not the
same read any more). A checkpoint-level failure that is new and names no chosen entry is a
difference too. What differs is said, by name; the rewrite is not undone. Lines appended by
another process between the two runs are not compared.

- ARI's backup in the checkpoint (``memory_backup.jsonl.gz``, export-ari's default and ARI's
  end-of-run backup): each chosen event's record removed (matched by kind, node and text:
  :func:`ledger.maintenance.redact.backup_key`), every other line passed through the rule, replaced atomically;
- files set aside beside the log, ``verified_context.json`` and the backup (``.rolled-back-*``,
  ``.torn-*``, ``.damaged-*``, ``.repaired-*``) that hold a chosen id, a removed text or a match:
  deleted (:func:`ledger.maintenance.redact.scrub_aside`).

Journaled (:mod:`ledger.maintenance.redact`): the intent ``memory_ledger.jsonl.gz.redact`` (0600) is durable
before the log is renamed and removed only once every derived file above is scrubbed (each
replacement synced, renamed, its directory synced; each deletion's directory synced). A
redaction killed at any point is finished by the next ``redact`` (any selector), which says
``resumed: …`` first.

Export bundles and ARI backups written afterwards come from the redacted log and hold stubs.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ledger import Ledger
from ledger.maintenance.redact import MARK, Pending, RedactionReport, Scrub, Selector, finish, pending, redact
from projections import settings
from projections.access.reader import check_chain, read_records
from projections.api import MemoryBackend, scrub_derived
from projections.engines.protocol import Progress
from projections.tools.prove import prove
from projections.tools.reads import SCOPE_REDACTED, replay_all

__all__ = ["MARK", "CheckpointRedaction", "SelfCheck", "redact_checkpoint"]


@dataclass
class SelfCheck:
    """The redaction checked against ``prove`` before and after it (see the module)."""

    verify: str  # Ledger.verify's summary after the redaction
    verified: bool
    claims: int = 0  # claims compared: their entry was not chosen
    reads: int = 0  # reads compared
    skipped_claims: int = 0  # claims of chosen entries (they lose their text: not compared)
    skipped_context: int = 0  # claims checked against a redacted experiment context (their grounds went)
    skipped_reads: dict[str, int] = field(default_factory=dict)  # why → how many, not compared
    differences: list[str] = field(default_factory=list)
    before: dict[str, str] = field(default_factory=dict)  # entry id → prove's verdict, before
    after: dict[str, str] = field(default_factory=dict)  # … and after

    @property
    def ok(self) -> bool:
        return self.verified and not self.differences

    def lines(self) -> list[str]:
        skipped = [f"{n} read(s) {why}" for why, n in self.skipped_reads.items() if n]
        skipped += [f"{self.skipped_claims} claim(s) of a redacted entry"] if self.skipped_claims else []
        skipped += (
            [f"{self.skipped_context} claim(s) whose numbers were checked against the redacted experiment context"]
            if self.skipped_context
            else []
        )
        compared = f"{self.claims} claim(s) and {self.reads} read(s) the redaction did not involve"
        not_compared = f" (not compared: {', '.join(skipped)})" if skipped else ""
        if self.ok:
            return [f"check: ok: the log verifies; prove gives the same verdicts for the {compared}{not_compared}"]
        out = [
            "REDACTION CHECK FAILED: the log is rewritten (not undone), but "
            + ("it does not verify: " + self.verify if not self.verified else f"prove differs on the {compared}")
            + not_compared
        ]
        return out + [f"  differs: {d}" for d in self.differences]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


@dataclass
class CheckpointRedaction:
    """The log's redaction, what else was scrubbed, and the redaction's check of itself."""

    log: RedactionReport
    scrubbed: list[str]
    check: SelfCheck | None = None  # None: dry run, nothing chosen, or not asked for
    resumed: Pending | None = None  # an interrupted redaction finished first

    @property
    def ok(self) -> bool:
        return self.check is None or self.check.ok

    def lines(self) -> list[str]:
        out = [self.resumed.line()] if self.resumed is not None else []
        out += [*self.log.lines(), *(f"scrubbed {name}" for name in self.scrubbed)]
        return out + (self.check.lines() if self.check is not None else [])

    def as_dict(self) -> dict[str, Any]:
        r = self.log
        return {
            "dry_run": r.event is None,
            "selector": r.selector,
            "chosen": [{"seq": e.seq, "id": e.id, "node": e.node, "type": e.type} for e in r.chosen],
            "redaction_seq": r.event.seq if r.event else None,
            "log_bytes": [r.bytes_before, r.bytes_after],
            "deleted": r.removed_files,
            "scrubbed": self.scrubbed,
            "check": self.check.as_dict() if self.check is not None else None,
            "resumed": (
                {
                    "redaction_seq": self.resumed.seq,
                    "selector": self.resumed.selector,
                    "scrubbed": self.resumed.scrubbed,
                }
                if self.resumed is not None
                else None
            ),
        }


def redact_checkpoint(
    checkpoint_dir: str | Path,
    selector: Selector,
    *,
    reason: str,
    by: str,
    dry_run: bool = False,
    check: bool = True,
    progress: Progress | None = None,
) -> CheckpointRedaction:
    """Finish an interrupted redaction (its intent), redact the log, scrub the files derived from
    it, remove the intent, and check the result (see the module). ``progress(step, STEPS)``
    before each of :data:`STEPS` (and once at the end): a redaction of a large log takes seconds
    in each."""
    ckpt = Path(checkpoint_dir)
    tell = progress or (lambda _done, _total: None)
    resumed = None if dry_run else pending(ckpt)
    if resumed is not None:
        resumed.scrubbed = scrub_derived(ckpt, resumed.rule, resumed.backup)
        finish(ckpt, resumed.seq)
    tell(0, len(STEPS))
    before = _Baseline.take(ckpt) if check and not dry_run else None
    tell(1, len(STEPS))
    report = redact(ckpt, selector, reason=reason, by=by, dry_run=dry_run, keep_intent=True)
    if report.event is None:
        tell(len(STEPS), len(STEPS))
        return CheckpointRedaction(report, [], resumed=resumed)
    tell(2, len(STEPS))
    scrub = report.rule
    scrubbed = scrub_derived(ckpt, scrub, report.backup)
    finish(ckpt, report.event.seq)  # every derived file scrubbed: the intent (and the secret in it) goes
    _fold_letta(ckpt)
    done = CheckpointRedaction(report, scrubbed, resumed=resumed)
    tell(3, len(STEPS))
    if before is not None:
        seeded = any(e.type == "core_seeded" for e in report.chosen)  # the experiment context: facts, primary metric
        done.check = _compare(before, _Baseline.take(ckpt), scrub, ckpt, context_removed=seeded)
    tell(len(STEPS), len(STEPS))
    return done


# What a redaction does, in order (the steps its progress counts).
STEPS = (
    "what prove says before",
    "rewriting the log",
    "scrubbing the files derived from it",
    "checking what prove says after",
)


def _fold_letta(ckpt: Path) -> None:
    """With Letta configured, fold the redaction now, so the passages leave the server before
    the command returns (a server that is down gets it from the next process that folds)."""
    if settings.letta_base_url() is None:
        return
    backend = MemoryBackend(ckpt)
    try:
        backend.flush_projections()
    finally:
        backend.close()


# ---------------------------------------------------------------------------- the self-check


@dataclass
class _Baseline:
    """What ``prove`` says of a checkpoint: each claim's verdict and failures, the
    checkpoint-level failures, and each recorded read replayed."""

    claims: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    records: dict[str, bytes] = field(default_factory=dict)  # entry id → its claim in the context file
    failures: list[str] = field(default_factory=list)
    reads: dict[str, Any] = field(default_factory=dict)  # n (or file:line) → reads.Replayed
    error: str | None = None

    @classmethod
    def take(cls, ckpt: Path) -> _Baseline:
        try:
            proof = prove(ckpt)
            # replayed again on a backend of its own, as before: docs/cli.md shows this command's
            # "folding … from scratch" warning once per backend (prove's Reviewer.replayed has them)
            backend = MemoryBackend(ckpt, readonly=True)
            try:
                replayed = replay_all(backend, read_records(check_chain(ckpt)[1]))
            finally:
                backend.close()
        except Exception as exc:  # the check must say it could not run, never hide the redaction's outcome
            return cls(error=f"{type(exc).__name__}: {exc}")
        out = cls(failures=list(proof.failures))
        if proof.context is not None:
            with contextlib.suppress(OSError, ValueError):
                ctx = msgspec.json.decode(Path(proof.context).read_bytes())
                for item in ctx.get("claims") or [] if isinstance(ctx, dict) else []:
                    if isinstance(item, dict) and isinstance(item.get("entry_id"), str):
                        out.records.setdefault(item["entry_id"], msgspec.json.encode(item, order="sorted"))
        for claim in proof.claims:
            out.claims.setdefault(claim.entry_id, (claim.verdict, tuple(claim.failures)))
        for r in replayed:
            out.reads[f"n{r.record.n}" if r.record.n is not None else r.record.where] = r
        return out


def _compare(
    before: _Baseline, after: _Baseline, scrub: Scrub, ckpt: Path, *, context_removed: bool = False
) -> SelfCheck:
    """Prove's verdicts before and after, on what the redaction did not choose. A claim whose
    record is unchanged but whose values or evidence changed while the experiment context (the
    core seed: its hardware spec and rationale are facts claims are checked against) was
    redacted involved that context: it is counted as such, not as a difference."""
    with Ledger.open_readonly(ckpt) as ledger:
        verified = ledger.verify()
    check = SelfCheck(verified.summary(), verified.ok)
    check.before = {i: v for i, (v, _) in before.claims.items()}
    check.after = {i: v for i, (v, _) in after.claims.items()}
    for when, base in (("before", before), ("after", after)):
        if base.error is not None:
            check.differences.append(f"prove could not run {when} the redaction ({base.error}): nothing compared")
    if before.error is not None or after.error is not None:
        return check
    chosen = scrub.ids
    for eid, (verdict, failures) in before.claims.items():
        if eid in chosen:
            check.skipped_claims += 1
            continue
        check.claims += 1
        now = after.claims.get(eid)
        if now is None:
            check.differences.append(f"claim {eid}: {verdict} before, not in the context after")
        elif now != (verdict, failures):
            gained = [f for f in now[1] if f not in failures]
            lost = [f for f in failures if f not in now[1]]
            why = "; ".join([*(f"now fails: {f}" for f in gained), *(f"no longer fails: {f}" for f in lost)])
            same = eid in before.records and before.records[eid] == after.records.get(eid)
            grounds_only = all(_from_lost_grounds(f) for f in gained)
            if same and context_removed and grounds_only:
                check.claims, check.skipped_context = check.claims - 1, check.skipped_context + 1  # not compared
                continue
            cause = (
                " — its record in the context file is unchanged: it was checked against something the redaction removed"
                if same
                else ""
            )
            check.differences.append(
                f"claim {eid}: {verdict} before, {now[0]} after" + (f" ({why})" if why else "") + cause
            )
    check.differences += [
        f"claim {eid}: {after.claims[eid][0]} after, not in the context before"
        for eid in after.claims.keys() - before.claims.keys()
        if eid not in chosen
    ]
    check.differences += [
        f"new failure: {f}" for f in after.failures if f not in before.failures and not any(i in f for i in chosen)
    ]
    check.skipped_reads = {
        "returned a redacted entry": 0,
        "quoted the removed text": 0,
        "ranked a redacted entry's scope": 0,
    }
    for key, was in before.reads.items():
        record = was.record
        if set(record.ids) & chosen:
            check.skipped_reads["returned a redacted entry"] += 1
            continue
        if scrub.quotes([record.query, record.args]):  # what the caller asked: a tool name or scope is never exempt
            check.skipped_reads["quoted the removed text"] += 1
            continue
        now = after.reads.get(key)
        if now is not None and now.verdict == "not_replayable" and now.why == SCOPE_REDACTED:
            check.skipped_reads["ranked a redacted entry's scope"] += 1  # its order weighs the entry removed
            continue
        check.reads += 1
        if now is None:
            check.differences.append(f"read {record.where} ({record.tool}): replayed before, not found after")
        elif (now.verdict, sorted(now.differing)) != (was.verdict, sorted(was.differing)):
            why = f": {now.why}" if now.why else ""
            check.differences.append(
                f"read {record.where} ({record.tool} @seq {record.at}): {was.verdict} before, {now.verdict} after{why}"
            )
    return check


def _from_lost_grounds(failure: str) -> bool:
    """A failure a claim gains only because what its numbers were checked against is gone: its
    values or evidence now differ, and so it now has the exclusion for unchecked numbers and
    leaves what the paper reads."""
    head = failure.split(":", 1)[0]
    if head in ("values", "evidence") or failure.startswith("in usable_for_claims, not checked:"):
        return True
    return "unchecked_numbers" in failure and (head == "exclusions" or failure.startswith("in usable_for_claims"))
