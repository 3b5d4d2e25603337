"""The read side's errors: a projection that could not be brought up to date (the log, the
write side's truth, is intact whatever these say)."""

from __future__ import annotations

from ledger.errors import LedgerError


class ProjectionError(LedgerError):
    """A projection could not be brought up to date (the log itself is intact)."""


class EmbeddingMismatch(ProjectionError):
    """A projection was built with a different embedding configuration than the one in use."""
