"""The Letta projection (R11–R13): the log folded into one Letta agent per checkpoint.

Each node-scope or ReAct event becomes one archival passage of agent ``ari_agent_<hash>``
(``hash = sha1(str(resolved checkpoint path))[:12]``, as ARI, so a copied checkpoint gets
its own agent and replays into it), tagged with its collection (``ari_node_<hash>`` /
``ari_react_<hash>``), node, kind and event id. The core seed updates the blocks
``persona``, ``human`` and ``ari_context``. No tools, no self-edit, no messages.

The cursor (last folded seq) lives in the agent's metadata, so an emptied or new server
replays from zero. Replay is idempotent: before pushing, the event ids already present are
read back from the passages' tags. Letta filters tags *after* its top-k cut, so a search
widens ``top_k`` until ``limit`` in-scope results are found or the whole agent was ranked:
never fewer in-scope results than exist. Letta returns no score; the score reported is
the same embedder's cosine, as on the embedded engine.
"""
from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ledger import config
from ledger.errors import EmbeddingMismatch, ProjectionError
from ledger.events import Event
from ledger.typed import typed_kind

from projections.models.catalog import Catalog
from projections.engines.local import Projector

log = logging.getLogger("projections.engines.letta")

BATCH = 200
LIST_PAGE = 1000
RETRY_AFTER_S = 2.0  # after a failure, reads use the embedded engine this long before retrying
META_KEY = "ari_ledger"


def checkpoint_hash(checkpoint_dir: Path) -> str:
    return hashlib.sha1(str(Path(checkpoint_dir).resolve()).encode()).hexdigest()[:12]


def delete_agent(client, name: str) -> None:
    """Delete an agent with its archive and blocks (``agents.delete`` alone orphans both)."""
    for agent in list(client.agents.list(name=name)):
        blocks = [b.id for b in client.agents.blocks.list(agent_id=agent.id)]
        for archive in list(client.archives.list(agent_id=agent.id)):
            client.archives.delete(archive.id)
        client.agents.delete(agent.id)
        for block_id in blocks:
            client.blocks.delete(block_id)


def agent_cursor(checkpoint_dir: Path, client=None) -> dict[str, Any]:
    """Where the checkpoint's agent stands, for ``status``: its name, cursor, or why unknown."""
    name = f"ari_agent_{checkpoint_hash(checkpoint_dir)}"
    try:
        client = client or make_client()
        found = list(client.agents.list(name=name))
    except Exception as exc:  # noqa: BLE001 - status reports an unreachable server, it does not fail
        return {"agent": name, "cursor": None, "error": f"{type(exc).__name__}: {exc}"[:200]}
    if not found:
        return {"agent": name, "cursor": 0, "error": "agent missing (the next read or `ari-ledger restore` replays)"}
    return {"agent": name, "cursor": int(((found[0].metadata or {}).get(META_KEY) or {}).get("cursor", 0)), "error": None}


def default_embedding_config(model: str, dim: int) -> dict[str, Any]:
    """The project's own offline endpoint (``ari-ledger letta up`` starts it)."""
    return {
        "embedding_endpoint_type": "openai",
        "embedding_endpoint": config.embed_url(),
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
    raw = config.letta_embedding_config()
    if raw is None or raw.strip().lower() in DEFAULT_HANDLES:
        return default_embedding_config(model, dim)
    raw = raw.strip()
    if not raw.startswith("{"):
        return {"handle": raw, "embedding_model": raw.split("/")[-1]}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise ProjectionError("LETTA_EMBEDDING_CONFIG is neither a handle nor a JSON object of Letta's embedding_config") from None
    if not isinstance(value, dict) or "embedding_model" not in value:
        raise ProjectionError("LETTA_EMBEDDING_CONFIG must be a JSON object with at least embedding_model")
    return value


def _same_embedding(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same model, and the same dimension when both say one."""
    if a.get("embedding_model") != b.get("embedding_model"):
        return False
    return a.get("embedding_dim") is None or b.get("embedding_dim") is None or a.get("embedding_dim") == b.get("embedding_dim")


def _embedding_args(embedding: dict[str, Any]) -> dict[str, Any]:
    """``agents.create`` arguments: a handle by name, else the inline configuration."""
    if "handle" in embedding and "embedding_endpoint_type" not in embedding:
        return {"embedding": embedding["handle"]}
    return {"embedding_config": embedding}


def make_client(timeout: float | None = None):
    """A letta-client for ``LETTA_BASE_URL`` (``ARI_MEMORY_LETTA_TIMEOUT_S`` per request, no retries:
    a failure falls back to the embedded engine at once)."""
    from letta_client import Letta

    return Letta(base_url=config.letta_base_url(), api_key=config.letta_api_key(),
                 timeout=timeout or config.letta_timeout_s(), max_retries=0)


class LettaProjection:
    """Folds one ledger into one Letta agent; searches it with exact scope.

    The Letta :class:`~projections.engines.protocol.Projection`.
    """

    name = "letta"

    def __init__(self, projector: Projector, client, *, auto_restore: bool = True) -> None:
        self.projector = projector
        self.client = client
        self.auto_restore = auto_restore
        digest = checkpoint_hash(projector.ledger.checkpoint_dir)
        self.agent_name = f"ari_agent_{digest}"
        self.node_tag, self.react_tag = f"ari_node_{digest}", f"ari_react_{digest}"
        self.embedding = configured_embedding(projector.embedder.name, projector.embedder.dim)
        self.agent_id: str | None = None
        self.archive_id: str | None = None
        self.cursor = 0
        self.last_search: dict[str, Any] = {}
        self._checked_tail = False  # the first catch-up of a process re-reads which events are present

    # -- the agent ---------------------------------------------------------------------

    def attach(self, *, create: bool) -> bool:
        """Find (or create) the agent and read its cursor; False when it is missing."""
        found = list(self.client.agents.list(name=self.agent_name))
        if not found:
            if not create:
                return False
            agent = self.client.agents.create(
                name=self.agent_name,
                model="letta/letta-free",
                **_embedding_args(self.embedding),
                memory_blocks=[{"label": label, "value": ""} for label in ("persona", "human", "ari_context")],
                include_base_tools=False,
                tags=["ari-memory-ledger"],
                metadata={META_KEY: {"cursor": 0, "ckpt": self.projector.ledger.ckpt, "embedding": self.embedding}},
            )
        else:
            agent = found[0]
            ec = agent.embedding_config
            recorded = {"embedding_model": getattr(ec, "embedding_model", None), "embedding_dim": getattr(ec, "embedding_dim", None)}
            if not _same_embedding(recorded, self.embedding):
                raise EmbeddingMismatch(
                    f"Letta agent {self.agent_name} embeds with {recorded.get('embedding_model')} "
                    f"({recorded.get('embedding_dim')}-dim), but this checkpoint is configured for "
                    f"{self.embedding.get('embedding_model')} ({self.embedding.get('embedding_dim')}-dim); "
                    "refusing to mix them (delete the agent to restore into the new configuration)"
                )
        self.agent_id = agent.id
        meta = (agent.metadata or {}).get(META_KEY, {})
        self.cursor = int(meta.get("cursor", 0))
        archives = list(self.client.archives.list(agent_id=agent.id))
        self.archive_id = archives[0].id if archives else None
        if self.archive_id is None:
            self.cursor = 0  # an agent without passages has folded nothing, whatever it says
        return True

    def detach(self) -> None:
        """Forget the agent; the next catch-up looks it up again (and replays into a new one)."""
        self.agent_id = self.archive_id = None
        self._checked_tail = False

    def _save_cursor(self) -> None:
        meta = {"cursor": self.cursor, "ckpt": self.projector.ledger.ckpt, "embedding": self.embedding}
        self.client.agents.update(self.agent_id, metadata={META_KEY: meta})

    def _present_event_ids(self) -> set[str]:
        """Event ids already pushed (from passage tags): what makes a re-run replay idempotent."""
        present: set[str] = set()
        after = None
        while True:
            kwargs = {"limit": LIST_PAGE} | ({"after": after} if after else {})
            page = self.client.agents.passages.list(self.agent_id, **kwargs)
            if not page:
                break
            for passage in page:
                present.update(t[2:] for t in passage.tags or () if t.startswith("e:"))
            after = page[-1].id
        return present

    # -- folding -----------------------------------------------------------------------

    def lag(self) -> int:
        return max(0, self.projector.ledger.last_seq - self.cursor)

    def health(self) -> dict[str, Any]:
        return {"name": self.name, "agent": self.agent_name, "cursor": self.cursor, "lag": self.lag()}

    def restore(self, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Replay the log into the agent (creating it when missing), whatever
        ``ARI_MEMORY_AUTO_RESTORE`` says; Letta's failures become one ProjectionError."""
        from letta_client import APIError

        started = time.perf_counter()
        try:
            self.attach(create=True)
            folded = self.catch_up(progress=progress)
        except APIError as exc:
            raise ProjectionError(f"Letta at {config.letta_base_url()} failed: {exc}") from None
        seconds = time.perf_counter() - started
        return {
            "name": self.name,
            "agent": self.agent_name,
            "events": folded,
            "cursor": self.cursor,
            "passages": self.passages,
            "seconds": round(seconds, 2),
            "events_per_s": round(folded / seconds, 1) if folded else 0.0,
        }

    def catch_up(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Push every event after the cursor; return how many events were folded."""
        if self.agent_id is None and not self.attach(create=self.auto_restore):
            return 0
        target = self.projector.ledger.refresh()
        if target <= self.cursor:
            return 0
        present = set() if self._checked_tail else self._present_event_ids()
        self._checked_tail = True
        try:
            return self._fold(target, present, progress)
        except BaseException:
            self._checked_tail = False  # a push may have landed without its cursor: re-check next time
            raise

    def _fold(self, target: int, present: set[str], progress: Callable[[int, int], None] | None) -> int:
        start = self.cursor
        # An agent with no passages needs nothing a purge hid: start at the last purge.
        skip_to = self._last_purge(target) if self.archive_id is None else 0
        pending: list[dict[str, Any]] = []
        last_seq = self.cursor
        for event in self.projector.ledger.events(after=self.cursor, as_of=target):
            last_seq = event.seq
            if event.seq <= skip_to:
                continue
            passage = self._passage(event)
            if event.type == "core_seeded":
                self._push(pending)
                pending = []
                self._seed_blocks(event)
            elif event.type == "checkpoint_purged":
                pending = []  # hidden by this purge: never pushed
                self._renew_agent()
                present = set()
            elif passage is not None and event.id not in present:
                pending.append(passage)
            if len(pending) >= BATCH:
                self._push(pending)
                pending = []
                self._advance(last_seq, start, target, progress)
        self._push(pending)
        self._advance(last_seq, start, target, progress)
        return target - start

    def _last_purge(self, target: int) -> int:
        return max((seq for seq in self.projector.catalog.purges if seq <= target), default=0)

    def _renew_agent(self) -> None:
        """ARI deletes the agent on purge: the passages and blocks a purge hid leave the server."""
        delete_agent(self.client, self.agent_name)
        self.detach()
        self.attach(create=True)
        self._checked_tail = True

    def _advance(self, seq: int, start: int, target: int, progress: Callable[[int, int], None] | None) -> None:
        self.cursor = seq
        self._save_cursor()
        if progress:
            progress(seq - start, target - start)

    def _passage(self, event: Event) -> dict[str, Any] | None:
        if event.type == "memory_added":
            kind = typed_kind(event.body.get("metadata", {})) or "note"
            return {"text": event.body["text"] or " ", "tags": [self.node_tag, f"n:{event.node}", f"k:{kind}", f"e:{event.id}"]}
        if event.type == "react_step":
            return {"text": event.body["content"] or " ", "tags": [self.react_tag, f"n:{event.node}", "k:react", f"e:{event.id}"]}
        return None

    def _push(self, passages: list[dict[str, Any]]) -> None:
        if not passages:
            return
        if self.archive_id is None:  # Letta makes the archive with the agent's first passage
            first = passages[0]
            self.client.agents.passages.create(self.agent_id, text=first["text"], tags=first["tags"])
            self.archive_id = list(self.client.archives.list(agent_id=self.agent_id))[0].id
            passages = passages[1:]
        if passages:
            self.client.archives.passages.create_many(self.archive_id, passages=passages)

    def _seed_blocks(self, event: Event) -> None:
        body = event.body
        values = {
            "persona": body.get("persona", ""),
            "human": body.get("human", ""),
            "ari_context": json.dumps(body.get("context", {}), ensure_ascii=False, sort_keys=True),
        }
        for label, value in values.items():
            self.client.agents.blocks.update(label, agent_id=self.agent_id, value=value)

    # -- search ------------------------------------------------------------------------

    @property
    def passages(self) -> int:
        """Passages in the agent once caught up: the ledger knows (entries + ReAct steps)."""
        catalog = self.projector.catalog
        return len(catalog.entries) + len(catalog.steps)

    def search(self, query: str, collection_tags: list[str], wanted: Callable[[str], bool], limit: int) -> list[str]:
        """Event ids of the best ``limit`` passages passing ``wanted``, in Letta's rank order.

        ``top_k`` starts at ARI's over-fetch and widens until enough pass or every passage of
        the agent was ranked, so the scope is exact at any pool size.
        """
        top_k = max(config.letta_overfetch(), limit * 40)
        rounds = 0
        while True:
            k = min(top_k, max(self.passages, 1))
            rounds += 1
            found = self.client.agents.passages.search(
                self.agent_id, query=query, top_k=k, tags=collection_tags, tag_match_mode="any"
            )
            hits = []
            for result in found.results:
                eid = next((t[2:] for t in result.tags or () if t.startswith("e:")), None)
                if eid is not None and wanted(eid):
                    hits.append(eid)
            if len(hits) >= limit or k >= self.passages:
                self.last_search = {"rounds": rounds, "top_k": k, "passages": self.passages}
                return hits[:limit]
            top_k = k * 4


class LettaEngine:
    """Search on Letta; the embedded engine answers (and says so) while Letta is unreachable."""

    def __init__(self, projector: Projector, fallback, client=None) -> None:
        self.projector = projector
        self.fallback = fallback
        client = client or make_client()
        self.letta = LettaProjection(projector, client, auto_restore=config.auto_restore())
        self.error: str | None = None
        self._failed_at = 0.0

    @property
    def name(self) -> str:
        return "letta" if self.error is None else "embedded (letta unavailable)"

    def ready(self) -> bool:
        """Bring Letta up to date; False (and remember why) when it cannot be reached."""
        if self.error is not None and time.monotonic() - self._failed_at < RETRY_AFTER_S:
            return False
        try:
            self.letta.catch_up()
            if self.letta.agent_id is None:
                raise ProjectionError(f"agent {self.letta.agent_name} is missing and ARI_MEMORY_AUTO_RESTORE is off; run `ari-ledger restore`")
        except EmbeddingMismatch:
            raise
        except Exception as exc:  # noqa: BLE001 - any transport/server failure means "use the fallback"
            self._failed(exc)
            return False
        self.error = None
        return True

    def _failed(self, exc: Exception) -> None:
        self.error, self._failed_at = f"{type(exc).__name__}: {exc}"[:300], time.monotonic()
        self.letta.detach()  # the agent may be gone (emptied server): find or restore it next time
        log.warning("Letta unavailable, reads use the embedded engine: %s", self.error)

    def _answer(self, on_letta: Callable[[], list[tuple[str, float]]], fallback: Callable[[], list[tuple[str, float]]]):
        """Letta's answer when it can give one, else the embedded engine's (and remember why)."""
        if not self.ready():
            return fallback()
        try:
            return on_letta()
        except EmbeddingMismatch:
            raise
        except Exception as exc:  # noqa: BLE001 - as in ready(): fall back, never fail a read
            self._failed(exc)
            return fallback()

    def _visible(self, node_ids: Iterable[str] | None, as_of: int | None) -> Callable[[str], bool]:
        catalog: Catalog = self.projector.catalog
        scope = None if node_ids is None else set(node_ids)

        def wanted(eid: str) -> bool:
            entry = catalog.entries.get(eid)
            return entry is not None and entry.visible(as_of) and (scope is None or entry.node_id in scope)

        return wanted

    def _scored(self, query: str, ids: list[str], text_of: Callable[[str], str]) -> list[tuple[str, float]]:
        if not ids:
            return []
        vectors = self.projector.embedder.embed([query] + [text_of(i) for i in ids])
        scores = np.clip((vectors[1:] @ vectors[0] + 1.0) / 2.0, 0.0, 1.0)
        return list(zip(ids, map(float, scores)))

    def search(self, query: str, node_ids: list[str], limit: int, as_of: int | None) -> list[tuple[str, float]]:
        def on_letta() -> list[tuple[str, float]]:
            tags = [f"n:{n}" for n in dict.fromkeys(node_ids)]
            ids = self.letta.search(query, tags, self._visible(node_ids, as_of), limit)
            return self._scored(query, ids, lambda eid: self.projector.catalog.entries[eid].text)

        return self._answer(on_letta, lambda: self.fallback.search(query, node_ids, limit, as_of))

    def react_search(self, query: str, limit: int, as_of: int | None) -> list[tuple[str, float]]:
        def on_letta() -> list[tuple[str, float]]:
            steps = {s.step_id: s for s in self.projector.catalog.steps_as_of(as_of)}
            ids = self.letta.search(query, [self.letta.react_tag], steps.__contains__, limit)
            return self._scored(query, ids, lambda sid: steps[sid].content)

        return self._answer(on_letta, lambda: self.fallback.react_search(query, limit, as_of))

    def lag(self) -> int:
        return self.letta.lag()

    def health(self) -> dict[str, Any]:
        ok = self.ready()
        return {"letta": {"ok": ok, "agent": self.letta.agent_name, "lag": self.letta.lag(), "error": self.error}}
