"""ARI's ``bulk_import``: entries of one kind appended once, whatever was imported before.

An entry whose content (node, text, metadata, ARI's ``ts``) is already visible is skipped, so
restoring the same backup twice, or a backup of this very checkpoint, adds nothing. An entry a
redaction removed (``ledger.maintenance.redact``) is skipped too, and counted (``redacted``): a backup
written before the redaction (ARI's end-of-run ``memory_backup.jsonl.gz``, ``export-ari``'s)
never brings the removed body back. All entries are checked before any is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.ari.importer import Planned, ari_files_in, entry_key, plan_entries, redaction_digests, seed_key, step_key
from ledger.events import EventsRedacted
from projections.api.session import Session
from projections.engines.protocol import Progress
from projections.models.catalog import Catalog, event_time
from projections.models.shapes import ImportResult

IMPORT_BATCH = 1000


class ImportReport(ImportResult, total=False):
    """``bulk_import``'s answer; ``redacted`` (only when some were): how many of ``skipped``
    a redaction had removed."""

    redacted: int


@dataclass
class Removed:
    """What the checkpoint's redactions say of the bodies they removed, as an import matches
    them: each body's digest (``events.Redacted.digest``), and where the event stood
    (node, type, ``ts`` from its stub's envelope: the time an export gives an entry ARI's
    tools wrote, whose body the import cannot rebuild exactly, e.g. one stored with findings)."""

    digests: set[str] = field(default_factory=set)
    places: set[tuple[str, str, float]] = field(default_factory=set)
    sources: set[str] = field(default_factory=set)  # the checkpoint's ARI files: origin.source values

    def __bool__(self) -> bool:
        return bool(self.digests)

    def holds(self, p: Planned) -> bool:
        """Whether a redaction removed the body this planned entry would write again."""
        ts = (p.body.get("origin") or {}).get("ts")
        if ts is not None and (p.node, p.type, ts) in self.places:
            return True
        return not self.digests.isdisjoint(redaction_digests(p, self.sources))


class Imports:
    def __init__(self, session: Session) -> None:
        self.session = session

    def bulk_import(
        self, entries: Sequence[Mapping[str, Any]], kind: str, source: str, progress: Progress | None = None
    ) -> ImportReport:
        """Append the planned events not visible yet and not redacted. The look before the lock
        only spares a re-import the lock; what is written is decided under it, chunk by chunk,
        so two processes importing one backup at once write each entry once. ``progress(entries
        done, entries)`` after each chunk is durable: an interrupt then keeps every chunk before
        it, and importing again adds only the rest."""
        if progress is not None:
            progress(0, len(entries))  # planning and the first look come first: seconds for 50,000
        planned = plan_entries(entries, kind, source=source)
        with self.session.reading() as catalog:
            fresh, redacted = not_yet_imported(catalog, planned, self._removed(catalog))
        todo, imported = bool(fresh), 0
        if todo:
            redacted = 0  # decided again under the lock
        for start in range(0, len(planned) if todo else 0, IMPORT_BATCH):
            with self.session.deciding() as (catalog, batch):
                fresh, gone = not_yet_imported(catalog, planned[start : start + IMPORT_BATCH], self._removed(catalog))
                for p in fresh:
                    batch.append(p.node, p.type, p.body, current_node=p.node)
            imported += len(fresh)
            redacted += gone
            if progress is not None:
                progress(min(start + IMPORT_BATCH, len(planned)), len(planned))
        skipped = len(planned) - imported
        self.session.access.record(
            "import", "bulk_import", kind=kind, imported=imported, skipped=skipped, redacted=redacted
        )
        result: ImportReport = {"imported": imported, "kind": kind, "skipped": skipped}
        if redacted:
            result["redacted"] = redacted
        return result

    def _removed(self, catalog: Catalog) -> Removed:
        """The redactions' records of the bodies they removed (read from the log: the catalog
        keeps which events, not the digests)."""
        removed = Removed()
        if not catalog.redacted:
            return removed
        ledger = self.session.ledger
        records: dict[int, dict[str, str]] = {}
        for info in catalog.redacted.values():
            if info.redacted_at not in records:
                event = ledger.event_at(info.redacted_at)
                body = event.body_as(EventsRedacted) if event is not None else None
                records[info.redacted_at] = {r.id: r.digest for r in body.redacted} if body else {}
            digest = records[info.redacted_at].get(info.event_id)
            if digest is not None:
                removed.digests.add(digest)
            stub = ledger.event_at(info.seq)
            if stub is not None:
                removed.places.add((info.node_id, info.type, event_time(stub)))
        removed.sources = {p.name for p in ari_files_in(self.session.checkpoint_dir)}
        return removed


def not_yet_imported(
    catalog: Catalog, planned: list[Planned], removed: Removed | None = None
) -> tuple[list[Planned], int]:
    """The planned events whose content is not visible yet (nor earlier in the same call) and
    that no redaction removed, and how many a redaction removed (``removed``).

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
    fresh, gone = [], 0
    for p in planned:
        if p.key in seen:
            continue
        seen.add(p.key)
        if removed and removed.holds(p):
            gone += 1
        else:
            fresh.append(p)
    return fresh, gone
