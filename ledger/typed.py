"""Typed research memory as ARI stores it: a kind and pointers to evidence, in ``metadata``.

ARI's writer (``ari_skill_memory.writer.add_typed_memory``) stamps an entry's metadata with
``type`` and ``mem_kind`` (the kind), ``metric_ptr`` (``{name, value}``), ``artifact_refs``
(``[{path, sha256, role}]``) and ``node_report_ref`` (``{run_id, node_id}``); reflections add
``confidence``, reproducibility events ``repro_target_id`` and ``repro_status``. ARI's
retriever, context builder and agent loop read them there, and so does every reader of this
library: one representation, whoever wrote the entry.

What ARI accepts is stored. What this library knows is wrong with it — a sha256 that is not
64 hex, an unknown role, an absolute or escaping path (never read), an unknown kind or
status, a missing pointer — becomes a :class:`~ledger.vocabulary.Finding` on the entry.
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from .errors import kind_of
from .vocabulary import ARTIFACT_ROLES, KINDS, REPRO_STATUSES, Finding, is_sha256

TYPED_KEYS = ("metric_ptr", "artifact_refs", "node_report_ref", "repro_target_id", "repro_status", "confidence")
_TYPED_KEYS = frozenset(TYPED_KEYS)


def kind_label(metadata: Mapping[str, Any]) -> str | None:
    """ARI's kind of an entry: ``mem_kind``, else ``type`` (any label, e.g. ``result_summary``)."""
    label = metadata.get("mem_kind") or metadata.get("type")
    return label if isinstance(label, str) else None


def typed_kind(metadata: Mapping[str, Any]) -> str | None:
    """The research-memory kind of an entry, or None for free text."""
    label = kind_label(metadata)
    return label if label in KINDS else None


def artifact_ref_dict(ref: object) -> dict[str, Any]:
    """A ref as ARI stores it, from a dict, ARI's ``ArtifactRef`` (``to_dict``), a dataclass or a Struct."""
    if isinstance(ref, Mapping):
        return dict(ref)
    if hasattr(ref, "to_dict"):
        return dict(ref.to_dict())
    if dataclasses.is_dataclass(ref) and not isinstance(ref, type):
        return dataclasses.asdict(ref)
    if isinstance(ref, msgspec.Struct):
        return msgspec.structs.asdict(ref)
    return {"path": ref}  # kept as given; inspect_metadata reports it


def typed_metadata(
    kind: str,
    *,
    metric_ptr: object = None,
    artifact_refs: Iterable[object] | None = None,
    node_report_ref: object = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The metadata ARI's writer stamps on a typed entry (same keys, same order)."""
    metadata: dict[str, Any] = {
        "type": kind,
        "mem_kind": kind,
        "metric_ptr": metric_ptr,
        "artifact_refs": [artifact_ref_dict(r) for r in artifact_refs or []],
        "node_report_ref": node_report_ref,
    }
    if extra:
        metadata.update(extra)
    return metadata


def evidence_refs(metadata: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The artifact refs of an entry that are objects (what the audit and evidence read)."""
    refs = metadata.get("artifact_refs")
    return [r for r in refs if isinstance(r, Mapping)] if isinstance(refs, list) else []


# ---------------------------------------------------------------------------- findings


def inspect_metadata(metadata: Mapping[str, Any]) -> list[Finding]:
    """What is wrong with an entry's typed fields (nothing for free text)."""
    if not metadata:
        return []
    found: list[Finding] = []
    label = kind_label(metadata)
    mem_kind = metadata.get("mem_kind")
    if mem_kind is not None and mem_kind not in KINDS:
        found.append(Finding("metadata.mem_kind", f"unknown kind {mem_kind!r}; the entry is stored as free text"))
    if isinstance(mem_kind, str) and metadata.get("type") in KINDS and metadata["type"] != mem_kind:
        found.append(
            Finding("metadata.type", f"{metadata['type']!r} differs from mem_kind {mem_kind!r}; mem_kind wins")
        )
    if label not in KINDS and _TYPED_KEYS.isdisjoint(metadata):
        return found
    _inspect_refs(metadata.get("artifact_refs"), found)
    _inspect_report_ref(metadata.get("node_report_ref"), found)
    _inspect_metric(metadata.get("metric_ptr"), found)
    confidence = metadata.get("confidence")
    if confidence is not None and not (_number(confidence) and 0.0 <= confidence <= 1.0):
        found.append(Finding("metadata.confidence", f"{confidence!r} is not a number between 0 and 1"))
    if label == "reproducibility_event":
        target, status = metadata.get("repro_target_id"), metadata.get("repro_status")
        if not isinstance(target, str) or not target:
            found.append(
                Finding("metadata.repro_target_id", "missing: the event is about no memory and changes no status")
            )
        if status not in REPRO_STATUSES:
            found.append(
                Finding(
                    "metadata.repro_status", f"unknown status {status!r}; expected one of {', '.join(REPRO_STATUSES)}"
                )
            )
    return found


def _inspect_refs(refs: object, found: list[Finding]) -> None:
    if refs is None:
        return
    if not isinstance(refs, list):
        found.append(Finding("metadata.artifact_refs", f"expected a list of refs, got {kind_of(refs)}"))
        return
    for i, ref in enumerate(refs):
        where = f"metadata.artifact_refs[{i}]"
        if not isinstance(ref, Mapping):
            found.append(Finding(where, "expected an object with path, sha256 and role"))
            continue
        problem = path_problem(ref.get("path"))
        if problem:
            found.append(Finding(f"{where}.path", problem))
        sha = ref.get("sha256")
        if sha is not None and not is_sha256(sha):
            found.append(
                Finding(f"{where}.sha256", "not a sha256 digest (64 lowercase hex); nothing can be verified against it")
            )
        role = ref.get("role", "unknown")
        if role not in ARTIFACT_ROLES:
            found.append(
                Finding(f"{where}.role", f"unknown role {role!r}; expected one of {', '.join(ARTIFACT_ROLES)}")
            )


def path_problem(path: object) -> str | None:
    """Why an artifact path cannot be resolved inside a node's work dir, or None."""
    if not isinstance(path, str) or not path:
        return "missing or not a string"
    if "\x00" in path:
        return "contains a NUL byte; never read"
    if path.startswith("/"):
        return "absolute path; artifacts are relative to the node's work dir, so it is never read"
    normal = posixpath.normpath(path)
    if normal == ".." or normal.startswith("../"):
        return "'..' leaves the node's work dir; never read"
    if normal == ".":
        return "names the work dir itself, not a file"
    return None


def _inspect_report_ref(ref: object, found: list[Finding]) -> None:
    if ref is None:
        return
    if not isinstance(ref, Mapping):
        found.append(
            Finding("metadata.node_report_ref", f"expected an object with run_id and node_id, got {kind_of(ref)}")
        )
        return
    for key in ("run_id", "node_id"):
        if not isinstance(ref.get(key), str) or not ref.get(key):
            found.append(Finding(f"metadata.node_report_ref.{key}", "missing: the node report cannot be located"))


def _inspect_metric(ptr: object, found: list[Finding]) -> None:
    if ptr is None:
        return
    if not isinstance(ptr, Mapping):
        found.append(Finding("metadata.metric_ptr", f"expected an object {{name, value}}, got {kind_of(ptr)}"))
        return
    if not isinstance(ptr.get("name"), str) or not ptr.get("name"):
        found.append(Finding("metadata.metric_ptr.name", "missing: the result names no metric"))
    if "value" in ptr and ptr["value"] is not None and not _number(ptr["value"]):
        found.append(Finding("metadata.metric_ptr.value", f"{ptr['value']!r} is not a finite number"))


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
