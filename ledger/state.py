"""What an open log knows of its file: the state the open scan advances.

One :class:`LogState` per open :class:`~ledger.ledger.Ledger` (its ``state``): where the head is
(end offset, seq, hash), the checkpoint id, the side index as far as it has been read, and the
newest member seen. The scan (:mod:`ledger.recovery`) folds what it reads into it, the Ledger's
own appends advance it, and a reopen (a fork, a replaced log) starts it again. The tools beside
the log (``verify``, ``redact``, ``rollback``) read it; only the scan and the Ledger change it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Head:
    """What the writer knows of the log's end (a batch advances seq and hash as it queues)."""

    end: int = 0
    seq: int = 0
    hash: str = ""


@dataclass(slots=True)
class LogState:
    """The state of one open log, advanced by the scan (see the module)."""

    head: Head = field(default_factory=Head)  # the end of what was read: byte offset, last seq, its hash
    ckpt: str | None = None  # the checkpoint id, minted with the first event
    index: list[tuple[int, int]] = field(default_factory=list)  # side index records read or added: (offset, seq)
    index_dirty: bool = False  # a seek found the index wrong: rebuild it under the lock
    last_member: tuple[int, int] = (0, 1)  # (offset, first seq) of the newest member seen: cheap tail reads

    def restart(self) -> None:
        """Forget what was read of the file (it is read again from its start); the checkpoint
        id stays, as the file read next must be the same checkpoint's."""
        self.head, self.index, self.last_member, self.index_dirty = Head(), [], (0, 1), False
