"""``ari-ledger``: the command line for people. It only translates; logic lives in the library.

Exit codes scripts can trust: 0 success; 1 a check ran and found a problem (verify,
audit, an alarm in status); 2 the command could not run (bad arguments, missing
checkpoint, bad input, a file that cannot be read or written): one ``error:`` line.
Reading commands (verify, status, log) open the log read-only and never change a byte.
"""
from __future__ import annotations

import argparse
import logging
import dataclasses
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Callable

import msgspec

from . import config
from .anchor import Anchor, AnchorUnreadable
from .errors import InvalidInput, LedgerError
from .events import CHECKPOINT_NODE
from .ledger import Ledger
from .log import LOG_NAME

log = logging.getLogger("ledger")

EXIT_OK, EXIT_CHECK_FAILED, EXIT_ERROR = 0, 1, 2

Command = Callable[[argparse.Namespace], int]
_COMMANDS: dict[str, tuple[Command, Callable[[argparse.ArgumentParser], None], str]] = {}


def command(name: str, help: str):
    """Register ``fn`` as a sub-command; the decorated ``setup`` adds its arguments."""

    def register(fn: Command) -> Command:
        setup = getattr(fn, "setup", lambda parser: None)
        _COMMANDS[name] = (fn, setup, help)
        return fn

    return register


def arguments(setup: Callable[[argparse.ArgumentParser], None]):
    def attach(fn: Command) -> Command:
        fn.setup = setup  # type: ignore[attr-defined]
        return fn

    return attach


def emit(data: object) -> None:
    """Print data as one JSON document."""
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _checkpoint(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="checkpoint directory holding memory_ledger.jsonl.gz")


def _checkpoint_json(parser: argparse.ArgumentParser) -> None:
    _checkpoint(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")


# ---------------------------------------------------------------------------- commands


def _verify_args(parser: argparse.ArgumentParser) -> None:
    _checkpoint_json(parser)
    parser.add_argument(
        "--head", action="append", default=[], metavar="HASH",
        help="an event hash kept outside the checkpoint (an export manifest's last_hash, a note): "
        "fail unless it is an event of this chain; prints its seq (repeatable; 12+ hex digits)",
    )
    parser.add_argument(
        "--accept-rollback", action="store_true",
        help="after a person has looked: accept the log as it is, clearing a rollback alarm "
        "(a damaged tail and stale snapshot/verified context are moved aside, never deleted)",
    )


@command("verify", "check the log (members, hashes, links), its anchors and derived files (exit 1 on any problem)")
@arguments(_verify_args)
def cmd_verify(args: argparse.Namespace) -> int:
    from projections.projector import check_snapshot

    if args.accept_rollback:
        return _accept_rollback(Path(args.checkpoint))
    heads = [_hash_arg(h) for h in args.head]
    with Ledger.open_readonly(args.checkpoint) as ledger:
        vc_anchor, vc_problem = verified_context_anchor(ledger.checkpoint_dir)
        report = ledger.verify([Anchor("--head", h) for h in heads] + ([vc_anchor] if vc_anchor else []))
        snapshot = check_snapshot(ledger) if report.reason is None else None
    rollback = [*report.rollback, *([snapshot.rollback] if snapshot and snapshot.rollback else [])]
    problems = [*report.problems, *([vc_problem] if vc_problem else []), *([snapshot.problem] if snapshot and snapshot.problem else [])]
    if args.json:
        emit(dataclasses.asdict(report) | {
            "rollback": rollback, "problems": problems, "anchor_problem": rollback[0] if rollback else None,
            "snapshot": dataclasses.asdict(snapshot) if snapshot else None,
        })
    else:
        lines = [f"rolled back: {line}" for line in rollback] + [f"problem: {line}" for line in problems]
        if report.reason is not None or not rollback:
            lines.insert(0, report.summary())  # damaged / torn tail / ok; else a rollback line leads
        lines += [f"head {h[:12]}…: seq {seq} of {report.last_seq}" for h, seq in report.found.items()]
        print("\n".join(lines))
    return EXIT_OK if report.reason is None and not rollback and not problems else EXIT_CHECK_FAILED


def _hash_arg(value: str) -> str:
    value = value.strip().lower()
    if not 12 <= len(value) <= 64 or any(c not in "0123456789abcdef" for c in value):
        raise InvalidInput("--head", f"{value!r} is not an event hash (12 to 64 lowercase hex digits)")
    return value


def verified_context_anchor(checkpoint_dir: Path) -> tuple[Anchor | None, str | None]:
    """The anchor ``verified_context.json`` records (``{"anchor": {"seq", "hash"}}``), or why
    it cannot be read; (None, None) when the file or its anchor is absent."""
    from projections.verified import VERIFIED_CONTEXT_NAME

    path = checkpoint_dir / VERIFIED_CONTEXT_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        return None, f"{VERIFIED_CONTEXT_NAME} is unreadable ({exc})"
    anchor = data.get("anchor") if isinstance(data, dict) else None
    if anchor is None:
        return None, None
    seq, hash_ = (anchor.get("seq"), anchor.get("hash")) if isinstance(anchor, dict) else (None, None)
    if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(hash_, str):
        return None, f"{VERIFIED_CONTEXT_NAME}: anchor must be {{\"seq\": int, \"hash\": str}}, got {anchor!r}"
    return Anchor(VERIFIED_CONTEXT_NAME, hash_, seq), None


def _accept_rollback(checkpoint_dir: Path) -> int:
    """``verify --accept-rollback``: re-anchor at the log's end; move aside what anchors lost events."""
    from projections.projector import rollback_problem, snapshot_anchor
    from projections.snapshot import SNAPSHOT_NAME, SnapshotError, read_preamble
    from projections.verified import VERIFIED_CONTEXT_NAME

    candidates: list[tuple[Path, Anchor, Callable[[Ledger], str | None]]] = []
    try:
        preamble = read_preamble(checkpoint_dir / SNAPSHOT_NAME)
        if preamble.cursor:
            candidates.append((checkpoint_dir / SNAPSHOT_NAME, snapshot_anchor(preamble), lambda lg: rollback_problem(lg, preamble)))
    except (FileNotFoundError, SnapshotError):
        pass
    vc_anchor, _ = verified_context_anchor(checkpoint_dir)
    if vc_anchor:
        candidates.append((checkpoint_dir / VERIFIED_CONTEXT_NAME, vc_anchor, lambda lg: lg.anchor_problem(vc_anchor)))
    if (checkpoint_dir / LOG_NAME).exists():  # keep only the anchors this log does not hold
        with Ledger.open_readonly(checkpoint_dir) as ledger:
            candidates = [c for c in candidates if c[2](ledger)]
    accepted = Ledger.accept_rollback(checkpoint_dir, [(path, anchor) for path, anchor, _ in candidates])
    for line in accepted or ["nothing to accept: the log holds every anchor"]:
        print(f"accepted: {line}" if accepted else line)
    return EXIT_OK


@command("status", "events, nodes, event types, last seq, projection lag and alarms (read-only; exit 1 on an alarm)")
@arguments(_checkpoint_json)
def cmd_status(args: argparse.Namespace) -> int:
    with Ledger.open_readonly(args.checkpoint) as ledger:
        if ledger.damage is not None:
            raise ledger.damage
        types: Counter[str] = Counter()
        nodes: set[str] = set()
        for event in ledger.events():
            types[event.type] += 1
            nodes.add(event.node)
        nodes.discard(CHECKPOINT_NODE)
        projections = projection_lag(ledger)
        snapshot = projections["snapshot"] or {}
        vc_anchor, vc_problem = verified_context_anchor(ledger.checkpoint_dir)
        alarms = [a for a in (ledger.head_problem(), snapshot.get("rollback"), vc_anchor and ledger.anchor_problem(vc_anchor)) if a]
        notes = [n for n in (_torn_note(ledger), _head_note(ledger), snapshot.get("problem"), vc_problem) if n]
        data = {
            "checkpoint": str(ledger.checkpoint_dir),
            "ckpt": ledger.ckpt,
            "events": sum(types.values()),
            "last_seq": ledger.last_seq,
            "nodes": len(nodes),
            "types": dict(sorted(types.items())),
            "file_size": ledger.path.stat().st_size,
            "projections": projections,
            "alarms": alarms,
            "notes": notes,
        }
    if args.json:
        emit(data)
    else:
        for key, value in data.items():
            if key not in ("alarms", "notes") or value:
                print(f"{key:>11}: {value}")
    return EXIT_CHECK_FAILED if alarms else EXIT_OK


def _torn_note(ledger: Ledger) -> str | None:
    bad = ledger.torn_tail
    if bad is None:
        return None
    size = ledger.path.stat().st_size - bad.offset
    return f"torn tail: {size} bytes at byte offset {bad.offset} ({bad.reason}); the next writable open moves them aside"


def _head_note(ledger: Ledger) -> str | None:
    try:
        anchor = ledger.head_anchor()
    except AnchorUnreadable as exc:
        return f"{exc}; the next writable open re-anchors it"
    if ledger.head_damaged_slot:
        return f"one of the head file's two records is damaged; the other (seq {anchor.seq}) is used"
    return None


def projection_lag(ledger: Ledger) -> dict:
    """How far each projection is behind the log: the snapshot a resume loads, and Letta."""
    from projections.projector import check_snapshot

    snap = check_snapshot(ledger, deep=False)
    lags: dict = {"snapshot": None}
    if snap.present:
        lags["snapshot"] = {
            "cursor": snap.cursor,
            "lag": None if snap.cursor is None else ledger.last_seq - snap.cursor,
            **{k: v for k, v in (("rebuilt", snap.rebuilt), ("rollback", snap.rollback), ("problem", snap.problem)) if v},
        }
    if config.letta_base_url():
        from projections.letta import agent_cursor

        letta = agent_cursor(ledger.checkpoint_dir)
        letta["lag"] = None if letta["cursor"] is None else ledger.last_seq - letta["cursor"]
        lags["letta"] = letta
    return lags


def _log_args(parser: argparse.ArgumentParser) -> None:
    _checkpoint(parser)
    parser.add_argument("--as-of", type=int, default=None, metavar="SEQ", help="stop at this seq (time travel)")
    parser.add_argument("--node", default=None, help="only events of this node")


@command("log", "print events as JSON lines, optionally as of a seq or for one node")
@arguments(_log_args)
def cmd_log(args: argparse.Namespace) -> int:
    encoder = msgspec.json.Encoder()
    out = sys.stdout.buffer
    with Ledger.open_readonly(args.checkpoint) as ledger:
        if ledger.damage is not None:
            raise ledger.damage
        alarm = ledger.head_problem()
        if alarm:
            log.warning("alarm: %s", alarm)
        for event in ledger.events(as_of=args.as_of):
            if args.node is None or event.node == args.node:
                out.write(encoder.encode(event) + b"\n")
    out.flush()
    return EXIT_OK


# ---------------------------------------------------------------------------- entry


def build_parser() -> argparse.ArgumentParser:
    import projections.cli  # noqa: F401 - registers the read-side and tooling commands

    parser = argparse.ArgumentParser(prog="ari-ledger", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (fn, setup, help) in _COMMANDS.items():
        p = sub.add_parser(name, help=help, description=help)
        setup(p)
        p.set_defaults(func=fn)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        return args.func(args)
    except LedgerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # a file that cannot be read or written: say which, no traceback
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_ERROR
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130

