"""The read side's settings: every environment variable the projections, the API and the
adapters read, read here at call time.

The names and defaults are ARI's (``ari_skill_memory.config``), so a checkpoint and its hooks
configure this library exactly as they configure ARI's own memory skill. Where ARI accepts a
value this library also accepts it; where this library reads a variable ARI does not know, the
docstring says so. The write side reads only the current node (:mod:`ledger.config`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ledger.config import env, flag, number
from ledger.errors import ConfigurationError

BACKENDS = ("letta", "in_memory")  # ARI_MEMORY_BACKEND values ARI accepts


def checkpoint_dir() -> Path | None:
    """``ARI_CHECKPOINT_DIR``: the checkpoint whose ledger the backend opens by default."""
    value = env("ARI_CHECKPOINT_DIR")
    return Path(value).expanduser() if value else None


def checkpoint_hash(checkpoint_dir: Path) -> str:
    """ARI's namespace of a checkpoint: ``sha1(str(resolved path))[:12]`` (its Letta agent is
    ``ari_agent_<hash>``), so a copied checkpoint never shares an agent with the original."""
    return hashlib.sha1(os.fsencode(Path(checkpoint_dir).resolve())).hexdigest()[
        :12
    ]  # a path that is not UTF-8: its bytes


def memory_backend() -> str:
    """``ARI_MEMORY_BACKEND`` (ARI's default ``letta``; ``in_memory`` is ARI's test setting).

    Both run on the ledger: ``in_memory`` never talks to a server, ``letta`` keeps a Letta
    projection when ``LETTA_BASE_URL`` is set. Any other value is refused, as ARI does.
    """
    value = (env("ARI_MEMORY_BACKEND") or "letta").strip().lower()
    if value not in BACKENDS:
        raise ConfigurationError(
            f"ARI_MEMORY_BACKEND={value!r} is not supported; expected one of {', '.join(BACKENDS)}"
        )
    return value


def letta_base_url() -> str | None:
    """``LETTA_BASE_URL``: when set (and ``ARI_MEMORY_BACKEND`` is not ``in_memory``), the log is
    also folded into a Letta server. Unlike ARI there is no default URL: unset means no server."""
    if memory_backend() == "in_memory":
        return None
    return env("LETTA_BASE_URL")


def search_engine() -> str:
    """``ARI_MEMORY_SEARCH_ENGINE`` (this library's): ``embedded`` (the default) answers searches
    from the local index even when Letta is configured — the same entries, the same embedder,
    a thousand times faster; ``letta`` reads from the Letta server (``LETTA_BASE_URL``)."""
    value = (env("ARI_MEMORY_SEARCH_ENGINE") or "embedded").strip().lower()
    if value not in ("embedded", "letta"):
        raise ConfigurationError(f"ARI_MEMORY_SEARCH_ENGINE={value!r} is not supported; expected embedded or letta")
    if value == "letta" and letta_base_url() is None:
        raise ConfigurationError(
            "ARI_MEMORY_SEARCH_ENGINE=letta needs LETTA_BASE_URL (and ARI_MEMORY_BACKEND not in_memory)"
        )
    return value


def letta_api_key() -> str | None:
    return env("LETTA_API_KEY")


def letta_embedding_config() -> str | None:
    """``LETTA_EMBEDDING_CONFIG``: a handle string (ARI's default ``letta-default``) or a JSON
    object of Letta's ``embedding_config``; interpreted by the Letta projection."""
    return env("LETTA_EMBEDDING_CONFIG")


def letta_timeout_s() -> float:
    """``ARI_MEMORY_LETTA_TIMEOUT_S`` (ARI's default 10 s): the timeout of one Letta request."""
    value = number("ARI_MEMORY_LETTA_TIMEOUT_S", 10.0, float)
    return value if value > 0 else 10.0


def letta_push_timeout_s() -> float:
    """``ARI_MEMORY_LETTA_PUSH_TIMEOUT_S`` (this library's, 60 s, never below the read timeout):
    the timeout of one request that pushes into the agent. A batch of passages is embedded by
    the server before it answers; on a busy two-core machine that outlasts ARI's 10 s."""
    value = number("ARI_MEMORY_LETTA_PUSH_TIMEOUT_S", 60.0, float)
    return max(value if value > 0 else 60.0, letta_timeout_s())


def embed_url() -> str:
    """``ARI_MEMORY_EMBED_URL`` (this library's): the offline embeddings endpoint Letta agents
    are created with."""
    return env("ARI_MEMORY_EMBED_URL") or "http://127.0.0.1:8284/v1"


def letta_overfetch() -> int:
    """``ARI_MEMORY_LETTA_OVERFETCH``: the smallest ``top_k`` asked of Letta (ARI's default 200)."""
    value = int(number("ARI_MEMORY_LETTA_OVERFETCH", 200))
    return value if value > 0 else 200


def auto_restore() -> bool:
    """``ARI_MEMORY_AUTO_RESTORE`` (default on; ARI turns it off with ``false``, this library
    also with 0/no/off): restore memory into an empty store on resume — for this library,
    replay the log into an empty or missing Letta agent."""
    return flag("ARI_MEMORY_AUTO_RESTORE", True)


def consolidation_enabled() -> bool:
    """``ARI_MEMORY_CONSOLIDATE`` (default on; 0/false/no/off disables)."""
    return flag("ARI_MEMORY_CONSOLIDATE", True)


def mcp_all_tools() -> bool:
    """``ARI_MEMORY_MCP_ALL_TOOLS`` (this library's, default off; read when the MCP server starts):
    serve every tool, also ari-core's in-process ``seed_core_memory`` and ``react_add`` (and, on
    a server spawned for one node, the checkpoint-wide reads). Off, the server serves ARI's
    tools and read-only ones, as ARI's memory skill does."""
    return flag("ARI_MEMORY_MCP_ALL_TOOLS", False)


def react_max_entry_chars() -> int:
    """``ARI_REACT_MEMORY_MAX_ENTRY_CHARS`` (ARI's default 0 = no cap): longer ReAct steps are
    cut and marked ``…[truncated]``, as ARI does."""
    return max(0, int(number("ARI_REACT_MEMORY_MAX_ENTRY_CHARS", 0)))


def access_log_enabled() -> bool:
    """``ARI_MEMORY_ACCESS_LOG`` (default on; ARI turns it off with ``off``, this library also
    with 0/false/no): write ``memory_access.jsonl`` beside the log."""
    return flag("ARI_MEMORY_ACCESS_LOG", True)


def access_log_preview_chars() -> int:
    """``ARI_MEMORY_ACCESS_PREVIEW_CHARS`` (ARI's default 200): text kept in a write line."""
    return max(0, int(number("ARI_MEMORY_ACCESS_PREVIEW_CHARS", 200)))


def access_log_max_bytes() -> int:
    """``ARI_MEMORY_ACCESS_LOG_MAX_MB`` (ARI's default 100): the size at which the access log
    is rotated to ``memory_access.<unix time>.jsonl``."""
    mb = number("ARI_MEMORY_ACCESS_LOG_MAX_MB", 100, float)
    return int(mb * 1024 * 1024) if mb > 0 else 100 * 1024 * 1024
