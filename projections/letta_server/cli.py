"""``up|down|status|env`` on the command line: ``ari-ledger letta …`` and ``python -m projections.letta_server …``."""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from .errors import LettaHarnessError
from .install import LETTA_VERSION
from .layout import resolve_home
from .lifecycle import (
    DEFAULT_EMBED_PORT,
    DEFAULT_LETTA_PORT,
    DEFAULT_PG_PORT,
    down,
    server,
    status,
    up,
)


def port(text: str) -> int:
    """A TCP port, checked when the arguments are read (before anything starts)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port (1 to 65535), got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port (1 to 65535), got {value}")
    return value


def seconds(text: str) -> float:
    """A wait in seconds: a finite number above 0 (``inf`` or ``1e400`` would wait forever)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value < 86_400 * 7:
        raise argparse.ArgumentTypeError(f"expected seconds above 0 and under a week, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``up|down|status|env`` and their options to ``parser`` (reused by ``ari-ledger letta``)."""
    parser.add_argument(
        "action",
        choices=("up", "down", "status", "env"),
        help="up: install once, start and wait for health; down: stop; status: report; "
        'env: the client\'s exports, LETTA_API_KEY (the password) included: eval "$(ari-ledger letta env)"',
    )
    parser.add_argument(
        "--home",
        type=Path,
        default=None,
        help="harness directory (default: $ARI_LETTA_HOME or ~/.cache/ari-ledger/letta)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    parser.add_argument("--letta-port", type=port, default=DEFAULT_LETTA_PORT, help="(up) Letta port [%(default)s]")
    parser.add_argument(
        "--embed-port", type=port, default=DEFAULT_EMBED_PORT, help="(up) embedding endpoint port [%(default)s]"
    )
    parser.add_argument("--pg-port", type=port, default=DEFAULT_PG_PORT, help="(up) Postgres port [%(default)s]")
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=300,
        help="(up) seconds to wait for each process to become healthy [%(default)s]",
    )


def run(args: argparse.Namespace, progress: Callable[[int, int], None] | None = None) -> int:
    """Carry out parsed arguments (see :func:`add_arguments`); returns the exit code.
    ``progress``: passed to :func:`up` (its steps, ``UP_STEPS``)."""
    try:
        if args.action == "up":
            srv = up(
                args.home,
                letta_port=args.letta_port,
                embed_port=args.embed_port,
                pg_port=args.pg_port,
                timeout=args.timeout,
                progress=progress,
            )
            if args.json:
                print(json.dumps(srv.to_dict(), indent=2))
            else:
                print(f"Letta {LETTA_VERSION} is up at {srv.base_url} (pid {srv.letta_pid})")
                print(
                    f"embeddings: {srv.embedding_url} ({srv.embedding_model}, dim {srv.embedding_dim}, "
                    f"pid {srv.embed_pid})"
                )
                print(f"postgres:   {srv.pg_uri} (pid {srv.pg_pid}; socket only, with a password)")
                print(f'password:   LETTA_API_KEY is in {srv.api_key_file}; eval "$(ari-ledger letta env)" exports it')
                print(f"home:       {srv.home}")
            return 0
        if args.action == "env":
            running = server(args.home)
            if running is None:
                raise LettaHarnessError(
                    f"no healthy owner-only Letta runs for {resolve_home(args.home)}: run `letta up`"
                )
            if args.json:
                print(json.dumps(running.client_env, indent=2))
            else:
                for name, value in running.client_env.items():
                    print(f"export {name}={shlex.quote(value)}")
            return 0
        if args.action == "down":
            stopped = down(args.home)
            if args.json:
                print(json.dumps(stopped))
            else:
                names = [k for k, v in stopped.items() if v]
                print("stopped: " + ", ".join(names) if names else "nothing was running")
            return 0
        st = status(args.home)
        if args.json:
            print(json.dumps(st, indent=2))
        else:
            print(f"home:       {st['home']} (Letta {'installed' if st['installed'] else 'not installed'})")
            print(
                "access:     "
                + (
                    f"owner only (LETTA_API_KEY in {st['api_key_file']})"
                    if st["owner_only"]
                    else "not owner-only: run `letta up` (it restarts an older harness's open stack)"
                    if st["letta"]["running"]
                    else "-"
                )
            )
            lt, e, pg = st["letta"], st["embed"], st["postgres"]
            print(
                f"letta:      {'healthy' if lt['healthy'] else 'running, unhealthy' if lt['running'] else 'down'}"
                + (f" at {lt['url']} (pid {lt['pid']})" if lt["running"] else "")
            )
            print(
                f"embeddings: {'healthy' if e['healthy'] else 'running, unhealthy' if e['running'] else 'down'}"
                + (f" at {e['url']} (pid {e['pid']})" if e["running"] else "")
            )
            print(
                f"postgres:   {'running' if pg['running'] else 'down'}"
                + (f" on socket {pg['socket_dir']} port {pg['port']} (pid {pg['pid']})" if pg["running"] else "")
            )
        return 0 if st["healthy"] else 1
    except (LettaHarnessError, OSError, subprocess.SubprocessError) as exc:
        # OSError and the like: a file or program of the stack the harness could not use; one line
        # naming it (e.g. "[Errno 13] Permission denied: '/path'"), never a traceback.
        message = str(exc) if isinstance(exc, LettaHarnessError) else f"{type(exc).__name__}: {exc}"
        if args.json:
            print(json.dumps({"ok": False, "error": message}))
        print(f"error: {message}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: the command line) and carry it out; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m projections.letta_server",
        description="Run a real Letta 0.16.7 server offline for ari-memory-ledger.",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))
