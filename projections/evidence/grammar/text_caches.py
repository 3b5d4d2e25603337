"""Caches of what is derived from a claim's text (its sentences, its words, what they name).

A text is read many times while a checkpoint is open (each node's verified context reads its
lineage's claims again), so what is derived from it is kept; each cache is registered here so
that a benchmark can forget them all and time every claim as one it has never seen.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])
_CACHES: list[Any] = []
# entries per cache: a claim's texts (its sentences, clauses, phrases) and a lineage's claims read
# again fit; more is held alive for nothing, and a heap of cached tuples makes each of Python's
# full collections slower (16,384 cost a claim's check 8 % in gen-2 collections alone)
_SIZE = 1024


def per_text(fn: F) -> F:
    """``functools.lru_cache`` of a function of a text, registered for :func:`forget`."""
    cached = functools.lru_cache(maxsize=_SIZE)(fn)
    _CACHES.append(cached)
    return cast(F, cached)


def forget() -> None:
    """Empty every cache of a text (a benchmark's round starts with none)."""
    for cache in _CACHES:
        cache.cache_clear()
