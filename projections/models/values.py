"""Value grounding: is the number in a claim's sentence the number in its evidence?

Pure functions over text and bytes; the API reads the files. A *mention* is a metric-like
number in a claim's text: one beside a metric name (``GFlops_per_s=13.64``), beside a unit
(``13.64 GFlops/s``, ``0.96 s``), a ratio (``4.1x``) or a percentage (``7%``, ``+38%``).
Bare numbers (``16 threads``, ``256^3``, ``32x8x64``) and approximate ones (``~35``) are not
claims of a measured value and are not checked.

A plain mention holds when a value it may stand for (the report's metric of that name, or a
metric whose unit it carries, or a cited artifact's column or key of that name) equals it
*within its own rounding*: ``13.6`` matches 13.64, ``13.65`` does not. A ratio or a
percentage may also be derived: ``a/b``, ``100·a/b`` or ``100·(a/b − 1)`` of two values in
reach (this node's metrics, an ancestor's metric of the same name, the sentence's own
numbers). Every value is also held to its range: declared, else what its name makes obvious
(an accuracy or ratio in [0, 1], a percentage in [0, 100], a time, size or rate ≥ 0).
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

_NUM = r"[-+]?(?:\d+\.\d+|\d+|\.\d+)(?:[eE][-+]?\d+)?"
# a number not glued to an identifier, a version, a power or a shape (node_A1, DDR4-2933, 256^3, 32x8)
_MENTION = re.compile(rf"(?<![\w.^/\-])(?P<num>{_NUM})(?![\w.]*\^)(?!\d)")
_AFTER = re.compile(r"\s?(?P<unit>%|[x×](?![\w])|times\b|[A-Za-zµ_]+(?:/[A-Za-z]+)?(?![\w]))")
# what may stand just before a number (read backwards from it: a regex anchored at the end
# would try every start position of the text before it)
_APPROX_MARKS = ("~", "≈", "<", ">", "≤", "≥")
_APPROX_WORDS = ("about", "approx", "approx.", "approximately", "around", "roughly", "nearly", "almost", "up to")
_SPREAD_MARKS = ("±", "+/-", "+-")
_LINKS = ("=", ":", " of", " is", " was")
_CHANGE_WORDS = re.compile(
    r"^\s*(?:over|faster|slower|more|less|fewer|higher|lower|better|worse|improvement|gain|increase|decrease|"
    r"reduction|speedup|drop|up|down)\b",
    re.I,
)
_CAMEL = re.compile(r"([a-z])([A-Z])")
_DIGIT = re.compile(r"\d")
_NON_WORD = re.compile(r"[^A-Za-z0-9]+")
_TIME_UNITS = {"s": 1.0, "sec": 1.0, "secs": 1.0, "seconds": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_SIZE_UNITS = {"b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib", "bytes"}
_UNIT_WORDS = {"flops", "gflops", "tflops", "mflops", "hz", "khz", "mhz", "ghz", "w", "j", "fps"}
_FRACTION_WORDS = {"accuracy", "acc", "precision", "recall", "f1", "auc", "ratio", "fraction", "probability", "iou"}
_PERCENT_WORDS = {"percent", "pct", "percentage"}
_BOUNDED_WORDS = {"efficiency", "utilization", "utilisation", "occupancy", "coverage", "share", "rate"}
_NONNEGATIVE_WORDS = {
    "time", "latency", "duration", "runtime", "seconds", "bandwidth", "throughput", "flops", "gflops", "tflops",
    "count", "size", "memory", "bytes", "speedup", "s", "ms", "us", "ns", "sec", "error", "loss",
}  # fmt: skip


class Mention(NamedTuple):
    """A metric-like number as the sentence writes it."""

    text: str  # as written, e.g. "13.64 GFlops/s"
    value: float
    tolerance: float  # half a unit of the last digit written
    unit: str | None  # "%", "x", "GFlops/s", … (None: only a name beside it)
    name: str | None  # the metric name written beside it, when it is one of the report's
    change: bool = False  # a relative change ("+38%", "38% faster"), not a share
    bounded: bool = False  # a percentage of a bounded quantity ("accuracy of 91%"): at most 100
    spread: bool = False  # an uncertainty ("± 0.13 GFlops/s"): a metric such as GFlops_per_s_std


@dataclass
class Place:
    """Numbers found in one piece of evidence, by the (normalised) key they stand under."""

    where: str  # "node_report.json metrics", "results.csv", …
    by_key: dict[str, list[float]] = field(default_factory=dict)

    def add(self, key: str, value: float) -> None:
        self.by_key.setdefault(tokens_key(key), []).append(value)


@dataclass
class Evidence:
    """What one claim's numbers may be checked against. The cited artifacts are read only when
    a number is not the report's (``sources`` load them, once)."""

    metrics: dict[str, float]  # the claim's node report's numeric metrics
    ancestors: dict[str, float] = field(default_factory=dict)  # "node:metric" → value (ancestors' reports)
    sources: list[Callable[[], Place | None]] = field(default_factory=list)  # cited, hash-verified artifacts
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # declared metric ranges
    _places: list[Place] | None = field(default=None, repr=False)

    @property
    def places(self) -> list[Place]:
        if self._places is None:
            self._places = [p for p in (load() for load in self.sources) if p is not None]
        return self._places


@dataclass(frozen=True)
class Miss:
    """A number that did not hold, and where it was looked for."""

    value: str
    reason: str
    looked: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "reason": self.reason, "looked_in": list(self.looked)}


# ------------------------------------------------------------------------- names and units


@functools.lru_cache(maxsize=4096)
def tokens(name: str) -> tuple[str, ...]:
    """``effective_bandwidth_GB_per_s`` and ``GB/s`` alike as lowercase words (``/`` = ``per``)."""
    spaced = _CAMEL.sub(r"\1 \2", name.replace("/", " per ").replace("µ", "u"))
    return tuple(t for t in _NON_WORD.split(spaced.lower()) if t)


@functools.lru_cache(maxsize=4096)
def tokens_key(name: str) -> str:
    return "_".join(tokens(name))


def _unit_of(word: str) -> str | None:
    """The unit a word after a number names, or None when it is just a word."""
    low = word.lower()
    if low in ("%", "x", "×", "times"):
        return "%" if low == "%" else "x"
    if low in _TIME_UNITS or low in _SIZE_UNITS or low in _UNIT_WORDS or low.endswith("/s"):
        return word
    return None


@functools.lru_cache(maxsize=8192)
def _suffix_match(unit: str, metric: str, *, anywhere: bool = False) -> bool:
    """``GB/s`` is the unit of ``effective_bandwidth_GB_per_s``; ``s`` of ``time_s``; and,
    ``anywhere``, of a spread such as ``GFlops_per_s_std``."""
    u, m = tokens(unit), tokens(metric)
    if not u or len(u) > len(m):
        return False
    starts = range(len(m) - len(u) + 1) if anywhere else [len(m) - len(u)]
    return any(m[i : i + len(u)] == u for i in starts)


def tolerance(written: str) -> float:
    """Half a unit of the last digit written: ``13.6`` → 0.05, ``1.5e-3`` → 0.00005."""
    mantissa, _, exponent = written.lower().lstrip("+-").partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (-decimals + (int(exponent) if exponent else 0)) * (1 + 1e-9)


def same(value: float, mention_value: float, tol: float) -> bool:
    return math.isfinite(value) and abs(value - mention_value) <= tol + 1e-12 * abs(value)


# ---------------------------------------------------------------------------- mentions


def mentions(text: str, metric_names: Iterable[str]) -> tuple[list[Mention], list[float]]:
    """The metric-like numbers of ``text``, and every number it writes (approximate ones
    included: they may be the base of a ratio, as in "7% of the ~35 GFlops/s roofline")."""
    found: list[Mention] = []
    numbers: list[float] = []
    if _DIGIT.search(text) is None:
        return found, numbers
    names = {tokens_key(n): n for n in metric_names}
    for m in _MENTION.finditer(text):
        raw = m.group("num")
        value = float(raw)
        numbers.append(value)
        before = text[max(0, m.start() - 80) : m.start()].rstrip()  # what a name, a ~ or a ± beside it needs
        if _approximate(before):
            continue
        after = _AFTER.match(text, m.end())
        unit = _unit_of(after.group("unit")) if after else None
        if unit is None and after:  # "13.64 GFlops_per_s": a metric name after the number
            word = after.group("unit")
            if tokens_key(word) in names:
                unit = word
        written = _name_before(before)
        name = names.get(tokens_key(written)) if written else None
        if unit is None and name is None:
            continue
        end = after.end() if after and unit else m.end()
        change = unit == "%" and (raw[0] in "+-" or bool(_CHANGE_WORDS.match(text[end:])))
        word = set(tokens(written)) if written else set()
        bounded = unit == "%" and not change and bool(word & (_FRACTION_WORDS | _PERCENT_WORDS | _BOUNDED_WORDS))
        spread = before.endswith(_SPREAD_MARKS)
        found.append(Mention(text[m.start() : end].strip(), value, tolerance(raw), unit, name, change, bounded, spread))
    return found, numbers


def _approximate(before: str) -> bool:
    """ "~35", "about 40", "up to 12": not a measured value."""
    if before.endswith(_APPROX_MARKS):
        return True
    if not before[-1:].isalpha():
        return False
    low = before[-16:].lower()
    return any(low.endswith(w) and (len(low) == len(w) or not low[-len(w) - 1].isalnum()) for w in _APPROX_WORDS)


def _name_before(before: str) -> str | None:
    """The word just before a number, past a link (``GFlops_per_s=``, ``accuracy of``)."""
    for link in _LINKS:
        if before.endswith(link):
            before = before[: -len(link)].rstrip()
            break
    i = len(before)
    while i and (before[i - 1].isalnum() or before[i - 1] == "_"):
        i -= 1
    word = before[i:]
    return word if word and not word[0].isdigit() else None


# --------------------------------------------------------------------------- evidence


def numbers_in(data: bytes, where: str) -> Place:
    """The keyed numbers of an artifact: CSV columns, JSON keys, ``key=value`` / ``key: value``
    lines and CSV blocks inside logs (a header line, then rows)."""
    place = Place(where)
    text = data.decode("utf-8", "replace")
    stripped = text.lstrip()
    if stripped[:1] in "{[":
        try:
            _walk_json(json.loads(text), "", place)
            return place
        except ValueError:
            pass
    header: list[str] | None = None
    for row in csv.reader(io.StringIO(text)):
        cells = [c.strip() for c in row]
        if len(cells) > 1 and all(_number(c) is None for c in cells) and all(cells):
            header = cells
            continue
        if header and len(cells) == len(header):
            for key, cell in zip(header, cells, strict=True):
                value = _number(cell)
                if value is not None:
                    place.add(key, value)
            continue
        header = None if len(cells) > 1 else header
        for key, raw in re.findall(rf"([A-Za-z_][\w/]*)\s*[=:]\s*({_NUM})(?![\w.])", ",".join(row)):
            place.add(key, float(raw))
    return place


def _walk_json(value: Any, key: str, place: Place) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _walk_json(v, str(k), place)
    elif isinstance(value, list):
        for v in value:
            _walk_json(v, key, place)
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and key:
        place.add(key, float(value))


def _number(cell: str) -> float | None:
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def numeric_metrics(metrics: object) -> dict[str, float]:
    """The finite numeric metrics of a node report (booleans are not numbers)."""
    if not isinstance(metrics, Mapping):
        return {}
    return {
        str(k): float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }


# ----------------------------------------------------------------------------- checks


def range_problem(name: str, value: float, declared: Mapping[str, tuple[float, float]]) -> str | None:
    """Why ``value`` cannot be a value of metric ``name``, or None."""
    if name in declared:
        lo, hi = declared[name]
        return None if lo <= value <= hi else f"{name}={value:g} is outside its declared range [{lo:g}, {hi:g}]"
    words = set(tokens(name))
    if words & _PERCENT_WORDS and not 0 <= value <= 100:
        return f"{name}={value:g} is a percentage outside [0, 100]"
    if words & _FRACTION_WORDS and not words & _PERCENT_WORDS and not 0 <= value <= 1:
        return f"{name}={value:g} is a ratio or score outside [0, 1]"
    if words & _NONNEGATIVE_WORDS and value < 0:
        return f"{name}={value:g} is negative, which a {name} cannot be"
    return None


def check_metric_ptr(ptr: object, evidence: Evidence) -> Miss | None:
    """A ``metric_ptr`` holds when its value equals the report's metric of its name within the
    coarser of the two precisions, and is in range."""
    if not isinstance(ptr, Mapping) or not isinstance(ptr.get("name"), str):
        return None
    name, value = ptr["name"], ptr.get("value")
    shown = f"metric_ptr {name}={value!r}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return Miss(shown, "the value is not a finite number", ("metric_ptr",))
    if name not in evidence.metrics:
        return Miss(shown, f"the node report has no metric {name!r}", ("node_report.json metrics",))
    reported = evidence.metrics[name]
    tol = max(tolerance(repr(float(value))), tolerance(repr(reported)))
    if not same(reported, float(value), tol):
        return Miss(shown, f"the node report says {name}={reported!r}", ("node_report.json metrics",))
    problem = range_problem(name, float(value), evidence.ranges)
    return Miss(shown, problem, ("metric range",)) if problem else None


def check_mention(mention: Mention, numbers: list[float], evidence: Evidence) -> Miss | None:
    """None when the mention equals a value in reach (or one derived from two) and is in range."""
    names = _names_for(mention, evidence)
    matched = [n for n in names if same(evidence.metrics[n], mention.value, mention.tolerance)]
    for name in matched or names:  # the metric it states, when one matches; else every metric it may be
        problem = range_problem(name, mention.value, evidence.ranges)
        if problem and mention.unit != "%":
            return Miss(mention.text, problem, ("metric range",))
    if mention.unit == "%" and mention.bounded and not 0 <= mention.value <= 100:
        return Miss(mention.text, "a percentage of a bounded quantity outside [0, 100]", ("metric range",))
    looked: tuple[str, ...] = ()
    for artifacts in (False, True):  # the report first: the artifacts are read only if it does not hold it
        candidates = _candidates(mention, evidence, names, artifacts)
        looked += tuple(dict.fromkeys(where for where, _ in candidates if where not in looked))
        values = [v for _, v in candidates]
        if any(same(v, mention.value, mention.tolerance) for v in values):
            return None
        if mention.unit == "%" and any(same(v, mention.value / 100, mention.tolerance / 100) for v in values):
            return None
        if not artifacts and mention.unit in ("%", "x") and _derived(mention, numbers, evidence):
            return None
    looked = looked or ("node_report.json metrics",)
    what = f"{mention.name or mention.unit}"
    return Miss(mention.text, f"no {what} value in reach equals {mention.value:g} within its rounding", looked)


def _names_for(mention: Mention, evidence: Evidence) -> list[str]:
    if mention.name is not None:
        return [mention.name]
    if mention.unit in (None, "%", "x"):
        return []
    names = [n for n in evidence.metrics if _suffix_match(mention.unit, n, anywhere=mention.spread)]
    return sorted(names, key=lambda n: len(tokens(n)))


def _candidates(mention: Mention, evidence: Evidence, names: list[str], artifacts: bool) -> list[tuple[str, float]]:
    """(where, value) pairs the mention may stand for: in the report, or (``artifacts``) in the
    cited artifacts' columns and keys of those names or that unit."""
    out: list[tuple[str, float]] = []
    if not artifacts:
        out += [("node_report.json metrics", evidence.metrics[n]) for n in names]
        if mention.unit == "%" and mention.name is None:
            out += [("node_report.json metrics", v) for v in evidence.metrics.values()]
        return out
    keys = {tokens_key(n) for n in names}
    for place in evidence.places:
        for key, vals in place.by_key.items():
            unit_ok = mention.unit not in (None, "%", "x") and _suffix_match(mention.unit, key, anywhere=mention.spread)
            if key in keys or unit_ok:
                out += [(f"{place.where} ({key})", v) for v in vals]
    return out


def _derived(mention: Mention, numbers: list[float], evidence: Evidence) -> bool:
    """A ratio or percentage of two values in reach: this node's metric over an ancestor's metric
    of the same name, or over a number the sentence writes."""
    tops = list(evidence.metrics.items())
    for name, a in tops:
        bases = [v for k, v in evidence.ancestors.items() if k.rpartition(":")[2] == name]
        bases += [n for n in numbers if n != mention.value]
        for b in bases:
            if a == 0 or b == 0 or not math.isfinite(b):
                continue
            ratio = a / b
            if mention.unit == "x" and (
                same(ratio, mention.value, mention.tolerance) or same(1 / ratio, mention.value, mention.tolerance)
            ):
                return True
            if mention.unit == "%":
                shares = (100 * ratio, abs(100 * (ratio - 1)), abs(100 * (1 / ratio - 1)))
                if any(same(s, abs(mention.value), mention.tolerance) for s in shares):
                    return True
    return False


def check_text(text: str, evidence: Evidence) -> tuple[list[Mention], list[Miss]]:
    """The mentions of ``text`` and those that did not hold."""
    found, numbers = mentions(text, evidence.metrics)
    misses = [miss for m in found if (miss := check_mention(m, numbers, evidence)) is not None]
    return found, misses
