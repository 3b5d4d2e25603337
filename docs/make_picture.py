"""Make the README's picture, docs/lineage-report.png, from a fresh demo: the program draws it.

    .venv/bin/python docs/make_picture.py        # or: make picture

It runs ``ari-ledger demo ari-demo`` in a new temporary directory (so the page names its
checkpoint ``ari-demo/checkpoint``, the same on every machine), renders the demo's
``report.html`` in headless Chromium at 1600 x 1000, and writes the picture and, beside it,
``docs/lineage-report.png.source.json``: the sha256 of the report it was rendered from and the
sha256 of the picture. ``tests/docs/test_picture.py`` makes the report of a fresh demo again and
fails when its sha256 is not the recorded one: the picture is stale, run this again.

The demo's entry ids and times (UUIDv7s and ISO times from the moment it ran) differ on every
run; they are not drawn (only a click shows them), and are replaced by ``<uuid>`` and ``<time>``
before the report is hashed (``report_digest``). Everything else of the page is hashed as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
PICTURE = DOCS / "lineage-report.png"
SOURCE = DOCS / "lineage-report.png.source.json"
WIDTH, HEIGHT = 1600, 1000
CHROMIUM = "chromium"
COMMAND = "python docs/make_picture.py"

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_TIME = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")


def demo_report(workdir: Path) -> Path:
    """A fresh demo in ``workdir/ari-demo`` (``ari-ledger demo``, this interpreter's); its report."""
    subprocess.run(
        [sys.executable, "-m", "projections", "demo", "ari-demo"],
        cwd=workdir,
        env={k: v for k, v in os.environ.items() if not k.startswith(("ARI_", "LETTA_"))},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=True,
        timeout=600,
    )
    return workdir / "ari-demo" / "report.html"


def report_digest(html: str) -> str:
    """sha256 of the report with the demo's run-dependent ids and times replaced."""
    stable = _TIME.sub("<time>", _UUID.sub("<uuid>", html))
    return hashlib.sha256(stable.encode("utf-8")).hexdigest()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def chromium() -> str | None:
    """The Chromium to render with (``$CHROMIUM`` or ``chromium`` on PATH), or None."""
    return shutil.which(os.environ.get("CHROMIUM", CHROMIUM))


def render(report: Path, picture: Path, browser: str) -> None:
    """The page as headless Chromium draws it at WIDTH x HEIGHT, as a PNG."""
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",  # also as root, in a container
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                f"--window-size={WIDTH},{HEIGHT}",
                "--virtual-time-budget=5000",  # the page's script has run (fit to width) before the shot
                f"--screenshot={picture}",
                report.resolve().as_uri(),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
            timeout=120,
        )
    if not picture.is_file() or picture.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
        raise RuntimeError(f"{browser} wrote no PNG to {picture}")


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's header."""
    data = path.read_bytes()[:24]
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def main() -> int:
    browser = chromium()
    if browser is None:
        print("error: chromium not found (Debian: apt-get install -y chromium; or set CHROMIUM)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ari-picture-") as tmp:
        report = demo_report(Path(tmp))
        render(report, PICTURE, browser)
        source = {
            "made_by": COMMAND,
            "report": "report.html of `ari-ledger demo ari-demo`, entry ids and times replaced (docs/make_picture.py)",
            "report_sha256": report_digest(report.read_text(encoding="utf-8")),
            "picture_sha256": file_digest(PICTURE),
            "size": list(png_size(PICTURE)),
        }
    SOURCE.write_text(json.dumps(source, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {PICTURE.relative_to(DOCS.parent)} and {SOURCE.relative_to(DOCS.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
