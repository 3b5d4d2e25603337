"""Typed models of ARI's ``node_report.json`` (schema_version 1).

A node report is the evidence a memory entry points at, so it is parsed strictly:
wrong types are refused rather than coerced, because a silently coerced metric or
hash would make the index disagree with the evidence. Fields ARI may add later are
kept (``extra="allow"``) so that an older ledger can still index newer reports.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ledger.errors import InvalidInput
from ledger.events import REPORT_ROLES, is_sha256

Label = Literal["draft", "improve", "debug", "ablation", "validation", "other"]
ArtifactRole = Literal[REPORT_ROLES]  # one list of roles, defined with the events
ARTIFACT_ROLES: tuple[str, ...] = get_args(ArtifactRole)


def _sha256(value: object) -> str:
    if not is_sha256(value):
        raise PydanticCustomError("sha256", "expected 64 lowercase hex characters")
    return value  # type: ignore[return-value]


def _metric(value: object) -> int | float:
    # bool is an int subclass; True as a metric is always a bug upstream.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PydanticCustomError("metric", "expected a number")
    if not math.isfinite(value):
        raise PydanticCustomError("metric", "expected a finite number (NaN and Infinity are not JSON)")
    return value


def _schema_version(value: object) -> int:
    if type(value) is not int or value != 1:
        raise PydanticCustomError("schema_version", "{reason}", {"reason": f"unsupported schema_version {value!r}, expected 1"})
    return 1


Sha256 = Annotated[str, PlainValidator(_sha256)]
Metric = Annotated[int | float, PlainValidator(_metric)]


class _Model(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class AddedFile(_Model):
    path: str
    sha256: Sha256


class ModifiedFile(_Model):
    path: str
    sha256_before: Sha256
    sha256_after: Sha256


class FilesChanged(_Model):
    added: list[AddedFile] = Field(default_factory=list)
    modified: list[ModifiedFile] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    inherited_unchanged: list[str] = Field(default_factory=list)


class SelfAssessment(_Model):
    succeeded: bool
    headline: str = ""
    concerns: list[str] = Field(default_factory=list)


class Artifact(_Model):
    filename: str
    role: ArtifactRole = "unknown"
    sha256: Sha256 | None = None
    size: int | None = Field(default=None, ge=0)


class NodeReport(_Model):
    """One node's ``node_report.json``; identity fields are required, prose fields default empty."""

    schema_version: Annotated[int, PlainValidator(_schema_version)]
    node_id: str = Field(min_length=1)
    parent_id: str | None
    ancestor_ids: list[str]
    label: Label
    depth: int = Field(ge=0)
    status: str = Field(min_length=1)
    files_changed: FilesChanged = Field(default_factory=FilesChanged)
    metrics: dict[str, Metric] = Field(default_factory=dict)
    self_assessment: SelfAssessment
    next_steps_hints: list[str] = Field(default_factory=list)
    build_command: str = ""
    run_command: str = ""
    artifacts: list[Artifact] = Field(default_factory=list)
    what_was_done: str = ""
    delta_vs_parent: str = ""

    @model_validator(mode="after")
    def _tree_position_is_consistent(self) -> NodeReport:
        # Ancestor-scoped recall trusts these three fields, so they must agree.
        expected_parent = self.ancestor_ids[-1] if self.ancestor_ids else None
        if self.parent_id != expected_parent:
            _tree_error("parent_id", f"{self.parent_id!r} is not the last of ancestor_ids ({expected_parent!r})")
        if self.depth != len(self.ancestor_ids):
            _tree_error("depth", f"{self.depth} does not match {len(self.ancestor_ids)} ancestor_ids")
        if self.node_id in self.ancestor_ids:
            _tree_error("ancestor_ids", f"contains the node itself ({self.node_id!r})")
        return self


def _tree_error(field: str, reason: str) -> None:
    raise PydanticCustomError("tree_position", "{reason}", {"field": field, "reason": reason})


def load_node_report(source: str | Path | Mapping) -> NodeReport:
    """Parse and validate a report from a ``node_report.json`` path or an already-decoded dict."""
    data = source if isinstance(source, Mapping) else _read_json(Path(source))
    if not isinstance(data, Mapping):
        raise InvalidInput("node_report", f"expected a JSON object, got {type(data).__name__}")
    try:
        return NodeReport.model_validate(dict(data))
    except ValidationError as exc:
        raise _as_invalid_input(exc) from None


def report_hash(report: NodeReport | Mapping) -> str:
    """sha256 of the report's canonical JSON, so re-consolidating the same report is a no-op.

    A model hashes the fields it was given (defaults it filled in are left out), so a
    dict and the model loaded from it hash the same.
    """
    data = report.model_dump(mode="json", exclude_unset=True) if isinstance(report, NodeReport) else report
    try:
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput("node_report", f"not JSON-serialisable: {exc}") from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_json(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InvalidInput("node_report", f"file not found: {path}") from None
    except OSError as exc:
        raise InvalidInput("node_report", f"cannot read {path}: {exc.strerror}") from None
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInput("node_report", f"{path} is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput("node_report", f"invalid JSON in {path} at line {exc.lineno} column {exc.colno}: {exc.msg}") from None


def _as_invalid_input(exc: ValidationError) -> InvalidInput:
    """The first pydantic error as ``InvalidInput(dotted.path[i].field, short reason)``."""
    err = exc.errors(include_url=False)[0]
    ctx = err.get("ctx") or {}
    if err["type"] == "tree_position":
        return InvalidInput(ctx["field"], ctx["reason"])
    field = _dotted(err["loc"]) or "node_report"
    if err["type"] == "missing":
        return InvalidInput(field, "required field is missing")
    return InvalidInput(field, err["msg"])


def _dotted(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
