"""Tools: ``demo``, ``bench``, ``embed-server``, ``letta``, ``mcp``, ``restore``, ``ari-skill``."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger import InvalidInput, layout
from ledger.progress import Interrupted
from projections import settings
from projections.adapters.cli import framework
from projections.adapters.cli.framework import (
    EXIT_CHECK_FAILED,
    EXIT_OK,
    checkpoint_arg,
    clip,
    command,
    counts,
    emit,
    file_facts,
)
from projections.adapters.cli.memory import open_backend
from projections.adapters.cli.progress import Reporter
from projections.evidence.grounded_block import render_grounded_block

if TYPE_CHECKING:  # the backend (numpy, the engines) and rich's tables: imported by the commands that use them
    from projections.api import MemoryBackend


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", nargs="?", default=None, help="output directory (default: a new temp dir)")
    p.add_argument("--json", action="store_true", help="print the scope table as JSON")
    p.add_argument(
        "--planted",
        action="store_true",
        help="add the planted-fault claims (answer key planted.json, context planted_context.json) and prove them",
    )


@command(
    "demo",
    "replay the fixture BFTS run into a fresh checkpoint, as ARI's hooks would",
    _demo_args,
    exit_codes={EXIT_OK: "the demo was written (also when its audit finds the planted problem)"},
)
def cmd_demo(args: argparse.Namespace) -> int:
    from rich.table import Table

    from projections.adapters.demo import FIXTURE_RUN, copy_run, demo_output, replay_run
    from projections.adapters.report import render_report
    from projections.api import MemoryBackend
    from projections.tools.lineage import lineage_data, render_tree

    out = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="ari-demo-"))
    if layout.has_ledger(out / "checkpoint") or (out / "experiments").exists():
        raise InvalidInput("dir", f"{layout.shown(out)} already holds a demo; pass a new directory")
    try:
        with demo_output(out, fresh=not args.dir):  # all or nothing: a failed demo leaves no half of one
            experiments = copy_run(FIXTURE_RUN, out)
            if args.planted:
                from projections.adapters.planted import plant_reports

                plant_reports(experiments)
            backend = MemoryBackend(out / "checkpoint")
            try:
                with framework.console.status(
                    "replaying the fixture run (node start → context → consolidation → re-run → audit)"
                ):
                    replay = replay_run(backend, FIXTURE_RUN, experiments)
                rows: list[dict[str, Any]] = []
                for nid, ancestors in replay.tree.items():
                    scope = ancestors + [nid]
                    hits = backend.search_memory(replay.queries[nid], scope, limit=3)["results"]
                    rows.append(
                        {
                            "node": nid,
                            "may_read": scope,
                            "top_hits": [(h["node_id"], round(h["score"], 3), clip(h["text"], 48)) for h in hits],
                        }
                    )
                planted = _plant(backend, replay, out) if args.planted else None
                data = lineage_data(backend, experiments)
                report_path = out / "report.html"
                report_path.write_text(render_report(data), encoding="utf-8")
                backend.flush_projections()  # with a Letta server, leave its agent holding the whole run
                health = backend.health()
            finally:
                backend.close()
    except KeyboardInterrupt:
        raise Interrupted(f"the half-made demo in {layout.shown(out)} was removed; nothing else was touched") from None
    audit = replay.audit
    assert audit is not None, "replay_run always audits"
    if args.json:
        emit(
            {
                "checkpoint": str(out / "checkpoint"),
                "scope": rows,
                "audit": audit["summary"],
                "verified_context": str(replay.verified_path),
                "report": str(report_path),
                "backend": health["backend"],
            }
        )
        return EXIT_OK
    table = Table(title=f"What each node may read, and what a search from it returns ({health['backend']} engine)")
    table.add_column("node", style="bold", no_wrap=True)
    # lines break between words; a word wider than its column ends in … rather than breaking in two
    table.add_column("may read (root → self)", overflow="ellipsis")
    table.add_column("top hits for its eval_summary", overflow="ellipsis")
    for row in rows:
        table.add_row(
            row["node"], " → ".join(row["may_read"]), "\n".join(f"{n} {s:.3f} {t}" for n, s, t in row["top_hits"])
        )
    framework.console.print(table)
    framework.console.print(render_tree(data))
    ctx = json.loads(replay.verified_path.read_text()) if replay.verified_path else {}
    framework.console.print(
        f"\nbest node: {ctx.get('best_node')}; usable claims: {len(ctx.get('usable_for_claims', []))}"
    )
    framework.console.print(render_grounded_block(ctx) if ctx else "(no claims)")
    framework.console.print(f"audit: {counts(audit['summary'])}; chain: {'ok' if audit['chain']['ok'] else 'BROKEN'}")
    framework.console.print(
        f"checkpoint:       {out / 'checkpoint'}\nverified context: {replay.verified_path}\nlineage report:   {report_path}"
    )
    if planted is not None:
        _print_detection(out, planted)
    return EXIT_OK


def _plant(backend: MemoryBackend, replay: Any, out: Path) -> list[Any]:
    from projections.adapters.planted import plant_faults, write_answer_key

    planted = plant_faults(backend, replay)
    write_answer_key(planted, out / "planted.json")
    backend.export_verified_context(list(replay.tree), out / "planted_context.json")
    return planted


def _print_detection(out: Path, planted: list[Any]) -> None:
    from rich.table import Table

    from projections.adapters.planted import detection
    from projections.tools.prove import prove

    proof = prove(out / "checkpoint", out / "planted_context.json")
    table = detection(planted, {c.entry_id: (c.verdict, c.failures) for c in proof.claims})
    grid = Table(title=f"ari-ledger prove {out / 'checkpoint'} --context {out / 'planted_context.json'}")
    for col in ("class", "planted", "detected", "false positives"):
        grid.add_column(col)
    for fault, row in table.items():
        grid.add_row(fault, str(row["planted"]), str(row["detected"]), str(row["false_positives"]))
    framework.console.print(grid)


# the benchmarks `ari-ledger bench` offers; they are scripts of a clone (bench/), run by `python -m bench`
BENCHMARKS = ("ledger", "projections", "letta", "hooks", "processes", "redact", "prove", "client", "retrieval")


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json",
        action="store_true",
        help="print every figure as JSON on stdout (the benchmarks' progress goes to stderr); also after WHICH",
    )
    p.add_argument("which", choices=[*BENCHMARKS, "all"], nargs="?", default="all", help="which benchmark")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")


@command(
    "bench",
    "run the benchmarks (each figure beside its limit, measured in the same run)",
    _bench_args,
    exit_codes={EXIT_OK: "every figure meets its target", EXIT_CHECK_FAILED: "a figure missed its target"},
)
def cmd_bench(args: argparse.Namespace) -> int:
    """``python -m bench`` of the clone, in a child process: the package never imports the
    benchmarks, which are scripts of a checkout."""
    import subprocess
    import sys

    root = _find_bench()
    if root is None:
        raise InvalidInput(
            "bench", "the benchmarks are scripts in a checkout (bench/), not installed: run from a clone"
        )
    argv = [args.which, *args.rest, *(["--json"] if args.json else [])]
    # the clone first on the path (never another folder named bench in the current directory)
    boot = "import sys; sys.path.insert(0, sys.argv.pop(1)); from bench.__main__ import main; sys.exit(main(prog='ari-ledger bench'))"
    return subprocess.call([sys.executable, "-c", boot, str(root), *argv])


def _find_bench() -> Path | None:
    """The checkout holding ``bench/``: the one this package is installed from (``pip install
    -e``) or, failing that, the current directory; None when neither holds it."""
    for root in (Path(__file__).resolve().parents[3], Path.cwd()):
        if (root / "bench" / "__main__.py").is_file():
            return root
    return None


def _embed_args(p: argparse.ArgumentParser) -> None:
    from projections.adapters.embed_server import add_arguments

    add_arguments(p)


@command("embed-server", "serve OpenAI-compatible /v1/embeddings from the static embedder (offline)", _embed_args)
def cmd_embed_server(args: argparse.Namespace) -> int:
    from projections.adapters.embed_server import serve

    return serve(args)


def _letta_args(p: argparse.ArgumentParser) -> None:
    from projections.letta_server import add_arguments

    add_arguments(p)


@command(
    "letta",
    "bring a local Letta 0.16.7 server up or down (own venv, Postgres, embeddings)",
    _letta_args,
    exit_codes={EXIT_OK: "done; for status: all three are healthy", EXIT_CHECK_FAILED: "status: not all healthy"},
)
def cmd_letta(args: argparse.Namespace) -> int:
    from projections.letta_server import run
    from projections.letta_server.lifecycle import UP_STEPS

    def kept(done: int, total: int) -> str:
        finished = f"what finished is kept ({', '.join(UP_STEPS[:done])}): " if done else ""
        return (
            f"stopped at step {done + 1} of {total} ({UP_STEPS[done]}); {finished}`ari-ledger letta up` again "
            "goes on from what runs healthy, `ari-ledger letta down` stops what was started"
        )

    return run(args, progress=Reporter("letta up", "steps", note=kept, steps=UP_STEPS))


@command("mcp", "serve ARI's memory tools over MCP stdio (configured by ARI's environment variables)")
def cmd_mcp(args: argparse.Namespace) -> int:
    from projections.adapters.mcp_server import main as serve

    return serve()


def _restore_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    p.add_argument(
        "--dedupe",
        action="store_true",
        help="first delete duplicate agents of the checkpoint (keeps the oldest, the one in use)",
    )


@command("restore", "replay the log into the checkpoint's Letta agent (LETTA_BASE_URL), with progress", _restore_args)
def cmd_restore(args: argparse.Namespace) -> int:
    if not settings.letta_base_url():
        raise InvalidInput("LETTA_BASE_URL", "is not set; start a server with `ari-ledger letta up` and export its URL")
    backend = open_backend(args.checkpoint)
    deleted = backend.dedupe_letta_agents() if args.dedupe else []
    if deleted and not args.json:
        print(f"deleted {len(deleted)} duplicate agent(s): {', '.join(deleted)}")
    agent = f"ari_agent_{backend.namespace}"

    def kept(done: int, total: int) -> str:
        return (
            f"{done:,} of {total:,} events replayed into {agent} and kept (the agent keeps its cursor); "
            "run the same command again to replay the rest"
        )

    result = backend.restore(progress=Reporter(f"replaying into {agent}", note=kept))
    if args.json:
        emit({**result, "deleted_duplicates": deleted} if args.dedupe else result)
    else:
        print(
            f"restored {result['events']:,} events into {result['agent']} ({result['events_per_s']} events/s); cursor {result['cursor']}"
        )
    return EXIT_OK


def _ari_skill_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="the skill directory to write (created; template files are overwritten)")
    p.add_argument("--json", action="store_true", help="print JSON")


@command(
    "ari-skill",
    "write a skill directory for ARI's memory-skill.path (and the drop-in ari-skill-memory distribution)",
    _ari_skill_args,
)
def cmd_ari_skill(args: argparse.Namespace) -> int:
    from projections.adapters.skill_dir import write_skill_dir

    written = write_skill_dir(args.dir)
    root = Path(args.dir).resolve()
    if args.json:
        emit(
            {
                "dir": str(root),
                "files": [file_facts(path.relative_to(root), path.read_bytes()) for path in written],
                "server": str(root / "src" / "server.py"),
            }
        )
        return EXIT_OK
    for path in written:
        print(path.relative_to(root))
    print(
        f"wrote {len(written)} files to {root}; point memory-skill.path at it and install it, see {root / 'README.md'}"
    )
    return EXIT_OK
