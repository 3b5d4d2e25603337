"""ari-memory-ledger: an event-sourced, hash-chained memory for ARI's experiment tree.

The write side lives here (events, log, chain, guard, provenance); the read side lives in
``projections``. ``from ledger import Ledger`` is the log; ``get_backend`` is ARI's API.
"""
from .errors import (
    CopyOnWriteViolation,
    InvalidInput,
    LedgerError,
    LedgerNotFound,
    LogCorrupted,
    ProjectionError,
    UnsupportedVersion,
)
from .events import Event
from .ledger import Ledger, RecoveryReport, VerifyReport

__all__ = [
    "CopyOnWriteViolation",
    "Event",
    "InvalidInput",
    "Ledger",
    "LedgerError",
    "LedgerNotFound",
    "LogCorrupted",
    "ProjectionError",
    "RecoveryReport",
    "UnsupportedVersion",
    "VerifyReport",
]
