"""One pusher per checkpoint: the lock a process holds while it writes into the Letta agent.

Every process with Letta configured keeps the agent current, but only the one holding this
lock creates, purges or pushes into it; the others only read. It is an ``flock`` on
``{checkpoint}/memory_ledger/letta_push.lock``, taken per round (never for a process's life),
so a short-lived process can push its own few events when no one else is pushing, and the
kernel releases it when its holder dies (a SIGKILL mid-push frees it at once). The file is
opened per acquisition and unlocked before it is closed, so a child forked mid-push (which
drops its Letta thread) never keeps the parent's lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import time
from pathlib import Path

from ledger import layout
from ledger.checkpoint_format import LETTA_LOCK_NAME as LOCK_NAME

log = logging.getLogger("projections.engines.letta")

POLL_S = 0.05  # how often a waiting acquire tries again
NO_FLOCK = (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK)


class PushLock:
    """The push lock of one checkpoint, held by at most one process (and one thread) at a time."""

    def __init__(self, checkpoint_dir: Path) -> None:
        self.path = layout.store_dir(checkpoint_dir) / LOCK_NAME
        self._fd: int | None = None
        self._warned = False

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, wait: float = 0.0, stop=None) -> bool:
        """Take the lock, trying for up to ``wait`` seconds (0: once); False when another
        process holds it, this one cannot write the lock file (a read-only checkpoint), or
        ``stop()`` says to give up."""
        if self._fd is not None:
            raise RuntimeError("the Letta push lock is already held by this projection")
        try:  # never makes the directory: a writable ledger has; a missing one is being deleted
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except FileNotFoundError:
            return False
        except OSError as exc:
            self._warn(f"cannot open {self.path} ({exc}); this process only reads the Letta agent")
            return False
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._fd = fd
                return True
            except BlockingIOError:
                pass
            except OSError as exc:
                if exc.errno not in NO_FLOCK:
                    os.close(fd)
                    raise
                # no flock here: push unlocked, as before coordination existed
                self._warn(f"{self.path}: the file system has no flock; processes push into Letta uncoordinated")
                self._fd = fd
                return True
            if time.monotonic() >= deadline or (stop is not None and stop()):
                os.close(fd)
                return False
            time.sleep(POLL_S)

    def release(self) -> None:
        """Let another process push. Unlocked before it is closed: a child forked while this
        was held shares the open file description, and would keep the lock for its whole life
        if closing were all the parent did."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):  # no flock here: it was acquired unlocked
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning(message)
