"""Reproducibility state (R14): the latest status per target memory, by log order (seq).

Status changes are append-only ``reproducibility_event`` entries; the fold picks, for each
target, the visible event with the highest seq — never the latest wall-clock time.
"""
from __future__ import annotations

from typing import Iterable

from .catalog import Entry

UNVERIFIED = "unverified"


def repro_status(entries: Iterable[Entry]) -> dict[str, str]:
    """target memory id → latest status, given the visible entries of a scope."""
    latest: dict[str, tuple[int, str]] = {}
    for entry in entries:
        if entry.kind != "reproducibility_event":
            continue
        target = entry.body["target_id"]
        if target not in latest or entry.seq > latest[target][0]:
            latest[target] = (entry.seq, entry.body["status"])
    return {target: status for target, (_seq, status) in latest.items()}
