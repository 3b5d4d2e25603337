"""A new log written by a tool and renamed over the log: the Ledger's own operation
(:meth:`ledger.Ledger.replace_log`, as ZODB's ``FileStorage.pack`` takes the file its packer
wrote), which a tool such as a redaction only feeds with the new file's members. The other open
ledgers follow the new file at their next lock or refresh."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from .anchor import HeadFile
from .events import Event, EventType
from .guard import prepare_event
from .log import LogFile, compress_member, fsync_dir, index_due

# the Ledger's signer: (seq, prev hash, node, type, canonical body) -> (the event, its log line)
Signer = Callable[[int, str, str, EventType, dict[str, Any]], tuple[Event, bytes]]

log = logging.getLogger("ledger")


class LogReplacement:
    """A new log a tool writes beside the log, renamed over it by :meth:`commit` (see
    :meth:`Ledger.replace_log`). Its members go in whole with :meth:`member` (bytes as they are,
    or rebuilt) and :meth:`append` (a new event after the last one written); both keep its side
    index."""

    def __init__(self, log_file: LogFile, head_file: HeadFile, sign: Signer, path: Path, out: BinaryIO) -> None:
        self._log, self._head, self._sign = log_file, head_file, sign  # the log it replaces, and its signer
        self.path = path  # its temporary name, beside the log
        self.out = out  # the new file, open for writing
        self.index: list[tuple[int, int]] = []  # its side index, as members go in
        self.last: Event | None = None  # the last event written
        self.replaced = False  # the rename happened: the log is this file now

    @property
    def size(self) -> int:
        """Bytes written so far."""
        return self.out.tell()

    def member(self, data: bytes, events: list[Event]) -> None:
        """Write one whole gzip member, ``data``, holding ``events`` (in order, after the last)."""
        if events:
            offset = self.out.tell()
            if index_due(self.index, offset):
                self.index.append((offset, events[0].seq))
            self.last = events[-1]
        self.out.write(data)

    def append(self, node_id: str, type: EventType, body: Any) -> Event:
        """Validate and guard one event (as :meth:`Ledger.append`), sign it after the last event
        written, and write it as a member of its own; return it."""
        prepared = prepare_event(node_id, type, body, None)
        last = self.last
        event, line = self._sign(last.seq + 1 if last else 1, last.hash if last else "", *prepared)
        self.member(compress_member(line, single_event=True), [event])
        return event

    def commit(self) -> None:
        """Make this file the log: synced, renamed over the log, the directory synced, its side
        index written (a failure only warns: a stale index is found out and rebuilt), the head
        file anchored at its last event. When it raises, ``replaced`` says whether the rename
        happened (before it, the log is as it was)."""
        last = self.last
        if last is None:
            raise RuntimeError("a replacement log holds no event")
        self.out.flush()
        os.fsync(self.out.fileno())
        os.replace(self.path, self._log.path)
        self.replaced = True
        fsync_dir(self._log.path.parent)
        try:
            self._log.write_index(self.index)
        except OSError as exc:  # derived: a stale index is found out and rebuilt by the next open
            log.warning("could not rewrite %s after the redaction (%s)", self._log.idx_path, exc)
        self._head.write(last.ckpt, last.seq, last.hash, both=True)
