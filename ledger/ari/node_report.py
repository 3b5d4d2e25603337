"""Typed models of ARI's ``node_report.json`` (schema_version 1), and reading one safely.

The model follows ARI's schema (``ari-core/ari/schemas/node_report.schema.json``) and what
ARI's builder writes (``ari/orchestrator/node_report/builder.py``): ``inherited_unchanged``
items are ``{path, sha256}`` objects, ``sha256_before`` may be ``""``, ``metrics`` holds
``_``-prefixed evaluator data such as the ``_axis_scores`` dict, and a fallback stub has
only the required fields. It is strict about types — a silently coerced metric or hash
would make the index disagree with the evidence — so it is used two ways:
:func:`load_node_report` refuses a report that fails it, and :func:`report_findings` lists
every problem so consolidation can store what ARI would store and flag the rest.
Fields ARI may add later are kept (``extra="allow"``). Reading and hashing a report
without the models is :mod:`ledger.ari.report_file` (re-exported here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

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

from ledger.ari.report_file import MAX_REPORT_BYTES, read_report_file, report_hash
from ledger.errors import InvalidInput, kind_of
from ledger.vocabulary import Finding, NodeLabel, is_sha256

__all__ = ["MAX_REPORT_BYTES", "NodeReport", "load_node_report", "read_report_file", "report_findings", "report_hash"]


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
    # ARI's builder writes one of ledger.vocabulary.REPORT_ROLES, and ARI's skill passes any role string through
    # (``ArtifactRef.role: str``): a report with another role is read, and consolidation records
    # a finding for it, never a refusal stricter than ARI's
    role: str = Field(default="unknown", min_length=1)
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


def load_node_report(source: str | Path | Mapping[str, Any]) -> NodeReport:
    """Parse and validate a report from a ``node_report.json`` path or an already-decoded dict."""
    data = source if isinstance(source, Mapping) else read_report_file(Path(source))
    if not isinstance(data, Mapping):
        raise InvalidInput("node_report", f"expected a JSON object, got {kind_of(data)}")
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
