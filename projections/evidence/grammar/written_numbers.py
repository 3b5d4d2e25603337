"""Numbers a claim writes other than as one run of digits (docs/grounding.md, 1): in words
(``three seeds``, ``ninety epochs``, ``twice as fast``, ``two-fold``) and as compound
durations (``1 h 23 min``, ``2h15m``, ``3 days 4 hours``, ``14 min 37 s``).

Each is found as a span of the text with its value; :mod:`projections.evidence.grammar.quantities`
reads what stands around it (a noun, a comparison) as it does for digits. ``one`` is read
only before a count noun it can only count (``one GPU``), never in ``one of`` or ``at one
point``: a claim's prose uses it in too many other ways.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_UNITS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_RATIOS = {"twice": 2, "thrice": 3, "double": 2, "triple": 3, "quadruple": 4, "half": 0.5}
_WORDS = re.compile(
    r"\b(?:(?P<tens>" + "|".join(_TENS) + r")(?:[- ](?P<unit2>" + "|".join(k for k in _UNITS if k != "one") + r"))?"
    r"|(?P<unit>" + "|".join(_UNITS) + r")|(?P<dozen>a dozen|dozen)|(?P<hundred>a hundred|one hundred))"
    r"(?P<fold>-fold)?\b",
    re.I,
)
_RATIO_WORDS = re.compile(r"\b(?P<ratio>" + "|".join(_RATIOS) + r")\b(?=\s+(?:as|the|that|of|its)\b)", re.I)
# a count "one" may stand for: before one of these nouns only
_ONE_NOUNS = re.compile(
    r"\s+(?:single\s+)?(?:gpu|cpu|node|socket|thread|core|rank|seed|epoch|run|replicate|repetition|device|machine|"
    r"instance|worker|process|sample|batch|iteration|step|layer|head|client|server|disk|drive)\b",
    re.I,
)


# every word a match of _WORDS or _RATIO_WORDS holds one of, whole (a cheap first look)
_VOCABULARY = frozenset([*_UNITS, *_TENS, *_RATIOS, "dozen", "hundred"])
_LETTERS = re.compile(r"[a-z]+")


def may_hold(text: str) -> bool:
    """Whether ``text`` has a word a number may be written with (``three``, ``half``, ``dozen``)."""
    return not _VOCABULARY.isdisjoint(_LETTERS.findall(text.lower()))


class Spelled(NamedTuple):
    """A number found written in words or as a compound duration."""

    start: int
    end: int
    value: float
    tolerance: float
    unit: str | None = None  # "x" for a ratio word (twice, two-fold), "second" for a duration


def words(text: str) -> list[Spelled]:
    """Numbers written in words: counts (``three seeds``), ratios (``twice as fast``, ``two-fold``)."""
    out: list[Spelled] = []
    if not may_hold(text):
        return out
    for m in _WORDS.finditer(text):
        one = m.group("unit") and m.group("unit").lower() == "one" and not m.group("fold")
        if one and (not _ONE_NOUNS.match(text, m.end()) or text[max(0, m.start() - 3) : m.start()].lower() == "at "):
            continue
        if m.group("tens"):
            value = _TENS[m.group("tens").lower()] + (_UNITS[m.group("unit2").lower()] if m.group("unit2") else 0)
        elif m.group("unit"):
            value = _UNITS[m.group("unit").lower()]
        elif m.group("dozen"):
            value = 12
        else:
            value = 100
        if text[m.end() : m.end() + 1] in ("-",) and not m.group("fold") and text[m.end() + 1 : m.end() + 2].isdigit():
            continue
        out.append(Spelled(m.start(), m.end(), float(value), 0.0, "x" if m.group("fold") else None))
    for m in _RATIO_WORDS.finditer(text):
        out.append(Spelled(m.start(), m.end(), float(_RATIOS[m.group("ratio").lower()]), 0.0, "x"))
    return sorted(out)


_DURATION_UNITS = (
    ("day", r"d|days?"),
    ("hour", r"h|hrs?|hours?"),
    ("minute", r"m|mins?|minutes?"),
    ("second", r"s|secs?|seconds?"),
    ("millisecond", r"ms"),
)
_SECONDS = {"day": 86400.0, "hour": 3600.0, "minute": 60.0, "second": 1.0, "millisecond": 0.001}
_PART = r"(\d+(?:\.\d+)?)\s?(" + "|".join(f"(?P<{u}>{p})" for u, p in _DURATION_UNITS) + r")(?![A-Za-z])"
_PART_RE = re.compile(_PART)


def durations(text: str) -> list[Spelled]:
    """Compound durations: two or more parts, each a number and a time unit, largest first
    (``1 h 23 min`` = 4,980 s, ``2h15m``, ``3 h 41 min 12 s``), read as one value in seconds
    to the precision of its last part."""
    out: list[Spelled] = []
    pos = 0
    while True:
        first = _part_at(text, pos, search=True)
        if first is None:
            return out
        parts = [first]
        while True:
            gap = re.match(r"\s*(?:,\s*|and\s+)?", text[parts[-1][1] :])
            nxt = _part_at(text, parts[-1][1] + (gap.end() if gap else 0), search=False)
            if nxt is None or _SECONDS[nxt[3]] >= _SECONDS[parts[-1][3]]:
                break
            parts.append(nxt)
        if len(parts) >= 2:
            value = sum(float(p[2]) * _SECONDS[p[3]] for p in parts)
            last = parts[-1]
            decimals = len(last[2].partition(".")[2])
            tol = 0.5 * 10.0**-decimals * _SECONDS[last[3]] * (1 + 1e-9)
            out.append(Spelled(parts[0][0], last[1], value, tol, "second"))
            pos = last[1]
        else:
            pos = first[1]


def _part_at(text: str, pos: int, *, search: bool) -> tuple[int, int, str, str] | None:
    """One ``number unit`` part at (or, ``search``, after) ``pos``: start, end, digits, unit."""
    m = _PART_RE.search(text, pos) if search else _PART_RE.match(text, pos)
    while search and m is not None and m.start() and (text[m.start() - 1].isalnum() or text[m.start() - 1] in "._"):
        m = _PART_RE.search(text, m.end())
    if m is None:
        return None
    unit = next(u for u, _ in _DURATION_UNITS if m.group(u) is not None)
    return m.start(), m.end(), m.group(1), unit
