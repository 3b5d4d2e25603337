"""Artifact refs: the sha256-pinned files inside a node's work dir that memory cites as evidence.

Memory is an index, not evidence, so every ref must stay checkable later: a ref keeps the
hash the report recorded (the audit compares it with the file), is relative to the work dir,
and is never followed outside it. Refs are built from the report as ARI builds them
(``ari_skill_memory.provenance.refs_from_node_report``: ``files_changed`` added/modified with
their recorded hashes, ``artifacts`` by ``path`` or ``filename``, an absolute path elsewhere
kept by its name); where ARI would read a file outside the work dir (a ``..`` path, a symlink
leading out) or a file that is not regular, this library stores the ref unread and records
a finding instead.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import msgspec

from ledger.errors import InvalidInput
from ledger.layout import is_memory_file
from ledger.safe_io import UnsafeFile, open_file
from ledger.vocabulary import Finding, is_sha256

SOURCE_ROLE = "source"
_CHUNK = 1 << 20


class Provenance(msgspec.Struct, frozen=True):
    refs: list[dict[str, Any]]  # ARI's {path, sha256, role}
    findings: list[Finding]


def artifact_refs(report: Mapping[str, Any], work_dir: Path) -> Provenance:
    """Refs for the files a node added or modified and the artifacts it listed, one per path.

    Hashes recorded in the report are kept as they are (the audit checks them); a listed
    file without one is hashed now if it is a regular file inside the work dir. Deleted and
    inherited files get no ref: they are not this node's evidence, and neither is a memory
    file (the log, its snapshot, ARI's backup or access log: :func:`ledger.layout.is_memory_file`). When a path is listed
    twice the first recorded hash wins and an artifact role replaces the generic "source".
    """
    work = Path(work_dir)
    base = work.resolve()
    findings: list[Finding] = []
    merged: dict[str, dict[str, Any]] = {}
    for where, raw, sha, role in _candidates(report, findings):
        if is_memory_file(raw):  # ARI's loop may have copied memory files into the work dir
            findings.append(Finding(f"{where}.path", f"{raw} is a memory file, not the node's evidence; left out"))
            continue
        path, target = _place(work, base, raw, where, findings)
        if path in merged:
            old = merged[path]
            old["sha256"] = old["sha256"] or sha
            if old["role"] == SOURCE_ROLE and role not in (SOURCE_ROLE, "unknown"):
                old["role"] = role
            continue
        merged[path] = {"path": path, "sha256": sha, "role": role, "_target": target, "_where": where}
    refs = []
    for ref in merged.values():
        target, where = ref.pop("_target"), ref.pop("_where")
        if ref["sha256"] is None and target is not None:
            ref["sha256"] = _hash_if_regular(target, where, findings)
        refs.append(ref)
    return Provenance(refs=refs, findings=findings)


def _candidates(report: Mapping[str, Any], findings: list[Finding]) -> list[tuple[str, str, str | None, str]]:
    """(where, path, recorded sha256, role) for every file the report names as its own."""
    out: list[tuple[str, str, str | None, str]] = []
    changed = report.get("files_changed")
    if not isinstance(changed, Mapping):
        changed = {}
    for key, sha_keys in (("added", ("sha256",)), ("modified", ("sha256_after", "sha256"))):
        for i, item in enumerate(_list(changed.get(key))):
            if isinstance(item, Mapping) and isinstance(item.get("path"), str) and item["path"]:
                sha = next((item[k] for k in sha_keys if item.get(k)), None)
                out.append(
                    (f"files_changed.{key}[{i}]", item["path"], sha if isinstance(sha, str) else None, SOURCE_ROLE)
                )
    for i, item in enumerate(_list(report.get("artifacts"))):
        if not isinstance(item, Mapping):
            continue
        name = item.get("path") or item.get("filename")
        if isinstance(name, str) and name:
            sha = item.get("sha256")
            role = item.get("role")
            if not isinstance(role, str) or not role:
                role = "unknown"
            out.append((f"artifacts[{i}]", name, sha if is_sha256(sha) else None, role))
    return out


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _place(work: Path, base: Path, raw: str, where: str, findings: list[Finding]) -> tuple[str, Path | None]:
    """(path stored in the ref, file that may be read — None when it must not be)."""
    if os.path.isabs(raw) and "\x00" not in raw and _relative_to_any(os.path.normpath(raw), _roots(work, base)) is None:
        # ARI keeps an absolute path from elsewhere by its name, inside the work dir
        findings.append(
            Finding(f"{where}.path", f"absolute path outside the work dir ({raw}); kept by its name, as ARI does")
        )
        raw = PurePosixPath(raw).name
    rel, target, problem = _locate(work, base, raw)
    if problem:
        findings.append(Finding(f"{where}.path", f"{problem}; kept as given, never read"))
    return rel, target


def _hash_if_regular(target: Path, where: str, findings: list[Finding]) -> str | None:
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return None  # absent: nothing to pin (the audit reports it missing)
    if not stat.S_ISREG(mode):
        findings.append(Finding(f"{where}.path", "not a regular file; never read"))
        return None
    try:
        return sha256_file(target)
    except UnsafeFile:  # replaced by a FIFO or a link since the stat: never read
        findings.append(Finding(f"{where}.path", "not a regular file; never read"))
        return None


def resolve_inside(work_dir: Path, path: str) -> Path:
    """The real path of ``path`` (relative, or absolute inside ``work_dir``), refusing any escape.

    Escapes are ``..`` past the work dir, absolute paths elsewhere, and symlinks anywhere
    along the path whose target lies outside the work dir.
    """
    _rel, target, problem = _locate(Path(work_dir), Path(work_dir).resolve(), path)
    if problem or target is None:
        raise InvalidInput("path", problem or f"cannot be resolved: {path}")
    return target


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks so large artifacts don't load into memory. Only a
    regular file is read, and not through a link at its last component (pass a resolved path):
    a FIFO or a device in its place raises UnsafeFile at once (:func:`ledger.safe_io.open_file`)."""
    digest = hashlib.sha256()
    with os.fdopen(open_file(path, os.O_RDONLY), "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _locate(work_dir: Path, base: Path, path: str) -> tuple[str, Path | None, str | None]:
    """(posix path relative to the work dir, its real path inside it, why it may not be read)."""
    if not path:
        return path, None, "empty path"
    if "\x00" in path:
        return path.replace("\x00", ""), None, "contains a NUL byte"
    if os.path.isabs(path):
        rel = _relative_to_any(os.path.normpath(path), _roots(work_dir, base))
        if rel is None:
            return path, None, f"absolute path outside the work dir: {path}"
    else:
        rel = os.path.normpath(path)
        if rel == ".." or rel.startswith("../"):
            return PurePosixPath(path).as_posix(), None, f"'..' escapes the work dir: {path}"
    if rel == ".":
        return path, None, f"names the work dir itself, not a file: {path}"
    # realpath only reads link targets; the target's content is never opened here.
    target = Path(os.path.realpath(base / rel))
    if not target.is_relative_to(base):
        return PurePosixPath(rel).as_posix(), None, f"a symlink on the path leads outside the work dir: {path}"
    return PurePosixPath(rel).as_posix(), target, None


def _roots(work_dir: Path, base: Path) -> tuple[str, str]:
    return os.path.abspath(work_dir), str(base)


def _relative_to_any(path: str, roots: Iterable[str]) -> str | None:
    for root in roots:
        try:
            return str(PurePosixPath(path).relative_to(root))
        except ValueError:
            continue
    return None
