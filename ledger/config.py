"""The write side's configuration: the current node (the copy-on-write guard's variable), read
at call time, and the helpers every setting is read with.

The read side's settings (the checkpoint, Letta, search engine, access log, gates) live with it
in :mod:`projections.settings`. The names and defaults are ARI's (``ari_skill_memory.config``).
"""

from __future__ import annotations

import os

_FALSE = {"0", "false", "no", "off"}


def env(name: str) -> str | None:
    """A variable's value; unset and empty are the same (as ARI reads them)."""
    value = os.environ.get(name)
    return value if value not in (None, "") else None


def flag(name: str, default: bool) -> bool:
    """A switch: anything but 0/false/no/off is on."""
    value = env(name)
    return default if value is None else value.strip().lower() not in _FALSE


def number(name: str, default: float, kind: type = int) -> float:
    """A numeric variable; a value that is not a number falls back to the default (as ARI)."""
    value = env(name)
    try:
        return kind(value) if value is not None else default
    except ValueError:
        return default


def current_node() -> str | None:
    """``ARI_CURRENT_NODE_ID``: the node allowed to write (copy-on-write guard)."""
    return env("ARI_CURRENT_NODE_ID")


def set_current_node(node_id: str | None) -> None:
    """Set the process's current node (MCP ``_set_current_node``: a pooled server outlives a node)."""
    if node_id:
        os.environ["ARI_CURRENT_NODE_ID"] = node_id
    else:
        os.environ.pop("ARI_CURRENT_NODE_ID", None)
