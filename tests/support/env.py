"""Where things are, and a clean ARI environment for the test process and its children."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
PYTHON = sys.executable

# ARI's and this library's variables: no test inherits them from the shell that runs pytest
ARI_VARS = (
    "ARI_CHECKPOINT_DIR",
    "ARI_CURRENT_NODE_ID",
    "LETTA_BASE_URL",
    "LETTA_API_KEY",
    "LETTA_EMBEDDING_CONFIG",
    "ARI_MEMORY_LETTA_OVERFETCH",
    "ARI_MEMORY_AUTO_RESTORE",
    "ARI_MEMORY_CONSOLIDATE",
    "ARI_MEMORY_MCP_ALL_TOOLS",
    "ARI_MEMORY_ACCESS_LOG",
    "ARI_MEMORY_SEARCH_ENGINE",
    "ARI_MEMORY_BACKEND",
)


def subprocess_env(**extra: str) -> dict[str, str]:
    """Environment for a child process running this project's code."""
    env = {k: v for k, v in os.environ.items() if k not in ARI_VARS}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def ari_ledger(
    *args: object, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``ari-ledger ARGS…`` in a child process, as a person types it."""
    return subprocess.run(
        [PYTHON, "-m", "projections", *map(str, args)],
        capture_output=True,
        text=True,
        env=env if env is not None else subprocess_env(),
        timeout=timeout,
    )


def first_line(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> str:
    """The child's first line on stdout, read a byte at a time from the pipe itself. A buffered
    ``proc.stdout.readline()`` may take more than the line into the file object's buffer, and
    ``communicate()`` with two pipes reads the raw pipes, so what was taken would be lost (a
    writer's first acknowledged ids, say)."""
    assert proc.stdout is not None
    fd, line = proc.stdout.fileno(), bytearray()
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return line.decode()
