"""ari-memory-ledger: an event-sourced, hash-chained memory for ARI's experiment tree.

The write side lives here (events, log, chain, guard, provenance); the read side lives in
``projections``. ``from ledger import Ledger`` is the log. The memory API's front door is
``projections.api.get_backend``; ``ledger.get_backend`` is a deprecated second door.
"""

from .errors import (
    ConfigurationError,
    CopyOnWriteViolation,
    InvalidInput,
    LedgerError,
    LedgerNotFound,
    LogCorrupted,
    UnsupportedVersion,
)
from .events import Event
from .ledger import Ledger
from .memory_api import clear_backend_cache, get_backend
from .recovery import RecoveryReport
from .verify import VerifyReport

__all__ = [
    "ConfigurationError",
    "CopyOnWriteViolation",
    "Event",
    "InvalidInput",
    "Ledger",
    "LedgerError",
    "LedgerNotFound",
    "LogCorrupted",
    "RecoveryReport",
    "UnsupportedVersion",
    "VerifyReport",
    "clear_backend_cache",
    "get_backend",
]
