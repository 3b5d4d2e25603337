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
would compare (kind, node, text, metadata, ts), taken from the body as it will be stored —
and an event whose key is already visible in the checkpoint is not written again, whether
it was imported before or written there in the first place (a backup of this very
checkpoint imports nothing).

Importing never brings back what a redaction removed (``ledger.maintenance.redact``): its event records,
for each removed body, the digest ``ledger.chain.body_digest`` took of it, and
:func:`redaction_digests` gives, for a planned entry, the digests of every body an event
holding this entry could have had — the body as this import writes it, the body ARI's own
write (``add_memory``, ``react_add``, ``seed_core_memory``) gives it (no ``origin``), and the
body an import from another of ARI's files or ``bulk_import`` gave it. An entry one of whose
digests a redaction recorded is skipped and counted. The key is the removed body itself (its
text, metadata, node, time), never a stored copy of it; what cannot be matched is a body the
entry cannot reproduce (a v0.5 ISO time, exported as seconds, loses its ``ts_text``).
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeGuard, get_args

import msgspec

from ..checkpoint_format import BACKUP_NAME as BACKUP_NAME
from ..checkpoint_format import V05_REACT_NAME as REACT_NAME
from ..checkpoint_format import V05_STORE_NAME as STORE_NAME
from ..errors import InvalidInput, kind_of, os_reason
from ..events import CHECKPOINT_NODE, MAX_JSON_DEPTH, EventType, check_node_id, validate_body
from ..progress import Progress
from ..safe_io import INFLATE_ENV, TooLarge, UnsafeFile, inflate, max_inflated_bytes, read_file
from ..vocabulary import Finding

AriKind = Literal["node_scope", "react_step", "core_seed"]  # the kinds of ARI's entries (``kind`` in its backup)
ARI_KINDS: tuple[str, ...] = get_args(AriKind)
_key_encoder = msgspec.json.Encoder(order="deterministic")


@dataclass(frozen=True)
class Planned:
    """One event to append: node, type, body, and the content key that makes it idempotent."""

    node: str
    type: EventType
    body: dict[str, Any]
    key: str


def body_digest_of(body: Mapping[str, Any]) -> str:
    """The sha256 of a stored body's canonical bytes: what ``ledger.chain.body_digest`` takes
    from the event's line, and what a redaction records of the body it removes."""
    return hashlib.sha256(_key_encoder.encode(body)).hexdigest()


def redaction_digests(planned: Planned, sources: Iterable[str] = ()) -> set[str]:
    """The digests of the bodies an event holding ``planned``'s entry could have been stored
    with: as planned; without ``origin`` (written by ARI's tools, not imported); imported
    from ``sources`` or :data:`SOURCES` (with and without the entry's ``id``). A redaction
    that removed such an event recorded one of these (see the module)."""
    variants: list[dict[str, Any]] = [planned.body]
    bare = {k: v for k, v in planned.body.items() if k not in ("origin", "findings")}
    variants.append(bare)
    origin = planned.body.get("origin")
    if isinstance(origin, Mapping):
        for source in {*SOURCES, *sources}:
            for keep_id in (True, False):
                other = {k: v for k, v in origin.items() if keep_id or k != "id"}
                other["source"] = source
                variants.append({**planned.body, "origin": other})
    out = set()
    for body in variants:
        try:
            out.add(body_digest_of(validate_body(planned.type, body)))
        except InvalidInput:
            continue
    return out


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
    """ARI's ``ts``: float seconds as given; an ISO-8601 string (v0.5, written in UTC)
    converted, a string without a zone read as UTC; anything else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    return None


def plan_entries(entries: Iterable[Mapping[str, Any]], kind: str, *, source: str = "bulk_import") -> list[Planned]:
    """Events for ARI entries of one kind, validated as the ledger will store them; nothing
    is written here.

    A bad entry anywhere raises InvalidInput naming ``entries[i].<field>`` before anything is
    written, so an import is all or nothing.
    """
    ari_kind = _check_kind(kind, "kind")
    if isinstance(entries, (str, bytes, Mapping)):
        raise InvalidInput("entries", "expected a list of entries")
    return [plan_entry(entry, ari_kind, f"entries[{i}]", source) for i, entry in enumerate(entries)]


def plan_entry(entry: object, kind: AriKind, where: str, source: str) -> Planned:
    """One ARI entry as one event; errors name ``<where>.<field>`` (the field as ARI wrote it)."""
    if not isinstance(entry, Mapping):
        raise InvalidInput(where, f"expected an object, got {kind_of(entry)}")
    return _PLANNERS[kind](entry, where, source)


def is_ari_kind(kind: object) -> TypeGuard[AriKind]:
    return kind in ARI_KINDS


def _check_kind(kind: object, field: str) -> AriKind:
    """``kind`` as an ARI kind, or InvalidInput naming ``field``."""
    if not is_ari_kind(kind):
        raise InvalidInput(field, f"unknown kind {kind!r}; expected one of {', '.join(ARI_KINDS)}")
    return kind


def _origin(
    entry: Mapping[str, Any], source: str, ts_field: str, findings: list[Finding], where: str
) -> dict[str, Any]:
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


def _metadata(entry: Mapping[str, Any], where: str, name: str = "metadata") -> dict[str, Any]:
    metadata = entry.get(name) or {}
    if not isinstance(metadata, Mapping):
        raise InvalidInput(f"{where}.{name}", f"must be an object, got {kind_of(metadata)}")
    return dict(metadata)


def _text(entry: Mapping[str, Any], where: str, *names: str) -> tuple[str, str]:
    """The first of ``names`` the entry has, and its value ("" when it has none)."""
    for name in names:
        value = entry.get(name)
        if value is not None:
            if not isinstance(value, str):
                raise InvalidInput(f"{where}.{name}", f"must be a string, got {kind_of(value)}")
            return name, value
    return names[0], ""


def _stored(type: EventType, body: dict[str, Any], where: str, fields: Mapping[str, str]) -> dict[str, Any]:
    """The body as the ledger will store it (text cut, NaN as null, …), or InvalidInput naming
    the entry's own field (``fields`` maps body fields to the names the entry used)."""
    try:
        return validate_body(type, body)
    except InvalidInput as exc:
        path = exc.field.removeprefix("body").lstrip(".")
        head, dot, rest = path.partition(".")
        if head == "origin":  # only the entry's id and ts go into origin
            head, dot, rest = rest.partition(".")
            head = {"ts_text": "ts"}.get(head, head)
        head = fields.get(head, head)
        raise InvalidInput(f"{where}.{head}{dot}{rest}" if head else where, exc.reason) from None


def _node_scope(entry: Mapping[str, Any], where: str, source: str) -> Planned:
    node = check_node_id(entry.get("node_id"), f"{where}.node_id")
    _, text = _text(entry, where, "text")
    findings: list[Finding] = []
    origin = _origin(entry, source, "ts", findings, where)
    body = {"text": text, "metadata": _metadata(entry, where), "origin": origin, **_flagged(findings)}
    stored = _stored("memory_added", body, where, {})
    return Planned(
        node, "memory_added", body, entry_key(node, stored["text"], stored.get("metadata", {}), origin.get("ts"))
    )


def _react_step(entry: Mapping[str, Any], where: str, source: str) -> Planned:
    name, content = _text(entry, where, "content", "text")
    metadata = _metadata(entry, where)
    findings: list[Finding] = []
    origin = _origin(entry, source, "ts", findings, where)
    body = {"content": content, "metadata": metadata, "origin": origin, **_flagged(findings)}
    stored = _stored("react_step", body, where, {"content": name})
    key = step_key(stored["content"], stored.get("metadata", {}), origin.get("ts"))
    return Planned(step_node(metadata), "react_step", body, key)


def _core_seed(entry: Mapping[str, Any], where: str, source: str) -> Planned:
    _, persona = _text(entry, where, "persona")
    _, human = _text(entry, where, "human")
    findings: list[Finding] = []
    origin = _origin(entry, source, "seeded_at", findings, where)
    body = {
        "persona": persona,
        "human": human,
        "context": _metadata(entry, where, "context"),
        "origin": origin,
        **_flagged(findings),
    }
    stored = _stored("core_seeded", body, where, {})
    key = seed_key(stored.get("persona", ""), stored.get("human", ""), stored.get("context", {}))
    return Planned(CHECKPOINT_NODE, "core_seeded", body, key)


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


_PLANNERS: dict[AriKind, Callable[[Mapping[str, Any], str, str], Planned]] = {
    "node_scope": _node_scope,
    "react_step": _react_step,
    "core_seed": _core_seed,
}


# ---------------------------------------------------------------------------- ARI's files

SOURCES = ("bulk_import", BACKUP_NAME, STORE_NAME, REACT_NAME)  # the origin.source an import may have written
_MIGRATED = re.compile(r"\.migrated-(\d+)$")  # what ARI renames a v0.5 file to once imported

FORMATS = {
    "v0.6-backup": f"v0.6 {BACKUP_NAME}",
    "v0.5-store": f"v0.5 {STORE_NAME}",
    "v0.5-react": f"v0.5 {REACT_NAME}",
}


@dataclass
class AriFile:
    """The entries of one of ARI's memory files, by kind, in file order, each already
    checked the way ``bulk_import`` checks it."""

    path: str
    format: str  # a key of FORMATS
    entries: dict[str, list[dict[str, Any]]]


def ari_files_in(checkpoint: str | Path) -> list[Path]:
    """ARI's memory files in a checkpoint, in the order ARI produced them: the v0.5 files ARI
    migrated (``*.migrated-<ts>``, oldest migration first, the node store before the ReAct
    trace as ``maybe_auto_migrate`` imports them), v0.5 files not migrated yet, then the
    backup ARI writes at the end of every run."""
    checkpoint = Path(checkpoint)
    migrated = []
    for rank, name in enumerate((STORE_NAME, REACT_NAME)):
        for path in checkpoint.glob(f"{name}.migrated-*"):
            stamp = _MIGRATED.search(path.name)
            if stamp and path.is_file():
                migrated.append((int(stamp.group(1)), rank, path))
    current = [checkpoint / name for name in (STORE_NAME, REACT_NAME, BACKUP_NAME) if (checkpoint / name).is_file()]
    return [path for _, _, path in sorted(migrated)] + current


def read_ari_file(path: str | Path, progress: Progress | None = None) -> AriFile:
    """Read ``memory_backup.jsonl.gz`` (v0.6), ``memory_store.jsonl`` or ``memory.json`` (v0.5),
    also under ARI's ``.migrated-<ts>`` names; the format is told by the content.

    Every entry is checked as ``bulk_import`` will check it, so anything wrong — unreadable
    gzip, not UTF-8, not JSON, a bad field — raises InvalidInput naming ``file:line.field``
    before anything is written. The file is read only when it is a regular file (never through
    a link, a FIFO never blocks) of at most :func:`ledger.safe_io.max_inflated_bytes`, and a gzip
    file is inflated to at most that many bytes (a gzip bomb is one error, never a MemoryError).
    ``progress(entries checked, entries)`` as they are checked, every :data:`CHECKED_EVERY`.
    """
    path = Path(path)
    limit = max_inflated_bytes()
    raw: bytes | bytearray = _read_bytes(path, limit)
    compressed = raw[:2] == b"\x1f\x8b"
    try:
        if compressed:
            try:
                raw = inflate(raw, limit)
            except TooLarge as exc:
                raise InvalidInput(path.name, str(exc)) from None
            except (EOFError, zlib.error) as exc:
                raise InvalidInput(path.name, f"is not a complete gzip file ({exc})") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise InvalidInput(f"{path.name}:{line}", f"is not UTF-8 (byte 0x{raw[exc.start]:02x})") from None
        del raw
        return _parse(path, text, compressed, progress)
    except MemoryError:  # the limit is more than this machine can hold: one line, never a traceback
        raise InvalidInput(
            path.name,
            f"does not fit in this process's memory; lower {INFLATE_ENV} (now {limit} bytes) to refuse it sooner",
        ) from None


_LEDGER_EVENT = frozenset({"v", "seq", "id", "ckpt", "type", "body"})  # what every line of a ledger log holds


def _parse(path: Path, text: str, compressed: bool, progress: Progress | None = None) -> AriFile:
    """The entries of a file's text (see :func:`read_ari_file`)."""
    if text.lstrip().startswith("["):
        return _entries(
            path, "v0.5-react", [(n, "react_step", obj) for n, obj in _json_array(text, path.name)], progress
        )

    lines = _json_lines(text, path.name)
    if lines and lines[0][1].keys() >= _LEDGER_EVENT:
        raise InvalidInput(
            path.name,
            "is a ledger log (its lines are events with a seq and a hash), not one of ARI's memory files; "
            "to move a ledger's memory use `ari-ledger export` and `ari-ledger import`, or copy the checkpoint",
        )
    if not lines:  # a backup of an empty checkpoint, or a v0.5 store whose nodes were all cleared
        return AriFile(str(path), "v0.6-backup" if compressed else "v0.5-store", {})
    if not any("kind" in obj for _, obj in lines):
        return _entries(path, "v0.5-store", [(n, "node_scope", obj) for n, obj in lines], progress)
    kinds = []
    for n, obj in lines:
        if "kind" not in obj:
            raise InvalidInput(f"{path.name}:{n}.kind", "is missing; every line of a v0.6 backup has one")
        kinds.append(_check_kind(obj["kind"], f"{path.name}:{n}.kind"))
    return _entries(path, "v0.6-backup", [(n, kind, obj) for (n, obj), kind in zip(lines, kinds)], progress)


def _read_bytes(path: Path, limit: int) -> bytes:
    try:
        raw = read_file(path, limit)
    except UnsafeFile as exc:  # a link, a FIFO, a device, a directory, too big: one line
        raise InvalidInput(path.name or str(path), f"cannot read {exc}") from None
    except OSError as exc:
        raise InvalidInput(path.name or str(path), f"cannot read {path}: {os_reason(exc)}") from None
    if not raw:
        raise InvalidInput(path.name, "is empty (0 bytes): not an ARI memory file")
    return raw


CHECKED_EVERY = 1024  # entries checked between two progress calls


def _entries(
    path: Path, format: str, lines: list[tuple[int, AriKind, dict[str, Any]]], progress: Progress | None = None
) -> AriFile:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for i, (n, kind, obj) in enumerate(lines, 1):
        plan_entry(obj, kind, f"{path.name}:{n}", path.name)
        grouped.setdefault(kind, []).append(obj)
        if progress is not None and (i % CHECKED_EVERY == 0 or i == len(lines)):
            progress(i, len(lines))
    return AriFile(str(path), format, grouped)


def _json_lines(text: str, name: str) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for n, line in enumerate(text.split("\n"), 1):  # not splitlines(): ARI writes U+2028 unescaped
        if not line.strip():
            continue
        try:
            obj = json.loads(line)  # Python's reader: ARI writes NaN as a bare token
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{name}:{n}", f"is not JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:
            raise _too_deep(line, name, n) from None
        if not isinstance(obj, dict):
            raise InvalidInput(f"{name}:{n}", f"must be a JSON object, got {kind_of(obj)}")
        out.append((n, obj))
    return out


def _json_array(text: str, name: str) -> list[tuple[int, dict[str, Any]]]:
    """The objects of v0.5's ``memory.json`` (an indented JSON array), each with the line it starts on."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{name}:{exc.lineno}", f"is not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise _too_deep(text, name, 1, item_depth=2) from None
    decoder, out, pos = json.JSONDecoder(), [], text.index("[") + 1
    for i, item in enumerate(data):
        while text[pos].isspace() or text[pos] == ",":  # the text is valid JSON: find item i
            pos += 1
        line = text.count("\n", 0, pos) + 1
        if not isinstance(item, dict):
            raise InvalidInput(f"{name}:{line}", f"item {i} of the array must be a JSON object, got {kind_of(item)}")
        _, pos = decoder.raw_decode(text, pos)
        out.append((line, item))
    return out


def _too_deep(text: str, name: str, first_line: int, *, item_depth: int = 1) -> InvalidInput:
    """The error for JSON nested deeper than Python's reader can go (it raises RecursionError):
    named ``file:line.field`` like every other refusal, with the line and top-level field where
    the nesting first passes what an entry may hold (``item_depth``: how deep the entries are,
    1 for a line that is one, 2 for the items of an array)."""
    where, depth, key, last, in_string, escaped, start = f"{name}:{first_line}", 0, None, None, False, False, 0
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                if depth == item_depth:
                    last = text[start + 1 : i]
        elif ch == '"':
            in_string, start = True, i
        elif ch in "[{":
            depth += 1
            if depth == item_depth + 1:
                key = last
            if depth > MAX_JSON_DEPTH + item_depth:
                where = f"{name}:{first_line + text.count(chr(10), 0, i)}" + (f".{key}" if key else "")
                break
        elif ch in "]}":
            depth -= 1
    return InvalidInput(
        where, f"is nested too deeply for a JSON reader (a memory entry may nest at most {MAX_JSON_DEPTH} levels)"
    )
