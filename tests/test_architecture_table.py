"""docs/architecture.md's "Where to look" names every module of ``ledger/`` and ``projections/``,
and names nothing that does not exist.

A module is a ``.py`` file of a package (every folder from the root down to it has an
``__init__.py``; so ``adapters/skill-template/``, a template copied into a skill directory, is
not one), an empty ``__init__.py`` excepted. The table's first column names modules (and folders,
with a trailing ``/``) in backquotes; a bare name is in the folder of the name before it in the
same cell, the first name of a cell is relative to the table's root (``ledger/`` or
``projections/``).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
TABLE_ROOTS = {"**The write side, `ledger/`**": "ledger", "**The read side, `projections/`**": "projections"}


def _section() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## Where to look\n")
    end = text.index("\n## ", start + 1)
    return text[start:end].splitlines()


def named() -> tuple[dict[Path, str], list[str]]:
    """Every path the tables name (→ the row that names it), and the rows whose names cannot be read."""
    out: dict[Path, str] = {}
    unreadable = []
    root: str | None = None
    for line in _section():
        for heading, table_root in TABLE_ROOTS.items():
            if line.startswith(heading):
                root = table_root
        if not line.startswith("| `") or root is None:
            continue
        first = re.split(r"(?<!\\)\|", line)[1]
        names = re.findall(r"`([^`]+)`", first)
        if not names:
            unreadable.append(line)
        folder = Path(root)
        for i, name in enumerate(names):
            if "/" in name.rstrip("/") or i == 0:
                path = Path(root) / name
            else:
                path = folder / name
            folder = path if name.endswith("/") else path.parent
            out[path] = line
    return out, unreadable


def modules() -> set[Path]:
    found = set()
    for top in TABLE_ROOTS.values():
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT)
            folders = [ROOT / Path(*rel.parts[:i]) for i in range(1, len(rel.parts))]
            if not all((d / "__init__.py").is_file() for d in folders):
                continue  # not a package's module (a template, a data folder)
            if path.name == "__init__.py" and not path.read_text(encoding="utf-8").strip():
                continue  # an empty package face
            found.add(rel)
    return found


def test_the_where_to_look_table_names_every_module() -> None:
    paths, _ = named()
    missing = sorted(str(m) for m in modules() - set(paths))
    assert not missing, f"modules without a row in docs/architecture.md's 'Where to look': {missing}"


def test_the_where_to_look_table_names_only_what_exists() -> None:
    paths, unreadable = named()
    assert not unreadable, unreadable
    gone = sorted(str(p) for p in paths if not (ROOT / p).exists())
    assert not gone, f"docs/architecture.md's 'Where to look' names what does not exist: {gone}"
    assert modules() and len(paths) >= len(modules())  # the parse read the tables at all
