"""Configuration: every environment variable the library reads is read here, at call time.

The names are ARI's, so a checkpoint and its hooks configure this library exactly as they
configure ARI's own memory skill.
"""
from __future__ import annotations

import os
from pathlib import Path

_FALSE = {"0", "false", "no", "off"}


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else None


def _flag(name: str, default: bool) -> bool:
    value = _env(name)
    return default if value is None else value.strip().lower() not in _FALSE


def checkpoint_dir() -> Path | None:
    """``ARI_CHECKPOINT_DIR``: the checkpoint whose ledger the backend opens by default."""
    value = _env("ARI_CHECKPOINT_DIR")
    return Path(value) if value else None


def current_node() -> str | None:
    """``ARI_CURRENT_NODE_ID``: the node allowed to write (copy-on-write guard)."""
    return _env("ARI_CURRENT_NODE_ID")


def set_current_node(node_id: str | None) -> None:
    """Set the process's current node (MCP ``_set_current_node``: a pooled server outlives a node)."""
    if node_id:
        os.environ["ARI_CURRENT_NODE_ID"] = node_id
    else:
        os.environ.pop("ARI_CURRENT_NODE_ID", None)


def letta_base_url() -> str | None:
    """``LETTA_BASE_URL``: when set, the Letta projection serves reads; else the embedded engine."""
    return _env("LETTA_BASE_URL")


def letta_api_key() -> str | None:
    return _env("LETTA_API_KEY")


def letta_embedding_config() -> str | None:
    """``LETTA_EMBEDDING_CONFIG``: a JSON object of Letta's ``embedding_config`` for new agents."""
    return _env("LETTA_EMBEDDING_CONFIG")


def embed_url() -> str:
    """``ARI_MEMORY_EMBED_URL``: the offline embeddings endpoint Letta agents are created with."""
    return _env("ARI_MEMORY_EMBED_URL") or "http://127.0.0.1:8284/v1"


def letta_overfetch() -> int:
    """``ARI_MEMORY_LETTA_OVERFETCH``: the smallest ``top_k`` asked of Letta (ARI's default 200)."""
    value = _env("ARI_MEMORY_LETTA_OVERFETCH")
    return int(value) if value and value.isdigit() and int(value) > 0 else 200


def auto_restore() -> bool:
    """``ARI_MEMORY_AUTO_RESTORE`` (default on): replay the log into an empty Letta agent."""
    return _flag("ARI_MEMORY_AUTO_RESTORE", True)


def consolidation_enabled() -> bool:
    """``ARI_MEMORY_CONSOLIDATE`` (default on; 0/false/no/off disables)."""
    return _flag("ARI_MEMORY_CONSOLIDATE", True)


def access_log_enabled() -> bool:
    """``ARI_MEMORY_ACCESS_LOG`` (default on): write ``memory_access.jsonl`` beside the log."""
    return _flag("ARI_MEMORY_ACCESS_LOG", True)
