"""ARI's memory entries and files, turned into ledger events (``bulk_import``, ``import-ari``).

ARI's backends exchange entries in three kinds (``bulk_import(entries, kind)`` and the lines of
``memory_backup.jsonl.gz``):

* ``node_scope``: ``{"node_id", "text", "metadata", "ts"}`` (optional ``id``);
* ``react_step``: ``{"content"`` or ``"text", "metadata", "ts"}`` — the node id, when there
  is one, is ``metadata["node_id"]``;
* ``core_seed``: ``{"persona", "human", "context", "seeded_at"}``.

``ts`` is float seconds (v0.5's ``memory.json`` wrote ISO strings; they are converted).
Each entry becomes one event whose ``origin`` keeps where it came from and ARI's original
``ts``, so reads return the time ARI gave it. Metadata is kept exactly as ARI wrote it,
typed entries included (``ledger.typed``).

Importing is idempotent: every planned event carries a *content key* — a hash of what ARI
would compare (kind, node, text, metadata, ts) — and an event whose key is already
visible in the checkpoint is not written again, whether it was imported before or written
there in the first place (a backup of this very checkpoint imports nothing).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from .errors import InvalidInput
from .events import CHECKPOINT_NODE, Finding, check_node_id

ARI_KINDS = ("node_scope", "react_step", "core_seed")
_key_encoder = msgspec.json.Encoder(order="deterministic")


@dataclass(frozen=True)
class Planned:
    """One event to append: node, type, body, and the content key that makes it idempotent."""

    node: str
    type: str
    body: dict[str, Any]
    key: str


def content_key(kind: str, *parts: object) -> str:
    """A stable hash of what makes two ARI entries the same entry."""
    try:
        data = _key_encoder.encode([kind, *parts])
    except (TypeError, msgspec.EncodeError):
        data = repr([kind, *parts]).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def entry_key(node_id: str, text: str, metadata: object, ts: float | None) -> str:
    return content_key("node_scope", node_id, text, metadata, ts)


def step_key(content: str, metadata: object, ts: float | None) -> str:
    return content_key("react_step", content, metadata, ts)


def seed_key(persona: str, human: str, context: object) -> str:
    return content_key("core_seed", persona, human, context)


def seconds(value: object) -> float | None:
    """ARI's ``ts``: float seconds as given; an ISO-8601 string (v0.5) converted; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def plan_entries(entries: Iterable[Mapping[str, Any]], kind: str, *, source: str = "bulk_import") -> list[Planned]:
    """Events for ARI entries of one kind, validated; nothing is written here.

    A bad entry anywhere raises InvalidInput naming ``entries[i].<field>`` before anything is
    written, so an import is all or nothing.
    """
    if kind not in ARI_KINDS:
        raise InvalidInput("kind", f"unknown bulk_import kind {kind!r}; expected one of {', '.join(ARI_KINDS)}")
    if isinstance(entries, (str, bytes, Mapping)):
        raise InvalidInput("entries", "expected a list of entries")
    plan = _PLANNERS[kind]
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise InvalidInput(f"entries[{i}]", f"expected an object, got {type(entry).__name__}")
        out.append(plan(entry, f"entries[{i}]", source))
    return out


def _origin(entry: Mapping[str, Any], source: str, ts_field: str, findings: list[Finding], where: str) -> dict[str, Any]:
    origin: dict[str, Any] = {"source": source}
    if isinstance(entry.get("id"), str):
        origin["id"] = entry["id"]
    raw = entry.get(ts_field)
    ts = seconds(raw)
    if ts is not None:
        origin["ts"] = ts
    elif raw is not None:
        findings.append(Finding(f"{where}.{ts_field}", f"{raw!r} is not a time; the import time is used"))
    if isinstance(raw, str) and ts is not None:
        origin["ts_text"] = raw
    return origin


def _metadata(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    metadata = entry.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise InvalidInput(f"{where}.metadata", f"must be an object, got {type(metadata).__name__}")
    return dict(metadata)


def _text(entry: Mapping[str, Any], where: str, *names: str) -> str:
    for name in names:
        value = entry.get(name)
        if value is not None:
            if not isinstance(value, str):
                raise InvalidInput(f"{where}.{name}", f"must be a string, got {type(value).__name__}")
            return value
    return ""


def _node_scope(entry: Mapping[str, Any], where: str, source: str) -> Planned:
    node = entry.get("node_id")
    check_node_id(node, f"{where}.node_id")
    text, metadata = _text(entry, where, "text"), _metadata(entry, where)
    findings: list[Finding] = []
    origin = _origin(entry, source, "ts", findings, where)
    body = {"text": text, "metadata": metadata, "origin": origin, **_flagged(findings)}
    return Planned(node, "memory_added", body, entry_key(node, text, metadata, origin.get("ts")))


def _react_step(entry: Mapping[str, Any], where: str, source: str) -> Planned:
    content, metadata = _text(entry, where, "content", "text"), _metadata(entry, where)
    findings: list[Finding] = []
    origin = _origin(entry, source, "ts", findings, where)
    body = {"content": content, "metadata": metadata, "origin": origin, **_flagged(findings)}
    return Planned(step_node(metadata), "react_step", body, step_key(content, metadata, origin.get("ts")))


def _core_seed(entry: Mapping[str, Any], where: str, source: str) -> Planned:
    persona, human = _text(entry, where, "persona"), _text(entry, where, "human")
    context = entry.get("context") or {}
    if not isinstance(context, Mapping):
        raise InvalidInput(f"{where}.context", f"must be an object, got {type(context).__name__}")
    findings: list[Finding] = []
    origin = _origin(entry, source, "seeded_at", findings, where)
    body = {"persona": persona, "human": human, "context": dict(context), "origin": origin, **_flagged(findings)}
    return Planned(CHECKPOINT_NODE, "core_seeded", body, seed_key(persona, human, dict(context)))


def step_node(metadata: Mapping[str, Any], fallback: str | None = None) -> str:
    """The node a ReAct step belongs to: ``metadata["node_id"]`` when it is a node id, else
    ``fallback`` when that is one, else the checkpoint."""
    for node in (metadata.get("node_id"), fallback):
        try:
            return check_node_id(node)
        except InvalidInput:
            continue
    return CHECKPOINT_NODE


def _flagged(findings: list[Finding]) -> dict[str, Any]:
    return {"findings": [msgspec.structs.asdict(f) for f in findings]} if findings else {}


_PLANNERS = {"node_scope": _node_scope, "react_step": _react_step, "core_seed": _core_seed}


# ---------------------------------------------------------------------------- ARI's files


@dataclass
class AriFile:
    """The entries of one of ARI's memory files, by kind, in file order."""

    path: str
    format: str  # "v0.6-backup" | "v0.5-store" | "v0.5-react"
    entries: dict[str, list[dict[str, Any]]]

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.entries.values())


def read_ari_file(path: str | Path) -> AriFile:
    """Read ``memory_backup.jsonl.gz`` (v0.6), ``memory_store.jsonl`` or ``memory.json`` (v0.5),
    also under ARI's ``.migrated-<ts>`` names; the format is told by the content."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInput("source", f"cannot read {path}: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise InvalidInput("source", f"{path} is not a readable gzip file ({exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("source", f"{path} is not UTF-8 (byte {exc.start})") from None
    if text.lstrip().startswith("["):
        return AriFile(str(path), "v0.5-react", {"react_step": _json_list(text, path)})
    lines = _json_lines(text, path)
    if lines and all("kind" in obj for _n, obj in lines):
        grouped: dict[str, list[dict[str, Any]]] = {}
        for n, obj in lines:
            if obj["kind"] not in ARI_KINDS:
                raise InvalidInput(f"{path.name}:{n}.kind", f"unknown kind {obj['kind']!r}; expected one of {', '.join(ARI_KINDS)}")
            grouped.setdefault(obj["kind"], []).append(obj)
        return AriFile(str(path), "v0.6-backup", grouped)
    return AriFile(str(path), "v0.5-store", {"node_scope": [obj for _n, obj in lines]})


def _json_lines(text: str, path: Path) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)  # Python's reader: ARI writes NaN as a bare token
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{path.name}:{n}", f"not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise InvalidInput(f"{path.name}:{n}", "each line must be a JSON object")
        out.append((n, obj))
    return out


def _json_list(text: str, path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(path.name, f"not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise InvalidInput(path.name, "expected a JSON array of objects (v0.5 memory.json)")
    return data
