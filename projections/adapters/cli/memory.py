"""Commands on memory: ``search``, ``context``, ``verified``, ``audit``, ``tree``, ``report``.

Each opens the checkpoint read-only: a command for people changes nothing in it.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger import InvalidInput, LedgerNotFound, layout
from ledger.checkpoint_format import VERIFIED_CONTEXT_NAME
from ledger.events import check_seq
from ledger.safe_io import read_json
from projections.adapters.cli import framework
from projections.adapters.cli.framework import (
    ERROR_HELP,
    EXIT_CHECK_FAILED,
    EXIT_ERROR,
    EXIT_OK,
    STDOUT,
    as_arg,
    as_of_arg,
    check_dir,
    checkpoint_arg,
    command,
    counts,
    emit,
    experiments_arg,
    file_facts,
    need_as,
    output_arg,
    output_file,
    said,
)
from projections.adapters.cli.progress import folding
from projections.evidence.grounded_block import grounded_block_data, render_grounded_block
from projections.models.verdicts import EVIDENCE, check_evidence

if TYPE_CHECKING:  # the backend (numpy, the engines), rich's tables: imported by the commands that use them
    from projections.api import MemoryBackend


def open_backend(path: str) -> MemoryBackend:
    """An existing checkpoint, opened only to read it: a command for people changes nothing
    in the directory (no recovery, no snapshot, no access-log line). A first fold of a large
    log shows its progress on a terminal (``progress.folding``)."""
    from projections.api import MemoryBackend

    if not layout.has_ledger(path):
        raise LedgerNotFound(f"no ledger at {layout.log_path(path)} (is {path} a checkpoint directory?)")
    return MemoryBackend(path, readonly=True, progress=folding(path))


def known_lineage(backend: MemoryBackend, node: str, field: str = "--node") -> list[str]:
    """The node's lineage from the recorded tree; a node this checkpoint does not know is one
    ``error:`` line naming the option (every node selector goes through here)."""
    lineage = backend.lineage(node)
    if lineage is None:
        raise InvalidInput(field, f"unknown node {node!r} in this checkpoint (see `ari-ledger tree`)")
    return lineage


def scope_for(backend: MemoryBackend, node: str | None, ancestors: str | None) -> list[str]:
    """``--ancestors a,b`` as given (each a node the checkpoint knows; ``--as``, if given, must
    be one too), else the ``--as`` node's lineage from the recorded tree."""
    if node is not None:
        lineage = known_lineage(backend, node, "--as")
        if ancestors is None:
            return lineage
    if ancestors is None:
        raise InvalidInput("--as", "missing: name the node to read as (see `ari-ledger tree`)")
    scope = [a for a in ancestors.split(",") if a]
    for a in scope:
        known_lineage(backend, a, "--ancestors")
    return scope


def check_as_of(backend: MemoryBackend, as_of: int | None) -> None:
    """``--as-of``: a seq of this log (0 to its last seq); past the end is one error line."""
    if as_of is not None:
        check_seq(as_of, "--as-of", backend.seq_on_disk())


def as_of_seq(backend: MemoryBackend, as_of: int | None) -> int:
    """The seq an answer is as of, what every ``--json`` says as ``as_of_seq``: the one asked,
    else the end of the log the read folded."""
    return backend.folded_seq if as_of is None else as_of


def todays_files(seq: int, files: str = "files on disk (node reports, artifacts)") -> str:
    """What a command reading files as of a seq says of them: memory is as of then, the files
    are today's (they cannot travel in time)."""
    return f"as of seq {seq}: memory as it stood then; {files} as they are today"


def as_of_words(as_of: int | None) -> str:
    """`` (as of seq N)`` after a title when ``--as-of`` was given; nothing otherwise."""
    return "" if as_of is None else f" (as of seq {as_of})"


def check_seq_and_experiments(args: argparse.Namespace) -> None:
    """``--as-of`` a seq (0 or more), and an ``--experiments`` the user names must exist."""
    check_seq(args.as_of)
    check_dir(args.experiments, "--experiments")


def _search_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    p.add_argument("query", help="natural-language query (ARI uses the node's eval_summary)")
    as_arg(p, required=True, more="; required unless --ancestors is given")
    p.add_argument(
        "--ancestors",
        default=None,
        metavar="A,B,…",
        help="read exactly these nodes' memory (comma-separated) instead of the --as node's lineage",
    )
    p.add_argument("--limit", type=int, default=5, metavar="N", help="at most this many results")
    as_of_arg(p)
    p.add_argument("--kind", action="append", default=None, help="typed search: only this kind (repeatable)")


def _check_search(args: argparse.Namespace) -> None:
    """A negative seq, or an --ancestors that names no node, is one error line (not an empty scope)."""
    check_seq(args.as_of)
    if args.ancestors is not None and not [a for a in args.ancestors.split(",") if a]:
        raise InvalidInput("--ancestors", "names no node (give A,B,… or leave it out for the recorded lineage)")
    if args.ancestors is None:
        need_as(args, ", or give --ancestors A,B,…")


@command(
    "search",
    "semantic search as a node: only its ancestors' memory",
    _search_args,
    exit_codes={
        EXIT_ERROR: f"{ERROR_HELP}; an unknown --as or --ancestors node, an empty --ancestors, "
        "an unknown --kind, a negative --limit, an --as-of outside the log"
    },
    check=_check_search,
)
def cmd_search(args: argparse.Namespace) -> int:
    from rich.table import Table

    backend = open_backend(args.checkpoint)
    scope = scope_for(backend, args.as_node, args.ancestors)
    check_as_of(backend, args.as_of)
    results: list[Any]
    if args.kind:
        backend.check_kinds(args.kind, "--kind")
        results = backend.search_research_memory(
            args.query, scope, kinds=args.kind, limit=args.limit, as_of=args.as_of
        )["results"]
    else:
        results = backend.search_memory(args.query, scope, limit=args.limit, as_of=args.as_of)["results"]
    if args.json:
        emit({"scope": scope, "results": results, "as_of_seq": as_of_seq(backend, args.as_of)})
        return EXIT_OK
    title = f"{args.as_node} may read: {' → '.join(scope)}" if args.ancestors is None else f"read: {', '.join(scope)}"
    table = Table(title=title + as_of_words(args.as_of))
    for col in ("score", "node", "kind", "text"):
        table.add_column(col)
    for r in results:
        table.add_row(f"{r['score']:.3f}", r["node_id"], r.get("kind") or "note", r["text"])
    framework.console.print(table)
    return EXIT_OK


def _context_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    as_arg(p, required=True)
    as_of_arg(p)


def _check_as_node(args: argparse.Namespace) -> None:
    """``--as`` given (a command that reads as a node needs one), ``--as-of`` a seq."""
    need_as(args)
    check_seq(args.as_of)


@command(
    "context",
    "the working context a node starts with (experiment core, ancestor results)",
    _context_args,
    exit_codes={EXIT_ERROR: f"{ERROR_HELP}; an unknown --as node, an --as-of outside the log"},
    check=_check_as_node,
)
def cmd_context(args: argparse.Namespace) -> int:
    backend = open_backend(args.checkpoint)
    scope = scope_for(backend, args.as_node, None)
    check_as_of(backend, args.as_of)
    info = backend.node(args.as_node)
    ctx = backend.build_working_context(
        args.as_node, scope[:-1], info["eval_summary"] if info else None, as_of=args.as_of
    )
    if args.json:
        emit({**ctx, "as_of_seq": as_of_seq(backend, args.as_of)})
    elif not ctx["messages"]:
        framework.console.print(no_context(backend, args.as_node, args.as_of))
    else:
        if args.as_of is not None:
            framework.console.print(f"as of seq {args.as_of}\n")
        for message in ctx["messages"]:
            framework.console.print(f"{message['role']}:\n{message['content']}\n")
    return EXIT_OK


def no_context(backend: MemoryBackend, node: str, as_of: int | None) -> str:
    """Why a node starts with nothing, in one line (an empty output would look like a failure
    to read): the log had no event yet, the node did not exist yet, or nothing was written."""
    if as_of is None:
        return f"node {node} has no context: no experiment core is seeded and its ancestors wrote nothing for it"
    since = backend.node_since(node)
    if as_of == 0:
        why = "the log had no event yet (its first is seq 1)"
    elif since is not None and since > as_of:
        why = f"the node did not exist then (its first event is seq {since})"
    else:
        why = "no experiment core was seeded and its ancestors had written nothing for it"
    return f"node {node} had no context as of seq {as_of}: {why}"


def _verified_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    as_arg(p, required=False, more=f" (default: the best node of {VERIFIED_CONTEXT_NAME})")
    as_of_arg(p)
    p.add_argument(
        "--block",
        action="store_true",
        help="print the grounded block for the paper prompt (with --json: what it holds, as data, and its text)",
    )
    p.add_argument(
        "--min-evidence",
        default=None,
        metavar="LEVEL",
        help=f"keep claims below this evidence level out of usable_for_claims ({' < '.join(EVIDENCE)})",
    )


def _check_verified(args: argparse.Namespace) -> None:
    check_seq(args.as_of)
    if args.min_evidence is not None:
        check_evidence(args.min_evidence, "--min-evidence")


@command(
    "verified",
    "the verified context: claims ranked by how well artifacts back them",
    _verified_args,
    exit_codes={
        EXIT_ERROR: f"{ERROR_HELP}; an unknown --as node, no --as and no {VERIFIED_CONTEXT_NAME} (or a damaged "
        "one), an unknown --min-evidence, an --as-of outside the log"
    },
    check=_check_verified,
)
def cmd_verified(args: argparse.Namespace) -> int:
    from rich.table import Table

    backend = open_backend(args.checkpoint)
    if args.as_node:
        lineage = known_lineage(backend, args.as_node, "--as")
    else:
        lineage = _saved_lineage(backend, Path(args.checkpoint) / VERIFIED_CONTEXT_NAME)
    check_as_of(backend, args.as_of)
    ctx = backend.get_verified_context(lineage, min_evidence=args.min_evidence, as_of=args.as_of)
    seq = as_of_seq(backend, args.as_of)
    if args.block and args.json:
        emit(block_data(ctx, seq))
    elif args.block:
        print(render_grounded_block(ctx), end="")
    elif args.json:
        emit({**ctx, "as_of_seq": seq})
    else:
        table = Table(title=f"claims of {' → '.join(lineage)}{as_of_words(args.as_of)}")
        for col in ("rank", "node", "repro", "evidence", "usable", "text"):
            table.add_column(col)
        usable = {c["entry_id"] for c in ctx["usable_for_claims"]}
        for i, c in enumerate(ctx["claims"], 1):
            table.add_row(
                str(i),
                c["node_id"],
                c["repro_status"] or "unverified",
                c["evidence"],
                "yes" if c["entry_id"] in usable else "no",
                c["text"],
            )
        framework.console.print(table)
        for i, c in enumerate(ctx["claims"], 1):
            for x in c.get("exclusions", []):
                framework.console.print(f"not usable: #{i} {c['node_id']} {x['code']}: {x['text']}")
        framework.console.print(
            f"usable for claims: {len(ctx['usable_for_claims'])}; limitations: {len(ctx['limitations'])}"
        )
    return EXIT_OK


def block_data(ctx: Mapping[str, Any], seq: int) -> dict[str, Any]:
    """``verified --block --json``: what the grounded block holds as data, in the shape it is
    rendered from (``usable_for_claims``, ``limitations``: render_grounded_block of it is the
    block), its lineage and seq, and the block's text as ``--block`` prints it."""
    return {
        **grounded_block_data(ctx),
        "lineage": ctx.get("lineage"),
        "as_of_seq": seq,
        "block": render_grounded_block(ctx),
    }


def _saved_lineage(backend: MemoryBackend, saved: Path) -> list[str]:
    """The lineage ``verified_context.json`` records; a missing file asks for ``--as``, a damaged
    one, or one whose lineage names a node this checkpoint does not know, is an error naming it."""
    if not saved.is_file():
        raise InvalidInput("--as", f"no {VERIFIED_CONTEXT_NAME} yet; name the node to read as")
    data = read_json(saved)
    lineage = data.get("lineage") if isinstance(data, dict) else None
    if not isinstance(lineage, list) or not lineage or not all(isinstance(n, str) for n in lineage):
        raise InvalidInput(str(saved), f"records no lineage (a list of node ids), got {lineage!r}; pass --as NODE")
    for node in lineage:
        if backend.lineage(node) is None:
            raise InvalidInput(str(saved), f"its lineage names node {node!r}, which this checkpoint does not know")
    return lineage


def _audit_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    experiments_arg(p)
    p.add_argument(
        "--run-id", default=None, help="audit one run only (a directory under the experiments root the log names)"
    )
    as_of_arg(p)


@command(
    "audit",
    "re-hash every artifact memory cites and check every claim's numbers; exit 1 on a missing file or a mismatch",
    _audit_args,
    exit_codes={
        EXIT_OK: "every cited artifact is there with its hash, every claim's numbers match",
        EXIT_CHECK_FAILED: "a missing or mismatching artifact, a value mismatch, or a broken chain",
        EXIT_ERROR: f"{ERROR_HELP}; an --experiments that is not a directory (or none found), an unknown --run-id, "
        "an --as-of outside the log",
    },
    check=check_seq_and_experiments,
)
def cmd_audit(args: argparse.Namespace) -> int:
    from projections.evidence.grounding import check_run

    backend = open_backend(args.checkpoint)
    check_as_of(backend, args.as_of)
    root = _experiments_root(Path(args.checkpoint), args.experiments)
    if args.run_id is not None:
        check_run(backend.fresh_catalog(), root, args.run_id, "--run-id", args.as_of)
    audit = backend.audit_memory(root, args.run_id, as_of=args.as_of)
    if args.json:
        emit({**audit, "as_of_seq": as_of_seq(backend, args.as_of)})
    else:
        for r in audit["results"]:
            if r["status"] != "verified":
                framework.console.print(f"{r['status']:>9}  {r['node_id']}/{r['path']}", markup=False)
        for v in audit["values"]:
            for miss in v.get("mismatches", []):
                framework.console.print(
                    f"   values  {v['node_id']} {v['entry_id']}: {miss['value']}: {miss['reason']}", markup=False
                )
        framework.console.print(
            f"artifacts: {counts(audit['summary'])}; values: {counts(audit['value_summary'])}; "
            f"chain: {'ok' if audit['chain']['ok'] else 'BROKEN'}"
            + (f"; {todays_files(args.as_of, 'files on disk and the log chain')}" if args.as_of is not None else "")
        )
    return EXIT_OK if audit["ok"] else EXIT_CHECK_FAILED


def _experiments_root(ckpt: Path, given: str | None) -> Path:
    from projections.evidence.grounding import experiments_roots

    if given:
        return Path(given)
    for candidate in experiments_roots(ckpt):
        if candidate.is_dir():
            return candidate
    raise InvalidInput(
        "--experiments", f"no experiments directory in, beside or (ARI's layout) above {ckpt}; pass --experiments DIR"
    )


def _tree_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    experiments_arg(p)
    as_of_arg(p)


@command(
    "tree",
    "the recorded node tree with memory counts per node",
    _tree_args,
    exit_codes={EXIT_ERROR: f"{ERROR_HELP}; an --experiments that is not a directory, an --as-of outside the log"},
    check=check_seq_and_experiments,
)
def cmd_tree(args: argparse.Namespace) -> int:
    from projections.tools.lineage import lineage_data, render_tree

    backend = open_backend(args.checkpoint)
    check_as_of(backend, args.as_of)
    root = _optional_experiments(Path(args.checkpoint), args.experiments)
    data = lineage_data(backend, root, as_of=args.as_of)
    if args.json:
        emit(data)
        return EXIT_OK
    if args.as_of is not None:
        print(todays_files(args.as_of))
    print(render_tree(data) if data["nodes"] else no_nodes(args.as_of))
    return EXIT_OK


def no_nodes(as_of: int | None) -> str:
    """``tree`` of a log with no node (yet), in one line rather than nothing."""
    if as_of is None:
        return "no nodes: the log records none"
    why = "the log had no event yet" if as_of == 0 else "none had started or written"
    return f"no nodes as of seq {as_of}: {why}"


def _optional_experiments(ckpt: Path, given: str | None) -> Path | None:
    try:
        return _experiments_root(ckpt, given)
    except InvalidInput:
        return None


def _report_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    output_arg(p, "the HTML file to write", default="report.html")
    experiments_arg(p)
    as_of_arg(p)


@command(
    "report",
    "write the lineage report: one self-contained HTML file",
    _report_args,
    exit_codes={EXIT_ERROR: f"{ERROR_HELP}; an --experiments that is not a directory, an --as-of outside the log"},
    check=check_seq_and_experiments,
)
def cmd_report(args: argparse.Namespace) -> int:
    from ledger.output import write_output
    from projections.adapters.report import render_report
    from projections.tools.lineage import lineage_data

    with output_file(args.output) as out:
        backend = open_backend(args.checkpoint)
        check_as_of(backend, args.as_of)
        root = _optional_experiments(Path(args.checkpoint), args.experiments)
        data = lineage_data(backend, root, as_of=args.as_of)
        html = render_report(data).encode("utf-8")
        write_output(out, lambda raw: raw.write(html))
    if args.json:
        emit(
            file_facts(args.output, html)
            | {"nodes": len(data["nodes"]), "as_of_seq": data["as_of_seq"], "experiments": root and str(root)},
            said(args.output),
        )
    else:
        where = "standard output" if args.output == STDOUT else args.output
        at = "" if args.as_of is None else f", as of seq {args.as_of}"
        print(f"wrote {where} ({len(data['nodes'])} nodes{at})", file=said(args.output))
    return EXIT_OK
