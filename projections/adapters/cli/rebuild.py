"""``rebuild``: fold the log once, save the snapshot, rewrite ``verified_context.json``."""

from __future__ import annotations

import argparse

from projections.adapters.cli.framework import (
    EXIT_CHECK_FAILED,
    EXIT_OK,
    check_dir,
    checkpoint_arg,
    command,
    emit,
    experiments_arg,
)
from projections.adapters.cli.progress import Reporter, safe_points


def _rebuild_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    experiments_arg(p)


@command(
    "rebuild",
    "fold the log, save the projection snapshot and rewrite verified_context.json as the paper stage would "
    "(after import, redact, repair, --accept-rollback or a damaged snapshot); exit 1 when a part could not be",
    _rebuild_args,
    exit_codes={1: "partial: the snapshot could not be saved, or no verified context was written (why is printed)"},
    check=lambda args: check_dir(args.experiments, "--experiments"),
)
def cmd_rebuild(args: argparse.Namespace) -> int:
    from projections.tools.rebuild import rebuild

    with safe_points():  # Ctrl-C stops between two chunks: what was folded is whole, and saved
        done = rebuild(args.checkpoint, args.experiments, Reporter("folding the log"))
    if args.json:
        emit(done.as_dict())
    else:
        print("\n".join(done.lines()))
    return EXIT_OK if done.complete else EXIT_CHECK_FAILED
