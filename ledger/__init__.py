"""ari-memory-ledger: an event-sourced, hash-chained memory for ARI's experiment tree.

The write side lives here (events, log, chain, guard, provenance); the read side lives in
``projections``. ``from ledger import Ledger`` is the log; ``get_backend`` is ARI's API.
"""
from .errors import (
    ConfigurationError,
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
    "ConfigurationError",
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


def __getattr__(name: str):
    """``from ledger import get_backend``: ARI's API lives on the read side, loaded on demand."""
    if name in ("get_backend", "MemoryBackend"):
        from projections import backend

        return getattr(backend, name)
    raise AttributeError(f"module 'ledger' has no attribute {name!r}")
