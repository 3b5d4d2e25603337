"""Event envelope, typed bodies and their validation.

One JSON line in the log is one :class:`Event`. The field names are short and fixed so
that any tool (``zcat | jq``) can read the log without this library:

``v`` schema version, ``seq`` gapless position from 1, ``id`` time-ordered unique id,
``ts`` UTC ISO-8601, ``ckpt`` checkpoint id, ``node`` node id, ``type`` event type,
``body`` the typed payload, ``prev`` previous event's hash, ``hash`` this event's hash.

Bodies are validated against msgspec Structs before anything is written; a bad body
raises :class:`~ledger.errors.InvalidInput` naming the field.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeAlias, TypedDict, TypeGuard, TypeVar, get_args

import msgspec

from . import typed
from .errors import InvalidInput, UnsupportedVersion, decoded_reason, kind_of
from .vocabulary import (
    NODE_LABELS,
    Finding,
    is_sha256,
)

SCHEMA_VERSION = 3  # 2: typed fields in ``metadata`` as ARI stores them; 3: hashes cover a seal (ledger.chain)

MAX_NODE_ID_CHARS = 256
MAX_TEXT_BYTES = 256 * 1024  # longer text is stored cut, with a finding (never refused)
MAX_METADATA_BYTES = 1024 * 1024  # a JSON object beyond this is refused: event bodies stay bounded
MAX_JSON_DEPTH = 32
TRUNCATED = "…[truncated]"  # ARI's marker for a cut ReAct step, used for every cut text

_FORBIDDEN_IN_ID = re.compile(r"[/\\\x00-\x1f\x7f\ud800-\udfff]")  # no /, \, NUL, control, lone surrogate

# Node id used for checkpoint-wide events (ReAct steps, core seed, purge) written with no current node.
CHECKPOINT_NODE = "_checkpoint"

# The closed set of event types: a new type starts here, then gets its body (BODY_TYPES) and a
# key in PerEventType, which makes the type checker name every fold that does not handle it.
EventType = Literal[
    "node_started", "memory_added", "react_step", "core_seeded", "node_cleared", "checkpoint_purged", "events_redacted"
]
EVENT_TYPES: tuple[EventType, ...] = get_args(EventType)
_EVENT_TYPE_SET: frozenset[str] = frozenset(EVENT_TYPES)

if TYPE_CHECKING:
    StoredType: TypeAlias = EventType
else:
    # What a stored event's ``type`` is decoded as: the type checker sees the closed set, msgspec
    # reads any string, so a line naming a type this version does not know (a newer library's)
    # is not taken for a damaged line. Writes are checked (:func:`validate_body`).
    StoredType = str


def is_event_type(value: object) -> TypeGuard[EventType]:
    """Whether ``value`` names an event type."""
    return isinstance(value, str) and value in _EVENT_TYPE_SET


def event_type_of(value: object, field: str = "type") -> EventType:
    """``value`` as an event type, or InvalidInput naming ``field``: where a type comes from
    outside (a caller, a file), checked once."""
    if not is_event_type(value):
        raise InvalidInput(field, f"unknown event type {value!r}; expected one of {', '.join(EVENT_TYPES)}")
    return value


class UnsignedEvent(msgspec.Struct, frozen=True, gc=False):
    """An event before its hash is known; its canonical encoding is what gets hashed.

    Events are not tracked by the garbage collector (``gc=False``): they hold strings, ints
    and a JSON body, never a reference back to themselves, and a read keeps a member's worth
    of them alive at once, which made the collector run once per member for nothing.
    """

    v: int
    seq: int
    id: str
    ts: str
    ckpt: str
    node: str
    type: StoredType
    body: dict[str, Any]
    prev: str


B = TypeVar("B", bound="Body")


class Event(UnsignedEvent, frozen=True, gc=False):
    """One stored event, exactly as it appears on a line of the log (``hash`` last)."""

    hash: str

    def typed_body(self) -> Body:
        """The body decoded into its typed Struct (it was validated when written)."""
        return msgspec.convert(self.body, BODY_TYPES[self.type])

    def body_as(self, cls: type[B]) -> B:
        """The body as ``cls``, the Struct of this event's type: what readers use instead of
        string keys (a wrong ``cls`` is a programming error, raised as TypeError)."""
        if BODY_TYPES.get(self.type) is not cls:
            raise TypeError(f"a {self.type} event's body is not a {cls.__name__}")
        return msgspec.convert(self.body, cls)


# ---------------------------------------------------------------------------- bodies


class Body(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Base of every event body."""

    type_name: ClassVar[EventType]

    def check(self) -> None:
        """Semantic checks beyond types; raise InvalidInput naming the field."""

    def normalize(self, findings: list[Finding]) -> None:
        """Store-and-flag fixes (a text cut to its limit); each one appends a finding."""


class NodeStarted(Body):
    """A node of the tree: its parent and lineage, from ``start_node`` or a node report."""

    type_name: ClassVar[EventType] = "node_started"
    parent_id: str | None = None
    ancestor_ids: list[str] = []
    label: str = "other"
    depth: int = 0
    eval_summary: str | None = None
    origin: dict[str, Any] | None = None  # where the event came from when not from its caller (a repair)

    def check(self) -> None:
        if self.origin is not None:
            check_metadata(self.origin, "body.origin")
        if self.parent_id is not None:
            check_node_id(self.parent_id, "body.parent_id")
        for i, aid in enumerate(self.ancestor_ids):
            check_node_id(aid, f"body.ancestor_ids[{i}]")
        if self.parent_id is not None and (not self.ancestor_ids or self.ancestor_ids[-1] != self.parent_id):
            raise InvalidInput("body.ancestor_ids", "must end with parent_id (root→parent order)")
        if self.parent_id is None and self.ancestor_ids:
            raise InvalidInput("body.parent_id", "is missing although ancestor_ids is not empty")
        if len(set(self.ancestor_ids)) != len(self.ancestor_ids):
            raise InvalidInput("body.ancestor_ids", "lists a node twice")
        if self.label not in NODE_LABELS:
            raise InvalidInput("body.label", f"unknown label {self.label!r}; expected one of {', '.join(NODE_LABELS)}")
        if self.depth < 0:
            raise InvalidInput("body.depth", "must be >= 0")
        if self.eval_summary is not None:
            check_text(self.eval_summary, "body.eval_summary")


class MemoryAdded(Body):
    """A node-scope memory entry, as ARI stores it: text and metadata.

    Typed memory is ARI's representation: the kind and the pointers to the evidence
    (``type``/``mem_kind``, ``metric_ptr``, ``artifact_refs``, ``node_report_ref``,
    ``repro_target_id``/``repro_status``, ``confidence``) are keys of ``metadata``
    (see :mod:`ledger.typed`). The other fields are this library's own.
    """

    type_name: ClassVar[EventType] = "memory_added"
    text: str
    metadata: dict[str, Any] = {}
    report_hash: str | None = None  # consolidation: the node report this entry came from
    origin: dict[str, Any] | None = None  # where an imported entry came from (file, original id, ts, key)
    findings: list[Finding] = []

    def normalize(self, findings: list[Finding]) -> None:
        self.text = fit_text(self.text, "text", findings)
        findings.extend(typed.inspect_metadata(self.metadata))

    def check(self) -> None:
        check_text(self.text, "body.text")
        check_metadata(self.metadata, "body.metadata")
        if self.origin is not None:
            check_metadata(self.origin, "body.origin")
        if self.report_hash is not None and not is_sha256(self.report_hash):
            raise InvalidInput("body.report_hash", "expected 64 lowercase hex characters")


class ReactStep(Body):
    """One step of the flat, checkpoint-wide ReAct trace."""

    type_name: ClassVar[EventType] = "react_step"
    content: str
    metadata: dict[str, Any] = {}
    origin: dict[str, Any] | None = None
    findings: list[Finding] = []

    def normalize(self, findings: list[Finding]) -> None:
        self.content = fit_text(self.content, "content", findings)

    def check(self) -> None:
        check_text(self.content, "body.content")
        check_metadata(self.metadata, "body.metadata")
        if self.origin is not None:
            check_metadata(self.origin, "body.origin")


class CoreSeeded(Body):
    """The experiment context (core memory blocks), seeded once the goal is known."""

    type_name: ClassVar[EventType] = "core_seeded"
    persona: str = ""
    human: str = ""
    context: dict[str, Any] = {}
    origin: dict[str, Any] | None = None
    findings: list[Finding] = []

    def normalize(self, findings: list[Finding]) -> None:
        self.persona = fit_text(self.persona, "persona", findings)
        self.human = fit_text(self.human, "human", findings)

    def check(self) -> None:
        check_text(self.persona, "body.persona")
        check_text(self.human, "body.human")
        check_metadata(self.context, "body.context")
        if self.origin is not None:
            check_metadata(self.origin, "body.origin")


class NodeCleared(Body):
    """Tombstone: hides the node's earlier entries from every projection; the log keeps them."""

    type_name: ClassVar[EventType] = "node_cleared"
    reason: str = ""
    origin: dict[str, Any] | None = None

    def check(self) -> None:
        check_text(self.reason, "body.reason")
        if self.origin is not None:
            check_metadata(self.origin, "body.origin")


class CheckpointPurged(Body):
    """Tombstone for the whole checkpoint (ARI's ``purge_checkpoint``): hides every earlier
    entry, ReAct step and core seed from every projection; the log keeps them."""

    type_name: ClassVar[EventType] = "checkpoint_purged"
    reason: str = ""
    origin: dict[str, Any] | None = None

    def check(self) -> None:
        check_text(self.reason, "body.reason")
        if self.origin is not None:
            check_metadata(self.origin, "body.origin")


def is_stub_body(body: dict[str, Any]) -> bool:
    """Whether an event's body was removed by a redaction: only its digest is left
    (``{"sha256": hex}``; no body type has a ``sha256`` field)."""
    return len(body) == 1 and "sha256" in body


class Redacted(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One event a redaction removed the body of: what stays visible, and what proves it."""

    seq: int
    id: str
    hash: str  # the event's hash, unchanged by the redaction
    node: str
    type: StoredType
    digest: str  # sha256 of the removed body's canonical bytes
    stub: str  # sha256 of the stub line left in its place (hash field left out)
    kind: str = ""  # the entry's kind (``metadata.type``), when it had one


class EventsRedacted(Body):
    """A redaction (``ledger.maintenance.redact``): the bodies of ``redacted`` were removed from the log and
    replaced by stubs; the events keep their place, envelope and hash. ``selector`` says how they
    were chosen (by id, by node, by a text match), never the matched text itself."""

    type_name: ClassVar[EventType] = "events_redacted"
    reason: str
    by: str
    selector: str
    redacted: list[Redacted]

    def check(self) -> None:
        check_text(self.reason, "body.reason")
        if not self.reason.strip():
            raise InvalidInput("body.reason", "a redaction needs a reason")
        check_text(self.by, "body.by")
        check_text(self.selector, "body.selector")
        if not self.redacted:
            raise InvalidInput("body.redacted", "names no event")
        for i, r in enumerate(self.redacted):
            for name in ("hash", "digest", "stub"):
                if not is_sha256(getattr(r, name)):
                    raise InvalidInput(f"body.redacted[{i}].{name}", "must be 64 lowercase hex characters")


BODY_TYPES: dict[EventType, type[Body]] = {
    cls.type_name: cls
    for cls in (NodeStarted, MemoryAdded, ReactStep, CoreSeeded, NodeCleared, CheckpointPurged, EventsRedacted)
}

Handler = TypeVar("Handler")


class PerEventType(TypedDict, Generic[Handler]):
    """One value for each event type: a fold's dispatch table. A table that lacks a type is a
    type error ("Missing key"), and :func:`handlers` refuses it at import."""

    node_started: Handler
    memory_added: Handler
    react_step: Handler
    core_seeded: Handler
    node_cleared: Handler
    checkpoint_purged: Handler
    events_redacted: Handler


# Checked at import: each type has its body and its key in PerEventType, each body its type.
if set(BODY_TYPES) != _EVENT_TYPE_SET or PerEventType.__required_keys__ != _EVENT_TYPE_SET:
    raise ImportError(
        f"event types {sorted(EVENT_TYPES)}, body types {sorted(BODY_TYPES)} and the keys of PerEventType "
        f"{sorted(PerEventType.__required_keys__)} differ"
    )

FOLDS: dict[str, frozenset[str]] = {}  # every fold's dispatch table, by fold name (for the test that lists them)


def handlers(fold: str, table: PerEventType[Handler]) -> PerEventType[Handler]:
    """A fold's handler for each event type, checked complete when the fold's module is imported.

    Every fold of the log says what it does with every event type (a handler that does nothing
    included), so a new type in :data:`EventType` is a type error in each fold's table
    (:class:`PerEventType`) and fails at import naming each fold that does not handle it yet,
    instead of being skipped silently by an ``if``/``elif`` chain.
    """
    missing, unknown = set(EVENT_TYPES) - set(table), set(table) - set(EVENT_TYPES)
    if missing or unknown:
        raise TypeError(f"{fold}: no handler for event types {sorted(missing)}; unknown types {sorted(unknown)}")
    FOLDS[fold] = frozenset(table)
    return table


JSON_FIELDS = ("metadata", "origin", "context")  # bodies' caller-given JSON objects
_JSON_FIELD_SET = frozenset(JSON_FIELDS)


# ---------------------------------------------------------------------------- checks


def check_node_id(node_id: object, field: str = "node_id") -> str:
    """Refuse ids that cannot be a node: empty, too long, path-like or with control characters."""
    if not isinstance(node_id, str):
        raise InvalidInput(field, f"must be a string, got {kind_of(node_id)}")
    if not node_id:
        raise InvalidInput(field, "must not be empty")
    if len(node_id) > MAX_NODE_ID_CHARS:
        raise InvalidInput(field, f"longer than {MAX_NODE_ID_CHARS} characters ({len(node_id)})")
    if node_id in (".", ".."):
        raise InvalidInput(field, f"{node_id!r} is not a node id")
    bad = _FORBIDDEN_IN_ID.search(node_id)
    if bad:
        raise InvalidInput(
            field, f"contains a forbidden character {bad.group()!r} (no /, \\, NUL or control characters)"
        )
    return node_id


def check_seq(value: int | None, field: str = "--as-of", last: int | None = None) -> None:
    """A log position: 0 or more and, given the log's ``last`` seq, not beyond it (None: not
    given). A seq past the end names no state of the log: refused, not answered as now (the
    rule of every surface's ``as_of``)."""
    if value is not None and value < 0:
        raise InvalidInput(field, f"must be a seq (0 or more), got {value}")
    if value is not None and last is not None and value > last:
        raise InvalidInput(field, f"seq {value} is beyond the log's last seq {last}")


def check_text(text: object, field: str, limit: int = MAX_TEXT_BYTES) -> None:
    """Text must be valid UTF-8 (no lone surrogates) and within the size limit."""
    if not isinstance(text, str):
        raise InvalidInput(field, f"must be a string, got {kind_of(text)}")
    if text.isascii():  # a flag CPython keeps: valid UTF-8 of len(text) bytes, nothing to encode
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidInput(field, f"is not valid UTF-8 (character at index {exc.start})") from None
    if size > limit:
        raise InvalidInput(field, f"is {size} bytes; the limit is {limit}")


def fit_text(text: str, field: str, findings: list[Finding], limit: int = MAX_TEXT_BYTES) -> str:
    """``text`` cut to ``limit`` UTF-8 bytes (marked ``…[truncated]``), with a finding when cut."""
    if len(text) <= limit and text.isascii():
        return text
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return text  # check_text names the bad character
    if len(data) <= limit:
        return text
    keep = data[: limit - len(TRUNCATED.encode())].decode("utf-8", errors="ignore")
    findings.append(Finding(field, f"{len(data)} bytes; stored the first {limit} (the limit), marked {TRUNCATED}"))
    return keep + TRUNCATED


def check_metadata(value: object, field: str) -> None:
    """A JSON object of bounded size whose strings are valid UTF-8."""
    if not isinstance(value, dict):
        raise InvalidInput(field, f"must be an object, got {kind_of(value)}")
    if not value or _plain_json(value):
        return
    _check_json(value, field, 0)
    size = len(msgspec.json.encode(value))
    if size > MAX_METADATA_BYTES:
        raise InvalidInput(field, f"is {size} bytes encoded; the limit is {MAX_METADATA_BYTES}")


def _check_json(value: object, field: str, depth: int) -> None:
    if depth > MAX_JSON_DEPTH:
        raise InvalidInput(field, f"nested deeper than {MAX_JSON_DEPTH}")
    if value is None or isinstance(value, (bool, int, float)):
        return
    if isinstance(value, str):
        check_text(value, field, MAX_METADATA_BYTES)
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, f"{field}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            check_text(key, f"{field}.<key>", MAX_METADATA_BYTES)
            _check_json(item, f"{field}.{key}", depth + 1)
        return
    raise InvalidInput(field, f"{type(value).__name__} is not a JSON value")


def clean_json(value: Any, field: str, findings: list[Finding], depth: int = 0) -> Any:
    """``value`` as JSON can hold it, flagging what had to change (store, never lose).

    NaN and Infinity become null, tuples lists, and number keys strings — what ARI's own
    stores do with them, recorded as findings. Anything that is no JSON value at all (bytes,
    sets, objects) is refused by :func:`check_metadata` afterwards.
    """
    if depth > MAX_JSON_DEPTH or (not depth and isinstance(value, dict) and _plain_json(value)):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        findings.append(Finding(field, f"{value!r} is not a JSON number; stored as null"))
        return None
    if isinstance(value, (list, tuple)):
        return [clean_json(item, f"{field}[{i}]", findings, depth + 1) for i, item in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(key, (int, float)) and not isinstance(key, bool):
                findings.append(Finding(f"{field}.<key>", f"number key {key!r} stored as the string {str(key)!r}"))
                key = str(key)
            out[key] = clean_json(item, f"{field}.{key}", findings, depth + 1)
        return out
    return value


def _plain_json(value: dict[Any, Any]) -> bool:
    """True when ``value`` comes back unchanged through JSON (str keys, finite numbers, lists
    not tuples, nothing else), nested at most MAX_JSON_DEPTH deep and within size: then
    :func:`clean_json` and :func:`check_metadata` have nothing to find, and their per-value
    walks cost several times this (18 of the 31 us of validating an entry with two artifact
    refs, against 2.5 us for this)."""
    try:
        encoded = msgspec.json.encode(value)
    except (TypeError, ValueError, RecursionError):  # not JSON, a lone surrogate, a cycle
        return False
    return (
        len(encoded) <= MAX_METADATA_BYTES
        and encoded.count(b"{") + encoded.count(b"[") <= MAX_JSON_DEPTH  # brackets in strings count too
        and msgspec.json.decode(encoded) == value
    )


def validate_body(event_type: EventType, body: object) -> dict[str, Any]:
    """Validate ``body`` for ``event_type``; return its canonical dict (defaults omitted).

    What can be stored as given is stored; what had to be adapted (a text cut to its
    limit, NaN stored as null) or is known to be wrong (a typed entry's bad sha256) is
    listed under the body's ``findings``. What cannot be stored raises InvalidInput (an
    unknown ``event_type`` too: the write side's door, whatever its caller was checked by).
    """
    cls = BODY_TYPES[event_type_of(event_type)]
    if isinstance(body, Body):
        body = msgspec.to_builtins(body)
    if not isinstance(body, dict):
        raise InvalidInput("body", f"must be an object, got {kind_of(body)}")
    findings: list[Finding] = []
    if not _JSON_FIELD_SET.isdisjoint(body):
        body = {k: clean_json(v, k, findings) if k in _JSON_FIELD_SET else v for k, v in body.items()}
    try:
        typed = msgspec.convert(body, cls, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidInput(*_field_and_reason(str(exc))) from None
    typed.normalize(findings)
    typed.check()
    if findings:
        # Only bodies with a findings field collect any (normalize, and JSON fields, which only they have).
        typed.findings = [*getattr(typed, "findings", []), *findings]  # type: ignore[attr-defined]
    canonical: dict[str, Any] = msgspec.to_builtins(typed)
    return canonical


def _field_and_reason(message: str) -> tuple[str, str]:
    """Turn msgspec's "Expected `int`, got `str` - at `$.depth`" into ("body.depth", ...)."""
    reason, sep, where = message.rpartition(" - at `$")
    field = "body" + where.rstrip("`") if sep else "body"
    reason = reason if sep else message
    if reason.startswith("Object contains unknown field `"):
        return f"{field}.{reason.split('`')[1]}", "unknown field"
    if reason.startswith("Object missing required field `"):
        return f"{field}.{reason.split('`')[1]}", "missing (it is required)"
    return field, decoded_reason(reason)


# ---------------------------------------------------------------------------- ids, time


_UUID7_VERSION_VARIANT = 0x7 << 76 | 0b10 << 62  # version 7, variant 10
_UUID7_RAND_B = (1 << 62) - 1


class _UUID7:
    """UUIDv7 ids: time-ordered (ms), unique, monotonic within a process.

    The random bits come from ``os.urandom`` read 4 KiB at a time (one system call per 409
    ids instead of one per id); a forked child drops the pool, so a parent and its child never
    hand out the same bits.
    """

    POOL_BYTES = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0
        self._pool = b""
        self._at = 0
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._pool, self._at = b"", 0

    def __call__(self) -> str:
        with self._lock:
            at = self._at
            if at + 10 > len(self._pool):
                self._pool, at = os.urandom(self.POOL_BYTES), 0
            self._at = at + 10
            rand = int.from_bytes(self._pool[at : at + 10], "big")
            ms = time.time_ns() // 1_000_000
            value = ms << 80 | _UUID7_VERSION_VARIANT | (rand >> 64 & 0xFFF) << 64 | rand & _UUID7_RAND_B
            if value <= self._last:  # same millisecond: keep strictly increasing
                value = self._last + 1
            self._last = value
        h = value.to_bytes(16, "big").hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


new_event_id = _UUID7()

_utc_second = (0, "")  # (unix second, its "%Y-%m-%dT%H:%M:%S"): formatted once per second


def utc_now() -> str:
    """UTC timestamp, ISO-8601 with microseconds and a ``Z``."""
    global _utc_second
    second, micros = divmod(time.time_ns() // 1000, 1_000_000)
    cached = _utc_second
    if cached[0] != second:
        cached = _utc_second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{cached[1]}.{micros:06d}Z"


# ---------------------------------------------------------------------------- versions

# Upcasters turn a raw event dict of version N into version N+1. When SCHEMA_VERSION is
# bumped, register the old→new step here; events on disk are never rewritten.
_V1_TYPED_FIELDS = ("kind", "node_report_ref", "artifact_refs", "metric_ptr", "confidence", "target_id", "status")


def _v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    """v1 kept typed fields beside ``metadata``; v2 keeps them inside it, as ARI does."""
    if raw["type"] != "memory_added" or not any(k in raw["body"] for k in _V1_TYPED_FIELDS):
        return raw
    body = dict(raw["body"])
    typed = {k: body.pop(k) for k in _V1_TYPED_FIELDS if k in body}
    metadata = dict(body.get("metadata") or {})
    kind = typed.get("kind")
    if kind:
        metadata.update(type=kind, mem_kind=kind)
    ptr = typed.get("metric_ptr")
    if ptr is not None:
        metadata["metric_ptr"] = {"name": ptr.removeprefix("metrics.")}
    for old, new in (
        ("artifact_refs", "artifact_refs"),
        ("node_report_ref", "node_report_ref"),
        ("confidence", "confidence"),
        ("target_id", "repro_target_id"),
        ("status", "repro_status"),
    ):
        if old in typed:
            metadata[new] = typed[old]
    body["metadata"] = metadata
    return {**raw, "body": body}


UPCASTERS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: lambda raw: raw}
# Steps that change no body (2 -> 3 changed what the hash covers): an event whose every step to
# the current version is one of these is read as it is, keeping the version that says what its
# hash covers.
BODY_UNCHANGED = frozenset({2})


_version_of = attrgetter("v")


def _reads_as(version: int, current: int) -> bool:
    return version == current or (version < current and BODY_UNCHANGED.issuperset(range(version, current)))


def upcast_all(events: list[Event]) -> list[Event]:
    """``events`` (read from disk, in order) with bodies of the current schema version."""
    if all(_reads_as(v, SCHEMA_VERSION) for v in set(map(_version_of, events))):
        return events
    return [upcast(event) for event in events]


def upcast(event: Event, current: int | None = None) -> Event:
    """Bring an event read from disk to the current schema version, or refuse a newer one."""
    current = SCHEMA_VERSION if current is None else current
    if _reads_as(event.v, current):
        return event
    if event.v > current:
        raise UnsupportedVersion(
            f"event seq {event.seq} has schema version {event.v}, newer than this library "
            f"understands ({current}); upgrade ari-memory-ledger to read this log"
        )
    raw = msgspec.structs.asdict(event)
    while raw["v"] < current:
        step = UPCASTERS.get(raw["v"])
        if step is None:
            raise UnsupportedVersion(f"event seq {event.seq}: no upcaster from schema version {raw['v']}")
        raw = step(raw)
        raw["v"] += 1
    return Event(**raw)
