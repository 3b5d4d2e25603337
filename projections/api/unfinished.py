"""What a crash interrupted, finished by the next process that opens the checkpoint.

A repair and a redaction are journaled (``ledger.maintenance.repair``, ``ledger.maintenance.redact``): each records its
intent, durably, before it changes anything, and every later step can be run again. As SQLite
treats a hot journal, the next process that opens the checkpoint for writing, whoever it is —
ARI's hooks, the memory skill's MCP server, a command — finishes what the intent records before
it answers anything: the repair's cut and re-appended events (under the log's lock), the
redaction's derived files scrubbed (the snapshot dropped, the access log, the verified context
and ARI's backup through the rule). Until then nothing derived from the log is trusted, and
nothing is served from it: an open that may not write (read-only) raises
:class:`~ledger.errors.UnfinishedOperation` naming the operation and the one command that
finishes it, never a rollback or a lost event for it.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import stat
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from ledger import Ledger, layout
from ledger.anchor import Anchor, verified_context_anchor
from ledger.ari.importer import BACKUP_NAME
from ledger.errors import LedgerReadOnly, UnfinishedOperation
from ledger.layout import SNAPSHOT_NAME, VERIFIED_CONTEXT_NAME, log_path, store_dir
from ledger.log import fsync_dir
from ledger.maintenance.redact import MARK, Pending, Scrub, backup_key, finish, pending, scrub_aside
from ledger.maintenance.repair import RepairReport, repair
from ledger.maintenance.rollback import accept_rollback as accept_log_rollback
from ledger.output import replace_file
from ledger.safe_io import TooLarge, inflate, max_inflated_bytes, read_file
from projections.access.log import AccessLog
from projections.engines.local import rollback_problem, snapshot_anchor
from projections.engines.snapshot import SnapshotError, read_preamble

log = logging.getLogger("projections")


def refuse_unfinished(checkpoint_dir: str | Path) -> None:
    """For an open that may not write: raise UnfinishedOperation when a crash left an operation
    unfinished (a read would serve what the redaction removed, or call the repair's cut a
    rollback)."""
    found = layout.unfinished(checkpoint_dir)
    if found:
        raise UnfinishedOperation(layout.unfinished_message(checkpoint_dir, found))


def finish_unfinished(checkpoint_dir: str | Path) -> list[str]:
    """For a writable open, before it opens the log: finish every operation a crash left
    unfinished, the repair first (a redaction's scrub reads a log that opens). Returns one line
    per operation finished (each also logged); none when there was nothing to finish. A
    checkpoint that cannot be written (a read-only file system) is refused as a read-only open
    refuses it."""
    ckpt = Path(checkpoint_dir)
    found = layout.unfinished(ckpt)
    if not found:
        return []
    done = []
    try:
        if "repair" in found:
            report, aside = finish_repair(ckpt, interrupted=True)
            done.append(
                f"finished a repair a crash interrupted: kept seq 1..{report.kept}, "
                f"{len(report.salvaged)} salvaged event(s) re-appended"
                + (f"; moved aside: {', '.join(aside)}" if aside else "")
            )
        if "redaction" in found:
            resumed = finish_redaction(ckpt)
            if resumed is not None:
                done.append(resumed.line())
    except (OSError, LedgerReadOnly) as exc:
        raise UnfinishedOperation(
            f"{layout.unfinished_message(ckpt, found)}; finishing it here failed: {exc}"
        ) from None
    for line in done:
        log.warning("%s: %s", ckpt, line)
    return done


def finish_repair(checkpoint_dir: Path, *, interrupted: bool = False) -> tuple[RepairReport, list[str]]:
    """The log repaired (:func:`ledger.maintenance.repair.repair`, which finishes an interrupted one), then
    each derived file whose anchor the repaired log no longer holds (the snapshot,
    verified_context.json) moved aside as :func:`accept_rollback` does: the repair changed the
    log on purpose. ``interrupted``: a repair's intent was found, so its cut is accepted even
    when another process finished the repair while this one waited for the log's lock.
    Returns the repair and what was moved aside."""
    aside: list[str] = []

    def derived() -> None:  # before the intent goes: a crash here leaves the repair unfinished
        aside.extend(accept_rollback(checkpoint_dir))

    report = repair(checkpoint_dir, before_done=derived)
    if report.reason is None and interrupted:  # another process finished it while this one waited
        aside.extend(accept_rollback(checkpoint_dir))
    return report, aside


def finish_redaction(checkpoint_dir: Path) -> Pending | None:
    """An interrupted redaction's derived files scrubbed and its intent removed (None when the
    log was never redacted: then there is nothing to finish)."""
    resumed = pending(checkpoint_dir)
    if resumed is not None:
        resumed.scrubbed = scrub_derived(checkpoint_dir, resumed.rule, resumed.backup)
        finish(checkpoint_dir, resumed.seq)
    return resumed


def accept_rollback(checkpoint_dir: Path) -> list[str]:
    """Re-anchor at the log's end after a person looked; move aside (never delete) the derived
    files whose anchors name events the log no longer holds. Returns what was accepted."""
    candidates: list[tuple[Path, Anchor, Callable[[Ledger], str | None]]] = []
    snapshot = layout.log_path(checkpoint_dir).with_name(SNAPSHOT_NAME)
    try:
        preamble = read_preamble(snapshot)
        if preamble.cursor:
            candidates.append((snapshot, snapshot_anchor(preamble), lambda lg: rollback_problem(lg, preamble)))
    except (FileNotFoundError, SnapshotError):
        pass
    vc_anchor, _ = verified_context_anchor(checkpoint_dir)
    if vc_anchor:
        candidates.append((checkpoint_dir / VERIFIED_CONTEXT_NAME, vc_anchor, lambda lg: lg.anchor_problem(vc_anchor)))
    if layout.has_ledger(checkpoint_dir):  # keep only the anchors this log does not hold
        with Ledger.open_readonly(checkpoint_dir) as ledger:
            candidates = [c for c in candidates if c[2](ledger)]
    return accept_log_rollback(checkpoint_dir, [(path, anchor) for path, anchor, _ in candidates])


# ---------------------------------------------------------------------------- a redaction's derived files


def scrub_derived(ckpt: Path, scrub: Scrub, backup: tuple[str, ...]) -> list[str]:
    """Every file derived from the log through the rule, each step durable and safe to run again
    (a redaction's steps 3; its intent is removed after): what was rewritten or deleted."""
    verified = ckpt / VERIFIED_CONTEXT_NAME
    backup_path = ckpt / BACKUP_NAME
    out = _drop_snapshot(ckpt)
    access = AccessLog(ckpt)
    try:
        out += access.rewrite(scrub)
    finally:
        access.flush_and_close()
    fsync_dir(ckpt)  # the access log's renames
    out += _rewrite_json(verified, scrub)
    out += _rewrite_backup(backup_path, scrub, backup)
    for path in (log_path(ckpt), verified, backup_path):
        out += [f"{name} (deleted: it held a removed body)" for name in scrub_aside(path, scrub)]
    return out


def _drop_snapshot(ckpt: Path) -> list[str]:
    gone = []
    store = store_dir(ckpt)
    for path in store.glob(SNAPSHOT_NAME + "*"):
        path.unlink(missing_ok=True)
        gone.append(f"{path.name} (deleted; rebuilt from the redacted log by the next open)")
    if gone:
        fsync_dir(store)
    return gone


def _rewrite_backup(path: Path, scrub: Scrub, keys: tuple[str, ...]) -> list[str]:
    """ARI's backup (gzip JSON Lines) without the chosen events' records (one line dropped per
    chosen record: :func:`ledger.maintenance.redact.backup_key`), every other line through the rule,
    replaced atomically when it changed; lines that are not JSON lose the rule's matches. A file
    that is not there or not a regular file is left alone; one that cannot be inflated is
    deleted when it holds what the redaction removed (it cannot be scrubbed, and would bring
    it back on import-ari)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return []
    if not stat.S_ISREG(info.st_mode):
        return []
    limit = max_inflated_bytes()
    raw = read_file(path, limit)
    try:
        data = bytes(inflate(raw, limit))
    except (zlib.error, EOFError, TooLarge):
        if scrub.deletes(raw):
            path.unlink()
            fsync_dir(path.parent)
            return [f"{path.name} (deleted: it held a removed body and cannot be read to scrub it)"]
        return []
    todo = Counter(keys)
    lines, changed = [], False
    for line in data.split(b"\n"):
        if not line.strip():
            lines.append(line)
            continue
        try:
            value = json.loads(line)
        except ValueError:
            text = line.decode("utf-8", "replace")
            new = scrub.pattern.sub(MARK, text) if scrub.pattern is not None else text
            changed = changed or new != text
            lines.append(new.encode() if new != text else line)
            continue
        key = _backup_key_of(value)
        if key is not None and todo[key] > 0:
            todo[key] -= 1
            changed = True
            continue
        value, hit = scrub(value)
        changed = changed or hit
        lines.append(json.dumps(value, ensure_ascii=False).encode("utf-8") if hit else line)
    if not changed:
        return []
    buf = io.BytesIO()
    with gzip.GzipFile(filename=path.name, mode="wb", fileobj=buf) as out:
        out.write(b"\n".join(lines))
    replace_file(path, buf.getvalue())  # synced, renamed, the directory synced; the mode kept
    return [path.name]


def _backup_key_of(value: Any) -> str | None:

    if not isinstance(value, dict):
        return None
    kind = value.get("kind")
    if kind == "node_scope":
        return backup_key(kind, value.get("node_id"), value.get("text"))
    if kind == "react_step":
        return backup_key(kind, value.get("text"))
    if kind == "core_seed":
        return backup_key(kind, value.get("persona"), value.get("human"))
    return None


def _rewrite_json(path: Path, scrub: Scrub) -> list[str]:
    """``path`` through the rule, replaced atomically (``ledger.output.replace_file``) when it
    changed; a file that is not there, not a regular file (a FIFO never blocks) or not JSON is
    left alone."""
    if path.is_symlink() or not path.is_file():
        return []
    try:
        value = msgspec.json.decode(read_file(path))
    except (OSError, msgspec.DecodeError):
        return []
    value, changed = scrub(value)
    if not changed:
        return []
    replace_file(path, msgspec.json.format(msgspec.json.encode(value), indent=2))
    return [path.name]
