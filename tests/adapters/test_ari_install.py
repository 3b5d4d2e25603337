"""A good guest in ARI's Python (R36, issue 16): installing this project into an environment
that holds ARI's locked packages moves none of them.

ARI installs its ``requirements.lock`` exactly (``tests/ari-pins.txt`` holds its pins). The test
resolves this project's dependencies under those pins (a requirement that needs another version
of a pinned package fails here, naming it), builds an environment holding ARI's versions of every
pinned package the project touches, runs the plain ``pip install`` the migration doc gives, and
compares the environment before and after: every package ARI pins is where it was.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from support.env import ROOT

PINS = ROOT / "tests" / "ari-pins.txt"


def _name(raw: str) -> str:
    return re.sub(r"[-_.]+", "-", raw).lower()


def ari_pins() -> dict[str, str]:
    pins = {}
    for line in PINS.read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[_name(name)] = version
    return pins


def run(*cmd: str, **kw: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def installed(python: Path) -> dict[str, str]:
    listed = run(str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check")
    return {_name(p["name"]): p["version"] for p in json.loads(listed.stdout)}


def test_installing_the_project_moves_none_of_aris_pinned_packages(tmp_path: Path) -> None:
    pins = ari_pins()
    assert pins["mcp"] == "1.27.1"  # the pin that an earlier `mcp>=1.28` requirement moved

    # 1. this project's dependencies resolve under ARI's pins (pip names the conflict if not)
    report = tmp_path / "resolved.json"
    run(
        sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q",
        "--report", str(report), "-c", str(PINS), str(ROOT),
    )  # fmt: skip
    resolved = {
        _name(i["metadata"]["name"]): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]
    }
    touched = {name: pins[name] for name in resolved if name in pins}
    assert {"mcp", "pydantic", "numpy", "letta-client", "rich"} <= touched.keys()

    # 2. an environment holding ARI's versions of every pinned package the project needs
    venv = tmp_path / "ari-env"
    run(sys.executable, "-m", "venv", str(venv))
    python = venv / "bin" / "python"
    run(str(python), "-m", "pip", "install", "-q", "--no-deps", *(f"{n}=={v}" for n, v in sorted(touched.items())))
    before = installed(python)
    assert all(before[n] == v for n, v in touched.items())

    # 3. the install as docs/ari-migration.md writes it, without constraints: nothing ARI pins moves
    run(str(python), "-m", "pip", "install", "-q", str(ROOT))
    after = installed(python)
    moved = {n: (before[n], after.get(n)) for n in touched if after.get(n) != before[n]}
    assert moved == {}, f"the install moved ARI's pinned packages (before, after): {moved}"
    assert "ari-memory-ledger" in after
    run(str(python), "-c", "import mcp.server.fastmcp, projections.adapters.mcp_server, ledger")
