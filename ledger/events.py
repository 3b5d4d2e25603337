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
from datetime import datetime, timezone
from typing import Any, Callable, ClassVar

import msgspec

from .errors import InvalidInput, UnsupportedVersion

SCHEMA_VERSION = 1

MAX_NODE_ID_CHARS = 256
MAX_TEXT_BYTES = 256 * 1024
MAX_METADATA_BYTES = 64 * 1024
MAX_JSON_DEPTH = 32

KINDS = (
    "observation",
    "experiment_result",
    "failure_case",
    "procedure",
    "reflection",
    "artifact_summary",
    "paper_claim",
    "reproducibility_event",
)
REPRO_STATUSES = ("unverified", "rerun_passed", "rerun_failed", "paper_only_reproduced")
REPORT_ROLES = ("data_output", "log", "binary", "figure", "unknown")  # node_report.json's roles
ARTIFACT_ROLES = (*REPORT_ROLES, "source")  # plus the files a node added or modified
NODE_LABELS = ("draft", "improve", "debug", "ablation", "validation", "other")

_SHA256 = re.compile(r"[0-9a-f]{64}")
_FORBIDDEN_IN_ID = re.compile(r"[/\\\x00-\x1f\x7f\ud800-\udfff]")  # no /, \, NUL, control, lone surrogate

# Node id used for checkpoint-wide events (ReAct steps, core seed) written with no current node.
CHECKPOINT_NODE = "_checkpoint"


class UnsignedEvent(msgspec.Struct, frozen=True):
    """An event before its hash is known; its canonical encoding is what gets hashed."""

    v: int
    seq: int
    id: str
    ts: str
    ckpt: str
    node: str
    type: str
    body: dict[str, Any]
    prev: str


class Event(UnsignedEvent, frozen=True):
    """One stored event, exactly as it appears on a line of the log (``hash`` last)."""

    hash: str

    def typed_body(self) -> "Body":
        """The body decoded into its typed Struct (it was validated when written)."""
        return msgspec.convert(self.body, BODY_TYPES[self.type])


# ---------------------------------------------------------------------------- bodies


class Body(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Base of every event body."""

    type_name: ClassVar[str]

    def check(self) -> None:
        """Semantic checks beyond types; raise InvalidInput naming the field."""


class NodeStarted(Body):
    type_name: ClassVar[str] = "node_started"
    parent_id: str | None = None
    ancestor_ids: list[str] = []
    label: str = "other"
    depth: int = 0
    eval_summary: str | None = None

    def check(self) -> None:
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


class NodeReportRef(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Pointer to the node_report.json that is the evidence behind a typed entry."""

    run_id: str
    node_id: str


class ArtifactRefBody(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    path: str
    sha256: str | None = None
    role: str = "unknown"


class MemoryAdded(Body):
    """A node-scope memory entry; ``kind`` None is ARI's free-text ``add_memory``."""

    type_name: ClassVar[str] = "memory_added"
    text: str
    metadata: dict[str, Any] = {}
    kind: str | None = None
    node_report_ref: NodeReportRef | None = None
    artifact_refs: list[ArtifactRefBody] = []
    metric_ptr: str | None = None
    confidence: float | None = None
    target_id: str | None = None
    status: str | None = None
    report_hash: str | None = None
    origin: dict[str, Any] | None = None  # where an imported entry came from (file, original id, ts)

    def check(self) -> None:
        check_text(self.text, "body.text")
        check_metadata(self.metadata, "body.metadata")
        if self.origin is not None:
            check_metadata(self.origin, "body.origin")
        if self.kind is not None and self.kind not in KINDS:
            raise InvalidInput("body.kind", f"unknown kind {self.kind!r}; expected one of {', '.join(KINDS)}")
        if self.kind == "reproducibility_event":
            if not self.target_id:
                raise InvalidInput("body.target_id", "a reproducibility_event needs the id of the memory it is about")
            if self.status not in REPRO_STATUSES:
                raise InvalidInput(
                    "body.status", f"unknown status {self.status!r}; expected one of {', '.join(REPRO_STATUSES)}"
                )
        elif self.status is not None or self.target_id is not None:
            field = "body.status" if self.status is not None else "body.target_id"
            raise InvalidInput(field, "only a reproducibility_event carries a target and a status")
        if self.confidence is not None and not (0.0 <= self.confidence <= 1.0):
            raise InvalidInput("body.confidence", "must be between 0 and 1")
        for i, ref in enumerate(self.artifact_refs):
            check_artifact_ref(ref, f"body.artifact_refs[{i}]")
        if self.metric_ptr is not None:
            check_text(self.metric_ptr, "body.metric_ptr")


class ReactStep(Body):
    """One step of the flat, checkpoint-wide ReAct trace."""

    type_name: ClassVar[str] = "react_step"
    content: str
    metadata: dict[str, Any] = {}
    origin: dict[str, Any] | None = None

    def check(self) -> None:
        check_text(self.content, "body.content")
        check_metadata(self.metadata, "body.metadata")
        if self.origin is not None:
            check_metadata(self.origin, "body.origin")


class CoreSeeded(Body):
    """The experiment context (core memory blocks), seeded once the goal is known."""

    type_name: ClassVar[str] = "core_seeded"
    persona: str = ""
    human: str = ""
    context: dict[str, Any] = {}

    def check(self) -> None:
        check_text(self.persona, "body.persona")
        check_text(self.human, "body.human")
        check_metadata(self.context, "body.context")


class NodeCleared(Body):
    """Tombstone: hides the node's earlier entries from every projection; the log keeps them."""

    type_name: ClassVar[str] = "node_cleared"
    reason: str = ""

    def check(self) -> None:
        check_text(self.reason, "body.reason")


BODY_TYPES: dict[str, type[Body]] = {
    cls.type_name: cls for cls in (NodeStarted, MemoryAdded, ReactStep, CoreSeeded, NodeCleared)
}
EVENT_TYPES = tuple(BODY_TYPES)


# ---------------------------------------------------------------------------- checks


def check_node_id(node_id: object, field: str = "node_id") -> str:
    """Refuse ids that cannot be a node: empty, too long, path-like or with control characters."""
    if not isinstance(node_id, str):
        raise InvalidInput(field, f"must be a string, got {type(node_id).__name__}")
    if not node_id:
        raise InvalidInput(field, "must not be empty")
    if len(node_id) > MAX_NODE_ID_CHARS:
        raise InvalidInput(field, f"longer than {MAX_NODE_ID_CHARS} characters ({len(node_id)})")
    if node_id in (".", ".."):
        raise InvalidInput(field, f"{node_id!r} is not a node id")
    bad = _FORBIDDEN_IN_ID.search(node_id)
    if bad:
        raise InvalidInput(field, f"contains a forbidden character {bad.group()!r} (no /, \\, NUL or control characters)")
    return node_id


def check_text(text: object, field: str, limit: int = MAX_TEXT_BYTES) -> None:
    """Text must be valid UTF-8 (no lone surrogates) and within the size limit."""
    if not isinstance(text, str):
        raise InvalidInput(field, f"must be a string, got {type(text).__name__}")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(field, f"is not valid UTF-8 (character at index {exc.start})") from None
    if size > limit:
        raise InvalidInput(field, f"is {size} bytes; the limit is {limit}")


def check_metadata(value: object, field: str) -> None:
    """A JSON object of bounded size whose strings are valid UTF-8 and numbers finite."""
    if not isinstance(value, dict):
        raise InvalidInput(field, f"must be an object, got {type(value).__name__}")
    _check_json(value, field, 0)
    size = len(msgspec.json.encode(value))
    if size > MAX_METADATA_BYTES:
        raise InvalidInput(field, f"is {size} bytes encoded; the limit is {MAX_METADATA_BYTES}")


def _check_json(value: object, field: str, depth: int) -> None:
    if depth > MAX_JSON_DEPTH:
        raise InvalidInput(field, f"nested deeper than {MAX_JSON_DEPTH}")
    if value is None or isinstance(value, (bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(field, "must be a finite number (JSON has no NaN or Infinity)")
        return
    if isinstance(value, str):
        check_text(value, field, MAX_METADATA_BYTES)
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, f"{field}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(field, f"keys must be strings, got {type(key).__name__}")
            check_text(key, f"{field}.<key>", MAX_METADATA_BYTES)
            _check_json(item, f"{field}.{key}", depth + 1)
        return
    raise InvalidInput(field, f"{type(value).__name__} is not a JSON value")


def is_sha256(value: object) -> bool:
    """True for a sha256 digest written as 64 lowercase hex characters."""
    return isinstance(value, str) and _SHA256.fullmatch(value) is not None


def check_artifact_ref(ref: ArtifactRefBody, field: str) -> None:
    check_text(ref.path, f"{field}.path", 4096)
    if not ref.path or ref.path.startswith("/") or ".." in ref.path.split("/"):
        raise InvalidInput(f"{field}.path", "must be a relative path inside the node's work dir")
    if ref.sha256 is not None and not is_sha256(ref.sha256):
        raise InvalidInput(f"{field}.sha256", "expected 64 lowercase hex characters")
    if ref.role not in ARTIFACT_ROLES:
        raise InvalidInput(f"{field}.role", f"unknown role {ref.role!r}; expected one of {', '.join(ARTIFACT_ROLES)}")


def validate_body(event_type: str, body: object) -> dict[str, Any]:
    """Validate ``body`` for ``event_type``; return its canonical dict (defaults omitted)."""
    cls = BODY_TYPES.get(event_type) if isinstance(event_type, str) else None
    if cls is None:
        raise InvalidInput("type", f"unknown event type {event_type!r}; expected one of {', '.join(EVENT_TYPES)}")
    if isinstance(body, Body):
        body = msgspec.to_builtins(body)
    if not isinstance(body, dict):
        raise InvalidInput("body", f"must be an object, got {type(body).__name__}")
    try:
        typed = msgspec.convert(body, cls, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidInput(*_field_and_reason(str(exc))) from None
    typed.check()
    return msgspec.to_builtins(typed)


def _field_and_reason(message: str) -> tuple[str, str]:
    """Turn msgspec's "Expected `int`, got `str` - at `$.depth`" into ("body.depth", ...)."""
    reason, sep, where = message.rpartition(" - at `$")
    field = "body" + where.rstrip("`") if sep else "body"
    reason = reason if sep else message
    if reason.startswith("Object contains unknown field `"):
        return f"{field}.{reason.split('`')[1]}", "unknown field"
    return field, reason


# ---------------------------------------------------------------------------- ids, time


class _UUID7:
    """UUIDv7 ids: time-ordered (ms), unique, monotonic within a process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def __call__(self) -> str:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            rand = int.from_bytes(os.urandom(10), "big")
            value = (ms << 80) | (0x7 << 76) | ((rand >> 64) & 0xFFF) << 64 | (0b10 << 62) | (rand & ((1 << 62) - 1))
            if value <= self._last:  # same millisecond: keep strictly increasing
                value = self._last + 1
            self._last = value
        h = f"{value:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


new_event_id = _UUID7()


def utc_now() -> str:
    """UTC timestamp, ISO-8601 with microseconds and a ``Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ---------------------------------------------------------------------------- versions

# Upcasters turn a raw event dict of version N into version N+1. When SCHEMA_VERSION is
# bumped, register the old→new step here; events on disk are never rewritten.
UPCASTERS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def upcast(event: Event, current: int | None = None) -> Event:
    """Bring an event read from disk to the current schema version, or refuse a newer one."""
    current = SCHEMA_VERSION if current is None else current
    if event.v == current:
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
