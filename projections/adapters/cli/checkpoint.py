"""Commands on the log itself: ``status``, ``verify``, ``log`` (read-only), and the two that
change it on purpose: ``repair`` and ``redact``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import shlex
import sys
from typing import TYPE_CHECKING, Any

import msgspec

from ledger import InvalidInput, Ledger, layout
from ledger.events import check_seq
from ledger.layout import SNAPSHOT_NAME
from ledger.progress import Interrupted
from projections.adapters.cli.framework import (
    ERROR_HELP,
    EXIT_CHECK_FAILED,
    EXIT_ERROR,
    EXIT_OK,
    as_of_arg,
    checkpoint_arg,
    command,
    counts,
    emit,
    node_arg,
)
from projections.adapters.cli.progress import only_reading

if TYPE_CHECKING:
    from ledger.events import Event
    from ledger.maintenance.redact import Selector

# Each command imports what it runs (``projections.tools.checkpoint`` and the projection engines
# under it) when it runs: the command line starts without them.

log = logging.getLogger("ledger")

# after a command deleted or set aside the snapshot (or verified_context.json)
REBUILD_LINE = (
    "next: `ari-ledger rebuild {}` saves a new snapshot (until then every read folds the whole log) "
    "and rewrites verified_context.json"
)


def _verify_args(parser: argparse.ArgumentParser) -> None:
    checkpoint_arg(parser)
    parser.add_argument(
        "--head",
        action="append",
        default=[],
        metavar="HASH",
        help="an event hash kept outside the checkpoint (an export manifest's last_hash, a note): "
        "fail unless it is an event of this chain; prints its seq (repeatable; 12+ hex digits)",
    )
    parser.add_argument(
        "--accept-rollback",
        action="store_true",
        help="after a person has looked: accept the log as it is, clearing a rollback alarm "
        "(a damaged tail and stale snapshot/verified context are moved aside, never deleted)",
    )


@command(
    "verify",
    "check the log (members, hashes, links), its anchors and derived files (exit 1 on any problem)",
    _verify_args,
    exit_codes={
        EXIT_OK: "the log, its anchors and derived files check out (or --accept-rollback accepted them)",
        EXIT_CHECK_FAILED: "a problem: damage, a torn tail, a rollback, a bad derived file (each printed)",
    },
)
def cmd_verify(args: argparse.Namespace) -> int:
    from projections.tools import checkpoint as state

    if args.accept_rollback:
        from pathlib import Path

        accepted = state.accept_rollback(Path(args.checkpoint))
        for line in accepted or ["nothing to accept: the log holds every anchor"]:
            print(f"accepted: {line}" if accepted else line)
        return EXIT_OK
    bar = only_reading("verifying", "verify")

    found = state.verify(args.checkpoint, [hash_arg(h) for h in args.head], progress=bar)
    report = found.report
    if args.json:
        emit(found.as_dict())
    else:
        lines = [f"rolled back: {line}" for line in found.rollback] + [f"problem: {line}" for line in found.problems]
        if report.reason is not None or not found.rollback:
            lines.insert(0, report.summary())  # damaged / torn tail / ok; else a rollback line leads
        lines += [f"head {h[:12]}…: seq {seq} of {report.last_seq}" for h, seq in report.found.items()]
        lines += next_steps(found.report, found.rollback, args.checkpoint)
        print("\n".join(lines))
    return EXIT_OK if found.passed else EXIT_CHECK_FAILED


def next_steps(report: Any, rollback: list[str] | tuple[str, ...], checkpoint: str) -> list[str]:
    """What the person can do about what ``verify`` found: the command, with their checkpoint."""
    where = shlex.quote(checkpoint)
    if report.reason is not None and report.torn_tail:
        return [f"next: `ari-ledger repair {where}` (or the next write) sets the torn tail aside, byte for byte"]
    if report.reason is not None:
        return [
            f"next: `ari-ledger repair {where}` keeps every event before seq {report.first_bad_seq}, "
            "sets the rest aside byte for byte and re-appends what it can salvage"
        ]
    if rollback:
        return [
            "next: restore the missing events (a backup, a .torn-* file), or accept the log as it is "
            f"with `ari-ledger verify --accept-rollback {where}`"
        ]
    return []


def _self_check(checkpoint: str, work: str) -> Any:
    """``verify`` after a change: a Ctrl-C here leaves the change done, its check not."""
    from projections.tools import checkpoint as state

    try:
        return state.verify(checkpoint)
    except KeyboardInterrupt:
        raise Interrupted(
            f"the {work} is done; only its self-check was cut short (`ari-ledger verify {shlex.quote(checkpoint)}` checks)"
        ) from None


def hash_arg(value: str) -> str:
    value = value.strip().lower()
    if not 12 <= len(value) <= 64 or any(c not in "0123456789abcdef" for c in value):
        raise InvalidInput("--head", f"{value!r} is not an event hash (12 to 64 lowercase hex digits)")
    return value


@command(
    "status",
    "events, nodes, event types, last seq, projection lag and alarms (read-only; exit 1 on an alarm)",
    checkpoint_arg,
    exit_codes={EXIT_OK: "no alarm (notes, if any, are printed)", EXIT_CHECK_FAILED: "an alarm: a rollback"},
)
def cmd_status(args: argparse.Namespace) -> int:
    from projections.tools import checkpoint as state

    data = state.status(args.checkpoint)
    if args.json:
        emit(data)
    else:
        print("\n".join(status_lines(data)))
    return EXIT_CHECK_FAILED if data["alarms"] else EXIT_OK


def status_lines(data: dict[str, Any]) -> list[str]:
    """``status`` for people: one labelled line per fact, counts in words, no Python reprs."""
    projections = data["projections"]
    rows = [
        ("checkpoint", layout.shown(data["checkpoint"])),
        ("ckpt", data["ckpt"]),
        ("events", f"{data['events']} ({counts(data['types'])}); {data['redacted']} redacted"),
        ("last seq", str(data["last_seq"])),
        ("nodes", str(data["nodes"])),
        ("log size", f"{data['file_size']:,} bytes"),
        ("snapshot", _projection_line(projections.get("snapshot"), "none")),
        ("search", f"{projections.get('search_engine')} engine"),
    ]
    if "letta" in projections:
        letta = projections["letta"]
        rows.append(("letta", f"agent {letta.get('agent')}: " + _projection_line(letta, "unknown")))
    shown = {"checkpoint", "ckpt", "events", "types", "redacted", "last_seq", "nodes", "file_size", "projections"}
    rows += [  # a fact added later is still shown, as JSON rather than a Python repr
        (key.replace("_", " "), value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        for key, value in data.items()
        if key not in shown | {"alarms", "notes"}
    ]
    rows += [("alarm", a) for a in data["alarms"]] + [("note", n) for n in data["notes"]]
    return [f"{key:>10}: {value}" for key, value in rows]


def _projection_line(state: dict[str, Any] | None, absent: str) -> str:
    """Where a projection stands: its seq and how far behind the log, and any problem it has."""
    if not state:
        return absent
    cursor, lag = state.get("cursor"), state.get("lag")
    line = "seq unknown" if cursor is None else f"at seq {cursor}"
    if lag is not None:
        line += ", up to date" if lag == 0 else f", {lag} behind" if lag > 0 else f", {-lag} ahead of the log"
    extra = [f"{key}: {state[key]}" for key in ("rebuilt", "rollback", "problem", "error") if state.get(key)]
    if state.get("duplicates"):
        extra.append(f"{len(state['duplicates'])} duplicate agent(s)")
    return "; ".join([line, *extra])


def _log_args(parser: argparse.ArgumentParser) -> None:
    checkpoint_arg(parser, json_flag=False)
    as_of_arg(parser)
    node_arg(parser)


def _check_log(args: argparse.Namespace) -> None:
    """A negative seq or a node the checkpoint does not know is one error line, not empty output."""
    check_seq(args.as_of)
    if args.node is not None:
        check_node(args.checkpoint, args.node)


def check_node(checkpoint: str, node: str) -> None:
    """``--node``: a node some event of the log belongs to; any other is one error line (a
    selector that names nothing would print, or redact, nothing and look like success)."""
    with Ledger.open_readonly(checkpoint) as ledger:
        if ledger.damage is not None:
            raise ledger.damage
        if any(event.node == node for event in ledger.events()):
            return
    raise InvalidInput("--node", f"unknown node {node!r} in this checkpoint (see `ari-ledger tree`)")


def _last_seq(checkpoint: str) -> int:
    with Ledger.open_readonly(checkpoint) as ledger:
        return ledger.last_seq


def _redaction_kept(checkpoint: str, before: int) -> str:
    """What a redaction stopped by Ctrl-C kept: nothing, the redacted log with its derived files
    to finish, or everything but its self-check."""
    if "redaction" in layout.unfinished(checkpoint):
        return (
            "the log is redacted, its derived files not all scrubbed yet: "
            f"`ari-ledger repair {checkpoint}` (or the next writable open) finishes it"
        )
    with Ledger.open_readonly(checkpoint) as ledger:
        landed = any(e.type == "events_redacted" for e in ledger.events(after=before))
    if landed:
        return f"the redaction is done; only its self-check was cut short (`ari-ledger prove {checkpoint}` checks)"
    return "nothing was changed"


def check_chooses(checkpoint: str, selector: Selector, text_option: str) -> None:
    """Every ``--id`` names a redactable event of the log, and the selector chooses at least one
    event: a mistyped selector is one error line and exit 2, never "would redact 0 event(s)",
    exit 0, and the secret left in place."""
    from ledger.maintenance.redact import REDACTABLE

    chosen: set[str] = set()
    ids: dict[str, Event] = {}
    wanted = set(selector.ids)
    with Ledger.open_readonly(checkpoint) as ledger:
        if ledger.damage is not None:
            raise ledger.damage
        for event in ledger.events():
            if event.id in wanted:
                ids[event.id] = event
            if selector.matches(event):
                chosen.add(event.id)
    for given in selector.ids:
        if given not in ids:
            raise InvalidInput("--id", f"no event of this checkpoint has id {given!r} (see `ari-ledger log`)")
        if given not in chosen and not (selector.node or selector.text):
            event = ids[given]
            why = "is already redacted" if event.type in REDACTABLE else f"is a {event.type} event, which holds no text"
            raise InvalidInput("--id", f"event {given!r} {why}; nothing changed")
    if not chosen:
        named = [
            *(["--id"] if selector.ids else []),
            *(["--node"] if selector.node else []),
            *([text_option] if selector.text else []),
        ]
        field = named[0] if len(named) == 1 else " ".join(named)
        raise InvalidInput(field, "chooses no event with text to redact (together they must all hold); nothing changed")


@command(
    "log",
    "print events as JSON lines, optionally as of a seq or for one node",
    _log_args,
    exit_codes={EXIT_ERROR: f"{ERROR_HELP}; an --as-of outside the log, an unknown --node, damage in the log"},
    check=_check_log,
)
def cmd_log(args: argparse.Namespace) -> int:
    encoder = msgspec.json.Encoder()
    out = sys.stdout.buffer
    with Ledger.open_readonly(args.checkpoint) as ledger:
        if ledger.damage is not None:
            raise ledger.damage
        check_seq(args.as_of, "--as-of", ledger.last_seq)
        alarm = ledger.head_problem()
        if alarm:
            log.warning("alarm: %s", alarm)
        for event in ledger.events(as_of=args.as_of):
            if args.node is None or event.node == args.node:
                out.write(encoder.encode(event) + b"\n")
    out.flush()
    return EXIT_OK


@command(
    "repair",
    "explicitly repair a damaged log: keep the valid prefix, move the rest aside byte for byte, "
    "re-append what can be salvaged from it (marked salvaged); exit 0 when the result verifies",
    checkpoint_arg,
    exit_codes={EXIT_OK: "the repaired log verifies", EXIT_CHECK_FAILED: "it still does not verify"},
)
def cmd_repair(args: argparse.Namespace) -> int:
    from pathlib import Path

    from projections.tools import checkpoint as state

    try:
        report, aside, redaction = state.repair(Path(args.checkpoint))
    except KeyboardInterrupt:
        left = layout.unfinished(args.checkpoint)
        kept = (
            f"the {' and the '.join(left)}'s record is kept: `ari-ledger repair {args.checkpoint}` (or the next "
            "writable open) finishes it"
            if left
            else "the repair had finished; nothing is left to do"
        )
        raise Interrupted(kept) from None
    found = _self_check(args.checkpoint, "repair")
    if args.json:
        finished = {"redaction_seq": redaction.seq, "scrubbed": redaction.scrubbed} if redaction else None
        emit(
            {
                "repair": dataclasses.asdict(report),
                "moved_aside": aside,
                "redaction_finished": finished,
                "verify": found.as_dict(),
            }
        )
    else:
        print(
            "\n".join(
                [
                    *report.lines(),
                    *([redaction.line()] if redaction else []),
                    *(f"moved aside: {line}" for line in aside),
                    *([REBUILD_LINE.format(args.checkpoint)] if aside else []),
                    f"verify: {found.report.summary()}",  # the verdict stays the last line
                ]
            )
        )
    return EXIT_OK if found.passed else EXIT_CHECK_FAILED


def _redact_args(parser: argparse.ArgumentParser) -> None:
    checkpoint_arg(parser)
    what = parser.add_argument_group("what to redact (at least one; together they must all hold)")
    what.add_argument("--id", action="append", default=[], metavar="EVENT_ID", help="an event id (repeatable)")
    node_arg(what)
    what.add_argument("--match", metavar="TEXT", help="entries, ReAct steps or core seeds holding this literal text")
    what.add_argument("--regex", metavar="PATTERN", help="... or matching this regular expression")
    parser.add_argument("--reason", required=True, help="why (kept in the log with the redaction)")
    parser.add_argument("--by", default=None, help="who redacts (default: the user and host)")
    parser.add_argument("--dry-run", action="store_true", help="list what would be redacted; change nothing")


@command(
    "redact",
    "remove the text of chosen events from every file of the checkpoint (and its Letta agent), and "
    "nothing else; the chain still verifies, the redaction is itself an event (who, when, why, which, "
    "digests), and it checks itself: prove's verdicts on what it did not involve are unchanged (exit 1 if not)",
    _redact_args,
    exit_codes={
        EXIT_OK: "redacted (or, with --dry-run, listed); the log verifies and prove's other verdicts are unchanged",
        EXIT_CHECK_FAILED: "the log does not verify, or prove's verdicts changed on what was not chosen\n"
        "(the log stays rewritten)",
        EXIT_ERROR: f"{ERROR_HELP}; an unknown --node, --match with --regex",
    },
)
def cmd_redact(args: argparse.Namespace) -> int:
    import getpass
    import socket

    from ledger.maintenance.redact import Selector
    from projections.adapters.cli.progress import Reporter
    from projections.tools.redaction import STEPS, redact_checkpoint

    if args.match is not None and args.regex is not None:
        raise InvalidInput("--match", "give --match or --regex, not both")
    if args.node is not None:
        check_node(args.checkpoint, args.node)
    text = args.regex if args.regex is not None else args.match
    try:
        selector = Selector(tuple(args.id), args.node, text, regex=args.regex is not None)
    except InvalidInput as exc:  # the text to match is the option the person gave
        if exc.field != "text":
            raise
        raise InvalidInput("--regex" if args.regex is not None else "--match", exc.reason) from None
    by = args.by or f"{getpass.getuser()}@{socket.gethostname()}"
    before = _last_seq(args.checkpoint)
    try:
        check_chooses(args.checkpoint, selector, "--regex" if args.regex is not None else "--match")
        steps = Reporter("redacting", "steps", steps=STEPS)
        done = redact_checkpoint(
            args.checkpoint, selector, reason=args.reason, by=by, dry_run=args.dry_run, progress=steps
        )
    except KeyboardInterrupt:
        raise Interrupted(_redaction_kept(args.checkpoint, before)) from None
    found = _self_check(args.checkpoint, "redaction")
    if args.json:
        emit({"redact": done.as_dict(), "verify": found.as_dict()})
    else:
        snapshot = layout.log_path(args.checkpoint).with_name(SNAPSHOT_NAME)
        dropped = any(line.startswith(SNAPSHOT_NAME) for line in done.scrubbed) and not snapshot.exists()
        print(
            "\n".join(
                [
                    *done.lines(),
                    *([REBUILD_LINE.format(args.checkpoint)] if dropped else []),
                    f"verify: {found.report.summary()}",  # the verdict stays the last line
                ]
            )
        )
    if not done.ok:
        log.error("prove's verdicts changed on what the redaction did not choose (see above); the log stays rewritten")
    return EXIT_OK if found.passed and done.ok else EXIT_CHECK_FAILED
