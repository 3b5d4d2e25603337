"""The harness's two errors: a ``LedgerError`` so callers catch one family, and the install's own
(it carries whether pip looked offline, which tests use to skip rather than fail)."""

from __future__ import annotations

from pathlib import Path

from ledger.errors import LedgerError


class LettaHarnessError(LedgerError):
    """The Letta server (or one of its parts) could not be installed, started, checked or stopped."""


class LettaInstallError(LettaHarnessError):
    """pip could not install Letta into the harness venv. ``network`` tells whether it looked offline."""

    def __init__(self, message: str, *, network: bool = False, log: Path | None = None) -> None:
        self.network = network
        self.log = log
        super().__init__(message)
