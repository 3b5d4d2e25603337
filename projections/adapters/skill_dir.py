"""A skill directory ARI can point ``memory-skill.path`` at, written from package-data templates.

ARI starts a skill as ``{python} {dir}/src/server.py`` with ``PYTHONPATH={dir}:{ari-core}``, and
ari-core's in-process calls import ``ari_skill_memory``. The directory answers both without an
edit to ARI: ``src/server.py`` runs this project's MCP server, and ``pip install {dir}`` installs a
distribution named ``ari-skill-memory`` whose modules forward to :mod:`projections.api.backend`.
The templates live in ``projections/adapters/skill-template/`` (a name no import can reach); files ending
in ``.in`` get ``$placeholders`` filled in (``string.Template``) and lose the suffix, the others
are copied as they are.

    ari-ledger ari-skill DIR
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from importlib.metadata import version
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from string import Template

from ledger import layout
from ledger.errors import InvalidInput

TEMPLATES = "skill-template"
FILLED = ".in"
SKIPPED = ("__pycache__", ".pyc")


def _templates(folder: Traversable, rel: tuple[str, ...] = ()) -> Iterator[tuple[Traversable, tuple[str, ...]]]:
    for item in sorted(folder.iterdir(), key=lambda t: t.name):
        if item.name.endswith(SKIPPED):
            continue
        if item.is_dir():
            yield from _templates(item, (*rel, item.name))
        else:
            yield item, (*rel, item.name)


def mcp_manifest() -> dict:
    """ARI's ``mcp.json`` for the skill: the tools ARI's pooled server serves by default (ARI's and
    the read-only ones), from the server's own list, so the two cannot drift."""
    from projections.adapters.mcp_server import served_tools

    return {
        "name": "memory-skill",
        "version": version("ari-memory-ledger"),
        "description": "Ancestor-scoped, artifact-grounded memory (ari-memory-ledger)",
        "tools": served_tools(),
        "runtime": "python",
        "entrypoint": "src/server.py",
    }


def write_skill_dir(target: str | Path) -> list[Path]:
    """Write (or refresh) the skill directory at ``target``; returns the files written.

    Files of the template are overwritten; anything else in ``target`` (a ``.venv``) is left alone.
    """
    problem = layout.not_utf8(target, "the skill's files record its path")
    if problem is not None:  # before anything is written: no half a skill directory
        raise InvalidInput("dir", problem)
    root = Path(target).resolve()
    ledger_version = version("ari-memory-ledger")
    values = {
        "skill_dir": str(root),
        "ledger_version": ledger_version,
        "ledger_local_version": re.sub(r"[^A-Za-z0-9.]", ".", ledger_version),
    }
    written = []
    for source, rel in _templates(files("projections.adapters") / TEMPLATES):
        text = source.read_text(encoding="utf-8")
        if rel[-1].endswith(FILLED):
            rel = (*rel[:-1], rel[-1][: -len(FILLED)])
            text = Template(text).substitute(values)
        written.append(_write(root.joinpath(*rel), text))
    written.append(_write(root / "mcp.json", json.dumps(mcp_manifest(), indent=2) + "\n"))
    return written


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
