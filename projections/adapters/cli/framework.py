"""The command registry of ``ari-ledger``, its exit codes and output helpers.

Exit codes scripts can trust: 0 success; 1 a check ran and found a problem (verify, audit,
an alarm in status); 2 the command could not run (bad arguments, missing checkpoint, bad
input) — always as one ``error:`` line, never a traceback.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from rich.console import Console

EXIT_OK, EXIT_CHECK_FAILED, EXIT_ERROR = 0, 1, 2

Command = Callable[[argparse.Namespace], int]
Setup = Callable[[argparse.ArgumentParser], None]
COMMANDS: dict[str, tuple[Command, Setup, str]] = {}

console = Console(highlight=False, soft_wrap=True, markup=False)  # ids and claims contain [brackets]


def command(name: str, help: str, setup: Setup = lambda parser: None) -> Callable[[Command], Command]:
    """Register ``fn`` as the sub-command ``name``; ``setup`` adds its arguments."""

    def register(fn: Command) -> Command:
        COMMANDS[name] = (fn, setup, help)
        return fn

    return register


def emit(data: object) -> None:
    """Print data as one JSON document."""
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


# What every command calls its checkpoint argument: the checkpoint, never the ledger's own folder in it.
CHECKPOINT_HELP = "checkpoint directory (ARI's checkpoints/<run_id>/, the folder that holds memory_ledger/)"


def checkpoint_arg(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    parser.add_argument("checkpoint", help=CHECKPOINT_HELP)
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print JSON")
