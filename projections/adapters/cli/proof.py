"""Commands for a reviewer: ``reads`` (what a node saw, replayed) and ``prove`` (everything)."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from ledger import InvalidInput
from ledger.events import check_seq
from projections.access.log import READ_FIELDS  # named in reads' --help
from projections.adapters.cli import framework
from projections.adapters.cli.checkpoint import hash_arg
from projections.adapters.cli.framework import (
    EXIT_CHECK_FAILED,
    EXIT_ERROR,
    EXIT_OK,
    STDOUT,
    Deprecated,
    as_of_arg,
    checkpoint_arg,
    command,
    emit,
    experiments_arg,
    node_arg,
    output_arg,
    output_file,
    said,
)
from projections.adapters.cli.memory import check_seq_and_experiments, open_backend
from projections.adapters.cli.progress import only_reading

if TYPE_CHECKING:
    from projections.tools.prove import Proof

EXIT_NOTHING_TO_PROVE = 3  # prove: no verified context, or one without claims

READS_EXIT_CODES = {
    EXIT_OK: "the access log's chain holds (and, with --replay, every replayable read replays the same)",
    EXIT_CHECK_FAILED: "the chain is broken, or a read replays differently\n"
    f"(fields compared: {', '.join(READ_FIELDS)})",
    EXIT_ERROR: "the command could not run: not a checkpoint, --node names a node neither the log nor\n"
    "the access log has, or an --as-of outside the log (one error: line)",
}

PROVE_EXIT_CODES = {
    EXIT_OK: "PROVED: every claim holds, every number and artifact of usable_for_claims was checked,\n"
    "the context is what the library builds (as of its anchor; without one, each usable item as\n"
    "the library judges it), the chains hold and every recorded read replays the same",
    EXIT_CHECK_FAILED: "NOT PROVED: something fails (each failure is printed), or, with --strict, something\n"
    "could not be checked",
    EXIT_ERROR: "the command could not run: not a checkpoint, a --context file that is missing or not a "
    "verified context, a bad --head, an --experiments that is not a directory, an --as-of outside the log "
    "(one error: line)",
    EXIT_NOTHING_TO_PROVE: "NOTHING TO PROVE: no verified context, or one that lists no claims (with --as-of: "
    f"none as of that seq); the rest is still checked, and a failure there makes it {EXIT_CHECK_FAILED}",
}


def _reads_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    node_arg(p)
    as_of_arg(p)
    p.add_argument("--replay", action="store_true", help="run every read again as of its log position and compare")


@command(
    "reads",
    "what each node read (position, ids) from the chained access log; --replay re-runs them (exit 1 on a problem)",
    _reads_args,
    exit_codes=READS_EXIT_CODES,
)
def cmd_reads(args: argparse.Namespace) -> int:
    from projections.access.reader import check_chain, made_by, read_records
    from projections.tools.reads import replay_all

    backend = open_backend(args.checkpoint)  # a checkpoint, or exit 2 saying so
    try:
        check_seq(args.as_of, "--as-of", backend.last_seq)
        chain, lines = check_chain(Path(args.checkpoint))
        records = read_records(lines, args.node)
        recorded = len(records)
        if args.as_of is not None:  # the reads made by then: a read records the log position it saw
            records = made_by(records, args.as_of)
        if args.node is not None and not records and backend.lineage(args.node) is None:
            raise InvalidInput(
                "--node",
                f"unknown node {args.node!r}: neither the log nor the access log has it (see `ari-ledger tree`)",
            )
        replayed = replay_all(backend, records) if args.replay else []
    finally:
        backend.close()
    failed = not chain.ok or any(r.verdict == "differs" for r in replayed)
    if args.json:
        emit(
            {
                "chain": chain.as_dict(),
                "reads": [r.as_dict() for r in replayed] if args.replay else [r.as_dict() for r in records],
                "as_of_seq": backend.last_seq if args.as_of is None else args.as_of,
            }
        )
        return EXIT_CHECK_FAILED if failed else EXIT_OK
    verdicts = {id(r.record): r for r in replayed}
    for record in records:
        done = verdicts.get(id(record))
        mark = f"{done.verdict:>14}  " if done else ""
        at = "?" if record.at is None else record.at
        framework.console.print(
            f"{mark}{record.where}  {record.node_id or '-'}  {record.tool} @seq {at}: {len(record.ids)} id(s)"
            + (f"  ({done.why})" if done and done.why else "")
        )
    state = "intact" if chain.ok else "BROKEN"
    framework.console.print(f"access log: {chain.lines} lines, {chain.chained} chained, chain {state}")
    for line in chain.problems:
        framework.console.print(f"problem: {line}")
    for line in chain.notes:
        framework.console.print(f"note: {line}")
    if args.as_of is not None:
        framework.console.print(
            f"as of seq {args.as_of}: {len(records)} of {recorded} recorded read(s) were made by then; "
            "the access log's chain is checked as it is today"
        )
    if args.replay:
        same = sum(r.verdict == "same" for r in replayed)
        framework.console.print(f"replayed {len(replayed)} read(s): {same} same, {len(replayed) - same} not")
    return EXIT_CHECK_FAILED if failed else EXIT_OK


def _prove_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    p.add_argument(
        "--context", default=None, metavar="FILE", help="a verified_context.json (default: the checkpoint's own)"
    )
    experiments_arg(p)
    p.add_argument(
        "--head",
        action="append",
        default=[],
        metavar="HASH",
        help="an event hash kept outside the checkpoint (repeatable)",
    )
    output_arg(p, "also write the lineage report, an HTML file, with failing claims marked")
    p.add_argument("--html", dest="output", action=Deprecated, new="-o/--output")
    p.add_argument("--strict", action="store_true", help="what could not be checked fails too")
    as_of_arg(p)


@command(
    "prove",
    "for a reviewer: chain, anchors, every claim traced to its event, report, artifacts and values, "
    "every read replayed (exit 0 only when all holds)",
    _prove_args,
    exit_codes=PROVE_EXIT_CODES,
    check=check_seq_and_experiments,
)
def cmd_prove(args: argparse.Namespace) -> int:
    from ledger.output import write_output
    from projections.tools.prove import Reviewer

    bar = only_reading("proving", "prove")
    heads = [hash_arg(h) for h in args.head]
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(output_file(args.output)) if args.output else None
        with Reviewer(args.checkpoint, args.experiments, progress=bar) as reviewer:  # the log opened once
            proof = reviewer.prove(args.context, heads, strict=args.strict, as_of=args.as_of)
            if out is not None:
                from projections.adapters.report import render_report

                html = render_report(reviewer.lineage(proof)).encode("utf-8")  # the same open log
                write_output(out, lambda raw: raw.write(html))
    code = {"proved": EXIT_OK, "nothing_to_prove": EXIT_NOTHING_TO_PROVE}.get(proof.verdict, EXIT_CHECK_FAILED)
    if args.json:
        emit(proof.as_dict() | ({"output": args.output} if args.output else {}), said(args.output or ""))
        return code
    con = framework.make_console(stderr=True) if args.output == STDOUT else framework.console
    if proof.as_of_note:
        con.print(proof.as_of_note)
    for claim in proof.claims:
        head = f"{claim.verdict:>5}  {claim.node_id}  [{claim.evidence}; values {claim.values and claim.values['verdict']}]"
        con.print(f"{head}  {claim.text}")
        if claim.failures:
            con.print(f"         entry_id: {claim.entry_id}")
        for why in claim.failures:
            con.print(f"         fails: {why}")
        for why in claim.unchecked:
            con.print(f"         not checked: {why}")
        for why in claim.notes:
            con.print(f"         note: {why}")
    con.print(f"anchors: {', '.join(proof.anchors)}")
    con.print(
        f"reads: {proof.reads['same']} replayed the same, {proof.reads['differs']} differ, "
        f"{proof.reads['not_replayable']} not replayable; access log {proof.access['chained']} chained lines"
    )
    for line in proof.failures:
        con.print(f"FAIL: {line}")
    for read in proof.read_failures:
        con.print(f"FAIL: read {read['where']} ({read['tool']} @seq {read['at']}): {read['why']}")
    for line in proof.unchecked:
        con.print(f"not checked: {line}")
    for line in proof.notes:
        con.print(f"note: {line}")
    con.print(_verdict_line(proof) + (f"; report: {args.output}" if args.output and args.output != STDOUT else ""))
    return code


def _verdict_line(proof: Proof) -> str:
    """The last line: the verdict, the claims that hold, and the claims by evidence level."""
    if proof.verdict == "nothing_to_prove":
        return f"NOTHING TO PROVE: {proof.no_claims}"
    holds = sum(c.verdict == "holds" for c in proof.claims)
    levels = ", ".join(f"{level} {n}" for level, n in proof.evidence_counts().items())
    line = f"{'PROVED' if proof.ok else 'NOT PROVED'}: {holds} of {len(proof.claims)} claims hold"
    return line + (f" ({levels})" if levels else "") + (f"; {proof.no_claims}" if proof.no_claims else "")
