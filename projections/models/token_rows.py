"""The embedding matrix, read from the weights file a page at a time as tokens need it.

A memory mapping of the file would be shared page cache, but a kernel that keeps the file in
large folios maps a whole folio on a fault: a few hundred tokens touched all 16 MB of it
(every page resident in the process, madvise(MADV_RANDOM) or not). Reading the pages a batch's
tokens sit on into a private anonymous buffer keeps resident only what was read: a process
that embeds short notes holds the rows of the tokens it met, and a cold fold of a large log
the whole matrix, once.

Filling needs no lock: a page's bytes are written before it is marked present (and a row ready
only once all its pages are), two threads filling one page write the same bytes, and a reader
reads only rows whose pages are present. The file
stays open (position-free ``pread``, so a fork shares it safely) and is closed with the object,
never by the exit handlers (a backend's last save at exit may still embed).
"""

from __future__ import annotations

import mmap
import os
import weakref
from pathlib import Path

import numpy as np

from ledger.errors import LedgerError

PAGE = mmap.PAGESIZE


class TokenRows:
    """A ``rows x cols`` matrix of ``dtype`` stored at ``offset`` in ``path``; ``take`` reads it."""

    def __init__(self, path: Path, offset: int, rows: int, cols: int, dtype: np.dtype) -> None:
        self.path, self.offset = path, offset
        self.shape = (rows, cols)
        self.dtype = dtype
        self._row_bytes = cols * dtype.itemsize
        size = rows * self._row_bytes
        self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        # Closed with the object, not at exit: an exit handler (a backend's last snapshot save) may still embed.
        weakref.finalize(self, os.close, self._fd).atexit = False
        if os.fstat(self._fd).st_size < offset + size:
            raise LedgerError(f"{path}: the matrix ends at byte {offset + size}, past the file's end; reinstall it")
        # Private and anonymous: untouched pages cost nothing; no huge pages (a 2 MB page per token read).
        self._buffer = mmap.mmap(-1, max(size, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_NOHUGEPAGE"):
            self._buffer.madvise(mmap.MADV_NOHUGEPAGE)
        self._size = size
        self._matrix = np.frombuffer(self._buffer, dtype=dtype, count=rows * cols).reshape(rows, cols)
        self._present = np.zeros(-(-size // PAGE), dtype=bool)  # pages read
        self._ready = np.zeros(rows, dtype=bool)  # rows whose every page was read

    def take(self, ids: np.ndarray) -> np.ndarray:
        """The rows of ``ids`` (any shape of valid row indices), at the stored precision."""
        self._read_pages(ids)
        return self._matrix[ids]

    def _read_pages(self, ids: np.ndarray) -> None:
        flat = np.asarray(ids, dtype=np.intp).ravel()
        if flat.size == 0:
            return
        if int(flat.min()) < 0 or int(flat.max()) >= self.shape[0]:
            raise IndexError(f"token ids must lie in [0, {self.shape[0]}); got {int(flat.min())}..{int(flat.max())}")
        if self._ready[flat].all():  # a query's usual case: every row read before (~5 µs in all)
            return
        first = flat * self._row_bytes // PAGE
        last = (flat * self._row_bytes + self._row_bytes - 1) // PAGE
        # every page from a row's first to its last (a row may be longer than a page)
        wanted = np.minimum(first[:, None] + np.arange(int((last - first).max()) + 1), last[:, None]).ravel()
        missing = wanted[~self._present[wanted]]
        view = memoryview(self._buffer)
        for page in np.unique(missing).tolist():
            start = page * PAGE
            end = min(start + PAGE, self._size)
            self._read_into(view[start:end], self.offset + start)
            self._present[page] = True
        self._ready[flat] = True  # after their pages: a row marked ready is whole

    def _read_into(self, into: memoryview, at: int) -> None:
        done = 0
        while done < len(into):
            n = os.preadv(self._fd, [into[done:]], at + done)
            if n == 0:
                raise LedgerError(f"{self.path}: the file ended at byte {at + done} while reading its matrix")
            done += n
