"""ARI's ``bulk_import``: entries of one kind appended once, whatever was imported before.

An entry whose content (node, text, metadata, ARI's ``ts``) is already visible is skipped, so
restoring the same backup twice, or a backup of this very checkpoint, adds nothing. All
entries are checked before any is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ledger.ari_import import Planned, entry_key, plan_entries, seed_key, step_key
from projections.api.session import Session
from projections.api.shapes import ImportResult
from projections.models.catalog import Catalog

IMPORT_BATCH = 1000


class Imports:
    def __init__(self, session: Session) -> None:
        self.session = session

    def bulk_import(self, entries: Sequence[Mapping[str, Any]], kind: str, source: str) -> ImportResult:
        """Append the planned events not visible yet. The look before the lock only spares a
        re-import the lock; what is written is decided under it, chunk by chunk, so two
        processes importing one backup at once write each entry once."""
        planned = plan_entries(entries, kind, source=source)
        with self.session.reading() as catalog:
            todo = bool(not_yet_imported(catalog, planned))
        imported = 0
        for start in range(0, len(planned) if todo else 0, IMPORT_BATCH):
            with self.session.deciding() as (catalog, batch):
                fresh = not_yet_imported(catalog, planned[start : start + IMPORT_BATCH])
                for p in fresh:
                    batch.append(p.node, p.type, p.body, current_node=p.node)
            imported += len(fresh)
        skipped = len(planned) - imported
        self.session.access.record("import", "bulk_import", kind=kind, imported=imported, skipped=skipped)
        return {"imported": imported, "kind": kind, "skipped": skipped}


def not_yet_imported(catalog: Catalog, planned: list[Planned]) -> list[Planned]:
    """The planned events whose content is not visible yet (nor earlier in the same call).

    An entry ARI gave no time matches a visible entry with the same content, whatever its
    time (each is also keyed without one), so it is imported once, not on every run.
    """
    seen: set[str] = set()
    for nid in {p.node for p in planned if p.type == "memory_added"}:
        for e in catalog.node_entries(nid):
            seen.update((entry_key(nid, e.text, e.metadata, e.ts), entry_key(nid, e.text, e.metadata, None)))
    if any(p.type == "react_step" for p in planned):
        for s in catalog.steps_as_of():
            seen.update((step_key(s.content, s.metadata, s.ts), step_key(s.content, s.metadata, None)))
    seed = catalog.context()
    if seed is not None:
        seen.add(seed_key(seed.persona, seed.human, seed.context))
    fresh = []
    for p in planned:
        if p.key not in seen:
            seen.add(p.key)
            fresh.append(p)
    return fresh
