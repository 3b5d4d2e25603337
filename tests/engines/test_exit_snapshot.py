"""A library writer leaves its snapshot at exit (issue 39).

A script that writes many entries and exits without closing used to lose the snapshot: the
exit-time save folds in parallel from about 8,192 events, and its thread pool refused work once
the interpreter had begun to exit ("cannot schedule new futures after interpreter shutdown"),
so every later read folded the whole log again. A backend made directly (not through
``get_backend``'s cache) was not closed at exit at all. Each is run as a real process here; the
next process finds a snapshot at the log's end, and folds nothing from scratch.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ledger import layout
from ledger.layout import SNAPSHOT_NAME
from projections.engines.snapshot import read_preamble
from tests.support.env import subprocess_env

WRITER = textwrap.dedent(
    """
    import sys
    from projections.api import MemoryBackend, get_backend

    checkpoint, count, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    memory = get_backend(checkpoint) if how == "cached" else MemoryBackend(checkpoint)
    for i in range(count):
        node = f"node_{i % 40}"
        added = memory.add_memory(node, f"step {i}: tile {i % 97} ran at {i * 0.37:.2f} GFlops/s", current_node=node)
        assert added["ok"], added
    # exits without close()
    """
)

READER = textwrap.dedent(
    """
    import sys
    from projections.api import MemoryBackend

    memory = MemoryBackend(sys.argv[1], readonly=True)
    print(len(memory.search_memory("tile 5", ["node_5"], limit=3)["results"]))
    memory.close()
    """
)


def run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=subprocess_env(), timeout=600
    )


@pytest.mark.parametrize(("how", "count"), [("cached", 20_000), ("direct", 9_000)])
def test_the_next_process_finds_the_writers_snapshot(tmp_path: Path, how: str, count: int) -> None:
    checkpoint = tmp_path / "ckpt"
    wrote = run(WRITER, str(checkpoint), str(count), how)
    assert wrote.returncode == 0, wrote.stderr
    assert "failed" not in wrote.stderr and "Traceback" not in wrote.stderr, wrote.stderr
    assert "from scratch" not in wrote.stderr, wrote.stderr  # the save at exit takes that advice itself
    snapshot = layout.log_path(checkpoint).with_name(SNAPSHOT_NAME)
    assert snapshot.is_file(), f"no snapshot after {count} entries written by a {how} backend"
    assert read_preamble(snapshot).cursor == count
    read = run(READER, str(checkpoint))
    assert read.returncode == 0, read.stderr
    assert read.stdout.strip() == "3"
    assert "from scratch" not in read.stderr, read.stderr
