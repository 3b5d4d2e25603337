"""The confusion table of a claim corpus (truth × verdict), as the blind corpora and the
claim sets print it: one grammar of rows and columns for both."""

from __future__ import annotations

from collections import Counter
from typing import Any

TRUTHS = ("correct", "wrong", "no_evidence")
VERDICTS = ("checked", "mismatch", "unchecked")
COLUMNS = (*VERDICTS, "missing")  # missing: the tool listed no number written so


def verdict_of(found: dict[str, Any] | None) -> str:
    return "missing" if found is None else str(found.get("verdict"))


def table(rows: tuple[str, ...], counts: Counter[tuple[str, str]], title: str) -> str:
    width = max(len(r) for r in (*rows, title)) + 2
    lines = [title.ljust(width) + "".join(c.rjust(11) for c in COLUMNS) + "      total"]
    for row in rows:
        cells = [counts[(row, c)] for c in COLUMNS]
        lines.append(row.ljust(width) + "".join(str(n).rjust(11) for n in cells) + str(sum(cells)).rjust(11))
    return "\n".join(lines)
