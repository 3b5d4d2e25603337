"""Reading from Letta (``ARI_MEMORY_SEARCH_ENGINE=letta``): an explicit choice, not the default.

The local index holds the same entries with the same embedder and answers in well under a
millisecond, so searches run there unless Letta is chosen. Chosen, a search first brings the
agent up to date (read-your-writes), and while Letta cannot answer the embedded engine does
(``health()`` says so).

Each read is planned from the local index (``plan``): Letta cuts at ``top_k`` before it
filters the scope, so the plan says which time windows and ``top_k`` return every in-scope
row that can rank in the best ``limit`` — exact scope at about the cost of one plain call
however many better-matching siblings crowd the agent. Letta returns no score; the score
reported is the same embedder's cosine, as on the embedded engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, cast

import numpy as np

from projections.engines.letta.plan import plan_read
from projections.engines.letta.projection import LettaProjection
from projections.engines.letta.rows import AgentRows
from projections.engines.local import Projector
from projections.engines.runner import ProjectionRunner
from projections.errors import ProjectionRefused
from projections.models.catalog import REACT, Catalog

RETRY_AFTER_S = 2.0  # after a failure, reads use the embedded engine this long before retrying


class LettaEngine:
    """Search on Letta; the embedded engine answers (and says so) while Letta cannot."""

    def __init__(self, projector: Projector, fallback: Any, sync: ProjectionRunner) -> None:
        self.projector = projector
        self.fallback = fallback
        self.sync = sync
        self.letta = cast(LettaProjection, sync.projection)  # what a Letta session's runner keeps
        self._failed_at = 0.0
        self._rows_cache: AgentRows | None = None

    @property
    def name(self) -> str:
        return "letta" if self.sync.error is None else "embedded (letta unavailable)"

    def ready(self) -> bool:
        """Bring Letta up to date for this read; False when it cannot be reached now."""
        if self.sync.error is not None and time.monotonic() - self._failed_at < RETRY_AFTER_S:
            return False
        if self.sync.catch_up():
            return True
        self._failed_at = time.monotonic()
        return False

    def _answer(
        self,
        on_letta: Callable[[], list[tuple[str, float]]],
        fallback: Callable[[], list[tuple[str, float]]],
        as_of: int | None = None,
    ):
        """Letta's answer when it can give one, else the embedded engine's (and remember why).

        A purge deleted the agent, as ARI's purge does: what a read as of an earlier seq must
        see is only in the local index, which answers it."""
        if as_of is not None and any(seq > as_of for seq in self.projector.catalog.purges):
            return fallback()
        if not self.ready():
            return fallback()
        try:
            return on_letta()
        except ProjectionRefused:
            raise
        except Exception as exc:
            self.sync.failed(exc)
            self._failed_at = time.monotonic()
            return fallback()

    def _visible(self, node_ids: Iterable[str] | None, as_of: int | None) -> Callable[[str], bool]:
        catalog: Catalog = self.projector.catalog
        scope = None if node_ids is None else set(node_ids)

        def wanted(eid: str) -> bool:
            entry = catalog.entries.get(eid)
            return entry is not None and entry.visible(as_of) and (scope is None or entry.node_id in scope)

        return wanted

    def _rows(self) -> AgentRows:
        """The agent's passages as the local fold knows them, rebuilt when the fold moved."""
        if self._rows_cache is None or self._rows_cache.cursor != self.projector.cursor:
            self._rows_cache = AgentRows.of(self.projector)
        return self._rows_cache

    def _planned(
        self, query: str, wanted: np.ndarray, limit: int, tags: list[str], unplanned: Callable[[], list[str]]
    ) -> list[tuple[str, float]]:
        """Letta's answer through a plan: the calls return the targets, whose best ``limit``
        are the answer; if a call came back without one of its targets (Letta ranked
        differently than the slack allows, or holds rows the fold does not), the unplanned,
        widening search answers instead."""
        rows = self._rows()
        cosine = rows.cosine(self.projector, self.projector.embedder.embed([query])[0])
        plan = plan_read(rows.at_us, cosine, wanted, limit, windows=self.letta.dated)
        returned: set[str] = set()
        for call in plan.calls:
            returned.update(self.letta.fetch(query, call, tags))
        score = np.clip((cosine + 1.0) / 2.0, 0.0, 1.0)
        if not all(rows.ids[i] in returned for i in plan.targets.tolist()):
            position = rows.positions()
            return [(eid, float(score[position[eid]])) for eid in unplanned()]  # Letta's own order
        self.letta.last_search = {
            "plan": "windows" if plan.calls and plan.calls[0].window is not None else "whole",
            "calls": len(plan.calls),
            "top_k": [c.top_k for c in plan.calls],
            "targets": len(plan.targets),
            "passages": len(rows.ids),
        }
        found = [i for i in np.flatnonzero(wanted).tolist() if rows.ids[i] in returned]
        found.sort(key=lambda i: (-cosine[i], rows.seq[i]))
        return [(rows.ids[i], float(score[i])) for i in found[:limit]]

    def search(self, query: str, node_ids: list[str], limit: int, as_of: int | None) -> list[tuple[str, float]]:
        def on_letta() -> list[tuple[str, float]]:
            rows = self._rows()
            tags = [f"n:{n}" for n in dict.fromkeys(node_ids)]
            wanted = rows.in_scope(node_ids) & rows.visible(as_of)
            return self._planned(
                query,
                wanted,
                limit,
                tags,
                lambda: self.letta.search(query, tags, self._visible(node_ids, as_of), limit),
            )

        return self._answer(on_letta, lambda: self.fallback.search(query, node_ids, limit, as_of), as_of)

    def react_search(self, query: str, limit: int, as_of: int | None) -> list[tuple[str, float]]:
        def on_letta() -> list[tuple[str, float]]:
            rows = self._rows()
            visible = {s.step_id for s in self.projector.catalog.steps_as_of(as_of)}
            wanted = rows.in_scope([REACT]) & rows.visible(as_of)
            tags = [self.letta.react_tag]
            return self._planned(
                query, wanted, limit, tags, lambda: self.letta.search(query, tags, visible.__contains__, limit)
            )

        return self._answer(on_letta, lambda: self.fallback.react_search(query, limit, as_of), as_of)

    def lag(self) -> int:
        return self.letta.lag()

    def health(self) -> dict[str, Any]:
        """Reading from Letta, a health check brings it up to date first (as a read would)."""
        self.ready()
        return {}
