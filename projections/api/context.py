"""The experiment context (core memory): seeded once the goal is known, read with no search."""

from __future__ import annotations

import time
from typing import Any

from ledger import config
from ledger.events import CHECKPOINT_NODE
from projections.api import checks
from projections.api.session import Session
from projections.models.shapes import SeedResult


class ExperimentContext:
    def __init__(self, session: Session) -> None:
        self.session = session

    def seed(self, persona: str, human: str, context: dict[str, Any] | None) -> SeedResult:
        body = {"persona": persona, "human": human, "context": checks.metadata(context, "context")}
        with self.session.lock:
            event = self.session.append(config.current_node() or CHECKPOINT_NODE, "core_seeded", body)
            seed = self.session.projector.catalog.context()
        seeded_at = seed.ts if seed is not None and seed.seq == event.seq else time.time()
        self.session.access.record("seed", "seed_core_memory", entry_id=event.id, seq=event.seq)
        return {"ok": True, "seeded_at": seeded_at, "id": event.id, "seq": event.seq}

    def get(self, as_of: int | None = None) -> dict[str, Any]:
        """The seeded context exactly as seeded, ``{}`` before the seed (and after a purge)."""
        with self.session.reading() as catalog:
            seed = catalog.context(as_of)
        return dict(seed.context) if seed else {}
