"""Commands on memory: ``search``, ``context``, ``verified``, ``audit``, ``tree``, ``report``.

Each opens the checkpoint read-only: a command for people changes nothing in it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from ledger import InvalidInput, LedgerNotFound, layout
from ledger.bundle import check_output_path
from ledger.safe_io import read_file
from ledger.vocabulary import KINDS
from projections.adapters.cli.framework import (
    ERROR_HELP,
    EXIT_CHECK_FAILED,
    EXIT_ERROR,
    EXIT_OK,
    check_dir,
    check_seq,
    checkpoint_arg,
    command,
    console,
    emit,
)
from projections.api.audit import check_run
from projections.api.backend import MemoryBackend
from projections.api.grounding import experiments_roots
from projections.api.verified import EVIDENCE, VERIFIED_CONTEXT_NAME, check_evidence, render_grounded_block


def open_backend(path: str) -> MemoryBackend:
    """An existing checkpoint, opened only to read it: a command for people changes nothing
    in the directory (no recovery, no snapshot, no access-log line)."""
    if not layout.has_ledger(path):
        raise LedgerNotFound(f"no ledger at {layout.log_path(path)} (is {path} a checkpoint directory?)")
    return MemoryBackend(path, readonly=True)


def known_lineage(backend: MemoryBackend, node: str, field: str = "--node") -> list[str]:
    """The node's lineage from the recorded tree; a node this checkpoint does not know is one
    ``error:`` line naming the option (every node selector goes through here)."""
    lineage = backend.lineage(node)
    if lineage is None:
        raise InvalidInput(field, f"unknown node {node!r} in this checkpoint (see `ari-ledger tree`)")
    return lineage


def scope_for(backend: MemoryBackend, node: str, ancestors: str | None) -> list[str]:
    """``--ancestors a,b`` as given (each a node the checkpoint knows; ``--node`` then only
    labels the output), else the node's lineage from the recorded tree."""
    if ancestors is None:
        return known_lineage(backend, node)
    scope = [a for a in ancestors.split(",") if a]
    for a in scope:
        known_lineage(backend, a, "--ancestors")
    return scope


def check_kinds(backend: MemoryBackend, kinds: list[str]) -> None:
    """``--kind``: one of ARI's kinds, or a label some entry of this checkpoint has (ARI's
    labels are free text, e.g. ``result_summary``); anything else names nothing."""
    with backend.session.reading() as catalog:
        labels = {e.label for e in catalog.entries.values()}
    for kind in kinds:
        if kind not in KINDS and kind not in labels:
            raise InvalidInput(
                "--kind",
                f"unknown kind {kind!r}: not one of {', '.join(KINDS)}, and no entry of this checkpoint has it",
            )


def _search_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    p.add_argument("query", help="natural-language query (ARI uses the node's eval_summary)")
    p.add_argument("--node", required=True, help="search as this node")
    p.add_argument(
        "--ancestors", default=None, metavar="A,B,…", help="comma-separated scope instead of the recorded lineage"
    )
    p.add_argument("--limit", type=int, default=5, help="at most this many results")
    p.add_argument("--as-of", type=int, default=None, metavar="SEQ", help="as the node saw it at this seq (0 or more)")
    p.add_argument("--kind", action="append", default=None, help="typed search: only this kind (repeatable)")


def _check_search(args: argparse.Namespace) -> None:
    """A negative seq, or an --ancestors that names no node, is one error line (not an empty scope)."""
    check_seq(args.as_of)
    if args.ancestors is not None and not [a for a in args.ancestors.split(",") if a]:
        raise InvalidInput("--ancestors", "names no node (give A,B,… or leave it out for the recorded lineage)")


@command(
    "search",
    "semantic search as a node: only its ancestors' memory",
    _search_args,
    exit_codes={
        EXIT_ERROR: f"{ERROR_HELP}; an unknown --node or --ancestors node, an empty --ancestors, "
        "an unknown --kind, a negative --limit or --as-of"
    },
    check=_check_search,
)
def cmd_search(args: argparse.Namespace) -> int:
    backend = open_backend(args.checkpoint)
    scope = scope_for(backend, args.node, args.ancestors)
    results: list[Any]
    if args.kind:
        check_kinds(backend, args.kind)
        results = backend.search_research_memory(
            args.query, scope, kinds=args.kind, limit=args.limit, as_of=args.as_of
        )["results"]
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
    checkpoint_arg(p)
    p.add_argument("--node", required=True, help="the node (one the checkpoint knows)")


@command("context", "the working context a node starts with (experiment core, ancestor results)", _node_args)
def cmd_context(args: argparse.Namespace) -> int:
    backend = open_backend(args.checkpoint)
    scope = scope_for(backend, args.node, None)
    info = backend.node(args.node)
    ctx = backend.build_working_context(args.node, scope[:-1], info["eval_summary"] if info else None)
    if args.json:
        emit(ctx)
    else:
        for message in ctx["messages"]:
            console.print(f"{message['role']}:\n{message['content']}\n")
    return EXIT_OK


def _verified_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    p.add_argument(
        "--node", default=None, help="lineage of this node (default: the best node of verified_context.json)"
    )
    p.add_argument("--block", action="store_true", help="print the grounded block for the paper prompt")
    p.add_argument(
        "--min-evidence",
        default=None,
        metavar="LEVEL",
        help=f"keep claims below this evidence level out of usable_for_claims ({' < '.join(EVIDENCE)})",
    )


@command("verified", "the verified context: claims ranked by how well artifacts back them", _verified_args)
def cmd_verified(args: argparse.Namespace) -> int:
    if args.min_evidence is not None:
        check_evidence(args.min_evidence, "--min-evidence")
    backend = open_backend(args.checkpoint)
    if args.node:
        lineage = known_lineage(backend, args.node)
    else:
        saved = Path(args.checkpoint) / VERIFIED_CONTEXT_NAME
        if not saved.is_file():
            raise InvalidInput("--node", f"no {VERIFIED_CONTEXT_NAME} yet; name the node whose lineage to use")
        lineage = json.loads(read_file(saved))["lineage"]
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
            table.add_row(
                str(i),
                c["node_id"],
                c["repro_status"] or "unverified",
                c["evidence"],
                "yes" if c["entry_id"] in usable else "no",
                c["text"],
            )
        console.print(table)
        for i, c in enumerate(ctx["claims"], 1):
            for x in c.get("exclusions", []):
                console.print(f"not usable: #{i} {c['node_id']} {x['code']}: {x['text']}")
        console.print(f"usable for claims: {len(ctx['usable_for_claims'])}; limitations: {len(ctx['limitations'])}")
    return EXIT_OK


def _audit_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    p.add_argument(
        "--experiments",
        default=None,
        help="experiments root (default: CKPT/experiments, CKPT/../experiments, or ARI's CKPT/../../experiments)",
    )
    p.add_argument("--run-id", default=None, help="audit one run only (a directory under the experiments root)")


@command(
    "audit",
    "re-hash every artifact memory cites and check every claim's numbers; exit 1 on a missing file or a mismatch",
    _audit_args,
    exit_codes={
        EXIT_OK: "every cited artifact is there with its hash, every claim's numbers match",
        EXIT_CHECK_FAILED: "a missing or mismatching artifact, a value mismatch, or a broken chain",
    },
)
def cmd_audit(args: argparse.Namespace) -> int:
    backend = open_backend(args.checkpoint)
    root = _experiments_root(Path(args.checkpoint), args.experiments)
    if args.run_id is not None:
        check_run(backend.session, root, args.run_id, "--run-id")
    audit = backend.audit_memory(root, args.run_id)
    if args.json:
        emit(audit)
    else:
        for r in audit["results"]:
            if r["status"] != "verified":
                console.print(f"{r['status']:>9}  {r['node_id']}/{r['path']}", markup=False)
        for v in audit["values"]:
            for miss in v.get("mismatches", []):
                console.print(
                    f"   values  {v['node_id']} {v['entry_id']}: {miss['value']}: {miss['reason']}", markup=False
                )
        console.print(
            f"summary: {audit['summary']}; values: {audit['value_summary']}; "
            f"chain: {'ok' if audit['chain']['ok'] else 'BROKEN'}"
        )
    return EXIT_OK if audit["ok"] else EXIT_CHECK_FAILED


def _experiments_root(ckpt: Path, given: str | None) -> Path:
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
    p.add_argument(
        "--experiments",
        default=None,
        help="experiments root, for metrics and audit status (default: found beside CKPT, else none)",
    )


def _check_experiments(args: argparse.Namespace) -> None:
    """An --experiments the user names must exist; only one left out is looked for (or done without)."""
    check_dir(args.experiments, "--experiments")


@command(
    "tree",
    "the recorded node tree with memory counts per node",
    _tree_args,
    exit_codes={EXIT_ERROR: f"{ERROR_HELP}; an --experiments that is not a directory"},
    check=_check_experiments,
)
def cmd_tree(args: argparse.Namespace) -> int:
    from projections.api.lineage import lineage_data, render_tree

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
    p.add_argument(
        "checkpoint", help="checkpoint directory (ARI's checkpoints/<run_id>/, the folder that holds memory_ledger/)"
    )
    p.add_argument("-o", "--output", default="report.html", metavar="FILE", help="the HTML file to write")
    p.add_argument(
        "--experiments",
        default=None,
        help="experiments root, for metrics and audit status (default: found beside CKPT, else none)",
    )


@command(
    "report",
    "write the lineage report: one self-contained HTML file",
    _report_args,
    exit_codes={EXIT_ERROR: f"{ERROR_HELP}; an --experiments that is not a directory"},
    check=_check_experiments,
)
def cmd_report(args: argparse.Namespace) -> int:
    from projections.adapters.report import render_report
    from projections.api.lineage import lineage_data

    check_output_path(Path(args.output), "--output")
    backend = open_backend(args.checkpoint)
    data = lineage_data(backend, _optional_experiments(Path(args.checkpoint), args.experiments))
    Path(args.output).write_text(render_report(data), encoding="utf-8")
    print(f"wrote {args.output} ({len(data['nodes'])} nodes)")
    return EXIT_OK
