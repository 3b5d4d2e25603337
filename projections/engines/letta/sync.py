"""Keeping the Letta projection current without making anyone wait for Letta.

Writes return as soon as the log holds them; reads answer from the local index. A daemon
thread folds what the log gained into the agent: woken after every write of this process,
and every few seconds for other processes' writes. Only one process pushes at a time (the
projection's push lock): a thread that finds it taken tries again shortly, and the holder
pushes whatever the log holds, this process's writes included. When Letta cannot be reached,
the error and the lag are what ``health()`` and ``status`` show, and the thread retries with
a growing pause; when Letta is back the lag drains. Nothing here can fail a write or a read.

Closing never waits long: the thread gets a moment to finish its batch, then the process
pushes its own last few events if the lock is free at once, with a short timeout; whatever it
leaves, the next pusher (any process's thread polls the log) pushes.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from projections.engines.letta.projection import LettaProjection
from projections.errors import EmbeddingMismatch, ProjectionError

log = logging.getLogger("projections.engines.letta")

POLL_S = 5.0  # how often the thread looks for other processes' writes when nothing wakes it
BUSY_S = 1.0  # how soon the thread tries again when another process holds the push lock
RETRY_S = (2.0, 60.0)  # first and longest pause after a failure
READ_WAIT_S = 5.0  # how long a read waits for another process's push before the embedded engine answers
CLOSE_JOIN_S = 1.0  # how long closing waits for the thread's batch in flight
CLOSE_EVENTS = 50  # at most this many events pushed by a closing process itself
CLOSE_TIMEOUT_S = 2.0  # the timeout of each Letta request of that last push


class LettaSync:
    """The thread that keeps one Letta projection at the end of the log."""

    def __init__(self, projection: LettaProjection) -> None:
        self.projection = projection
        self.error: str | None = None
        self.busy = False  # the last round found another process pushing
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._retry = RETRY_S[0]
        self._thread = threading.Thread(target=self._run, name=f"letta-sync[{projection.agent_name}]", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Something was written: fold it soon."""
        self._wake.set()

    def catch_up(self, wait: float = READ_WAIT_S) -> bool:
        """Fold now, on the caller's thread (waiting up to ``wait`` s for another process's
        push); True when the agent is at the end of the log."""
        try:
            folded = self.projection.push(wait=wait)
            if folded is None:  # another process is pushing: see where it stands
                self.busy = True
                self.projection.refresh()
                return self.projection.agent_id is not None and self.projection.lag() == 0
            self.busy = False
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
            if self.catch_up(wait=max(0.0, deadline - time.monotonic())) and self.projection.lag() == 0:
                return True
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        return False

    def health(self) -> dict[str, Any]:
        return {"ok": self.error is None, **self.projection.health(), "error": self.error, "busy": self.busy}

    def close(self, timeout: float = CLOSE_JOIN_S) -> None:
        """Stop the thread (its batch in flight finishes, or is cut at exit: the agent's push
        marker makes the next pusher check what landed), then push this process's last few
        events if no one else is pushing."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._push_last()

    def _push_last(self) -> None:
        projection = self.projection
        try:
            if projection.agent_id is not None and projection.projector.ledger.refresh() <= projection.cursor:
                return
            projection.pusher = projection.pusher.with_options(timeout=CLOSE_TIMEOUT_S)
            projection.push(wait=0.0, limit=CLOSE_EVENTS)
        except Exception as exc:  # the next pusher pushes them
            log.info("left the last events to the next Letta pusher: %s: %s", type(exc).__name__, exc)

    def _run(self) -> None:
        pause = POLL_S
        while not self._stop.is_set():
            self._wake.wait(pause)
            self._wake.clear()
            if self._stop.is_set():
                return
            pause = self._round()

    def _round(self) -> float:
        """One try at pushing what the log gained; the pause before the next."""
        projection = self.projection
        try:
            if projection.projector.ledger.refresh() <= projection.cursor and projection.agent_id is not None:
                return POLL_S if self.error is None else self._retry
            folded = projection.push(wait=0.0, stop=self._stop.is_set)
            self.busy = folded is None
            if folded is not None and projection.agent_id is None:
                raise ProjectionError(
                    f"agent {projection.agent_name} is missing and ARI_MEMORY_AUTO_RESTORE is off; "
                    "run `ari-ledger restore`"
                )
        except Exception as exc:
            self._failed(exc)
            return self._retry
        if self.busy:
            return BUSY_S
        self.error, self._retry = None, RETRY_S[0]
        return POLL_S

    def _failed(self, exc: BaseException) -> None:
        first = self.error is None
        self.error = f"{type(exc).__name__}: {exc}"[:300]
        self._retry = RETRY_S[0] if first else min(self._retry * 2, RETRY_S[1])
        self.projection.detach()  # the agent may be gone (emptied server): find or restore it next time
        if first:
            log.warning("Letta projection behind (the log and the local index are not): %s", self.error)
