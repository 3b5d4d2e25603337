"""``ari-ledger redact``: the log redacted (``ledger.redact``), then every file the read side
wrote from it made to forget the removed text.

- the projection snapshot is deleted (a cache: the next open folds the redacted log, whose
  stubs make no rows; a process still open rebuilds when it folds the redaction event);
- the access log and its rotations, and ``verified_context.json``: each string holding a removed
  text has it replaced by ``[redacted]``, and every record of a redacted entry (its
  ``entry_id``) loses its text, preview and metadata; each file is replaced atomically;
- the Letta agent: the redaction event's fold deletes the passages of the redacted events
  (done here at once when Letta is configured; otherwise by the next process that folds it).

Export bundles and ARI backups written afterwards come from the redacted log and hold stubs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from ledger.layout import SNAPSHOT_NAME, store_dir
from ledger.redact import RedactionReport, Selector, redact, strings_of
from projections import settings
from projections.api.access_log import AccessLog
from projections.api.verified import VERIFIED_CONTEXT_NAME

MARK = "[redacted]"
_TEXT_FIELDS = ("text", "content", "text_preview", "persona", "human")
_MIN_NEEDLE = 4  # shorter strings of a removed body (a label, a flag) are not searched for elsewhere


@dataclass
class CheckpointRedaction:
    """The log's redaction and what else was scrubbed."""

    log: RedactionReport
    scrubbed: list[str]

    def lines(self) -> list[str]:
        return [*self.log.lines(), *(f"scrubbed {name}" for name in self.scrubbed)]

    def as_dict(self) -> dict[str, Any]:
        r = self.log
        return {
            "dry_run": r.event is None,
            "selector": r.selector,
            "chosen": [{"seq": e.seq, "id": e.id, "node": e.node, "type": e.type} for e in r.chosen],
            "redaction_seq": r.event.seq if r.event else None,
            "log_bytes": [r.bytes_before, r.bytes_after],
            "deleted": r.removed_files,
            "scrubbed": self.scrubbed,
        }


class Scrubber:
    """Replaces removed texts in JSON values: in any string, and whole for records of a
    redacted entry."""

    def __init__(self, report: RedactionReport, selector: Selector) -> None:
        self.ids = {e.id for e in report.chosen}
        needles = {s for e in report.chosen for s in strings_of(e.body) if len(s) >= _MIN_NEEDLE}
        alternatives = [re.escape(n) for n in sorted(needles, key=len, reverse=True)]
        if selector.pattern is not None:
            alternatives.append(selector.pattern.pattern)
        self.pattern = re.compile("|".join(alternatives)) if alternatives else None

    def __call__(self, value: Any) -> tuple[Any, bool]:
        if isinstance(value, str):
            if self.pattern is None:
                return value, False
            new = self.pattern.sub(MARK, value)
            return new, new != value
        if isinstance(value, list):
            pairs = [self(v) for v in value]
            return [v for v, _ in pairs], any(hit for _, hit in pairs)
        if isinstance(value, dict):
            mine = value.get("entry_id") in self.ids or value.get("id") in self.ids
            out: dict[str, Any] = {}
            changed = False
            for k, v in value.items():
                if mine and k in _TEXT_FIELDS:
                    out[k], changed = MARK, True
                elif mine and k == "metadata":
                    out[k], changed = {}, True
                else:
                    out[k], hit = self(v)
                    changed = changed or hit
            return out, changed
        return value, False


def redact_checkpoint(
    checkpoint_dir: str | Path, selector: Selector, *, reason: str, by: str, dry_run: bool = False
) -> CheckpointRedaction:
    """Redact the log, then scrub the files derived from it (see the module)."""
    ckpt = Path(checkpoint_dir)
    report = redact(ckpt, selector, reason=reason, by=by, dry_run=dry_run)
    if report.event is None:
        return CheckpointRedaction(report, [])
    scrub = Scrubber(report, selector)
    scrubbed = [
        *_drop_snapshot(ckpt),
        *AccessLog(ckpt).rewrite(scrub),
        *_rewrite_json(ckpt / VERIFIED_CONTEXT_NAME, scrub),
    ]
    _fold_letta(ckpt)
    return CheckpointRedaction(report, scrubbed)


def _drop_snapshot(ckpt: Path) -> list[str]:
    gone = []
    for path in store_dir(ckpt).glob(SNAPSHOT_NAME + "*"):
        path.unlink(missing_ok=True)
        gone.append(f"{path.name} (deleted; rebuilt from the redacted log by the next open)")
    return gone


def _rewrite_json(path: Path, scrub: Scrubber) -> list[str]:
    try:
        value = msgspec.json.decode(path.read_bytes())
    except (FileNotFoundError, msgspec.DecodeError):
        return []
    value, changed = scrub(value)
    if not changed:
        return []
    tmp = path.with_name(path.name + ".redact-tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(value), indent=2))
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return [path.name]


def _fold_letta(ckpt: Path) -> None:
    """With Letta configured, fold the redaction now, so the passages leave the server before
    the command returns (a server that is down gets it from the next process that folds)."""
    if settings.letta_base_url() is None:
        return
    from projections.api.backend import MemoryBackend  # the backend imports this module's siblings

    backend = MemoryBackend(ckpt)
    try:
        backend.flush_projections()
    finally:
        backend.close()
