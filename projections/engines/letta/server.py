"""The Letta server as this library talks to it: the client, agent names, embedding configs.

One agent per checkpoint, ``ari_agent_<hash>`` with ``hash = sha1(str(resolved checkpoint
path))[:12]`` as ARI names it, so a copied checkpoint gets its own agent. What new agents embed
with comes from ``LETTA_EMBEDDING_CONFIG`` (ARI's default handles mean the project's offline
endpoint, the same model as the embedded index).
"""

from __future__ import annotations

import importlib.abc
import json
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from projections import settings
from projections.errors import ProjectionError

META_KEY = "ari_ledger"


PAGE = 100  # items of one list request; a checkpoint has one agent and one archive


def every(list_call: Callable[..., Any], **params: Any) -> list[Any]:
    """Every item of a Letta list call in one request when it fits a page: letta-client's pages
    otherwise always ask for a second, empty one (a round trip of each fold)."""
    page = list_call(limit=PAGE, **params)
    return list(page.items) if len(page.items) < PAGE else list(page)


def delete_agent(client, name: str) -> None:
    """Delete every agent of a name with its archive and blocks (``agents.delete`` alone orphans both)."""
    for agent in every(client.agents.list, name=name):
        delete_agent_by_id(client, agent.id)


def delete_agent_by_id(client, agent_id: str) -> None:
    """Delete one agent with its archive and blocks."""
    blocks = [b.id for b in client.agents.blocks.list(agent_id=agent_id)]
    for archive in every(client.archives.list, agent_id=agent_id):
        client.archives.delete(archive.id)
    client.agents.delete(agent_id)
    for block_id in blocks:
        client.blocks.delete(block_id)


def by_age(agents: Iterable[Any]) -> list[Any]:
    """Agents oldest first (created_at, then id): the first is the checkpoint's agent, the
    others duplicates older versions made when two processes created it at once."""
    far = datetime.max.replace(tzinfo=UTC)

    def key(agent: Any) -> tuple[datetime, str]:
        at = getattr(agent, "created_at", None)
        if isinstance(at, datetime) and at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        return (at if isinstance(at, datetime) else far, str(agent.id))

    return sorted(agents, key=key)


def agent_name(checkpoint_dir: Path) -> str:
    """``ari_agent_<hash>``: the checkpoint's agent, as ARI names it."""
    return f"ari_agent_{settings.checkpoint_hash(checkpoint_dir)}"


def agent_cursor(checkpoint_dir: Path, client=None) -> dict[str, Any]:
    """Where the checkpoint's agent stands, for ``status``: its name, cursor, or why unknown."""
    name = agent_name(checkpoint_dir)
    try:
        client = client or make_client()
        found = by_age(every(client.agents.list, name=name))
    except Exception as exc:
        return {"agent": name, "cursor": None, "error": f"{type(exc).__name__}: {exc}"[:200], "duplicates": []}
    if not found:
        return {
            "agent": name,
            "cursor": 0,
            "error": "agent missing (the next read or `ari-ledger restore` replays)",
            "duplicates": [],
        }
    meta = (found[0].metadata or {}).get(META_KEY) or {}
    return {
        "agent": name,
        "agent_id": found[0].id,
        "cursor": int(meta.get("cursor", 0)),
        "pushing": bool(meta.get("pushing", False)),
        "error": None,
        "duplicates": [a.id for a in found[1:]],
    }


def default_embedding_config(model: str, dim: int) -> dict[str, Any]:
    """The project's own offline endpoint (``ari-ledger letta up`` starts it)."""
    return {
        "embedding_endpoint_type": "openai",
        "embedding_endpoint": settings.embed_url(),
        "embedding_model": model,
        "embedding_dim": dim,
    }


# ARI's default handles name Letta's hosted embeddings (unreachable without internet); they
# mean "no particular choice", so the project's offline endpoint — the same model as the
# embedded index — is used instead.
DEFAULT_HANDLES = frozenset({"letta-default", "letta/letta-free"})


def configured_embedding(model: str, dim: int) -> dict[str, Any]:
    """What new agents embed with, from ``LETTA_EMBEDDING_CONFIG``.

    Unset or one of ARI's default handles (``letta-default``, which ari-core sets in every
    run): the project's offline endpoint. A JSON object: Letta's ``embedding_config`` as
    given. Any other string: a Letta embedding handle (``provider/model``), passed to Letta.
    """
    raw = settings.letta_embedding_config()
    if raw is None or raw.strip().lower() in DEFAULT_HANDLES:
        return default_embedding_config(model, dim)
    raw = raw.strip()
    if not raw.startswith("{"):
        return {"handle": raw, "embedding_model": raw.split("/")[-1]}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise ProjectionError(
            "LETTA_EMBEDDING_CONFIG is neither a handle nor a JSON object of Letta's embedding_config"
        ) from None
    if not isinstance(value, dict) or "embedding_model" not in value:
        raise ProjectionError("LETTA_EMBEDDING_CONFIG must be a JSON object with at least embedding_model")
    return value


def same_embedding(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same model, and the same dimension when both say one."""
    if a.get("embedding_model") != b.get("embedding_model"):
        return False
    return (
        a.get("embedding_dim") is None
        or b.get("embedding_dim") is None
        or a.get("embedding_dim") == b.get("embedding_dim")
    )


def embedding_args(embedding: dict[str, Any]) -> dict[str, Any]:
    """``agents.create`` arguments: a handle by name, else the inline configuration."""
    if "handle" in embedding and "embedding_endpoint_type" not in embedding:
        return {"embedding": embedding["handle"]}
    return {"embedding_config": embedding}


def make_client(timeout: float | None = None):
    """A letta-client for ``LETTA_BASE_URL`` (``ARI_MEMORY_LETTA_TIMEOUT_S`` per request, no retries:
    a failure falls back to the embedded engine at once)."""
    return _letta_class()(
        base_url=settings.letta_base_url(),
        api_key=settings.letta_api_key(),
        timeout=timeout or settings.letta_timeout_s(),
        max_retries=0,
    )


class _NoHttpxCommandLine(importlib.abc.MetaPathFinder):
    """Refuses ``httpx._main``: httpx's command line, which ``import httpx`` loads with click,
    rich and pygments whenever they are installed (~5 MB of a client's memory), and which no
    request uses."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "httpx._main":
            raise ModuleNotFoundError("httpx's command line is not loaded for a Letta client", name=name)
        return None


def _letta_class() -> type:
    """letta-client's ``Letta``. When this process has not loaded httpx yet, it is loaded without
    its command line: the finder stands only for this import, so a later ``import httpx._main``
    still works (``httpx.main`` then says the command line is not installed: run ``httpx`` as a
    command instead). A process that loaded httpx already is not touched."""
    finder = None if "httpx" in sys.modules else _NoHttpxCommandLine()
    if finder is not None:
        sys.meta_path.insert(0, finder)
    try:
        from letta_client import Letta
    finally:
        if finder is not None:
            sys.meta_path.remove(finder)
    return Letta
