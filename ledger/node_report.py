"""Typed models of ARI's ``node_report.json`` (schema_version 1), and reading one safely.

The model follows ARI's schema (``ari-core/ari/schemas/node_report.schema.json``) and what
ARI's builder writes (``ari/orchestrator/node_report/builder.py``): ``inherited_unchanged``
items are ``{path, sha256}`` objects, ``sha256_before`` may be ``""``, ``metrics`` holds
``_``-prefixed evaluator data such as the ``_axis_scores`` dict, and a fallback stub has
only the required fields. It is strict about types — a silently coerced metric or hash
would make the index disagree with the evidence — so it is used two ways:
:func:`load_node_report` refuses a report that fails it, and :func:`report_findings` lists
every problem so consolidation can store what ARI would store and flag the rest.
Fields ARI may add later are kept (``extra="allow"``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, get_args

import msgspec
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ledger.errors import InvalidInput
from ledger.safe_io import UnsafeFile, read_file
from ledger.vocabulary import Finding, NodeLabel, ReportRole, is_sha256

ArtifactRole = ReportRole  # one list of roles, defined with the events
ARTIFACT_ROLES: tuple[str, ...] = get_args(ArtifactRole)


def _sha256(value: object) -> str:
    if not is_sha256(value):
        raise PydanticCustomError("sha256", "expected 64 lowercase hex characters")
    return value


def _metric(value: object) -> int | float:
    # bool is an int subclass; True as a metric is always a bug upstream.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PydanticCustomError("metric", "expected a number")
    if not math.isfinite(value):
        raise PydanticCustomError("metric", "expected a finite number (NaN and Infinity are not JSON)")
    return value


def _sha256_or_empty(value: object) -> str:
    # ARI's builder writes "" when the parent's copy of a modified file could not be read.
    return "" if value == "" else _sha256(value)


def _schema_version(value: object) -> int:
    if type(value) is not int or value != 1:
        raise PydanticCustomError(
            "schema_version", "{reason}", {"reason": f"unsupported schema_version {value!r}, expected 1"}
        )
    return 1


Sha256 = Annotated[str, PlainValidator(_sha256)]
Sha256OrEmpty = Annotated[str, PlainValidator(_sha256_or_empty)]
Metric = Annotated[int | float, PlainValidator(_metric)]


def _metrics(value: dict[str, Any]) -> dict[str, Any]:
    # "_"-prefixed keys are the evaluator's own data (ARI's builder adds the _axis_scores dict).
    for name, item in value.items():
        if not name.startswith("_"):
            try:
                _metric(item)
            except PydanticCustomError as exc:
                raise PydanticCustomError(
                    "metric_value", "{reason}", {"field": f"metrics.{name}", "reason": exc.message()}
                ) from None
    return value


Metrics = Annotated[dict[str, Any], AfterValidator(_metrics)]


class _Model(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class AddedFile(_Model):
    path: str
    sha256: Sha256


class ModifiedFile(_Model):
    path: str
    sha256_before: Sha256OrEmpty = ""
    sha256_after: Sha256 | None = None


class InheritedFile(_Model):
    path: str
    from_node_id: str | None = None
    sha256: Sha256 | None = None


class FilesChanged(_Model):
    added: list[AddedFile] = Field(default_factory=list)
    modified: list[ModifiedFile] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    inherited_unchanged: list[InheritedFile | str] = Field(default_factory=list)


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
    parent_id: str | None = None
    ancestor_ids: list[str] = Field(default_factory=list)
    label: NodeLabel
    depth: int = Field(ge=0)
    status: str
    files_changed: FilesChanged
    metrics: Metrics
    self_assessment: SelfAssessment = Field(default_factory=lambda: SelfAssessment(succeeded=False))
    next_steps_hints: list[str] = Field(default_factory=list)
    build_command: str = ""
    run_command: str = ""
    artifacts: list[Artifact]
    what_was_done: str = ""
    delta_vs_parent: str = ""

    @model_validator(mode="after")
    def _tree_position_is_consistent(self) -> NodeReport:
        # Ancestor-scoped recall trusts these three fields, so they must agree.
        if "ancestor_ids" not in self.model_fields_set and "parent_id" not in self.model_fields_set:
            return self  # a fallback stub: no position recorded
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


MAX_REPORT_BYTES = 16 * 1024 * 1024


def load_node_report(source: str | Path | Mapping[str, Any]) -> NodeReport:
    """Parse and validate a report from a ``node_report.json`` path or an already-decoded dict."""
    data = source if isinstance(source, Mapping) else read_report_file(Path(source))
    if not isinstance(data, Mapping):
        raise InvalidInput("node_report", f"expected a JSON object, got {type(data).__name__}")
    try:
        return NodeReport.model_validate(dict(data))
    except ValidationError as exc:
        raise _as_invalid_input(exc.errors(include_url=False)[0]) from None


def report_findings(data: Mapping[str, Any]) -> list[Finding]:
    """Every way ``data`` departs from ARI's node_report schema, as findings (empty when valid)."""
    try:
        NodeReport.model_validate(dict(data))
    except ValidationError as exc:
        found = []
        for err in exc.errors(include_url=False):
            bad = _as_invalid_input(err)
            field = bad.field if bad.field.startswith("node_report") else f"node_report.{bad.field}"
            found.append(Finding(field, bad.reason))
        return found
    return []


def report_hash(report: NodeReport | Mapping[str, Any]) -> str:
    """sha256 of the report's canonical JSON, so re-consolidating the same report is a no-op.

    A model hashes the fields it was given (defaults it filled in are left out), so a
    dict and the model loaded from it hash the same. NaN hashes as null, as it is stored.
    """
    data = report.model_dump(mode="json", exclude_unset=True) if isinstance(report, NodeReport) else report
    try:
        text = _canonical(data)
    except (TypeError, msgspec.EncodeError) as exc:
        raise InvalidInput("node_report", f"not JSON-serialisable: {exc}") from None
    return hashlib.sha256(text).hexdigest()


def read_report_file(path: Path, inside: Path | None = None) -> Any:
    """A report file's JSON, read safely: a regular file, at most 16 MiB, inside ``inside``.

    Read by :func:`ledger.safe_io.read_file` (non-blocking, never through a link at its last
    component, checked with fstat before reading), so a FIFO or a device (``/dev/zero``) is
    refused instead of hanging or filling memory.
    """
    target = path
    if inside is not None:
        real, root = Path(os.path.realpath(path)), Path(os.path.realpath(inside))
        if not real.is_relative_to(root):
            raise InvalidInput("node_report", f"{path} is outside the node's work dir {inside}; not read")
        target = real  # a link inside the work dir is followed here, never at the open
    try:
        raw = read_file(target, MAX_REPORT_BYTES)
    except FileNotFoundError:
        raise InvalidInput("node_report", f"file not found: {path}") from None
    except UnsafeFile as exc:  # a link, a FIFO, a device, a directory, too big: one line, nothing read
        raise InvalidInput("node_report", str(exc)) from None
    except OSError as exc:
        raise InvalidInput("node_report", f"cannot read {path}: {exc.strerror}") from None
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInput("node_report", f"{path} is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            "node_report", f"invalid JSON in {path} at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None


_encoder = msgspec.json.Encoder(order="deterministic")


def _canonical(data: Any) -> bytes:
    return _encoder.encode(data)


def _as_invalid_input(err: Mapping[str, Any]) -> InvalidInput:
    """One pydantic error as ``InvalidInput(dotted.path[i].field, short reason)``."""
    ctx = err.get("ctx") or {}
    if err["type"] in ("tree_position", "metric_value"):
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
