"""``ari-ledger``: the command line for people. It only translates; logic lives in the library.

Exit codes scripts can trust: 0 success; 1 a check ran and found a problem (verify,
audit); 2 the command could not run (bad arguments, missing checkpoint, bad input).
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
from .errors import LedgerError
from .events import CHECKPOINT_NODE
from .ledger import Ledger

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


def open_existing(path: str) -> Ledger:
    """An existing checkpoint's ledger (a recovered torn tail is logged as a warning)."""
    return Ledger.open(Path(path), create=False)


def _checkpoint(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="checkpoint directory holding memory_ledger.jsonl.gz")


def _checkpoint_json(parser: argparse.ArgumentParser) -> None:
    _checkpoint(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")


# ---------------------------------------------------------------------------- commands


@command("verify", "check every gzip member, hash and link of the log (exit 1 on damage)")
@arguments(_checkpoint_json)
def cmd_verify(args: argparse.Namespace) -> int:
    from projections.projector import snapshot_anchor_problem

    with Ledger.open_readonly(args.checkpoint) as ledger:
        report = ledger.verify()
        # A hash chain cannot see its newest events cut off; the projection snapshot can.
        anchor = snapshot_anchor_problem(ledger, report.last_seq) if report.ok else None
    if args.json:
        emit(dataclasses.asdict(report) | {"anchor_problem": anchor})
    else:
        print(report.summary() if anchor is None else f"damaged: {anchor}")
    return EXIT_OK if report.ok and anchor is None else EXIT_CHECK_FAILED


@command("status", "events, nodes, event types, last seq and file size of a checkpoint")
@arguments(_checkpoint_json)
def cmd_status(args: argparse.Namespace) -> int:
    with open_existing(args.checkpoint) as ledger:
        types: Counter[str] = Counter()
        nodes: set[str] = set()
        for event in ledger.events():
            types[event.type] += 1
            nodes.add(event.node)
        nodes.discard(CHECKPOINT_NODE)
        data = {
            "checkpoint": str(ledger.checkpoint_dir),
            "ckpt": ledger.ckpt,
            "events": sum(types.values()),
            "last_seq": ledger.last_seq,
            "nodes": len(nodes),
            "types": dict(sorted(types.items())),
            "file_size": ledger.path.stat().st_size,
            "projections": projection_lag(ledger),
        }
    if args.json:
        emit(data)
    else:
        for key, value in data.items():
            print(f"{key:>11}: {value}")
    return EXIT_OK


def projection_lag(ledger: Ledger) -> dict:
    """How far each projection is behind the log: the snapshot a resume loads, and Letta."""
    from projections.projector import snapshot_preamble

    snap = snapshot_preamble(ledger.checkpoint_dir)
    lags = {"snapshot": {"cursor": snap.cursor, "lag": ledger.last_seq - snap.cursor} if snap else None}
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
    with open_existing(args.checkpoint) as ledger:
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
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130

