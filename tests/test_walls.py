"""The walls of the read side are contracts CI checks, not sentences: a door planted in a copy
of the tree breaks the contract that names it (``lint-imports`` in a child process, on the
copy), and the tree as it is keeps every contract."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(tree: Path) -> str:
    run = subprocess.run([str(LINT), "--no-cache"], cwd=tree, capture_output=True, text=True, timeout=300)
    return run.stdout + run.stderr


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of the packages and the contracts, to plant doors in."""
    copy = tmp_path_factory.mktemp("tree")
    for package in ("ledger", "projections", "bench"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def _status(out: str, contract: str) -> str:
    """KEPT or BROKEN: what lint-imports' summary says of the contract whose name starts so."""
    flat = " ".join(out.split())
    start = flat.index(contract, flat.index("Contracts"))
    return min((w for w in ("KEPT", "BROKEN") if w in flat[start:]), key=lambda w: flat.index(w, start))


def _lint_planted(tree: Path, path: str, line: str) -> str:
    """lint-imports' report once ``line`` is appended to the module at ``path`` (then taken out)."""
    kept = (tree / path).read_text()
    try:
        (tree / path).write_text(kept + "\n" + line + "\n")
        return _lint(tree)
    finally:
        (tree / path).write_text(kept)


@pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed beside this Python")
def test_the_tree_keeps_every_contract(tree: Path) -> None:
    out = _lint(tree)
    assert "0 broken" in out, out


@pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed beside this Python")
@pytest.mark.parametrize(
    "path, line, contract",
    [
        ("projections/tools/prove.py", "from projections.api.session import Session", "The facade has one door"),
        ("projections/adapters/report.py", "import projections.api.verified", "The facade has one door"),
        ("bench/prove_bench.py", "from projections.api.audit import Audit", "The facade has one door"),
        ("projections/evidence/grounding.py", "from projections.api import MemoryBackend", "The read side's layers"),
        ("projections/evidence/claims.py", "from projections.engines import local", "The read side's layers"),
        ("projections/evidence/grammar/units.py", "from projections.evidence import usable", "The rules of evidence"),
        ("ledger/recovery.py", "from ledger.maintenance import repair", "The write side's storage imports neither"),
        ("ledger/events.py", "from ledger.ari import provenance", "The write side's storage imports neither"),
        ("ledger/ari/importer.py", "from ledger.maintenance import bundle", "ARI's formats never import"),
    ],
)
def test_a_planted_door_breaks_its_contract(tree: Path, path: str, line: str, contract: str) -> None:
    out = _lint_planted(tree, path, line)
    assert _status(out, contract) == "BROKEN", out


def test_every_package_ships_in_the_wheel() -> None:
    """A folder of code that ``[tool.setuptools] packages`` does not name works from a clone
    (an editable install finds it) and is missing from the wheel ARI's Python installs."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for package in ("ledger", "projections")
        for init in (ROOT / package).rglob("__init__.py")
        if "skill-template" not in init.parts
    }
    assert found - listed == set(), "packages missing from pyproject.toml's [tool.setuptools] packages"


def test_the_storage_contract_names_every_module_of_the_centre() -> None:
    """The storage's contract lists its modules by name (a forbidden contract has no "every
    other module"): a module added at ``ledger/``'s top level must join the list."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (storage,) = [c for c in contracts if c["name"].startswith("The write side's storage")]
    centre = {f"ledger.{p.stem}" for p in (ROOT / "ledger").glob("*.py") if p.stem != "__init__"}
    assert set(storage["source_modules"]) == centre
