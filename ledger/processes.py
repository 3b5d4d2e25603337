"""Whether a process still lives: for what a dead process left behind (a snapshot's temporary
file, ``projections.engines.snapshot``) and for the local Letta harness's recorded pids
(``projections.letta_server``, which may import the write side and nothing else of this package).
"""

from __future__ import annotations

import os


def pid_alive(pid: int | None) -> bool:
    """True while the process ``pid`` exists and is not a zombie (an exited child not yet
    reaped); False for no pid, 0 or a negative one. A process of another user counts as alive."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except (OSError, IndexError):
        pass
    return True
