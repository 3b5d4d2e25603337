"""Value grounding: is each number a claim states the number its evidence holds?

Pure functions over text and numbers (the API reads the files). A claim's numbers are read as
quantities (:mod:`projections.models.quantities`), and each gets a verdict by the grammar of
``docs/grounding.md``: a *value* equals a metric of its dimension in the claim's own report
(after unit conversion, within the precision written); a *comparison* equals the figure
computed from a *named* base in the claim's lineage, in the stated direction; a *fact* equals
a number of the run's own words (hardware spec, setup); a *bound* is an inequality; a *range*
holds at both ends. A number whose evidence is not in reach is ``unchecked`` with its reason;
when in doubt the answer is ``unchecked``, never ``checked``.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from projections.models import units
from projections.models.quantities import BASE_WORDS, Quantity, count_noun, name_key, read, sentence_of, tolerance
from projections.models.verdicts import ValuesVerdict

_NUM = r"[-+]?(?:\d+\.\d+|\d+|\.\d+)(?:[eE][-+]?\d+)?"
_CAMEL = re.compile(r"([a-z])([A-Z])")
_DIGIT = re.compile(r"\d")
_NON_WORD = re.compile(r"[^A-Za-z0-9]+")
_FRACTION_WORDS = {"accuracy", "acc", "precision", "recall", "f1", "auc", "ratio", "fraction", "probability", "iou"}
_PERCENT_WORDS = {"percent", "pct", "percentage"}
_NONNEGATIVE_WORDS = {
    "time", "latency", "duration", "runtime", "seconds", "bandwidth", "throughput", "flops", "gflops", "tflops",
    "count", "size", "memory", "bytes", "speedup", "s", "ms", "us", "ns", "sec", "error", "loss",
}  # fmt: skip


@dataclass
class Place:
    """Numbers found in one piece of evidence, by the (normalised) key they stand under."""

    where: str  # "node_report.json metrics", "results.csv", …
    by_key: dict[str, list[float]] = field(default_factory=dict)  # as the file names them

    def add(self, key: str, value: float) -> None:
        self.by_key.setdefault(key, []).append(value)


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


def same(value: float, mention_value: float, tol: float) -> bool:
    return math.isfinite(value) and abs(value - mention_value) <= tol + 1e-12 * abs(value)


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


class Fact(NamedTuple):
    """A number of the run's own words: a hardware or setup fact."""

    value: float
    unit: str | None  # a pint unit
    noun: str | None  # a count noun
    where: str
    per: str | None = None  # what the count is per ("8 doubles per vector")


@dataclass
class Evidence:
    """What one claim's numbers may be checked against (docs/grounding.md, section 4). The cited
    artifacts are read only when a number is not the report's (``sources`` load them, once)."""

    metrics: dict[str, float]  # the claim's own node report's numeric metrics
    ancestors: dict[str, dict[str, float]] = field(default_factory=dict)  # lineage, root first: id → metrics
    sources: list[Callable[[], Place | None]] = field(default_factory=list)  # cited, hash-verified artifacts
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # declared metric ranges
    node_id: str | None = None
    others: frozenset[str] = frozenset()  # the run's other nodes (outside the lineage)
    facts: list[Fact] = field(default_factory=list)
    primary: str | None = None  # the experiment's primary metric
    _places: list[Place] | None = field(default=None, repr=False)

    @property
    def places(self) -> list[Place]:
        if self._places is None:
            self._places = [p for p in (load() for load in self.sources) if p is not None]
        return self._places


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


# ------------------------------------------------------------------------------ facts

_SETTING = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\d+(?:\.\d+)?)(?![\w.])")


def facts_in(texts: Mapping[str, object], numbers: Mapping[str, object] | None = None) -> list[Fact]:
    """The facts of the run's own words: quantities with a unit or a count noun in ``texts``
    (hardware spec, commands, what was done), ``NAME=16`` settings (``OMP_NUM_THREADS=16`` counts
    threads), and ``numbers`` (``cpu_info``'s ``threads`` and ``mhz``, ``mem_total_kb``)."""
    out: list[Fact] = []
    for where, text in texts.items():
        if not isinstance(text, str) or not text:
            continue
        for q in read(text):
            if q.change or q.name is not None or q.qualifier in ("<", "<=", ">", ">="):
                continue
            if q.unit is not None or q.noun is not None:
                out.append(Fact(q.value, q.unit, q.noun, where, q.per))
        for key, raw in _SETTING.findall(text):
            noun = _noun_of(key)
            if noun is not None:
                out.append(Fact(float(raw), None, noun, f"{where} ({key})"))
    for key, value in (numbers or {}).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        unit = units.of_metric(key) or units.parse(key)
        noun = None if unit else _noun_of(key)
        if unit or noun:
            out.append(Fact(float(value), unit, noun, key))
    return out


def _noun_of(key: str) -> str | None:
    for word in reversed(key.split("_") if "_" in key else [key]):
        noun = count_noun(word)
        if noun is not None:
            return noun
    return None


# ---------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    """One number of a claim: ``checked``, ``mismatch`` or ``unchecked``, and why."""

    written: str
    text: str
    verdict: ValuesVerdict
    why: str | None = None
    looked: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"written": self.written, "text": self.text, "verdict": self.verdict}
        if self.why:
            out["why"] = self.why
        if self.looked:
            out["looked_in"] = list(self.looked)
        return out


OWN = "node_report.json metrics"


def check_claim(text: str, evidence: Evidence) -> list[Verdict]:
    """A verdict for every number of ``text`` (docs/grounding.md)."""
    if _DIGIT.search(text) is None:
        return []
    names = frozenset(name_key(n) for n in evidence.metrics) | frozenset(
        name_key(n) for metrics in evidence.ancestors.values() for n in metrics
    )
    found = read(text, names)
    mentions = _node_mentions(text, evidence)
    checker = _Checker(text, found, mentions, evidence)
    return [checker.verdict(i) for i in range(len(found))]


def _node_mentions(text: str, evidence: Evidence) -> list[tuple[int, str]]:
    """(position, node id) of every node the text names, ``the baseline`` and ``the parent``
    resolved in the claim's lineage (the claim's own node included: it is never a base)."""
    ids = set(evidence.ancestors) | set(evidence.others) | ({evidence.node_id} if evidence.node_id else set())
    found: list[tuple[int, str]] = []
    if ids:
        pattern = r"(?<![\w])(" + "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True)) + r")(?![\w])"
        found += [(m.start(), m.group(1)) for m in re.finditer(pattern, text)]
    lineage = list(evidence.ancestors)
    for m in re.finditer(r"\b(baseline|root|parent)\b", text, re.I):
        role = BASE_WORDS[m.group(1).lower()]
        if lineage:
            found.append((m.start(), lineage[0] if role == "root" else lineage[-1]))
        elif evidence.node_id:
            found.append((m.start(), evidence.node_id))
    return sorted(found)


class _Checker:
    """The grammar's roles, for the quantities of one claim."""

    def __init__(self, text: str, found: list[Quantity], mentions: list[tuple[int, str]], ev: Evidence) -> None:
        self.text, self.found, self.mentions, self.ev = text, found, mentions, ev
        self._memo: dict[int, Verdict] = {}

    def verdict(self, i: int) -> Verdict:
        if i not in self._memo:
            self._memo[i] = self._verdict(i)
        return self._memo[i]

    def _verdict(self, i: int) -> Verdict:
        q = self.found[i]
        if q.base_of_share:
            return self._fact(q, base=True)
        if q.unit in ("%", "x"):
            if q.name is not None:
                return self._named(q)
            if q.of_quantity is not None:
                return self._share_of_quantity(q, self.found[q.of_quantity], self.verdict(q.of_quantity))
            return self._comparison(q)
        if q.spread:
            return self._spread(q)
        if q.difference:
            return self._difference(q)
        if q.name is not None:
            return self._named(q)
        if q.unit is not None:
            return self._measured(q)
        if q.noun is not None:
            return self._count(q)
        return self._out(q, "unchecked", "a bare number (no unit, metric name or noun)")

    # --------------------------------------------------------------------- helpers

    def _out(self, q: Quantity, verdict: ValuesVerdict, why: str | None = None, looked: Iterable[str] = ()) -> Verdict:
        return Verdict(q.written, q.text, verdict, why, tuple(dict.fromkeys(looked)))

    def _holds(self, q: Quantity, target: float) -> bool:
        """Does ``target`` (in the quantity's own unit) make the quantity true?"""
        if not math.isfinite(target):
            return False
        v = q.value
        if q.qualifier == "<":
            return target < v
        if q.qualifier == "<=":
            return target <= v
        if q.qualifier == ">":
            return target > v
        if q.qualifier == ">=":
            return target >= v
        tol = max(q.tolerance, 0.1 * abs(v)) if q.approximate else q.tolerance
        return abs(target - v) <= tol + 1e-12 * abs(target)

    def _in_unit(self, value: float, metric: str, q: Quantity) -> float | None:
        """A metric's value in the quantity's unit (None: not comparable)."""
        if q.unit is None or q.unit in ("%", "x"):
            return value
        unit = units.of_metric(metric)
        if unit is None:
            return value if q.name is not None else None
        if units.dimension(unit) != units.dimension(q.unit):
            return None
        return value * units.factor(unit, q.unit)

    def _of_dimension(self, metrics: Mapping[str, float], q: Quantity, spread: bool = False) -> list[str]:
        """The metrics of the quantity's dimension (spreads only when it is one)."""
        if q.unit is None or q.unit in ("%", "x"):
            return []
        dim = units.dimension(q.unit)
        return [
            m
            for m in metrics
            if units.is_spread(m) == spread and (u := units.of_metric(m)) is not None and units.dimension(u) == dim
        ]

    def _named_nodes(self, q: Quantity) -> list[str]:
        """The ancestors the quantity's sentence names."""
        lo, hi = sentence_of(self.text, q.start)
        return [n for pos, n in self.mentions if lo <= pos < hi and n in self.ev.ancestors and n != self.ev.node_id]

    def _range_problem(self, q: Quantity, metric: str) -> Verdict | None:
        problem = range_problem(metric, self.ev.metrics[metric], self.ev.ranges)
        return self._out(q, "mismatch", problem, ("metric range",)) if problem else None

    # ----------------------------------------------------------------------- roles

    def _named(self, q: Quantity) -> Verdict:
        """A metric by name (``GFlops_per_s=15.82``, ``accuracy of 91.3%``)."""
        key = name_key(q.name or "")
        own = [m for m in self.ev.metrics if name_key(m) == key]
        for metric in own:
            value = self._in_unit(self.ev.metrics[metric], metric, q)
            if value is not None and (self._holds(q, value) or (q.unit == "%" and self._holds(q, 100 * value))):
                return self._range_problem(q, metric) or self._out(q, "checked")
        for node in self._named_nodes(q):
            for metric, value in self.ev.ancestors[node].items():
                if name_key(metric) == key and (
                    self._holds(q, value) or (q.unit == "%" and self._holds(q, 100 * value))
                ):
                    return self._out(q, "checked")
        if own:
            said = ", ".join(f"{m}={self.ev.metrics[m]!r}" for m in own)
            return self._out(q, "mismatch", f"the node report says {said}", (OWN,))
        where = f"{self.ev.node_id}'s report" if self.ev.node_id else "the node report"
        return self._out(q, "unchecked", f"{where} has no metric {q.name!r}")

    def _measured(self, q: Quantity) -> Verdict:
        """A value, a bound or a range end with a unit: the own report's metric of its dimension,
        a named ancestor's, the verified artifacts' columns of its unit, or a fact."""
        assert q.unit is not None
        own = self._of_dimension(self.ev.metrics, q)
        if q.bound:
            for metric in own:
                value = self._in_unit(self.ev.metrics[metric], metric, q)
                if value is not None and self._holds(q, value):
                    return self._range_problem(q, metric) or self._out(q, "checked")
            if own:
                said = ", ".join(f"{m}={self.ev.metrics[m]!r}" for m in own)
                return self._out(q, "mismatch", f"the bound does not hold: the node report says {said}", (OWN,))
            return self._out(q, "unchecked", f"no metric of this dimension ({q.unit}) decides the bound")
        found, looked = self._value_found(q, own)
        if found is not None:
            return found
        fact = self._fact(q)
        if fact.verdict == "checked":
            return fact
        outside = self._named_outside(q)
        if outside:
            lineage = ", ".join(self.ev.ancestors) or "none"
            why = f"the sentence names {', '.join(outside)}, outside {self.ev.node_id}'s lineage ({lineage})"
            return self._out(q, "unchecked", why)
        if not own:
            measured = any(self._of_dimension(m, q) for m in self.ev.ancestors.values())
            if measured or not self.ev.metrics:  # a metric's dimension, but not this node's: no fact decides it
                where = f"{self.ev.node_id}'s report" if self.ev.node_id else "the node report"
                return self._out(q, "unchecked", f"{where} has no metric of dimension {q.unit}")
            return fact
        around = self._around(q, own)
        if around is not None:
            return around
        said = ", ".join(f"{m}={self.ev.metrics[m]!r}" for m in own)
        return self._out(q, "mismatch", f"no value in reach equals it: the node report says {said}", looked)

    def _value_found(self, q: Quantity, own: list[str]) -> tuple[Verdict | None, list[str]]:
        """``checked`` when a value in reach equals the quantity: the own report's, a named
        ancestor's (any ancestor's for the first end of ``from A to B``), a verified artifact's."""
        for metric in own:
            value = self._in_unit(self.ev.metrics[metric], metric, q)
            if value is not None and self._holds(q, value):
                return self._range_problem(q, metric) or self._out(q, "checked"), []
        nodes = list(self.ev.ancestors) if q.from_range and q.range_first else self._named_nodes(q)
        for node in nodes:
            metrics = self.ev.ancestors[node]
            for metric in self._of_dimension(metrics, q):
                value = self._in_unit(metrics[metric], metric, q)
                if value is not None and self._holds(q, value):
                    return self._out(q, "checked"), []
        looked = [OWN] + [f"{n}'s report" for n in nodes]
        # a cited artifact's rows back an exact number only: "roughly 12" is no row's
        for place in self.ev.places if (own or not self.ev.facts) and not q.approximate else []:
            for key, values in place.by_key.items():
                unit = units.of_metric(key)
                if unit is None or q.unit is None or units.dimension(unit) != units.dimension(q.unit):
                    continue
                looked.append(f"{place.where} ({key})")
                if any(self._holds(q, v * units.factor(unit, q.unit)) for v in values):
                    return self._out(q, "checked"), []
        return None, looked

    def _around(self, q: Quantity, own: list[str]) -> Verdict | None:
        """``between 0.8 and 0.9 s`` when neither end is a value of the run but the own value lies
        inside: a range *around* the value, said ``unchecked`` (its ends are nobody's numbers)."""
        if q.range_with is None or q.from_range or q.unit is None:
            return None
        other = self.found[q.range_with]
        if other.unit is None or other.unit in ("%", "x") or self._value_found(other, own)[0] is not None:
            return None  # the other end is a value: this one had to be one too
        low, high = sorted((q.value, other.value * units.factor(other.unit, q.unit)))
        for metric in own:
            value = self._in_unit(self.ev.metrics[metric], metric, q)
            if value is not None and low <= value <= high:
                return self._out(
                    q,
                    "unchecked",
                    f"a range around {metric}={self.ev.metrics[metric]!r}: its ends are not values of the run",
                )
        return None

    def _named_outside(self, q: Quantity) -> list[str]:
        """Nodes outside the lineage that the quantity's sentence names."""
        lo, hi = sentence_of(self.text, q.start)
        return list(dict.fromkeys(n for pos, n in self.mentions if lo <= pos < hi and n in self.ev.others))

    def _fact(self, q: Quantity, base: bool = False) -> Verdict:
        """A hardware or setup fact: a number of the same unit or noun in the run's own words."""
        dim = units.dimension(q.unit) if q.unit not in (None, "%", "x") else None
        same_kind = [
            f
            for f in self.ev.facts
            if (dim is not None and f.unit is not None and units.dimension(f.unit) == dim)
            or (q.noun is not None and f.noun == q.noun and f.per == q.per)  # 2 sweeps per k-tile are not 100 sweeps
        ]
        for f in same_kind:
            value = f.value * units.factor(f.unit, q.unit) if dim is not None and f.unit else f.value
            if self._holds(q, value):
                return self._out(q, "checked")
        if same_kind:
            said = "; ".join(
                sorted(
                    {
                        f"{f.where} says {f.value:g}{' ' + str(f.unit) if f.unit else ' ' + str(f.noun) + 's'}"
                        for f in same_kind
                    }
                )
            )
            return self._out(q, "mismatch", said, [f.where for f in same_kind])
        what = f"of dimension {q.unit}" if dim is not None else f"counting {q.noun}s" if q.noun else "of its kind"
        lead = "a base written in the sentence: " if base else ""
        return self._out(q, "unchecked", f"{lead}no metric or fact {what} in reach")

    def _count(self, q: Quantity) -> Verdict:
        """A count (``16 threads``): a metric named like the noun, else a setup fact."""
        noun = q.noun or ""
        own = [
            m
            for m in self.ev.metrics
            if q.per is None and any(t in (noun, noun + "s", noun + "es") for t in name_key(m).split("_"))
        ]
        for metric in own:
            if self._holds(q, self.ev.metrics[metric]):
                return self._out(q, "checked")
        fact = self._fact(q)
        if fact.verdict != "unchecked" or not own:
            return fact
        said = ", ".join(f"{m}={self.ev.metrics[m]!r}" for m in own)
        return self._out(q, "mismatch", f"the node report says {said}", (OWN,))

    def _spread(self, q: Quantity) -> Verdict:
        """``± 0.13 GFlops/s``: a spread metric of that dimension."""
        cands = self._of_dimension(self.ev.metrics, q, spread=True) if q.unit else []
        if not cands:
            cands = [m for m in self.ev.metrics if units.is_spread(m)] if q.unit is None else []
        for metric in cands:
            value = self._in_unit(self.ev.metrics[metric], metric, q)
            if value is not None and self._holds(q, value):
                return self._out(q, "checked")
        if cands:
            said = ", ".join(f"{m}={self.ev.metrics[m]!r}" for m in cands)
            return self._out(q, "mismatch", f"the node report says {said}", (OWN,))
        return self._out(q, "unchecked", "the node report has no spread metric (_std, _sd, _err) of this dimension")

    def _share_of_quantity(self, q: Quantity, base: Quantity, base_verdict: Verdict) -> Verdict:
        """``7% of the ~35 GFlops/s roofline``: 100 · own metric / that quantity, when it is a fact."""
        if base_verdict.verdict != "checked":
            return self._out(q, "unchecked", f"it is a share of {base.text}, which is not checked ({base_verdict.why})")
        slack = 0.1 * abs(q.value) if base.approximate else 0.0
        cands = self._of_dimension(self.ev.metrics, base)
        for metric in cands:
            value = self._in_unit(self.ev.metrics[metric], metric, base)
            if value is not None and base.value and abs(100 * value / base.value - q.value) <= q.tolerance + slack:
                return self._out(q, "checked")
        if not cands:
            return self._out(q, "unchecked", f"no metric of the dimension of {base.text} to take a share of")
        figures = ", ".join(
            f"{m}: {100 * value / base.value:.3g}%"
            for m in cands
            if base.value and (value := self._in_unit(self.ev.metrics[m], m, base)) is not None
        )
        return self._out(q, "mismatch", f"the share of {base.text} is {figures}", (OWN,))

    def _base(self, q: Quantity) -> tuple[str | None, str | None]:
        """The named base of a comparison: the nearest node named after it in its sentence, else
        before it (never the claim's own node); and why there is none."""
        lo, hi = sentence_of(self.text, q.start)
        named = [(pos, n) for pos, n in self.mentions if lo <= pos < hi and n != self.ev.node_id]
        after = [n for pos, n in named if pos >= q.end]
        before = [n for pos, n in named if pos < q.start]
        base = after[0] if after else before[-1] if before else None
        if base is None:
            return None, "no named base (a node id, the baseline or the parent)"
        if base not in self.ev.ancestors:
            lineage = ", ".join(self.ev.ancestors) or "none"
            return None, f"its base {base} is not in {self.ev.node_id}'s lineage ({lineage})"
        return base, None

    def _compared(self, q: Quantity, base: str) -> list[str]:
        """The metrics a comparison is about: named in its sentence (by name or by the unit of
        another number), else, for speed words, the time metrics and the primary metric, else
        the primary metric."""
        lo, hi = sentence_of(self.text, q.start)
        sentence = self.text[lo:hi]
        for other in self.found:  # the quantities' own words ("1.6 times") never name a metric
            if lo <= other.start and other.end <= hi:
                cut = slice(other.start - lo, other.end - lo)
                sentence = sentence[: cut.start] + " " * (cut.stop - cut.start) + sentence[cut.stop :]
        words = set(re.findall(r"[a-z]+", sentence.lower()))
        both = [m for m in self.ev.metrics if m in self.ev.ancestors[base] and not units.is_spread(m)]
        named = [m for m in both if m in sentence or any(stem in word for stem in _stems(m) for word in words)]
        for other in self.found:
            if lo <= other.start < hi and other is not q and other.unit not in (None, "%", "x"):
                named += [m for m in self._of_dimension({m: 0.0 for m in both}, other) if m not in named]
        if named:
            return named
        primary = [self.ev.primary] if self.ev.primary in both else []
        if q.speed:
            timed = [m for m in both if (u := units.of_metric(m)) is not None and units.dimension(u) == "second"]
            return timed + [p for p in primary if p not in timed]
        return primary

    def _difference(self, q: Quantity) -> Verdict:
        """``+5.95 GFlops/s over node_A``, ``0.5 s faster than node_A``: own − base of a metric of
        its dimension, in the stated direction (for a time and a speed word, less time is faster)."""
        base, why = self._base(q)
        if base is None:
            if q.signed:
                return self._out(q, "unchecked", f"a signed difference with {why}")
            return self._measured(replace(q, difference=False))  # "more than" with no base: a plain value
        theirs = self.ev.ancestors[base]
        metrics = [m for m in self._of_dimension(self.ev.metrics, q) if m in theirs]
        if not metrics:
            return self._out(q, "unchecked", f"no metric of dimension {q.unit} in both this report and {base}'s")
        shown = []
        for metric in metrics:
            own, other = self._in_unit(self.ev.metrics[metric], metric, q), self._in_unit(theirs[metric], metric, q)
            if own is None or other is None:
                continue
            timed = (u := units.of_metric(metric)) is not None and units.dimension(u) == "second"
            diff = other - own if q.speed and timed else own - other
            stated = q.value if q.signed else (q.value if q.direction == "up" else -q.value)
            if q.speed and timed and not q.signed:
                stated = q.value if q.direction == "up" else -q.value
            shown.append(f"{metric}: {self.ev.metrics[metric]:g} − {base}'s {theirs[metric]:g}")
            if self._holds(replace(q, value=stated), diff):
                return self._out(q, "checked")
        return self._out(q, "mismatch", "the difference is " + "; ".join(shown), (OWN, f"{base}'s report"))

    def _comparison(self, q: Quantity) -> Verdict:
        """``N x faster than node_A``, ``+38 % over node_A``, ``N % of the baseline``."""
        base, why = self._base(q)
        if base is None:
            return self._out(q, "unchecked", why)
        direction = q.direction
        if direction is None:
            return self._out(q, "unchecked", "a percentage with no direction (faster, lower, of, over, …)")
        metrics = self._compared(q, base)
        if not metrics:
            return self._out(q, "unchecked", f"no metric to compare with {base} (name one, or set the primary metric)")
        shown = []
        for metric in metrics:
            own, theirs = self.ev.metrics[metric], self.ev.ancestors[base][metric]
            if not own or not theirs:
                continue
            timed = (u := units.of_metric(metric)) is not None and units.dimension(u) == "second"
            r = theirs / own if q.speed and timed else own / theirs
            figure = _figure(q, direction, r)
            shown.append(f"{metric} {own:g} vs {base}'s {theirs:g}: {figure:.4g}{'%' if q.unit == '%' else 'x'}")
            stated = replace(q, value=abs(q.value)) if direction == "down" else q  # "-28 %" states a 28 % drop
            if self._holds(stated, figure):
                return self._out(q, "checked")
        if not shown:
            return self._out(q, "unchecked", f"{base}'s report has none of the compared metrics with a non-zero value")
        return self._out(q, "mismatch", "; ".join(shown), (OWN, f"{base}'s report"))


def _figure(q: Quantity, direction: str, r: float) -> float:
    """The figure a comparison states, from the ratio r = node / base (speed for speed words)."""
    if q.unit == "x":
        return 1 / r if direction == "down" else r
    if direction == "share":
        return 100 * r
    if direction == "down":
        return 100 * (1 - r)
    return 100 * (r - 1)


@functools.lru_cache(maxsize=4096)
def _stems(metric: str) -> tuple[str, ...]:
    """The words of a metric's name that say what it measures (``time`` of ``time_s``)."""
    skip = {"per", "flops", "gflops", "tflops", "mflops", "total", "effective", "mean", "avg", "max", "min"}
    return tuple(t for t in name_key(metric).split("_") if len(t) >= 4 and t not in skip)


def summarise(verdicts: list[Verdict], extra: list[Verdict] | None = None) -> dict[str, Any]:
    """A claim's ``values`` view: its verdict, counts and every number's verdict."""
    every = list(verdicts) + list(extra or [])
    mismatches = [v for v in every if v.verdict == "mismatch"]
    unchecked = [v for v in every if v.verdict == "unchecked"]
    checked = sum(1 for v in every if v.verdict == "checked")
    view: dict[str, Any] = {"checked": checked, "numbers": [v.as_dict() for v in every]}
    if mismatches:
        view["verdict"] = "mismatch"
        view["mismatches"] = [{"value": v.text, "reason": v.why or "", "looked_in": list(v.looked)} for v in mismatches]
    elif checked and not unchecked:
        view["verdict"] = "checked"
    else:
        view["verdict"] = "unchecked"
        view["why"] = "; ".join(f"{v.text}: {v.why}" for v in unchecked) if unchecked else "nothing numeric to check"
    if unchecked:
        view["unchecked"] = [{"value": v.text, "why": v.why or ""} for v in unchecked]
    return view
