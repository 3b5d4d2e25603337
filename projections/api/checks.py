"""Checks of the arguments the API's callers pass, refused with the field named."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ledger import InvalidInput
from ledger.errors import kind_of


def limit(value: object, field: str = "limit") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(field, f"must be a non-negative integer, got {value!r}")
    return value


def node_ids(ids: object, field: str = "ancestor_ids") -> list[str]:
    if isinstance(ids, str) or not isinstance(ids, (list, tuple)):
        raise InvalidInput(field, "must be a list of node ids")
    for i, nid in enumerate(ids):
        if not isinstance(nid, str):
            raise InvalidInput(f"{field}[{i}]", "must be a string")
    return list(ids)


def text_type(value: object, field: str = "text") -> str:
    """A text argument's type, worded as every surface words it (its size is the writer's to
    fit, as ARI's writer does, not refused here)."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, got {kind_of(value)}")
    return value


def metadata(value: object, field: str = "metadata") -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(field, f"must be an object or null, got {kind_of(value)}")
    return dict(value)


def labels(kinds: Iterable[str] | None) -> set[str] | None:
    """ARI's kind filter: None (or empty) for every kind."""
    if kinds is None:
        return None
    if isinstance(kinds, str) or not isinstance(kinds, (list, tuple, set, frozenset)):
        raise InvalidInput("kinds", "must be a list of kinds")
    return set(kinds) or None
