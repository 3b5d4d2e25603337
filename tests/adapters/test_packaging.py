"""The built wheel is what a user installs (issue 11, item 8): only ``ledger`` and
``projections`` at the top level, the demo's run inside, and ``ari-ledger demo`` working
from an empty folder with nothing of the checkout on the path."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from support.env import ROOT, subprocess_env


def pip(command: str, *args: str) -> None:
    """``pip COMMAND -q --no-deps ARGS`` with this interpreter (the build fetches its setuptools)."""
    subprocess.run([sys.executable, "-m", "pip", command, "-q", "--no-deps", *args], check=True, capture_output=True)


def test_the_wheel_installs_two_packages_and_runs_the_demo_from_an_empty_folder(tmp_path: Path) -> None:
    built = tmp_path / "wheel"
    pip("wheel", "-w", str(built), str(ROOT))
    (wheel,) = built.glob("ari_memory_ledger-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"ledger", "projections"}
    assert any(n.startswith("projections/adapters/fixtures/ari_run/") for n in names)

    site = tmp_path / "site"
    pip("install", "--target", str(site), str(wheel))
    empty = tmp_path / "empty"
    empty.mkdir()
    env = subprocess_env()
    env["PYTHONPATH"] = str(site)  # the installed copy only: not the checkout
    where = subprocess.run(
        [sys.executable, "-c", "import ledger, projections; print(ledger.__file__); print(projections.__file__)"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert all(line.startswith(str(site)) for line in where.stdout.split()), where.stdout
    out = tmp_path / "demo"
    demo = subprocess.run(
        [str(site / "bin" / "ari-ledger"), "demo", str(out)],  # the console script the wheel installs
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stderr
    assert (out / "checkpoint" / "memory_ledger" / "memory_ledger.jsonl.gz").is_file()
    assert (out / "report.html").is_file()
    assert os.listdir(empty) == []
