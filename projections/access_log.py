"""ARI's access log, ``memory_access.jsonl``: one JSON line per read and write.

It records who (the current node), which tool and which ids came back, so a run can be
audited for what each node actually saw. Rotated at a size limit; off with
``ARI_MEMORY_ACCESS_LOG=0``.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import msgspec

from ledger import config
from ledger.events import utc_now

ACCESS_LOG_NAME = "memory_access.jsonl"
MAX_BYTES = 10 * 1024 * 1024
KEEP_ROTATED = 3


class AccessLog:
    def __init__(self, checkpoint_dir: Path, max_bytes: int = MAX_BYTES) -> None:
        self.path = checkpoint_dir / ACCESS_LOG_NAME
        self.max_bytes = max_bytes
        self._lock = threading.Lock()

    def record(self, tool: str, ids: list[str] | None = None, *, node: str | None = None, **details: Any) -> None:
        """One line: who (``node``, else the current node), which tool, which ids."""
        if not config.access_log_enabled():
            return
        who = node or config.current_node()
        line = msgspec.json.encode(
            {"ts": utc_now(), "pid": os.getpid(), "node": who, "tool": tool, "ids": ids or [], **details}
        )
        with self._lock:
            self._rotate_if_full()
            with open(self.path, "ab") as f:
                f.write(line + b"\n")

    def _rotate_if_full(self) -> None:
        try:
            if self.path.stat().st_size < self.max_bytes:
                return
        except FileNotFoundError:
            return
        for i in range(KEEP_ROTATED - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{i + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
