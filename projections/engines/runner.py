"""Keeping a shared projection current without making anyone wait for it.

A shared projection lives outside this process (a server) and many processes fold into it
in turn (:class:`~projections.engines.protocol.SharedProjection`). Writes return as soon as the
log holds them; reads answer from the local index. A :class:`ProjectionRunner` is a daemon
thread that folds what the log gained into one such projection: woken after every write of
this process, and every few seconds for other processes' writes. Only one process folds at a
time (the projection's own lock): a runner that finds it taken tries again shortly, and the
holder folds whatever the log holds, this process's writes included. When the projection
cannot be reached, the error and the lag are what ``health()`` and ``status`` show, and the
runner retries with a growing pause; once it is back the lag drains. Nothing here can fail a
write or a read.

Closing never waits long: the thread gets a moment to finish its batch, then the process
folds its own last few events if no one else is folding, with short timeouts; whatever it
leaves, the next folder (any process's runner polls the log) folds.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from projections.engines.protocol import SharedProjection
from projections.errors import ProjectionRefused

log = logging.getLogger("projections")

POLL_S = 5.0  # how often the thread looks for other processes' writes when nothing wakes it
BUSY_S = 1.0  # how soon the thread tries again when another process is folding
RETRY_S = (2.0, 60.0)  # first and longest pause after a failure
READ_WAIT_S = 5.0  # how long a read waits for another process's fold before the embedded engine answers
CLOSE_JOIN_S = 1.0  # how long closing waits for the thread's batch in flight
CLOSE_EVENTS = 50  # at most this many events folded by a closing process itself


class ProjectionRunner:
    """The thread that keeps one shared projection at the end of the log."""

    def __init__(self, projection: SharedProjection) -> None:
        self.projection = projection
        self.error: str | None = None
        self.busy = False  # the last round found another process folding
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._retry = RETRY_S[0]
        self._thread = threading.Thread(target=self._run, name=f"fold[{projection.name}]", daemon=True)
        self._thread.start()

    @property
    def name(self) -> str:
        return self.projection.name

    def poke(self) -> None:
        """Something was written: fold it soon."""
        self._wake.set()

    def catch_up(self, wait: float = READ_WAIT_S) -> bool:
        """Fold now, on the caller's thread (waiting up to ``wait`` s for another process's
        fold); True when the projection holds the whole log."""
        try:
            folded = self.projection.fold(wait=wait)
            if folded is None:  # another process is folding: see where it stands
                self.busy = True
                return self.projection.current()
            self.busy = False
        except ProjectionRefused:
            raise
        except Exception as exc:
            self.failed(exc)
            return False
        self.error, self._retry = None, RETRY_S[0]
        return True

    def flush(self, timeout: float = 60.0) -> bool:
        """Wait until the projection holds the whole log (or ``timeout``); True when it does."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.catch_up(wait=max(0.0, deadline - time.monotonic())) and self.projection.lag() == 0:
                return True
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        return False

    def restored(self) -> None:
        """An explicit restore just succeeded: the error it mended is gone."""
        self.error, self._retry = None, RETRY_S[0]

    def health(self) -> dict[str, Any]:
        return {"ok": self.error is None, **self.projection.health(), "error": self.error, "busy": self.busy}

    def close(self, timeout: float = CLOSE_JOIN_S) -> None:
        """Stop the thread and give it ``timeout`` s: it ends its round, then folds this
        process's last few events itself if no one else is folding. What it has not done by
        then is cut at exit and left to the next folder (the projection checks what landed)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)

    def _fold_last(self) -> None:
        projection = self.projection
        try:
            if projection.lag() == 0:
                return
            projection.hurry()
            projection.fold(wait=0.0, limit=CLOSE_EVENTS)
        except Exception as exc:  # the next folder folds them
            log.info("left the last events to the next %s folder: %s: %s", projection.name, type(exc).__name__, exc)

    def _run(self) -> None:
        pause = POLL_S
        while True:
            self._wake.wait(pause)
            self._wake.clear()
            if self._stop.is_set():
                break
            pause = self._round()
        self._fold_last()  # on this thread: a round in flight when closing came would else skip it

    def _round(self) -> float:
        """One try at folding what the log gained; the pause before the next."""
        try:
            if not self.projection.behind():
                return POLL_S if self.error is None else self._retry
            self.busy = self.projection.fold(wait=0.0, stop=self._stop.is_set) is None
        except Exception as exc:
            self.failed(exc)
            return self._retry
        if self.busy:
            return BUSY_S
        self.error, self._retry = None, RETRY_S[0]
        return POLL_S

    def failed(self, exc: BaseException) -> None:
        """Remember why the projection is behind; it is looked up afresh on the next try."""
        first = self.error is None
        self.error = f"{type(exc).__name__}: {exc}"[:300]
        self._retry = RETRY_S[0] if first else min(self._retry * 2, RETRY_S[1])
        self.projection.forget()
        if first:
            log.warning("%s projection behind (the log and the local index are not): %s", self.name, self.error)
