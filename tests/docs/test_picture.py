"""The README's picture is made by the program (issue 28, item 4): docs/lineage-report.png is
headless Chromium's rendering of a fresh demo's report.html, made by ``docs/make_picture.py``
(``make picture``), which records beside it the sha256 of the report it drew.

A fresh demo's report must hash to that recorded sha256: when the report or the demo changes,
this fails until the picture is made again. The picture itself must be the one that command
wrote. With Chromium here, the command's rendering is checked too.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _make_picture() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_picture", ROOT / "docs" / "make_picture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


mp = _make_picture()
STALE = f"docs/lineage-report.png is stale: make it again with `{mp.COMMAND}` (or `make picture`)"


@pytest.fixture(scope="module")
def source() -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(mp.SOURCE.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def fresh_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cast(Path, mp.demo_report(tmp_path_factory.mktemp("picture")))


def test_the_readme_shows_the_picture() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(r"!\[[^\]]*\]\(docs/lineage-report\.png\)", readme)


def test_the_picture_is_of_the_report_a_fresh_demo_writes(source: dict[str, Any], fresh_report: Path) -> None:
    assert mp.report_digest(fresh_report.read_text(encoding="utf-8")) == source["report_sha256"], STALE


def test_the_picture_is_the_one_the_command_wrote(source: dict[str, Any]) -> None:
    assert mp.file_digest(mp.PICTURE) == source["picture_sha256"], STALE
    assert list(mp.png_size(mp.PICTURE)) == source["size"] == [mp.WIDTH, mp.HEIGHT]
    assert source["made_by"] == mp.COMMAND


def test_the_digest_ignores_only_the_runs_ids_and_times() -> None:
    page = '<p data-id="01a234da-8329-7f49-8541-ddca8c297976">2026-12-02T03:44:24Z node_A 9.87</p>'
    same = '<p data-id="01a234dc-88de-7f6d-831b-ba918224a5b2">2026-12-02T03:46:37Z node_A 9.87</p>'
    assert mp.report_digest(page) == mp.report_digest(same)
    assert mp.report_digest(page) != mp.report_digest(page.replace("9.87", "9.88"))
    assert mp.report_digest(page) != mp.report_digest(page.replace("node_A", "node_B"))


def test_the_command_draws_the_report(fresh_report: Path, tmp_path: Path) -> None:
    browser = mp.chromium()
    if browser is None:
        pytest.skip("chromium not found (Debian: apt-get install -y chromium): the picture cannot be drawn here")
    picture = tmp_path / "lineage-report.png"
    mp.render(fresh_report, picture, browser)
    assert mp.png_size(picture) == (mp.WIDTH, mp.HEIGHT)
