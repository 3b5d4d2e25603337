"""Reproducibility state (R14): the latest status per target memory, by log order (seq).

Status changes are append-only ``reproducibility_event`` entries (``metadata.repro_target_id``
and ``metadata.repro_status``, as ARI's writer stores them); the fold picks, for each target,
the visible event with the highest seq — never the latest wall-clock time. An event whose
status is unknown (stored with a finding) changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from ledger.vocabulary import REPRO_STATUSES
from projections.models.catalog import Entry


def repro_status(entries: Iterable[Entry]) -> dict[str, str]:
    """target memory id → latest status, given the visible entries of a scope."""
    latest: dict[str, tuple[int, str]] = {}
    for entry in entries:
        if entry.kind != "reproducibility_event":
            continue
        target, status = entry.metadata.get("repro_target_id"), entry.metadata.get("repro_status")
        if not isinstance(target, str) or status not in REPRO_STATUSES:
            continue
        if target not in latest or entry.seq > latest[target][0]:
            latest[target] = (entry.seq, status)
    return {target: status for target, (_seq, status) in latest.items()}
