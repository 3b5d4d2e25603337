"""Keeping the Letta projection current without making anyone wait for Letta.

Writes return as soon as the log holds them; reads answer from the local index. A daemon
thread folds what the log gained into the agent: woken after every write of this process,
and every few seconds for other processes' writes. When Letta cannot be reached, the error
and the lag are what ``health()`` and ``status`` show, and the thread retries with a growing
pause; when Letta is back the lag drains. Nothing here can fail a write or a read.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ledger.errors import EmbeddingMismatch, ProjectionError
from projections.engines.letta.projection import LettaProjection

log = logging.getLogger("projections.engines.letta")

POLL_S = 5.0  # how often the thread looks for other processes' writes when nothing wakes it
RETRY_S = (2.0, 60.0)  # first and longest pause after a failure


class LettaSync:
    """The thread that keeps one Letta projection at the end of the log."""

    def __init__(self, projection: LettaProjection) -> None:
        self.projection = projection
        self.error: str | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._retry = RETRY_S[0]
        self._thread = threading.Thread(target=self._run, name=f"letta-sync[{projection.agent_name}]", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Something was written: fold it soon."""
        self._wake.set()

    def catch_up(self) -> bool:
        """Fold now, on the caller's thread; True when the agent is at the end of the log."""
        try:
            self.projection.catch_up()
            if self.projection.agent_id is None:
                raise ProjectionError(
                    f"agent {self.projection.agent_name} is missing and ARI_MEMORY_AUTO_RESTORE is off; "
                    "run `ari-ledger restore`"
                )
        except EmbeddingMismatch:
            raise
        except Exception as exc:
            self._failed(exc)
            return False
        self.error, self._retry = None, RETRY_S[0]
        return True

    def flush(self, timeout: float = 60.0) -> bool:
        """Wait until the agent is at the end of the log (or ``timeout``); True when it is."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.catch_up() and self.projection.lag() == 0:
                return True
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        return False

    def health(self) -> dict[str, Any]:
        return {"ok": self.error is None, **self.projection.health(), "error": self.error}

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread (a push in flight finishes or is cut; replay is idempotent)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(POLL_S if self.error is None else self._retry)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                if (
                    self.projection.projector.ledger.refresh() > self.projection.cursor
                    or self.projection.agent_id is None
                ):
                    self.catch_up()
            except Exception as exc:
                self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        first = self.error is None
        self.error = f"{type(exc).__name__}: {exc}"[:300]
        self._retry = RETRY_S[0] if first else min(self._retry * 2, RETRY_S[1])
        self.projection.detach()  # the agent may be gone (emptied server): find or restore it next time
        if first:
            log.warning("Letta projection behind (the log and the local index are not): %s", self.error)
