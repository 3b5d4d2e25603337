"""A retired front door: ``from ledger import get_backend`` (deprecated).

The front door is :func:`projections.api.get_backend` (typed; ARI's ari-core reaches it
through the skill directory's ``ari_skill_memory.backends``). This one still answers, with a
``DeprecationWarning``, for code written against it. The backend lives on the read side, which
the write side must never import, so this only names an extension point — the entry-point group
``ari_memory_ledger.memory`` — where the installed read side registers its factory
(``pyproject.toml``): the dependency points up only in package metadata, never in an import.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from .errors import ConfigurationError

GROUP = "ari_memory_ledger.memory"


@cache
def _registered(name: str) -> Callable[..., Any]:
    from importlib.metadata import entry_points  # ~4 MB: only for the retired door, when used

    found = entry_points(group=GROUP, name=name)
    if not found:
        raise ConfigurationError(
            f"no memory API registered as {name!r} in entry-point group {GROUP!r}; "
            "install ari-memory-ledger (pip install -e .) so its read side is registered"
        )
    loaded: Callable[..., Any] = next(iter(found)).load()
    return loaded


def get_backend(checkpoint_dir: str | Path | None = None, *, reset: bool = False) -> Any:
    """Deprecated: ``projections.api.get_backend`` (the same backend, typed)."""
    _retired("get_backend")
    return _registered("get_backend")(checkpoint_dir, reset=reset)


def clear_backend_cache() -> None:
    """Deprecated: ``projections.api.clear_backend_cache``."""
    _retired("clear_backend_cache")
    _registered("clear_backend_cache")()


def _retired(name: str) -> None:
    warnings.warn(
        f"ledger.{name} is deprecated; use projections.api.{name} (the same call, typed)",
        DeprecationWarning,
        stacklevel=3,
    )
