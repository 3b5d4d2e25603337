"""ARI's front door on the write side, without the write side knowing the read side.

ARI's hooks call ``from ledger import get_backend``. The backend lives on the read side
(``projections.api``), which the write side must never import. So the write side only names
an extension point — the entry-point group ``ari_memory_ledger.memory`` — and the installed
read side registers its factory there (``pyproject.toml``). The dependency points up only in
package metadata, never in an import.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from .errors import ConfigurationError

GROUP = "ari_memory_ledger.memory"


@cache
def _registered(name: str) -> Callable[..., Any]:
    found = entry_points(group=GROUP, name=name)
    if not found:
        raise ConfigurationError(
            f"no memory API registered as {name!r} in entry-point group {GROUP!r}; "
            "install ari-memory-ledger (pip install -e .) so its read side is registered"
        )
    loaded: Callable[..., Any] = next(iter(found)).load()
    return loaded


def get_backend(checkpoint_dir: str | Path | None = None, *, reset: bool = False) -> Any:
    """ARI's ``get_backend``: the checkpoint's memory backend (one per checkpoint per process)."""
    return _registered("get_backend")(checkpoint_dir, reset=reset)


def clear_backend_cache() -> None:
    """ARI's ``clear_backend_cache``: close and forget every cached backend."""
    _registered("clear_backend_cache")()
