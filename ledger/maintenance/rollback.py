"""Accepting a rollback (``ari-ledger verify --accept-rollback``): explicit, run only when a
person asks; a tool beside the log, as ``repair`` is. It opens the log itself, under the lock,
with the scan told to move a damaged tail aside rather than refuse it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from .. import layout
from ..anchor import Anchor, HeadFile
from ..checkpoint_format import ROLLBACKS_SUFFIX as ROLLBACKS_SUFFIX
from ..checkpoint_format import ROLLED_BACK_MARK
from ..errors import LedgerNotFound, act_on_missing_log
from ..events import utc_now
from ..ledger import Ledger
from ..log import LOG_NAME, LogFile, fsync_dir
from ..safe_io import open_file, restrict
from ..state import Head


def accept_rollback(checkpoint_dir: str | Path, anchored_files: Iterable[tuple[Path, Anchor]] = ()) -> list[str]:
    """Accept the log as it is, after a person has looked: the only way to clear an alarm.

    A damaged tail (bytes that held acknowledged events) is moved aside to a ``.torn-*``
    file, never deleted; the head file is re-anchored at the log's end; each of
    ``anchored_files`` (a snapshot, ``verified_context.json``) whose anchor the log does
    not hold is renamed ``<name>.rolled-back-<stamp>``; what was accepted is appended to
    ``memory_ledger.jsonl.gz.rollbacks``. Returns what was accepted, [] when the log holds
    every anchor. Damage before the tail is still refused (LogCorrupted), and so is a missing
    or empty log while a log lies one level too deep (``layout.misplaced_log``: moved there by
    an earlier version), which is to be moved back, not accepted away (LedgerNotFound).
    """
    directory = Path(checkpoint_dir)
    layout.move_legacy_files(directory)
    path = layout.log_path(directory)
    misplaced = layout.misplaced_log(directory)
    if misplaced is not None and (not path.exists() or path.stat().st_size == 0):
        raise LedgerNotFound(f"nothing accepted: {act_on_missing_log(path, misplaced)}")
    head = HeadFile(path)
    if not path.exists():  # every anchor points at events that are gone
        files = [head.path, *(file for file, _anchor in anchored_files)]
        accepted = [f"{LOG_NAME} is missing; {f.name} moved to {_set_aside(f).name}" for f in files if f.exists()]
        if not accepted:
            raise LedgerNotFound(f"no ledger at {path} (is {directory} a checkpoint directory?)")
        _record_rollback(path, accepted, None)
        return accepted
    ledger = Ledger(directory, LogFile(path))
    try:
        with ledger.locked(accept=True):
            accepted = [str(r) for r in ledger.recovered]
            problem = ledger.head_problem()
            if problem:
                accepted.append(problem)
            for file, anchor in anchored_files:
                problem = ledger.anchor_problem(anchor) if file.exists() else None
                if problem:
                    accepted.append(f"{problem}; {file.name} moved to {_set_aside(file).name}")
            if accepted:
                if ledger.ckpt is None:  # nothing left to anchor
                    ledger.head_file.close()
                    if head.path.exists():
                        accepted.append(f"{head.source} moved to {_set_aside(head.path).name}")
                else:
                    ledger.head_file.write(ledger.ckpt, ledger.last_seq, ledger.last_hash, both=True, durable=True)
                _record_rollback(path, accepted, ledger.state.head if ledger.ckpt else None)
    finally:
        ledger.close()
    return accepted


def _set_aside(path: Path) -> Path:
    """Rename ``path`` to ``<name>.rolled-back-<stamp>``, readable by its owner only (it may hold
    the texts of the events that are gone)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}{ROLLED_BACK_MARK}{stamp}")
    os.replace(path, target)
    restrict(target)
    fsync_dir(path.parent)  # durable before anything that relies on it (a repair's intent removed after)
    return target


def _record_rollback(log_path: Path, accepted: list[str], head: Head | None) -> None:
    """Append what a person accepted to ``memory_ledger.jsonl.gz.rollbacks`` (fsynced)."""
    record = {
        "ts": utc_now(),
        "accepted": accepted,
        "anchored_at": {"seq": head.seq, "hash": head.hash} if head else None,
    }
    target = log_path.with_name(log_path.name + ROLLBACKS_SUFFIX)
    with os.fdopen(open_file(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(target.parent)
