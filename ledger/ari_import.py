"""Import ARI's own memory files into the ledger, keeping node ids, metadata and order.

Two formats:

* v0.6 ``memory_backup.jsonl.gz`` (the snapshot ARI's Letta backend carries in each
  checkpoint): one JSON object per line, ``kind`` one of ``node_scope`` (``node_id``,
  ``text``, ``metadata``, optional ``id``/``ts``), ``react_step`` (``content``,
  ``metadata``, optional ``id``/``ts``) and ``core_seed`` (``persona``, ``human``,
  ``context``);
* v0.5 ``memory_store.jsonl``: one node-scope entry per line (``node_id``, ``text``,
  ``metadata``, optional ``id``/``ts``).

Each entry becomes one event; its original id, timestamp and source file go into the
event's ``origin`` so nothing is lost, while ``metadata`` stays exactly as ARI wrote it.
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .errors import InvalidInput
from .events import CHECKPOINT_NODE, check_node_id, validate_body
from .ledger import Ledger

BATCH = 1000


@dataclass
class ImportReport:
    source: str
    format: str
    events: int = 0
    by_type: dict[str, int] = field(default_factory=dict)


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InvalidInput(f"{path.name}:{n}", f"not JSON ({exc.msg})") from None
                if not isinstance(obj, dict):
                    raise InvalidInput(f"{path.name}:{n}", "each line must be a JSON object")
                yield n, obj
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise InvalidInput("source", f"cannot read {path}: {exc}") from None


def detect_format(path: Path) -> str:
    """``v0.6-backup`` or ``v0.5-store``, from the first line."""
    for _n, obj in _lines(path):
        return "v0.6-backup" if "kind" in obj else "v0.5-store"
    raise InvalidInput("source", f"{path} holds no entries")


def _event(obj: dict[str, Any], fmt: str, where: str, source: str) -> tuple[str, str, dict[str, Any]]:
    """(node, type, body) for one line."""
    kind = obj.get("kind", "node_scope") if fmt == "v0.6-backup" else "node_scope"
    origin = {"source": source, **{k: obj[k] for k in ("id", "ts") if k in obj}}
    if kind == "node_scope":
        node = obj.get("node_id")
        if not isinstance(node, str):
            raise InvalidInput(f"{where}.node_id", "missing or not a string")
        return node, "memory_added", {"text": obj.get("text"), "metadata": obj.get("metadata") or {}, "origin": origin}
    if kind == "react_step":
        node = obj.get("node_id") or CHECKPOINT_NODE
        return node, "react_step", {"content": obj.get("content"), "metadata": obj.get("metadata") or {}, "origin": origin}
    if kind == "core_seed":
        body = {k: obj[k] for k in ("persona", "human", "context") if k in obj}
        return CHECKPOINT_NODE, "core_seeded", body
    raise InvalidInput(f"{where}.kind", f"unknown kind {kind!r}; expected node_scope, react_step or core_seed")


@dataclass
class ImportPlan:
    """Every event of an ARI file, validated, in file order: nothing is written yet."""

    source: Path
    format: str
    events: list[tuple[str, str, dict[str, Any]]]


def plan_import(source: Path) -> ImportPlan:
    """Read and validate the whole file; a bad line anywhere raises before anything is written."""
    fmt = detect_format(source)
    planned = []
    for n, obj in _lines(source):
        where = f"{source.name}:{n}"
        node, type_, body = _event(obj, fmt, where, source.name)
        try:
            check_node_id(node, "node_id")
            validate_body(type_, body)
        except InvalidInput as exc:
            raise InvalidInput(f"{where}.{exc.field}", exc.reason) from None
        planned.append((node, type_, body))
    return ImportPlan(source, fmt, planned)


def import_ari(ledger: Ledger, plan: ImportPlan, *, allow_non_empty: bool = False) -> ImportReport:
    """Append a validated plan to ``ledger`` in file order, in batches."""
    if ledger.last_seq and not allow_non_empty:
        raise InvalidInput("checkpoint", f"already holds {ledger.last_seq} events; import into an empty checkpoint")
    report = ImportReport(str(plan.source), plan.format)
    for start in range(0, len(plan.events), BATCH):
        with ledger.batch() as batch:
            for node, type_, body in plan.events[start : start + BATCH]:
                batch.append(node, type_, body, current_node=node)
                report.by_type[type_] = report.by_type.get(type_, 0) + 1
    report.events = len(plan.events)
    return report
