"""``docs/architecture.md``'s table of a checkpoint's files is ``ledger.checkpoint_format.FILES``,
row for row: a file added to the format without a row in the docs (or a row for a file the
format does not define) fails here. Each name the code makes is the one the table shows."""

from __future__ import annotations

import re
from pathlib import Path

from ledger import checkpoint_format as fmt

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def documented() -> list[str]:
    """The first column of the docs' table of a checkpoint's files."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## Files in a checkpoint directory\n")
    section = text[start : text.index("\n## ", start + 1)]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [m.group(1) for row in rows for m in [re.match(r"\| `([^`]+)` \|", row)] if m]


def test_the_docs_table_is_the_formats_table() -> None:
    assert documented() == [f.path for f in fmt.FILES]


def test_every_file_of_the_table_is_named_once() -> None:
    paths = [f.path for f in fmt.FILES]
    assert len(paths) == len(set(paths))


def test_the_names_the_code_makes_are_the_tables() -> None:
    """The writers build their names from the format's constants: a log's head, index and
    set-aside files; the access log's rotation; the snapshot beside the log."""
    from ledger.anchor import HeadFile
    from ledger.layout import log_path, store_dir

    checkpoint = Path("/ckpt")
    log = log_path(checkpoint)
    paths = {f.path for f in fmt.FILES}
    assert str(log.relative_to(checkpoint)) in paths
    assert f"{fmt.STORE_DIR}/{HeadFile(log).path.name}" in paths
    assert f"{fmt.STORE_DIR}/{log.name}{fmt.TORN_MARK}<UTC stamp>" in paths
    assert f"{store_dir(checkpoint).name}/{fmt.SNAPSHOT_NAME}" in paths
    assert fmt.ACCESS_ROTATED.format(stamp="<unix time>[_<n>]") in paths
