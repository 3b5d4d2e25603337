"""A checkpoint's state for people: events, projection lag, anchors, alarms — read-only.

``status`` and ``verify`` are one view: the projections' lag and the snapshot's check come
from :func:`projection_state`, the anchors outside the log (``verified_context.json``, the
snapshot, ``--head`` hashes) from :func:`anchors`. Nothing here writes to the checkpoint
except :func:`accept_rollback`, which a person asks for.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ledger import Ledger, VerifyReport, layout
from ledger.anchor import Anchor, AnchorUnreadable, context_anchor, verified_context_anchor
from ledger.checkpoint_format import VERIFIED_CONTEXT_NAME
from ledger.events import CHECKPOINT_NODE, is_stub_body
from ledger.layout import SNAPSHOT_NAME
from ledger.maintenance.redact import INTENT_SUFFIX as REDACT_INTENT
from ledger.maintenance.redact import Pending
from ledger.maintenance.repair import INTENT_SUFFIX as REPAIR_INTENT
from ledger.maintenance.repair import RepairReport
from ledger.verify import verify as verify_log
from projections import settings
from projections.api import accept_rollback as accept_rollback  # `verify --accept-rollback`
from projections.api import finish_redaction, finish_repair, refuse_unfinished
from projections.engines.local import (
    CLOSE_SAVE_SHARE,
    SNAPSHOT_EVERY,
    SnapshotCheck,
    check_snapshot,
)
from projections.engines.protocol import Progress
from projections.engines.snapshot import SnapshotError, read_preamble
from projections.engines.snapshot_check import OneRead

ONE_READ_FROM = 20_000  # a snapshot's cursor from which verify reads the log once for the log's and its checks


def projection_state(ledger: Ledger, *, deep: bool = False) -> dict[str, Any]:
    """How far each projection is behind the log (the snapshot a resume loads, and Letta),
    and what the snapshot's check found; ``deep`` compares the snapshot with the whole log."""
    snap = check_snapshot(ledger, deep=deep)
    state: dict[str, Any] = {"snapshot": None}
    if snap.present:
        state["snapshot"] = {
            "cursor": snap.cursor,
            "lag": None if snap.cursor is None else ledger.last_seq - snap.cursor,
            **{
                k: v
                for k, v in (("rebuilt", snap.rebuilt), ("rollback", snap.rollback), ("problem", snap.problem))
                if v
            },
        }
    state["search_engine"] = settings.search_engine()  # which engine answers searches
    if settings.letta_base_url():
        from projections.engines.letta import agent_cursor

        letta = agent_cursor(ledger.checkpoint_dir)
        letta["lag"] = None if letta["cursor"] is None else ledger.last_seq - letta["cursor"]
        state["letta"] = letta
    return state


def status(checkpoint_dir: str | Path) -> dict[str, Any]:
    """Events, nodes, event types, projection state, alarms (a rollback) and notes (a torn
    tail, a damaged head record, a snapshot problem). Raises LogCorrupted on damage."""
    with Ledger.open_readonly(checkpoint_dir) as ledger:
        if ledger.damage is not None:
            raise ledger.damage
        types: Counter[str] = Counter()
        nodes: set[str] = set()
        redacted = 0
        for event in ledger.events():
            types[event.type] += 1
            nodes.add(event.node)
            redacted += is_stub_body(event.body)
        nodes.discard(CHECKPOINT_NODE)
        projections = projection_state(ledger)
        snapshot = projections["snapshot"] or {}
        vc_anchor, vc_problem = verified_context_anchor(ledger.checkpoint_dir)
        alarms = [
            a
            for a in (ledger.head_problem(), snapshot.get("rollback"), vc_anchor and ledger.anchor_problem(vc_anchor))
            if a
        ]
        notes = [
            n
            for n in (
                _torn_note(ledger),
                _head_note(ledger),
                snapshot.get("problem"),
                _rebuild_note(ledger, projections["snapshot"]),
                vc_problem,
                _duplicates_note(projections.get("letta")),
                *_unfinished_notes(ledger),
            )
            if n
        ]
        return {
            "checkpoint": str(ledger.checkpoint_dir),
            "ckpt": ledger.ckpt,
            "events": sum(types.values()),
            "last_seq": ledger.last_seq,
            "nodes": len(nodes),
            "types": dict(sorted(types.items())),
            "redacted": redacted,  # events whose body a redaction removed (``ari-ledger redact``)
            "file_size": ledger.path.stat().st_size,
            "projections": projections,
            "alarms": alarms,
            "notes": notes,
        }


def _rebuild_note(ledger: Ledger, snapshot: dict[str, Any] | None) -> str | None:
    """A snapshot that is missing, or further behind the log than a close leaves it: every
    reading command folds what it lacks, each time, until ``ari-ledger rebuild`` saves one."""
    if not ledger.last_seq:
        return None
    rebuild = f"`ari-ledger rebuild {ledger.checkpoint_dir}` saves one"
    if snapshot is None:
        return f"no projection snapshot: every read folds all {ledger.last_seq:,} events from scratch; {rebuild}"
    lag = snapshot.get("lag")
    if lag is None or snapshot.get("rollback") or snapshot.get("problem"):
        return None
    if lag >= max(1, min(SNAPSHOT_EVERY, int(ledger.last_seq * CLOSE_SAVE_SHARE))) and lag > 1:
        return f"the projection snapshot is {lag:,} events behind the log: every read folds them; {rebuild}"
    return None


def _unfinished_notes(ledger: Ledger) -> list[str]:
    """A repair or a redaction a crash stopped (:func:`ledger.layout.unfinished`): its intent
    beside the log, and how to finish it."""
    why = {
        "repair": (REPAIR_INTENT, "a repair is unfinished"),
        "redaction": (REDACT_INTENT, "a redaction is unfinished (its derived files may still hold the removed text)"),
    }
    name = ledger.path.name
    return [
        f"{why[op][1]}: `ari-ledger repair` finishes it (as does any writable open) ({name}{why[op][0]})"
        for op in layout.unfinished(ledger.checkpoint_dir)
    ]


@dataclasses.dataclass(frozen=True)
class Verification:
    """What ``verify`` found: the chain report, rollbacks against anchors, other problems."""

    report: VerifyReport
    rollback: list[str]
    problems: list[str]
    snapshot: SnapshotCheck | None

    @property
    def passed(self) -> bool:
        return self.report.reason is None and not self.rollback and not self.problems

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self.report) | {
            "rollback": self.rollback,
            "problems": self.problems,
            "anchor_problem": self.rollback[0] if self.rollback else None,
            "snapshot": dataclasses.asdict(self.snapshot) if self.snapshot else None,
        }


def verify(
    checkpoint_dir: str | Path,
    heads: Iterable[str] = (),
    context: Path | None = None,
    progress: Progress | None = None,
) -> Verification:
    """Every member, hash and link of the log, its anchors (``heads``, verified_context.json or
    the ``context`` file given, the head file, the snapshot) and the snapshot against the log.
    ``progress(events checked, events to check)``: the log's events, then the snapshot's
    compared with the log, as one count. A repair or a redaction a crash left unfinished is
    refused (UnfinishedOperation, naming the command that finishes it), never reported as a
    rollback."""
    refuse_unfinished(checkpoint_dir)
    with Ledger.open_readonly(checkpoint_dir) as ledger:
        return verify_open(ledger, heads, context, progress)


def verify_open(
    ledger: Ledger,
    heads: Iterable[str] = (),
    context: Path | None = None,
    progress: Progress | None = None,
) -> Verification:
    """:func:`verify` on a log already open (``Ledger.open_readonly``), which stays open: a
    command that reads the log next opens it once.

    For the commands a person runs (``verify``, ``prove``, ``redact``'s check), in their own
    process: a large log or snapshot is checked with forked second processes where a CPU is
    free and no other thread runs (:func:`ledger.verify.second_cpu`). Library code calls
    ``Ledger.verify``, which forks only when asked to."""
    vc_anchor, vc_problem = context_anchor(context or ledger.checkpoint_dir / VERIFIED_CONTEXT_NAME)
    events = ledger.last_seq
    cursor = _snapshot_cursor(ledger)
    anchors = [Anchor("--head", h) for h in heads] + ([vc_anchor] if vc_anchor else [])
    snapshot: SnapshotCheck | None
    if cursor >= ONE_READ_FROM:
        # The snapshot's rows are compared with the log's events as the log's check reads them
        # (pieces of it in a second process where a CPU is free); its result counts only once the
        # log checked out.
        read = OneRead(ledger, anchors, cursor, progress)
        try:
            snapshot = check_snapshot(ledger, progress=read, one_read=read)
            report = read.report()
        finally:
            read.check.cancel()
        snapshot = snapshot if report.reason is None else None
    else:
        report = verify_log(ledger, anchors, counted(progress, 0, events + cursor), parallel="auto")
        snapshot = None
        if report.reason is None:
            snapshot = check_snapshot(ledger, progress=counted(progress, events, events + cursor))
    rollback = [*report.rollback, *([snapshot.rollback] if snapshot and snapshot.rollback else [])]
    problems = [
        *report.problems,
        *([vc_problem] if vc_problem else []),
        *([snapshot.problem] if snapshot and snapshot.problem else []),
    ]
    return Verification(report, rollback, problems, snapshot)


def counted(progress: Progress | None, base: int, total: int) -> Progress | None:
    """One part of a longer count: ``progress(base + done, total)`` (None without ``progress``)."""
    if progress is None:
        return None
    report = progress

    def part(done: int, _total: int) -> None:
        report(base + done, max(total, base + done))

    return part


def _snapshot_cursor(ledger: Ledger) -> int:
    """The snapshot's cursor from its header (0 when there is none, or it cannot be read)."""
    try:
        return read_preamble(ledger.path.with_name(SNAPSHOT_NAME)).cursor
    except (OSError, SnapshotError, ValueError):
        return 0


def _duplicates_note(letta: dict[str, Any] | None) -> str | None:
    """Duplicate agents (older versions let two processes create one each) are not an alarm:
    one is used, deterministically; say which and how to delete the others."""
    if not letta or not letta.get("duplicates"):
        return None
    return (
        f"{len(letta['duplicates'])} duplicate Letta agent(s) named {letta['agent']} (left by an older "
        f"version); the oldest, {letta['agent_id']}, is the one in use; "
        "`ari-ledger restore --dedupe CKPT` deletes the others"
    )


def _torn_note(ledger: Ledger) -> str | None:
    bad = ledger.torn_tail
    if bad is None:
        return None
    size = ledger.path.stat().st_size - bad.offset
    return (
        f"torn tail: {size} bytes at byte offset {bad.offset} ({bad.reason}); the next writable open moves them aside"
    )


def _head_note(ledger: Ledger) -> str | None:
    try:
        anchor = ledger.head_anchor()
    except AnchorUnreadable as exc:
        return f"{exc}; the next writable open re-anchors it"
    if ledger.head_damaged_slot and anchor is not None:
        return f"one of the head file's two records is damaged; the other (seq {anchor.seq}) is used"
    return None


def repair(checkpoint_dir: Path) -> tuple[RepairReport, list[str], Pending | None]:
    """``ari-ledger repair``: the log repaired (:func:`ledger.maintenance.repair.repair`, which finishes an
    interrupted one), each derived file whose anchor the repaired log no longer holds moved
    aside (:func:`~projections.api.unfinished.finish_repair`), and a redaction a crash
    interrupted finished. Returns the repair, what was moved aside, and the redaction finished."""
    report, aside = finish_repair(checkpoint_dir)
    return report, aside, finish_redaction(checkpoint_dir)
