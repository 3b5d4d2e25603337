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

from ledger import LedgerError, layout
from projections.adapters.cli import checkpoint, files, memory, proof, tools  # noqa: F401 - registered in this order
from projections.adapters.cli.framework import COMMANDS, EXIT_ERROR, EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ari-ledger", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (fn, setup, help) in COMMANDS.items():
        p = sub.add_parser(name, help=help, description=help)
        setup(p)
        p.set_defaults(func=fn)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        if getattr(args, "checkpoint", None) is not None:  # before anything else: one unmistakable path
            layout.check_checkpoint_dir(args.checkpoint)
        with layout.moves_suspended() if getattr(args, "dry_run", False) else contextlib.nullcontext():
            return int(args.func(args))  # a dry run moves no file, also not an old layout's
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
