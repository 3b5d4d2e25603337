"""A process using one checkpoint as ARI's processes do, driven line by line over stdin.

    python tests/support/memory_proc.py CKPT

Commands (one per line; each answers one line ``ok <result>`` on stdout):

- ``write N PREFIX``: N ``add_memory`` calls on node ``root``; answers the last seq
- ``bulk N PREFIX``: N entries in one group commit (one push round of several batches)
- ``purge``: ``purge_checkpoint()``
- ``flush``: wait until the Letta agent holds the whole log; answers True/False
- ``exit``: leave the way a process ends (``atexit`` closes the backend); answers the close's seconds

The test process talks to it with :class:`MemoryProcess`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def main(checkpoint: str) -> None:
    from projections.api import clear_backend_cache, get_backend

    backend = get_backend(checkpoint)
    print("ok ready", flush=True)
    for line in sys.stdin:
        cmd, *args = line.split()
        if cmd == "write":
            last = 0
            for i in range(int(args[0])):
                last = backend.add_memory("root", f"{args[1]} note {i}", current_node="root")["seq"]
            answer: object = last
        elif cmd == "bulk":
            with backend.session.batch() as batch:
                for i in range(int(args[0])):
                    batch.append("root", "memory_added", {"text": f"{args[1]} entry {i}"}, current_node="root")
            answer = backend.session.ledger.last_seq
        elif cmd == "purge":
            answer = backend.purge_checkpoint()["removed_node"]
        elif cmd == "flush":
            answer = backend.flush_projections(180)
        elif cmd == "exit":
            started = time.perf_counter()
            clear_backend_cache()  # what atexit does
            print(f"ok {time.perf_counter() - started:.3f}", flush=True)
            return
        else:
            answer = f"unknown command {cmd}"
        print(f"ok {answer}", flush=True)


class MemoryProcess:
    """One driven process (see the module docstring)."""

    def __init__(self, checkpoint: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(checkpoint)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )  # answers "ok ready" once open: ``read()`` it

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def read(self) -> str:
        assert self.proc.stdout is not None
        answer = self.proc.stdout.readline().strip()
        if not answer.startswith("ok "):
            raise RuntimeError(f"memory process answered {answer!r} (exit code {self.proc.poll()})")
        return answer[3:]

    def ask(self, line: str) -> str:
        self.send(line)
        return self.read()

    def exit(self) -> float:
        """End it as a process ends; the seconds its close took."""
        seconds = float(self.ask("exit"))
        self.proc.wait(60)
        return seconds

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(60)


if __name__ == "__main__":
    main(sys.argv[1])
