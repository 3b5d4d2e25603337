"""Which modules a fresh interpreter holds after some code runs: the tests of what a client or
a command line loads (``HEAVY`` lists), each in its own process, the way ARI or a console
script starts one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Sequence

from support.env import subprocess_env


def loaded_after(prologue: str, script: str, heavy: Sequence[str], *args: str, epilogue: str = "") -> dict[str, bool]:
    """For each of ``heavy``, whether it is in ``sys.modules`` once ``prologue``, ``script`` and
    ``epilogue`` ran in a fresh interpreter (``sys.argv[1:]``: ``args``)."""
    code = "\n".join(textwrap.dedent(part) for part in ("import json, sys", prologue, script, epilogue))
    code += f"\nprint(json.dumps({{name: name in sys.modules for name in {tuple(heavy)!r}}}))"
    run = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=subprocess_env(), timeout=300
    )
    assert run.returncode == 0, run.stderr
    return dict(json.loads(run.stdout.splitlines()[-1]))
