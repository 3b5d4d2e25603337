"""The Letta projection (R11–R13): the log folded into one Letta agent per checkpoint.

Each node-scope or ReAct event becomes one archival passage, tagged with its collection
(``ari_node_<hash>`` / ``ari_react_<hash>``), node, kind and event id. The core seed updates
the blocks ``persona``, ``human`` and ``ari_context``. No tools, no self-edit, no messages. A
purge deletes the agent, as ARI's purge does; a new, empty one takes the events after it.

The cursor (last folded seq) lives in the agent's metadata, so an emptied or new server
replays from zero. Many processes share one agent: only the holder of the checkpoint's push
lock (``lock``) creates, purges or pushes into it, and it re-reads the cursor from the
metadata each time it takes the lock, since another process may have advanced it. Before a
batch is pushed the metadata says so (``pushing``); a pusher that finds it set (its
predecessor died or failed mid-push) reads back which event ids are present from the
passages' tags instead of trusting the cursor, so replay stays idempotent without listing
every passage in steady state. Duplicate agents of one name (left by older versions) are
never pushed into: the oldest is the agent, ``duplicates`` names the others. Folding and
searching may run on different threads (the background sync, a read): one lock keeps the
agent's state consistent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Literal, assert_never

import msgspec

from ledger.events import CoreSeeded, Event, MemoryAdded, PerEventType, ReactStep, handlers, is_stub_body
from ledger.typed import typed_kind
from projections import settings
from projections.engines.letta.lock import PushLock
from projections.engines.letta.plan import Call, iso_us, letta_time
from projections.engines.letta.server import (
    META_KEY,
    by_age,
    configured_embedding,
    delete_agent,
    delete_agent_by_id,
    embedding_args,
    every,
    same_embedding,
)
from projections.engines.local import Projector
from projections.errors import EmbeddingMismatch, ProjectionError
from projections.models.catalog import Seed, event_time

BATCH = 200
CLOSE_TIMEOUT_S = 2.0  # the timeout of each Letta request of a closing process's last fold
RESTORE_WAIT_S = 120.0  # how long an explicit restore waits for another process's push
EVERY_PASSAGE = 2**31 - 1  # a top_k no agent reaches: Letta ranks all its passages
LIST_PAGE = 1000


class _Listed(msgspec.Struct):
    """What a listed passage is read for: its id and tags. Letta sends each with its embedding
    padded to 4,096 floats (~20 kB of JSON, ~130 MB a page as letta-client's models); decoding
    only these fields skips them."""

    id: str
    tags: list[str] | None = None


class LettaProjection:
    """Folds one ledger into one Letta agent; searches it with exact scope.

    The Letta :class:`~projections.engines.protocol.Projection`.
    """

    name = "letta"

    def __init__(self, projector: Projector, client, *, auto_restore: bool = True) -> None:
        self.projector = projector
        self.client = client  # searches: ARI's read timeout
        self.pusher = client.with_options(timeout=settings.letta_push_timeout_s())  # the agent's upkeep
        self.auto_restore = auto_restore
        digest = settings.checkpoint_hash(projector.ledger.checkpoint_dir)
        self.agent_name = f"ari_agent_{digest}"
        self.node_tag, self.react_tag = f"ari_node_{digest}", f"ari_react_{digest}"
        self.embedding = configured_embedding(projector.embedder.name, projector.embedder.dim)
        self.agent_id: str | None = None
        self.archive_id: str | None = None
        self.cursor = 0
        self.dated = False  # passages carry their events' times (agents made before that do not)
        self.last_search: dict[str, Any] = {}
        self.interrupted = False  # the metadata says a push was cut: check what is present first
        self.duplicates: list[str] = []  # other agents of the same name (older versions made them)
        self.lock = PushLock(projector.ledger.checkpoint_dir)
        self.guard = threading.RLock()  # the sync thread folds while a read may search or detach

    # -- the agent ---------------------------------------------------------------------

    def attach(self, *, create: bool) -> bool:
        """Find (or create) the agent and read its cursor and push marker from its metadata;
        False when it is missing. Only the push lock's holder may ``create``."""
        if create and not self.lock.held:
            raise RuntimeError("creating the Letta agent needs the push lock")
        found = by_age(every(self.pusher.agents.list, name=self.agent_name))
        if not found and not create:
            self.agent_id = self.archive_id = None
            return False
        agent = found[0] if found else self._create_agent()
        self.duplicates = [a.id for a in found[1:]]
        if found:
            self._check_embedding(agent)
        if agent.id != self.agent_id:
            self.agent_id, self.archive_id = agent.id, None
        meta = (agent.metadata or {}).get(META_KEY, {})
        self.cursor = int(meta.get("cursor", 0))
        self.dated = bool(meta.get("dated"))
        self.interrupted = bool(meta.get("pushing", True))  # agents of older versions never said
        if self.archive_id is None:  # Letta makes it with the first passage: perhaps another process did
            archives = every(self.pusher.archives.list, agent_id=agent.id)
            self.archive_id = archives[0].id if archives else None
        if self.archive_id is None:
            self.cursor = 0  # an agent without passages has folded nothing, whatever it says
            self.dated = True  # and its passages will carry their events' times
            self.interrupted = False
        return True

    def _create_agent(self):
        return self.pusher.agents.create(
            name=self.agent_name,
            model="letta/letta-free",
            **embedding_args(self.embedding),
            memory_blocks=[{"label": label, "value": ""} for label in ("persona", "human", "ari_context")],
            include_base_tools=False,
            tags=["ari-memory-ledger"],
            metadata={META_KEY: self._meta(cursor=0, dated=True, pushing=False)},
        )

    def _check_embedding(self, agent) -> None:
        ec = agent.embedding_config
        recorded = {
            "embedding_model": getattr(ec, "embedding_model", None),
            "embedding_dim": getattr(ec, "embedding_dim", None),
        }
        if not same_embedding(recorded, self.embedding):
            raise EmbeddingMismatch(
                f"Letta agent {self.agent_name} embeds with {recorded.get('embedding_model')} "
                f"({recorded.get('embedding_dim')}-dim), but this checkpoint is configured for "
                f"{self.embedding.get('embedding_model')} ({self.embedding.get('embedding_dim')}-dim); "
                "refusing to mix them (delete the agent to restore into the new configuration)"
            )

    def forget(self) -> None:
        """Forget the agent; the next fold looks it up again (and replays into a new one)."""
        with self.guard:
            self.agent_id = self.archive_id = None

    def hurry(self) -> None:
        """Closing: each request of the last fold times out after ``CLOSE_TIMEOUT_S``."""
        self.pusher = self.pusher.with_options(timeout=CLOSE_TIMEOUT_S)

    def _meta(self, *, cursor: int, dated: bool, pushing: bool) -> dict[str, Any]:
        return {
            "cursor": cursor,
            "ckpt": self.projector.ledger.ckpt,
            "embedding": self.embedding,
            "dated": dated,
            "pushing": pushing,
        }

    def _save_cursor(self, *, pushing: bool = False) -> None:
        """Record the cursor; ``pushing`` says passages after it may already be on the server."""
        meta = self._meta(cursor=self.cursor, dated=self.dated, pushing=pushing)
        self.pusher.agents.update(self.agent_id, metadata={META_KEY: meta})
        self.interrupted = pushing

    def _present_event_ids(self) -> set[str]:
        """Event ids already pushed (from passage tags): what makes a re-run replay idempotent."""
        return {eid for passage in self._passages() if (eid := _event_id(passage)) is not None}

    def _passages(self) -> Iterator[_Listed]:
        """Every passage of the agent (its id and tags), a page at a time."""
        after = None
        while True:
            kwargs = {"limit": LIST_PAGE} | ({"after": after} if after else {})
            raw = self.pusher.agents.passages.with_raw_response.list(self.agent_id, **kwargs)
            page = msgspec.json.decode(raw.http_response.content, type=list[_Listed])
            if not page:
                return
            yield from page
            after = page[-1].id

    def _drop_passages(self, event: Event) -> None:
        """A redaction: the passages of the events whose bodies it removed leave the server."""
        gone = {r["id"] for r in event.body["redacted"]}
        for passage_id in [p.id for p in self._passages() if _event_id(p) in gone]:
            self.pusher.agents.passages.delete(passage_id, agent_id=self.agent_id)
        if any(r["type"] == CoreSeeded.type_name for r in event.body["redacted"]):
            self._seed_blocks(self.projector.catalog.context())  # the newest seed left, or empty blocks

    # -- folding -----------------------------------------------------------------------

    def lag(self) -> int:
        return max(0, self.projector.ledger.refresh() - self.cursor)

    def health(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "agent": self.agent_name,
            "cursor": self.cursor,
            "lag": self.lag(),
            "agent_id": self.agent_id,
            "duplicate_agents": list(self.duplicates),
        }

    def restore(self, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Replay the log into the agent (creating it when missing), whatever
        ``ARI_MEMORY_AUTO_RESTORE`` says; Letta's failures become one ProjectionError."""
        with self.guard:
            from letta_client import APIError

            started = time.perf_counter()
            try:
                folded = self.fold(progress, wait=RESTORE_WAIT_S, create=True)
            except APIError as exc:
                raise ProjectionError(f"Letta at {settings.letta_base_url()} failed: {exc}") from None
            if folded is None:
                raise ProjectionError(
                    f"another process held {self.lock.path} for {RESTORE_WAIT_S:.0f} s (it is pushing into "
                    f"{self.agent_name}); run `ari-ledger restore` again once it is done"
                )
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

    def catch_up(self) -> int:
        """One push round if no other process is pushing (the Projection protocol's fold)."""
        return self.fold(wait=0.0) or 0

    def behind(self) -> bool:
        return self.agent_id is None or self.projector.ledger.refresh() > self.cursor

    def current(self) -> bool:
        self.refresh()
        return self.agent_id is not None and self.lag() == 0

    def fold(
        self,
        progress: Callable[[int, int], None] | None = None,
        *,
        wait: float = 0.0,
        stop: Callable[[], bool] | None = None,
        limit: int | None = None,
        create: bool | None = None,
    ) -> int | None:
        """Push the events after the agent's cursor (at most ``limit``), holding the push lock;
        return how many events were folded, or None when another process holds the lock for
        longer than ``wait`` seconds (it pushes; this one only reads). ``stop()`` ends the
        round after the batch in flight."""
        with self.guard:
            if not self.lock.path.exists():
                self.attach(create=False)  # the server answers before the lock file is made
            if not self.lock.acquire(wait, stop):
                return None
            try:
                if not self.attach(create=self.auto_restore if create is None else create):
                    raise ProjectionError(
                        f"agent {self.agent_name} is missing and ARI_MEMORY_AUTO_RESTORE is off; run `ari-ledger restore`"
                    )
                target = self.projector.ledger.refresh()
                if limit is not None:
                    target = min(target, self.cursor + limit)
                if target <= self.cursor:
                    return 0
                present = self._present_event_ids() if self.interrupted else set()
                return self._fold(target, present, progress, stop)
            finally:
                self.lock.release()

    def dedupe(self, wait: float = RESTORE_WAIT_S) -> list[str]:
        """Delete the duplicate agents (every agent of this name but the oldest) under the push
        lock; return their ids. The oldest is the one every process reads and pushes into."""
        with self.guard:
            if not self.lock.acquire(wait):
                raise ProjectionError(
                    f"another process held {self.lock.path} for {wait:.0f} s; run the command again once it is done"
                )
            try:
                if not self.attach(create=False):
                    return []
                deleted = list(self.duplicates)
                for agent_id in deleted:
                    delete_agent_by_id(self.pusher, agent_id)
                self.duplicates = []
                return deleted
            finally:
                self.lock.release()

    def refresh(self) -> None:
        """Re-read the agent and its cursor without the push lock (a reader beside the pusher)."""
        with self.guard:
            self.attach(create=False)

    def _fold(
        self,
        target: int,
        present: set[str],
        progress: Callable[[int, int], None] | None,
        stop: Callable[[], bool] | None,
    ) -> int:
        start = self.cursor
        # An agent with no passages needs nothing a purge hid: start at the last purge.
        skip_to = self._last_purge(target) if self.archive_id is None else 0
        pending: list[dict[str, Any]] = []
        last_seq = self.cursor
        for event in self.projector.ledger.events(after=self.cursor, as_of=target):
            last_seq = event.seq
            if event.seq <= skip_to:
                continue
            action = _ACTIONS[event.type]
            match action:
                case "blocks":
                    if not is_stub_body(event.body):
                        self._push(pending)
                        pending = []
                        self._seed_blocks(event.body_as(CoreSeeded))
                case "renew":
                    pending = []  # hidden by this purge: never pushed
                    self._renew_agent()
                    present = set()
                case "redact":
                    self._push(pending)
                    pending = []
                    self._drop_passages(event)
                case "passage":
                    if event.id not in present and not is_stub_body(event.body):
                        pending.append(self._passage(event))
                case "nothing":
                    pass
                case _:
                    assert_never(action)
            if len(pending) >= BATCH:
                self._push(pending)
                pending = []
                self._advance(last_seq, start, target, progress)
                if stop is not None and stop():
                    return last_seq - start
        self._push(pending)
        self._advance(last_seq, start, target, progress)
        return target - start

    def _last_purge(self, target: int) -> int:
        return max((seq for seq in self.projector.catalog.purges if seq <= target), default=0)

    def _renew_agent(self) -> None:
        """ARI deletes the agent on purge: the passages and blocks a purge hid leave the server."""
        delete_agent(self.pusher, self.agent_name)
        self.forget()
        self.attach(create=True)

    def _advance(self, seq: int, start: int, target: int, progress: Callable[[int, int], None] | None) -> None:
        self.cursor = seq
        self._save_cursor()
        if progress:
            progress(seq - start, target - start)

    def _passage(self, event: Event) -> dict[str, Any]:
        """The passage of a node-scope entry or a ReAct step, created at its event's time (an
        imported entry's original time): what lets a read ask Letta for a time window (see ``plan``)."""
        at = letta_time(event_time(event))
        if event.type == "memory_added":
            entry = event.body_as(MemoryAdded)
            kind = typed_kind(entry.metadata) or "note"
            return {
                "text": entry.text or " ",
                "created_at": at,
                "tags": [self.node_tag, f"n:{event.node}", f"k:{kind}", f"e:{event.id}"],
            }
        return {
            "text": event.body_as(ReactStep).content or " ",
            "created_at": at,
            "tags": [self.react_tag, f"n:{event.node}", "k:react", f"e:{event.id}"],
        }

    def _push(self, passages: list[dict[str, Any]]) -> None:
        """Push one batch, the metadata saying so first (a cut push is then checked, not trusted)."""
        if not passages:
            return
        if not self.interrupted:
            self._save_cursor(pushing=True)
        # Letta answers with every passage it made, each with its embedding padded to 4,096
        # floats: ~4 MB of JSON per 200 passages, ~30 MB as parsed models, twice that while
        # httpx joins the chunks it read. Nothing here reads them, so each answer is streamed
        # past a chunk at a time (an error status still raises) and never held.
        if self.archive_id is None:  # Letta makes the archive with the agent's first passage
            first = passages[0]
            _discard(self.pusher.agents.passages.with_streaming_response.create(self.agent_id, **first))
            self.archive_id = every(self.pusher.archives.list, agent_id=self.agent_id)[0].id
            passages = passages[1:]
        if passages:
            _discard(
                self.pusher.archives.passages.with_streaming_response.create_many(self.archive_id, passages=passages)
            )

    def _seed_blocks(self, core: CoreSeeded | Seed | None) -> None:
        values = {
            "persona": core.persona if core else "",
            "human": core.human if core else "",
            "ari_context": json.dumps(core.context if core else {}, ensure_ascii=False, sort_keys=True),
        }
        for label, value in values.items():
            self.pusher.agents.blocks.update(label, agent_id=self.agent_id, value=value)

    # -- search ------------------------------------------------------------------------

    @property
    def passages(self) -> int:
        """Passages in the agent once caught up: the ledger knows (entries + ReAct steps)."""
        catalog = self.projector.catalog
        return len(catalog.entries) + len(catalog.steps)

    def fetch(self, query: str, call: Call, tags: list[str]) -> list[str]:
        """Event ids of one planned call (see ``plan``), in Letta's rank order; ``tags`` only
        thin what comes back (Letta filters them after its cut)."""
        window = (
            {}
            if call.window is None
            else {"start_datetime": iso_us(call.window[0]), "end_datetime": iso_us(call.window[1])}
        )
        with self.guard:
            found = self.client.agents.passages.search(
                self.agent_id, query=query, top_k=call.top_k, tags=tags, tag_match_mode="any", **window
            )
        return [eid for eid in map(_event_id, found.results) if eid is not None]

    def search(self, query: str, collection_tags: list[str], wanted: Callable[[str], bool], limit: int) -> list[str]:
        """Event ids of the best ``limit`` passages passing ``wanted``, in Letta's rank order,
        without a plan: what a read falls back on when a planned one came back short.

        ``top_k`` starts at ARI's over-fetch and widens ×4 until enough pass; the last round
        ranks every passage of the agent (also any the log does not know), so the scope is
        exact at any pool size.
        """
        with self.guard:
            k = min(max(settings.letta_overfetch(), limit * 40), max(self.passages, 1))
            rounds = 0
            while True:
                rounds += 1
                found = self.client.agents.passages.search(
                    self.agent_id, query=query, top_k=k, tags=collection_tags, tag_match_mode="any"
                )
                hits = [eid for eid in map(_event_id, found.results) if eid is not None and wanted(eid)]
                if len(hits) >= limit or k == EVERY_PASSAGE:
                    self.last_search = {"plan": "widened", "calls": rounds, "top_k": k, "passages": self.passages}
                    return hits[:limit]
                k = k * 4 if k * 4 < self.passages else EVERY_PASSAGE


# What each event type is to the agent. A tombstone changes nothing there: reads drop cleared
# entries by the local catalog, and the passages stay, as ARI's clear keeps them on the server.
LettaAction = Literal["passage", "blocks", "renew", "redact", "nothing"]
_ACTIONS: PerEventType[LettaAction] = handlers(
    "LettaProjection._fold",
    {
        "memory_added": "passage",
        "react_step": "passage",
        "core_seeded": "blocks",
        "checkpoint_purged": "renew",
        "node_started": "nothing",
        "node_cleared": "nothing",
        "events_redacted": "redact",
    },
)


def _event_id(result: Any) -> str | None:
    """The ledger event id a passage was pushed for (its ``e:`` tag)."""
    return next((t[2:] for t in result.tags or () if t.startswith("e:")), None)


def _discard(response: AbstractContextManager[Any]) -> None:
    """Read a streamed answer to its end, keeping none of it: the connection goes back to the
    pool, and an error status has already raised when the stream opened."""
    with response as opened:
        for _chunk in opened.iter_bytes():
            pass
