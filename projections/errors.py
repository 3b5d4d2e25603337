"""The read side's errors: a projection that could not be brought up to date (the log, the
write side's truth, is intact whatever these say)."""

from __future__ import annotations

from ledger.errors import LedgerError


class ProjectionError(LedgerError):
    """A projection could not be brought up to date (the log itself is intact)."""


class ProjectionRefused(ProjectionError):
    """A projection refuses to fold: retrying cannot mend it, so it reaches the caller."""


class EmbeddingMismatch(ProjectionRefused):
    """A projection was built with a different embedding configuration than the one in use."""
