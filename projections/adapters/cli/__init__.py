"""ari-ledger: the one command line for people, over ARI's memory ledger.

It only translates arguments into library
calls and prints the result (a table for people, ``--json`` for scripts); logic lives in the
library. Commands are grouped by what they touch: the log (``checkpoint``), memory
(``memory``), files (``files``) and tools (``tools``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from typing import Any

from ledger import InvalidInput, LedgerError, layout
from ledger.errors import os_reason
from projections.adapters.cli import checkpoint, files, memory, proof, rebuild, tools  # noqa: F401 - registered in this order

# isort: split
from projections.adapters.cli import completion  # noqa: F401 - registered last: it lists the others
from projections.adapters.cli.framework import (
    COMMANDS,
    ERROR_HELP,
    EXIT_CHECK_FAILED,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    INTERRUPTED_HELP,
    HelpFormatter,
    Parser,
    exit_codes_epilog,
    honour_no_color,
    shorten,
)
from projections.adapters.cli.progress import interrupted, running


def version() -> str:
    """``ari-ledger X.Y.Z``: the installed distribution's version."""
    import importlib.metadata  # ~30 ms, and the look-up as much again: only for --version

    try:
        return f"ari-ledger {importlib.metadata.version('ari-memory-ledger')}"
    except importlib.metadata.PackageNotFoundError:  # a checkout on sys.path, not installed
        return "ari-ledger (not installed)"


class VersionAction(argparse._VersionAction):
    """``--version``: prints :func:`version`, looked up when the option is given, not each
    time the parser is built."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        self.version = version()
        super().__call__(parser, namespace, values, option_string)


TOP_EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_CHECK_FAILED: "a check ran and found a problem (verify, status, audit, reads, prove, ...)",
    EXIT_ERROR: ERROR_HELP,
    3: "prove: nothing to prove (no verified context, or one without claims)",
    EXIT_INTERRUPTED: INTERRUPTED_HELP,
}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="ari-ledger",
        description=__doc__.splitlines()[0],
        epilog="each command's --help lists its own exit codes\n\n" + exit_codes_epilog(TOP_EXIT_CODES),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (fn, setup, help) in COMMANDS.items():
        p = sub.add_parser(name, help=help, description=help)
        setup(p)
        p.set_defaults(func=fn)
    return parser


def as_typed(exc: LedgerError, argv: list[str]) -> str:
    """An error as the command line says it: a field the library names (``limit``) as the
    option the person typed (``--limit``), the reason the library's own."""
    if isinstance(exc, InvalidInput):
        flag = "--" + exc.field.replace("_", "-")
        if any(a == flag or a.startswith(flag + "=") for a in argv):
            return f"{flag}: {exc.reason}"
    return str(exc)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    honour_no_color()  # as the environment says now, not at import

    def error(message: str) -> None:
        print(f"error: {shorten(message, argv)}", file=sys.stderr)

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        if getattr(args, "checkpoint", None) is not None:  # before anything else: one unmistakable path
            layout.check_checkpoint_dir(args.checkpoint)
        with (
            layout.moves_suspended() if getattr(args, "dry_run", False) else contextlib.nullcontext(),
            running(args),  # bars on a terminal, all gone before an error or Ctrl-C's line
        ):
            return int(args.func(args))  # a dry run moves no file, also not an old layout's
    except LedgerError as exc:
        error(as_typed(exc, argv))
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # a file that cannot be read or written: say which, no traceback
        error(f"{exc.filename}: {os_reason(exc)}" if exc.filename else os_reason(exc))
        return EXIT_ERROR
    except ValueError as exc:
        error(str(exc))
        return EXIT_ERROR
    except KeyboardInterrupt as exc:  # one line: what the interrupted work kept, when it is known
        print(shorten(interrupted(exc), argv), file=sys.stderr)
        return EXIT_INTERRUPTED
