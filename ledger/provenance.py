"""Artifact refs: the sha256-pinned files inside a node's work dir that memory cites as evidence.

Memory is an index, not evidence, so every ref must stay checkable later: a ref keeps the
hash the report recorded (the audit compares it with the file), is relative to the work dir,
and never points outside it. Paths that would leave the work dir are refused and reported,
never followed, so indexing a hostile or sloppy report reads nothing outside the work dir.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

import msgspec

from ledger.errors import InvalidInput
from ledger.events import ARTIFACT_ROLES, is_sha256
from ledger.node_report import NodeReport

SOURCE_ROLE = "source"
_REF_KEYS = frozenset({"path", "sha256", "role"})
_CHUNK = 1 << 20


class ArtifactRef(msgspec.Struct, frozen=True):
    path: str
    sha256: str | None
    role: str


class RefusedPath(msgspec.Struct, frozen=True):
    path: str
    reason: str


class Provenance(msgspec.Struct, frozen=True):
    refs: list[ArtifactRef]
    refused: list[RefusedPath]


def artifact_refs(report: NodeReport, work_dir: Path) -> Provenance:
    """Refs for the files a node added or modified and the artifacts it listed, one per path.

    Hashes recorded in the report are kept as they are (the audit checks them); a listed
    file without a hash is hashed now if it exists. Deleted and inherited files get no ref:
    they are not this node's evidence. When a path is listed twice the first recorded hash
    wins and an artifact role replaces the generic "source".
    """
    base = Path(work_dir).resolve()
    fc = report.files_changed
    candidates = [
        *((f.path, f.sha256, SOURCE_ROLE) for f in fc.added),
        *((f.path, f.sha256_after, SOURCE_ROLE) for f in fc.modified),
        *((a.filename, a.sha256, a.role) for a in report.artifacts),
    ]
    merged: dict[str, tuple[str | None, str, Path]] = {}
    refused: dict[str, RefusedPath] = {}
    for raw, sha, role in candidates:
        try:
            rel, target = _locate(Path(work_dir), base, raw)
        except InvalidInput as exc:
            refused.setdefault(raw, RefusedPath(raw, exc.reason))
            continue
        if rel in merged:
            old_sha, old_role, _ = merged[rel]
            better_role = role if old_role == SOURCE_ROLE and role != "unknown" else old_role
            merged[rel] = (old_sha or sha, better_role, target)
        else:
            merged[rel] = (sha, role, target)
    refs = [
        ArtifactRef(rel, sha if sha is not None else _hash_if_file(target), role)
        for rel, (sha, role, target) in merged.items()
    ]
    return Provenance(refs=refs, refused=list(refused.values()))


def resolve_inside(work_dir: Path, path: str) -> Path:
    """The real path of ``path`` (relative, or absolute inside ``work_dir``), refusing any escape.

    Escapes are ``..`` past the work dir, absolute paths elsewhere, and symlinks anywhere
    along the path whose target lies outside the work dir.
    """
    return _locate(Path(work_dir), Path(work_dir).resolve(), path)[1]


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks so large artifacts don't load into memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def validate_artifact_refs(refs: Iterable[Mapping | ArtifactRef], field: str = "artifact_refs") -> list[ArtifactRef]:
    """Check refs handed to a typed writer; paths come back normalised (``a/./b`` -> ``a/b``)."""
    if isinstance(refs, (str, bytes, Mapping)) or not isinstance(refs, Iterable):
        raise InvalidInput(field, "expected a list of artifact refs")
    out: list[ArtifactRef] = []
    first_index: dict[str, int] = {}
    for i, item in enumerate(refs):
        where = f"{field}[{i}]"
        if isinstance(item, ArtifactRef):
            item = msgspec.structs.asdict(item)
        if not isinstance(item, Mapping):
            raise InvalidInput(where, "expected an object with path, sha256 and role")
        unknown = sorted(set(item) - _REF_KEYS, key=str)
        if unknown:
            raise InvalidInput(f"{where}.{unknown[0]}", "unknown key (expected path, sha256, role)")
        for key in ("path", "role"):
            if key not in item:
                raise InvalidInput(f"{where}.{key}", "required field is missing")
        path = _relative_posix(item["path"], f"{where}.path")
        sha = item.get("sha256")
        if sha is not None and not is_sha256(sha):
            raise InvalidInput(f"{where}.sha256", "expected 64 lowercase hex characters or null")
        role = item["role"]
        if not isinstance(role, str) or role not in ARTIFACT_ROLES:
            raise InvalidInput(f"{where}.role", f"expected one of {', '.join(ARTIFACT_ROLES)}")
        if path in first_index:
            raise InvalidInput(f"{where}.path", f"duplicate of {field}[{first_index[path]}].path ({path!r})")
        first_index[path] = i
        out.append(ArtifactRef(path, sha, role))
    return out


def _locate(work_dir: Path, base: Path, path: str) -> tuple[str, Path]:
    """(posix path relative to the work dir, real path inside it) or InvalidInput("path", ...)."""
    if not path:
        raise InvalidInput("path", "empty path")
    if "\x00" in path:
        raise InvalidInput("path", "contains a NUL byte")
    if os.path.isabs(path):
        rel = _relative_to_any(os.path.normpath(path), (os.path.abspath(work_dir), str(base)))
        if rel is None:
            raise InvalidInput("path", f"absolute path outside the work dir: {path}")
    else:
        rel = os.path.normpath(path)
        if rel == ".." or rel.startswith("../"):
            raise InvalidInput("path", f"'..' escapes the work dir: {path}")
    if rel == ".":
        raise InvalidInput("path", f"names the work dir itself, not a file: {path}")
    # realpath only reads link targets; the target's content is never opened here.
    target = Path(os.path.realpath(base / rel))
    if not target.is_relative_to(base):
        raise InvalidInput("path", f"a symlink on the path leads outside the work dir: {path}")
    return PurePosixPath(rel).as_posix(), target


def _relative_to_any(path: str, roots: Iterable[str]) -> str | None:
    for root in roots:
        try:
            return str(PurePosixPath(path).relative_to(root))
        except ValueError:
            continue
    return None


def _relative_posix(path: object, field: str) -> str:
    if not isinstance(path, str) or not path:
        raise InvalidInput(field, "expected a non-empty relative path")
    if "\x00" in path:
        raise InvalidInput(field, "contains a NUL byte")
    if path.startswith("/"):
        raise InvalidInput(field, f"expected a path relative to the work dir, got absolute {path!r}")
    rel = os.path.normpath(path)
    if rel == ".." or rel.startswith("../"):
        raise InvalidInput(field, f"'..' escapes the work dir: {path!r}")
    if rel == ".":
        raise InvalidInput(field, f"names the work dir itself, not a file: {path!r}")
    return rel


def _hash_if_file(target: Path) -> str | None:
    return sha256_file(target) if target.is_file() else None
