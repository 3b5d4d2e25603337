"""Read-side and tooling commands of ``ari-ledger`` (registered into ``ledger.cli``).

Each command translates arguments into one library call and prints the result: a table
for people, ``--json`` for scripts.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ledger import InvalidInput, LedgerNotFound
from ledger.ari_import import ARI_KINDS, BACKUP_NAME, FORMATS, REACT_NAME, STORE_NAME, ari_files_in, read_ari_file
from ledger.bundle import check_output_path, export_bundle, import_bundle
from ledger.cli import EXIT_CHECK_FAILED, EXIT_OK, arguments, command, emit
from ledger.log import LOG_NAME

from .backend import MemoryBackend
from .verified import VERIFIED_CONTEXT_NAME, render_grounded_block

console = Console(highlight=False, soft_wrap=True, markup=False)  # ids and claims contain [brackets]


def open_backend(path: str) -> MemoryBackend:
    """An existing checkpoint, opened only to read it: a command for people changes nothing
    in the directory (no recovery, no snapshot, no access-log line)."""
    if not (Path(path) / LOG_NAME).exists():
        raise LedgerNotFound(f"no ledger at {Path(path) / LOG_NAME} (is {path} a checkpoint directory?)")
    return MemoryBackend(path, readonly=True)


def scope_for(backend: MemoryBackend, node: str, ancestors: str | None) -> list[str]:
    """``--ancestors a,b`` as given, else the node's lineage from the recorded tree."""
    if ancestors is not None:
        return [a for a in ancestors.split(",") if a]
    backend.health()
    catalog = backend.projector.catalog
    if node not in catalog.nodes and node not in catalog.by_node:
        raise InvalidInput("--node", f"unknown node {node!r} in this checkpoint (see `ari-ledger tree`)")
    return catalog.lineage(node)


def _ckpt(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory")
    p.add_argument("--json", action="store_true", help="print JSON")


# ---------------------------------------------------------------------------- demo


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", nargs="?", default=None, help="output directory (default: a new temp dir)")
    p.add_argument("--json", action="store_true", help="print the scope table as JSON")


@command("demo", "replay the fixture BFTS run into a fresh checkpoint, as ARI's hooks would")
@arguments(_demo_args)
def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import FIXTURE_RUN, copy_run, replay_run
    from .lineage import lineage_data, render_tree
    from .report import render_report

    out = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="ari-demo-"))
    if (out / "checkpoint" / LOG_NAME).exists() or (out / "experiments").exists():
        raise InvalidInput("dir", f"{out} already holds a demo; pass a new directory")
    out.mkdir(parents=True, exist_ok=True)
    experiments = copy_run(FIXTURE_RUN, out)
    backend = MemoryBackend(out / "checkpoint")
    try:
        with console.status("replaying the fixture run (node start → context → consolidation → re-run → audit)"):
            replay = replay_run(backend, FIXTURE_RUN, experiments)
        rows = []
        for nid, ancestors in replay.tree.items():
            scope = ancestors + [nid]
            hits = backend.search_memory(replay.queries[nid], scope, limit=3)["results"]
            rows.append({"node": nid, "may_read": scope, "top_hits": [(h["node_id"], round(h["score"], 3), h["text"][:48]) for h in hits]})
        data = lineage_data(backend, experiments)
        report_path = out / "report.html"
        report_path.write_text(render_report(data), encoding="utf-8")
        health = backend.health()
    finally:
        backend.close()
    if args.json:
        emit({"checkpoint": str(out / "checkpoint"), "scope": rows, "audit": replay.audit["summary"],
              "verified_context": str(replay.verified_path), "report": str(report_path), "backend": health["backend"]})
        return EXIT_OK
    table = Table(title=f"What each node may read, and what a search from it returns ({health['backend']} engine)")
    table.add_column("node", style="bold", no_wrap=True)
    table.add_column("may read (root → self)")
    table.add_column("top hits for its eval_summary")
    for row in rows:
        table.add_row(row["node"], " → ".join(row["may_read"]), "\n".join(f"{n} {s:.3f} {t}" for n, s, t in row["top_hits"]))
    console.print(table)
    console.print(render_tree(data))
    ctx = json.loads(replay.verified_path.read_text()) if replay.verified_path else {}
    console.print(f"\nbest node: {ctx.get('best_node')}; usable claims: {len(ctx.get('usable_for_claims', []))}")
    console.print(render_grounded_block(ctx) if ctx else "(no claims)")
    console.print(f"audit: {replay.audit['summary']}  chain ok: {replay.audit['chain']['ok']}")
    console.print(f"checkpoint:       {out / 'checkpoint'}\nverified context: {replay.verified_path}\nlineage report:   {report_path}")
    return EXIT_OK


# ---------------------------------------------------------------------------- reads


def _search_args(p: argparse.ArgumentParser) -> None:
    _ckpt(p)
    p.add_argument("query", help="natural-language query (ARI uses the node's eval_summary)")
    p.add_argument("--node", required=True, help="search as this node")
    p.add_argument("--ancestors", default=None, help="comma-separated scope instead of the recorded lineage")
    p.add_argument("--limit", type=int, default=5)
    p.add_argument("--as-of", type=int, default=None, metavar="SEQ", help="as the node saw it at this seq")
    p.add_argument("--kind", action="append", default=None, help="typed search: only this kind (repeatable)")


@command("search", "semantic search as a node: only its ancestors' memory")
@arguments(_search_args)
def cmd_search(args: argparse.Namespace) -> int:
    backend = open_backend(args.checkpoint)
    scope = scope_for(backend, args.node, args.ancestors)
    if args.kind:
        results = backend.search_research_memory(args.query, scope, kinds=args.kind, limit=args.limit, as_of=args.as_of)["results"]
    else:
        results = backend.search_memory(args.query, scope, limit=args.limit, as_of=args.as_of)["results"]
    if args.json:
        emit({"scope": scope, "results": results})
        return EXIT_OK
    table = Table(title=f"{args.node} may read: {' → '.join(scope)}")
    for col in ("score", "node", "kind", "text"):
        table.add_column(col)
    for r in results:
        table.add_row(f"{r['score']:.3f}", r["node_id"], r.get("kind") or "note", r["text"])
    console.print(table)
    return EXIT_OK


def _node_args(p: argparse.ArgumentParser) -> None:
    _ckpt(p)
    p.add_argument("--node", required=True)


@command("context", "the working context a node starts with (experiment core, ancestor results)")
@arguments(_node_args)
def cmd_context(args: argparse.Namespace) -> int:
    backend = open_backend(args.checkpoint)
    scope = scope_for(backend, args.node, None)
    info = backend.projector.catalog.nodes.get(args.node)
    ctx = backend.build_working_context(args.node, scope[:-1], info.eval_summary if info else None)
    if args.json:
        emit(ctx)
    else:
        for message in ctx["messages"]:
            console.print(f"{message['role']}:\n{message['content']}\n")
    return EXIT_OK


def _verified_args(p: argparse.ArgumentParser) -> None:
    _ckpt(p)
    p.add_argument("--node", default=None, help="lineage of this node (default: the best node of verified_context.json)")
    p.add_argument("--block", action="store_true", help="print the grounded block for the paper prompt")
    p.add_argument("--min-evidence", default=None, choices=("none", "cited", "hashed", "verified", "rerun_passed"),
                   help="keep claims below this evidence level out of usable_for_claims")


@command("verified", "the verified context: claims ranked by how well artifacts back them")
@arguments(_verified_args)
def cmd_verified(args: argparse.Namespace) -> int:
    backend = open_backend(args.checkpoint)
    if args.node:
        lineage = scope_for(backend, args.node, None)
    else:
        saved = Path(args.checkpoint) / VERIFIED_CONTEXT_NAME
        if not saved.is_file():
            raise InvalidInput("--node", f"no {VERIFIED_CONTEXT_NAME} yet; name the node whose lineage to use")
        lineage = json.loads(saved.read_text())["lineage"]
    ctx = backend.get_verified_context(lineage, min_evidence=args.min_evidence)
    if args.block:
        print(render_grounded_block(ctx), end="")
    elif args.json:
        emit(ctx)
    else:
        table = Table(title=f"claims of {' → '.join(lineage)}")
        for col in ("rank", "node", "repro", "evidence", "usable", "text"):
            table.add_column(col)
        usable = {c["entry_id"] for c in ctx["usable_for_claims"]}
        for i, c in enumerate(ctx["claims"], 1):
            table.add_row(str(i), c["node_id"], c["repro_status"] or "unverified", c["evidence"], "yes" if c["entry_id"] in usable else "no", c["text"])
        console.print(table)
        console.print(f"usable for claims: {len(ctx['usable_for_claims'])}; limitations: {len(ctx['limitations'])}")
    return EXIT_OK


def _audit_args(p: argparse.ArgumentParser) -> None:
    _ckpt(p)
    p.add_argument("--experiments", default=None, help="experiments root (default: CKPT/experiments or CKPT/../experiments)")
    p.add_argument("--run-id", default=None)


@command("audit", "re-hash every artifact memory cites; exit 1 on missing or mismatch")
@arguments(_audit_args)
def cmd_audit(args: argparse.Namespace) -> int:
    backend = open_backend(args.checkpoint)
    root = _experiments_root(Path(args.checkpoint), args.experiments)
    audit = backend.audit_memory(root, args.run_id)
    if args.json:
        emit(audit)
    else:
        for r in audit["results"]:
            if r["status"] != "verified":
                console.print(f"{r['status']:>9}  {r['node_id']}/{r['path']}")
        console.print(f"summary: {audit['summary']}; chain: {'ok' if audit['chain']['ok'] else 'BROKEN'}")
    return EXIT_OK if audit["ok"] else EXIT_CHECK_FAILED


def _experiments_root(ckpt: Path, given: str | None) -> Path:
    if given:
        return Path(given)
    for candidate in (ckpt / "experiments", ckpt.parent / "experiments"):
        if candidate.is_dir():
            return candidate
    raise InvalidInput("--experiments", f"no experiments directory next to {ckpt}; pass --experiments DIR")


def _tree_args(p: argparse.ArgumentParser) -> None:
    _ckpt(p)
    p.add_argument("--experiments", default=None, help="experiments root, for metrics and audit status")


@command("tree", "the recorded node tree with memory counts per node")
@arguments(_tree_args)
def cmd_tree(args: argparse.Namespace) -> int:
    from .lineage import lineage_data, render_tree

    backend = open_backend(args.checkpoint)
    root = _optional_experiments(Path(args.checkpoint), args.experiments)
    data = lineage_data(backend, root)
    if args.json:
        emit(data)
    else:
        print(render_tree(data))
    return EXIT_OK


def _optional_experiments(ckpt: Path, given: str | None) -> Path | None:
    try:
        return _experiments_root(ckpt, given)
    except InvalidInput:
        return None


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint")
    p.add_argument("-o", "--output", default="report.html")
    p.add_argument("--experiments", default=None)


@command("report", "write the lineage report: one self-contained HTML file")
@arguments(_report_args)
def cmd_report(args: argparse.Namespace) -> int:
    from .lineage import lineage_data
    from .report import render_report

    check_output_path(Path(args.output), "--output")
    backend = open_backend(args.checkpoint)
    data = lineage_data(backend, _optional_experiments(Path(args.checkpoint), args.experiments))
    Path(args.output).write_text(render_report(data), encoding="utf-8")
    print(f"wrote {args.output} ({len(data['nodes'])} nodes)")
    return EXIT_OK


# ---------------------------------------------------------------------------- moving logs


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint")
    p.add_argument("out", help="bundle file to write (a tar of the log and a manifest)")


@command("export", "write a portable bundle: the verified log plus a manifest")
@arguments(_export_args)
def cmd_export(args: argparse.Namespace) -> int:
    manifest = export_bundle(Path(args.checkpoint), Path(args.out))
    print(f"exported {manifest['events']} events to {args.out}")
    return EXIT_OK


def _import_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle")
    p.add_argument("checkpoint", help="an empty checkpoint directory")


@command("import", "place a bundle's log into an empty checkpoint (checked first)")
@arguments(_import_args)
def cmd_import(args: argparse.Namespace) -> int:
    manifest = import_bundle(Path(args.bundle), Path(args.checkpoint))
    print(f"imported {manifest['events']} events into {args.checkpoint}")
    return EXIT_OK


def _import_ari_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory (created when it does not exist and --source is given)")
    p.add_argument("--source", action="append", default=None, metavar="FILE",
                   help=f"{BACKUP_NAME}, {STORE_NAME} or {REACT_NAME}, also *.migrated-<ts> (repeatable; "
                        "default: every one found in CKPT, in the order ARI wrote them)")
    p.add_argument("--json", action="store_true", help="print JSON")


@command("import-ari", "import ARI's memory files (v0.6 backup, v0.5 store and ReAct trace); importing twice adds nothing")
@arguments(_import_ari_args)
def cmd_import_ari(args: argparse.Namespace) -> int:
    ckpt = Path(args.checkpoint)
    sources = [Path(s) for s in args.source] if args.source else ari_files_in(ckpt)
    if not sources:
        raise InvalidInput("--source", f"no ARI memory file ({BACKUP_NAME}, {STORE_NAME}, {REACT_NAME}) in {ckpt}; pass --source FILE")
    files = [read_ari_file(s) for s in sources]  # every file read and checked before anything is written
    backend = MemoryBackend(ckpt)
    try:
        report = [{"path": f.path, "format": f.format,
                   "kinds": {kind: backend.bulk_import(f.entries[kind], kind, source=Path(f.path).name)
                             for kind in ARI_KINDS if kind in f.entries}}
                  for f in files]
    finally:
        backend.close()
    if args.json:
        emit(report)
        return EXIT_OK
    for item in report:
        done = "; ".join(f"{kind} {r['imported']} imported, {r['skipped']} already there" for kind, r in item["kinds"].items())
        print(f"{item['path']} ({FORMATS[item['format']]}): {done or 'no entries'}")
    return EXIT_OK


def _export_ari_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help="checkpoint directory")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help=f"where to write (default: CKPT/{BACKUP_NAME})")
    p.add_argument("--force", action="store_true",
                   help="replace an existing file even if it holds entries the checkpoint does not show")
    p.add_argument("--json", action="store_true", help="print JSON")


@command("export-ari", f"write ARI's {BACKUP_NAME} (what `ari memory backup` writes), for ARI's restore")
@arguments(_export_ari_args)
def cmd_export_ari(args: argparse.Namespace) -> int:
    from .ari_export import write_ari_backup

    backend = open_backend(args.checkpoint)
    try:
        result = write_ari_backup(backend, args.output, replace=args.force)
    except OSError as exc:
        raise InvalidInput("--output", f"cannot write {args.output or Path(args.checkpoint) / BACKUP_NAME}: {exc.strerror or exc}") from None
    if args.json:
        emit(result)
    else:
        lines = result["lines"]
        print(f"wrote {result['path']}: " + ", ".join(f"{n} {kind}" for kind, n in lines.items()))
    return EXIT_OK


# ---------------------------------------------------------------------------- tools


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("which", choices=["ledger", "projections", "letta", "all"], nargs="?", default="all")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")


@command("bench", "run the benchmarks (each figure beside its limit, measured in the same run)")
@arguments(_bench_args)
def cmd_bench(args: argparse.Namespace) -> int:
    import importlib

    modules = {"ledger": "bench.ledger_bench", "projections": "bench.projection_bench", "letta": "bench.letta_bench"}
    chosen = list(modules) if args.which == "all" else [args.which]
    worst = 0
    for name in chosen:
        print(f"== {name}", flush=True)
        worst = max(worst, importlib.import_module(modules[name]).main(args.rest))
    return worst


def _embed_args(p: argparse.ArgumentParser) -> None:
    from .embed_server import add_arguments

    add_arguments(p)


@command("embed-server", "serve OpenAI-compatible /v1/embeddings from the static embedder (offline)")
@arguments(_embed_args)
def cmd_embed_server(args: argparse.Namespace) -> int:
    from .embed_server import serve

    return serve(args)


def _letta_args(p: argparse.ArgumentParser) -> None:
    from .letta_harness import add_arguments

    add_arguments(p)


@command("letta", "bring a local Letta 0.16.7 server up or down (own venv, Postgres, embeddings)")
@arguments(_letta_args)
def cmd_letta(args: argparse.Namespace) -> int:
    from .letta_harness import run

    return run(args)



@command("mcp", "serve ARI's memory tools over MCP stdio (configured by ARI's environment variables)")
def cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp_server import main as serve

    return serve()


@command("restore", "replay the log into the checkpoint's Letta agent (LETTA_BASE_URL), with progress")
@arguments(_ckpt)
def cmd_restore(args: argparse.Namespace) -> int:
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ledger import config

    if not config.letta_base_url():
        raise InvalidInput("LETTA_BASE_URL", "is not set; start a server with `ari-ledger letta up` and export its URL")
    backend = open_backend(args.checkpoint)
    backend.projector.catch_up()  # the local fold first; Letta is replayed below, with progress
    columns = (TextColumn("replaying into {task.fields[agent]}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]:,.0f} events/s"), TimeElapsedColumn())
    started = time.perf_counter()
    with Progress(*columns, console=Console(stderr=True), transient=args.json) as progress:
        task = progress.add_task("replay", total=None, agent=backend.engine.letta.agent_name, rate=0.0)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total, rate=done / max(time.perf_counter() - started, 1e-9))

        result = backend.engine.restore(progress=update)
    if args.json:
        emit(result)
    else:
        print(f"restored {result['events']} events into {result['agent']} ({result['events_per_s']} events/s); cursor {result['cursor']}")
    return EXIT_OK


@command("ari-skill", "write a skill directory for ARI's memory-skill.path (and the drop-in ari-skill-memory distribution)")
@arguments(lambda p: p.add_argument("dir", help="the skill directory to write (created; template files are overwritten)"))
def cmd_ari_skill(args: argparse.Namespace) -> int:
    from .skill_dir import write_skill_dir

    written = write_skill_dir(args.dir)
    root = Path(args.dir).resolve()
    for path in written:
        print(path.relative_to(root))
    print(f"wrote {len(written)} files to {root}; point memory-skill.path at it and install it, see {root / 'README.md'}")
    return EXIT_OK
