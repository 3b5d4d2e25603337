"""``python -m bench [WHICH] [ARGS…] [--json]``: run the benchmarks from a clone.

The benchmarks are scripts of the checkout, not part of the installed package: the package never
imports them (an import-linter contract holds it), and ``ari-ledger bench`` runs this module in a
child process from the clone it finds. Each benchmark prints its figures beside their limits; the
exit status is 0 when every figure meets its target and 1 when one misses. With ``--json`` (before
or after WHICH) every figure is printed as one JSON document on standard output and the
benchmarks' progress goes to standard error.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import sys
from typing import Any

from projections.adapters.cli.framework import Parser, emit
from projections.adapters.cli.tools import BENCHMARKS

MODULES = {
    "ledger": "bench.ledger_bench",
    "projections": "bench.projection_bench",
    "letta": "bench.letta_bench",
    "hooks": "bench.hook_bench",
    "processes": "bench.processes_bench",
    "redact": "bench.redact_bench",
    "prove": "bench.prove_bench",
    "client": "bench.client_bench",
    "retrieval": "bench.retrieval_bench",
}


def main(argv: list[str] | None = None, prog: str = "python -m bench") -> int:
    """Run the chosen benchmarks; ``prog`` is how the user called this (``ari-ledger bench``)."""
    parser = Parser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="every figure as JSON on stdout; also after WHICH")
    parser.add_argument("which", choices=[*BENCHMARKS, "all"], nargs="?", default="all", help="which benchmark")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")
    args = parser.parse_args(argv)
    rest = [a for a in args.rest if a != "--json"]  # `bench redact --json`: the benchmarks take no --json
    as_json = args.json or len(rest) < len(args.rest)
    chosen = list(MODULES) if args.which == "all" else [args.which]
    from bench.common import RESULTS  # every figure report() printed

    worst = 0
    done: dict[str, Any] = {}
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        for name in chosen:
            print(f"== {name}", flush=True)
            module = importlib.import_module(MODULES[name])
            sys.argv[0] = f"{prog} {name}"  # the benchmark's usage line names the command the user ran
            before = len(RESULTS)
            code = module.main(rest)
            worst = max(worst, code)
            done[name] = {"exit": code, "figures": [dataclasses.asdict(f) for f in RESULTS[before:]]}
    if as_json:
        emit({"ok": worst == 0, "benchmarks": done})
    return worst


if __name__ == "__main__":
    sys.exit(main())
