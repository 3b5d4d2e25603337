"""The grammar's roles: what each number of a claim must match to hold (docs/grounding.md, 3).

One :class:`Checker` per claim. Each number read (:mod:`projections.evidence.grammar.quantities`) takes a
role — a value, a comparison against a named base, a difference, a difference of percentage
points, a closeness, a share of a written quantity, a spread, a bound, a range end, a count, a
fact, a row key — and gets ``checked``, ``mismatch`` or ``unchecked`` with its reason.

Which metric a number is about comes from the words beside it
(:mod:`projections.evidence.grammar.metric_names`): its own phrase (the noun phrase after it and the
words before it back to the last preposition), then all its leading words, then, for a
percentage or a bare end of a range or list, its sentence; a number with a unit is also held
to its unit's dimension. A phrase that names a quantity no metric measures is never checked
against the primary metric. Evidence is taken in order of authority (docs/grounding.md, 4):
the rows of a pinned table the sentence points at, the claim's own report (which decides a
metric it names), the ancestors the sentence names, the pinned artifacts, then the run's own
words; a hardware number never refutes a measurement, and a name the run never writes (a
dataset, a sample, a device it did not use) puts the number out of reach.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from projections.evidence.grammar import units
from projections.evidence.grammar.metric_names import (
    COMPLEMENTS,
    QUANTITY_WORDS,
    SHARE_WORDS,
    Named,
    abbreviates,
    canon,
    count_scale,
    counted_part,
    fewest_unsaid,
    is_measure_word,
    is_size_error,
    kept_as_percent,
    metric_words,
    name_metrics,
    names_a_quantity,
    other_member,
    phrase_words,
    weight,
)
from projections.evidence.grammar.quantities import count_noun, name_key, tolerance
from projections.evidence.grammar.quantity import Quantity, replace
from projections.evidence.grammar.quantity_links import sentence_of
from projections.evidence.grammar.sources import OWN, Evidence, Verdict, number_form, range_problem
from projections.evidence.grammar.tables import (
    Cell,
    Place,
    Pointer,
    Table,
    is_index_column,
    is_key_column,
    lower_is_better,
    pointed_rows,
    pointer,
    shape_keys,
    shapes,
)
from projections.models.verdicts import ValuesVerdict

# words that end the phrase a number is named by (looking back from it)
_BOUNDARY = frozenset(
    ["at", "on", "with", "for", "in", "by", "under", "over", "after", "before", "from", "to", "than", "vs", "versus", "across", "during", "while", "when", "using", "and", "or", "but", "whereas", "compared", "against", "relative", "into", "within", "without", "via", "among", "between", "since", "until"]
)  # fmt: skip
# a measurement's verbs: a hardware number of the same unit is the machine's, not this quantity
_MEASURED = frozenset(
    ["achieved", "achieves", "achieve", "measured", "sustained", "sustains", "reaches", "reached", "reach", "peaks", "peaked", "peak", "used", "uses", "consumed", "consumes", "took", "takes", "needs", "needed", "effective", "observed", "delivers", "delivered", "attains", "attained", "hits", "sustain", "drops", "dropped", "falls", "fell", "rises", "rose", "improves", "improved", "reads", "read", "writes", "processes", "processed", "streams", "stream", "moved", "saturates", "saturate", "issues", "issue", "achieving", "reaching", "draws", "drew", "draw", "dissipates", "dissipated"]
)  # fmt: skip
_PEAK = frozenset({"peak"})
_MEASURED_WORDS = frozenset(w for word in _MEASURED for w in canon(word)) | _MEASURED  # as phrases hold them
_IDENTIFIER = re.compile(r"(?<![\w.-])([A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*)(?![\w-])")
_GENERIC_IDS = frozenset(
    ["gpu", "gpus", "cpu", "cpus", "vcpu", "vcpus", "ram", "dram", "hbm", "ssd", "nvme", "io", "os", "api", "sm", "sms", "simd", "mpi", "omp", "id", "ids", "ok", "na", "pr", "ci", "csv", "json", "log", "logs", "fp32", "fp16", "bf16", "tf32", "fp64", "int8", "int4", "nf4", "amp", "ema", "sgd", "lr", "ls", "top-1", "top-5", "p50", "p90", "p95", "p99", "p999", "all", "pass", "result", "results", "metric", "metrics", "warn", "warning", "info", "finding", "note", "error", "debug", "fail", "failed", "table", "fig", "figure", "dimm", "node", "run", "status", "summary"]
)  # fmt: skip
# the settings a run writes and a sentence names ("a batch size of 128", "learning rate 1e-3")
_SETTING_WORDS = frozenset(
    {"batch", "lr", "epoch", "seed", "thread", "rank", "node", "gpu", "beam", "warmup", "ls", "dim"}
)
# words right after a factor that make it a comparison ("1.6x faster", "6.6x the baseline")
_COMPARING = frozenset(
    ["faster", "slower", "speedup", "speed", "the", "its", "their", "over", "more", "less", "higher", "lower", "fewer", "as", "that", "of", "improvement", "gain", "reduction", "increase", "decrease", "better", "worse", "than", "vs", "versus", "relative", "compared"]
)  # fmt: skip
# where a comparison puts the node against its base: never a word of the compared metric's name
_POSITIONS = frozenset({"above", "below", "over", "under", "ahead", "behind"})
_SPREAD_SAID = frozenset({"ci", "interval", "std", "sd", "stddev", "deviation", "spread", "sem", "bootstrap"})
_METHOD_OF = re.compile(r"[\w-]+'s\s+([A-Za-z]+)")  # a node's recipe, setup, configuration …
_PUNCT = re.compile(r"[,;:.!?|]")
_NAME_AT = re.compile(r"[\w-]+(?:'s)?")
_OF_NEXT = re.compile(r"\s*of\b")
_OF_SHARE = re.compile(r"\s*of\s")  # "3.7% of the …": a share of a whole
_PREDICATE = re.compile(r"\b(?:are|is|were|was|stay|stays|stayed|remain|remains|remained|get|gets|got|end up)\b", re.I)
_PLACED = re.compile(r"\b(above|below|over|under|ahead|behind)\s+(?:of\s+)?(?:the\s+|its\s+|their\s+)?$", re.I)
_AS_IN = re.compile(
    r"\b(?:as in|as for|as with|like|same as|unchanged from|matching|matches|as did|reproduces|reproduced|replicates|"
    r"confirms|confirmed)\s+(?:[\w-]+\s+){0,3}$",
    re.I,
)
_COUNT_WORDS = frozenset({"count", "total", "num", "n", "tp", "fp", "fn", "tn", "step", "iter"})
# a count metric's words that qualify nothing (its split, its aggregation, its magnitude)
_QUALIFIER_NOISE = frozenset({"val", "train", "test", "mean", "final", "max", "min", "avg", "m", "k", "b", "per"})


# words that say what a setting is counted over: one of them in the sentence excludes a fact with another
_SCOPES = frozenset({"global", "device", "local", "total", "effective", "micro", "gpu", "node", "rank", "worker"})
_PER_DEVICE = frozenset({"device", "local", "micro", "gpu", "node", "rank", "worker"})  # a share of the whole
# nouns after a number that make it a goal the run set, never a value it measured
_TARGETS = frozenset(
    {"budget", "target", "goal", "limit", "threshold", "cap", "slo", "deadline", "ceiling", "requirement", "tolerance"}
)
# what a run is repeated over: "three seeds" counts them, "seed 3" names one
_REPLICATES = frozenset({"seed", "rep", "run", "trial", "fold", "replicate", "repetition"})
# words before a node that make it a base or a circumstance, never the subject of the value after it
_PREPOSITIONS = (
    "than",
    "vs",
    "versus",
    "over",
    "against",
    "compared",
    "relative",
    "from",
    "like",
    "unlike",
    "of",
    "to",
    "with",
    "on",
    "in",
    "at",
    "by",
    "for",
    "after",
    "before",
    "beyond",
    "below",
    "above",
    "under",
    "as",
)
# verbs that state a node's value right after the node ("n1a_lm reaches 3.38%", "n1's loss was 0.96")
_STATES = (
    "reaches",
    "reached",
    "gives",
    "gave",
    "achieves",
    "achieved",
    "scores",
    "scored",
    "has",
    "had",
    "is",
    "was",
    "gets",
    "got",
    "hits",
    "hit",
    "attains",
    "attained",
    "records",
    "recorded",
    "delivers",
    "delivered",
    "shows",
    "showed",
    "runs at",
    "ran at",
    "sustains",
    "sustained",
    "stood at",
    "stands at",
    "sat at",
    "sits at",
    "ends at",
    "ended at",
    "trains at",
    "trained at",
    "decodes",
    "decoded",
    "serves",
    "served",
    "processes",
    "processed",
    "reports",
    "reported",
)
# the nouns of a node's way of working, not of its results: "n1a's recipe gives …" is re-run here
_METHOD_WORDS = frozenset(
    {
        "recipe",
        "setup",
        "config",
        "configuration",
        "settings",
        "method",
        "approach",
        "hyperparameters",
        "schedule",
        "kernel",
        "code",
        "pipeline",
        "model",
        "system",
        "script",
    }
)
# words before a percentage that make it what is left of a share the sentence names
_REMAINDER = frozenset({"leav", "leave", "remaining", "remainder", "rest"})


_CLAUSE_MARKS = re.compile(r"[,;()\[\]|]")
_WORD_AND_OR = re.compile(r"\s+[A-Za-z][\w-]*\s+(?:and|or)\s+")  # "1,621 SNP and 4,034 indel …"
_CLAUSE_END = re.compile(
    r"(?<!\d),|,(?!\d{3}\b)|;|\s(?:and|while|whereas|but|before|after|versus|vs)\b"
)  # never 6,000's comma
_CAPITALISED = re.compile(r"[A-Z][a-z]{2,}")
_UPPER_OR_DIGIT = re.compile(r"[A-Z0-9]")
_OVER_A_SPAN = re.compile(r"\b(?:over|across)\s+(?:a\s+total\s+of\s+|all\s+|the\s+)?$", re.I)
_FOR_A_SPAN = re.compile(r"\b(?:for|lasting)\s+(?:a\s+total\s+of\s+|all\s+)?$", re.I)
_DEVICES = frozenset({"gpu", "cpu", "core", "node", "device"})  # a time kept per one of them is not wall time
_NAME_PARTS = re.compile(r"[-_.]")
# a sentence that states a row other than the reported one, not the node's result ("another
# configuration ran at 9.80"); never "another 2%" (more of it) nor "test-other" (a split's name)
# words after which a sentence names a comparison's base: the rows it names there are the base's
_BASE_MARK = re.compile(r"\b(?:than|vs\.?|versus|compared (?:to|with)|relative to)(?![\w-])", re.IGNORECASE)
_COUNT_ENDS = re.compile(r"\s+(?!per\b|of\b|each\b|in\b|on\b)[A-Za-z]", re.IGNORECASE)  # a word, not "per"
_OF_EACH = re.compile(r"\s+of\s+(?:each|every|one|a|an|the\s+(?:whole|total))\s+[A-Za-z]", re.IGNORECASE)
_KEYED_BEFORE = re.compile(r"\b(?:at|with|after|for)\s+(?:the\s+)?[A-Za-z][\w-]*\s+$", re.IGNORECASE)
_TO_A_VALUE = re.compile(r"\bto\s+$")
_A_RATE_NEXT = re.compile(r"\s*[A-Za-z]+/[A-Za-z]")  # "31.2 targets/h": things per hour, never a goal
_PER_NEXT = re.compile(r"\s*(?:[\w-]+\s+){0,2}per\s", re.IGNORECASE)  # "64 particles per group"
_OTHER_ROW = re.compile(r"\b(?:another|an alternative)\s+(?![-+]?[\d.])[a-z]", re.IGNORECASE)


@dataclass(frozen=True)
class _Phrase:
    """The words that may name one number's quantity, nearest first."""

    own: list[str]  # its noun phrase after it, and its words back to the last preposition
    leading: list[str]  # all its words since the last number's phrase
    sentence: list[str]
    scope: tuple[int, int]  # its clause: where a row it points at is named
    after: int = 0  # how many of ``own`` follow it (the rest lead to it)


class _Pointed(NamedTuple):
    """What the rows a sentence points at say of a value: the verdict, which named metrics the
    table keeps, and whether those rows are none of the ones the report's values are of."""

    verdict: Verdict
    reported: frozenset[str]
    elsewhere: bool


class Checker:
    """The roles, for the quantities of one claim."""

    def __init__(self, text: str, found: list[Quantity], mentions: list[tuple[int, str]], ev: Evidence) -> None:
        self.text, self.found, self.mentions, self.ev = text, found, mentions, ev
        self._memo: dict[int, Verdict] = {}
        self._phrases = _phrases(_blank_nodes(text, mentions), found)  # a node's name never names a metric
        self._pointers: dict[tuple[int, int, int, int, bool], Pointer] = {}
        self._theirs: dict[int, set[str]] = {}
        self._blanks: dict[tuple[int, int, bool], str] = {}
        self._owns: dict[int, tuple[str, ...]] = {}
        self._sentences: dict[int, tuple[int, int]] = {}
        self._sides: dict[int, frozenset[str]] = {}
        self._placed: frozenset[str] | None = None
        self._reach: dict[tuple[int, int, int], str | None] = {}
        self._row_words_of: dict[int, tuple[str, ...]] = {}
        self._row_picks: list[tuple[int, str]] | None = None

    def verdict(self, i: int) -> Verdict:
        if i not in self._memo:
            self._memo[i] = self._verdict(i)
        return self._memo[i]

    def _verdict(self, i: int) -> Verdict:
        q = self.found[i]
        if q.base_of_share:  # "7% of the ~35 GFlops/s roofline", "50% of node_A's 9.87 GFlops/s"
            fact = self._fact(q, i, base=True)
            if fact.verdict == "unchecked" and q.unit is None and any(self._holds(q, f.value) for f in self.ev.facts):
                return self._out(q, "checked")  # "the planned 100,000": a number of the run's own words
            if fact.verdict == "checked" or (not self._named_outside(q) and not self._named_nodes(q)):
                return fact
            return self._value(q, i)
        away = self._out_of_reach(q, i)
        if away is not None:
            if (q.unit not in (None, "%", "x", "pp") or q.noun) and not self._measurement(i):
                fact = self._fact(q, i)
                if fact.verdict == "mismatch":
                    return fact  # "the A100 used here has 80 GB of HBM2e": the run's own words say 40 GB
            return self._out(q, "unchecked", away)
        if q.spread:
            return self._spread(q, i)
        if q.unit == "pp":
            return self._points(q, i)
        if q.unit in ("%", "x"):
            if q.of_quantity is not None:
                return self._share_of_quantity(q, i, self.found[q.of_quantity], self.verdict(q.of_quantity))
            if q.closeness:
                return self._closeness(q, i)
            if self._is_comparison(q, i):
                return self._comparison(q, i)
            if q.unit == "x":
                return self._value(replace(q, unit=None), i)  # 30.2x coverage: a value kept in x
            return self._value(q, i)
        if q.closeness:
            return self._near(q, i)
        if q.difference:
            return self._difference(q, i)
        if q.unit is not None or self._explicit(q):
            return self._value(q, i)
        key = self._row_key(q, i)
        if key is not None:
            return key
        if q.noun is not None:
            return self._count(q, i)
        if self._near_word(self._list_head(i)) in _SETTING_WORDS:  # "batch sizes of 256 and 1024", "LS 0.1"
            setting = self._setting(q, i, near=self._near_word(self._list_head(i)))
            if setting is not None:
                return setting
        flag = self._flag(q, i)
        if flag is not None:
            return flag
        if q.name is not None or self._phrases[i].own or q.range_with is not None or q.list_pos is not None:
            return self._value(q, i, bare=True)
        if _TO_A_VALUE.search(self.text, max(0, q.start - 4), q.start) and self._phrases[i].leading:
            # "conserves momentum to 3.2e-9", "rises six-fold over the parent, to 6.8e-5": the clause's quantity
            return self._value(q, i, bare=True)
        owner = self._possessor(q)
        if owner is not None and owner in self.ev.others:  # "trails n1a's 0.9954": a sibling's, out of reach
            lineage = ", ".join(self.ev.ancestors) or "none"
            return self._out(q, "unchecked", f"it is {owner}'s, outside {self.ev.node_id}'s lineage ({lineage})")
        if owner is not None or self._owned_after(q) is not None:  # "the parent's 0.874", "3796.5 for the parent"
            if not self._phrases[i].own:  # "555.5 core-hours with pools, against 3796.5 for the parent"
                q = replace(q, unit=self._unit_before(q))
            return self._value(q, i, bare=True)
        return self._out(q, "unchecked", "a bare number (no unit, metric name or noun)")

    def _possessor(self, q: Quantity) -> str | None:
        """The node whose possessive the number follows (``the parent's 0.874``, ``n1's 0.874``)."""
        lo = max(0, q.start - 40)
        if _POSSESSIVE_END.search(self.text, lo, q.start) is None:
            return None
        before = [node for pos, node in self.mentions if lo <= pos < q.start and node != self.ev.node_id]
        return before[-1] if before else None

    def _number_before(self, q: Quantity) -> Quantity | None:
        """The nearest earlier number of the quantity's sentence, if any."""
        lo, _ = self._sentence(q)
        return next((o for o in reversed(self.found) if lo <= o.start and o.end <= q.start), None)

    def _unit_before(self, q: Quantity) -> str | None:
        """The unit of the nearest earlier number of the sentence, when it is a value's."""
        before = self._number_before(q)
        if before is None or before.unit in ("x", "pp") or before.direction in ("up", "down"):
            return None
        return before.unit

    def _owned_after(self, q: Quantity) -> str | None:
        """The node the number is followed by as the one it is of (``against 3796.5 for the parent``)."""
        return next(
            (
                node
                for pos, node in self.mentions
                if q.end < pos <= q.end + 24 and node != self.ev.node_id and _FOR_NODE.fullmatch(self.text, q.end, pos)
            ),
            None,
        )

    # --------------------------------------------------------------------- helpers

    def _out(self, q: Quantity, verdict: ValuesVerdict, why: str | None = None, looked: Iterable[str] = ()) -> Verdict:
        return Verdict(q.written, q.text, verdict, why, tuple(dict.fromkeys(looked)))

    def _explicit(self, q: Quantity) -> bool:
        """``name=value``: a metric's name written as code, never a node's id."""
        if not q.explicit_name or q.name is None:
            return False
        nodes = self.ev.memo(("nodes",), lambda: set(self.ev.ancestors) | set(self.ev.others) | {self.ev.node_id})
        return q.name not in nodes

    def _holds(self, q: Quantity, target: float, *, exact: bool = False) -> bool:
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
        tol = 0.0 if exact else max(q.tolerance, 0.1 * abs(v)) if q.approximate else q.tolerance
        return abs(target - v) <= tol + 1e-12 * abs(target)

    def _others(self, metric: str) -> list[float]:
        """The values of one metric elsewhere in the run (how it is kept: fraction or percent)."""
        return [ms[metric] for ms in self.ev.ancestors.values() if metric in ms]

    def _readings(
        self, q: Quantity, metric: str, value: float, named: Named | None = None, column: Iterable[float] = ()
    ) -> list[float]:
        """The metric's value as the quantity's number may state it: in its unit, as a percent
        of a fraction, as a complement, at the magnitude its name keeps."""
        percent = kept_as_percent(metric, value, column)  # a node's value says how it is kept; a column's, all of it
        base = units.spread_base(metric) if not percent and units.is_spread(metric) else None
        if base and base != metric and base in self.ev.metrics:  # test_acc_std 0.10 beside test_acc 64.51: points
            percent = kept_as_percent(base, self.ev.metrics[base], self._others(base))
        if named is not None and named.complement:
            value = (100.0 - value) if percent else (1.0 - value)
        if q.unit == "%":
            return [value] if percent else [100.0 * value]
        if q.unit is None or q.unit == "x":
            out = [value]
            scale = count_scale(metric)
            if scale != 1.0 and units.of_metric(metric) is None:
                out.append(value * scale)
            if percent and abs(q.value) <= 1.0:
                out.append(value / 100.0)
            return out
        unit = units.of_metric(metric)
        if unit is None:
            return [value] if q.name is not None else []
        if units.dimension(unit) != units.dimension(q.unit):
            return []
        return [value * units.factor(unit, q.unit)]

    def _held_by(
        self, q: Quantity, metric: str, value: float, named: Named | None = None, column: Iterable[float] = ()
    ) -> bool:
        return any(self._holds(q, t) for t in self._readings(q, metric, value, named, column))

    def _of_dimension(self, metrics: Iterable[str], q: Quantity, spread: bool = False) -> list[str]:
        """The metrics of the quantity's dimension (spreads only when it is one)."""
        if q.unit is None or q.unit in ("%", "x", "pp"):
            return []
        dim = units.dimension(q.unit)
        return [
            m
            for m in metrics
            if units.is_spread(m) == spread and (u := units.of_metric(m)) is not None and units.dimension(u) == dim
        ]

    def _could_be(self, q: Quantity, metric: str, value: float) -> bool:
        """Whether a metric may be what a percentage states: a share (kept as a fraction or a
        percent), never a count or a measure with a unit."""
        if q.unit is None and abs(q.value) > 100 and self._is_share(metric):
            return False  # "322 of them deletions": no error rate, kept as a fraction or a percent
        if q.unit != "%":
            return True
        return bool(self.ev.memo(("may_be_share", metric, value), lambda: self._may_be_share(metric, value)))

    def _may_be_share(self, metric: str, value: float) -> bool:
        """Whether a metric holding ``value`` may be what a percentage states (see :meth:`_could_be`);
        once per metric and value of an evidence."""
        if units.of_metric(metric) is not None:
            return False  # a percentage is never a quantity with a unit (max_abs_err_kcal_per_mol)
        words = set(metric_words(metric))
        share = bool(words & SHARE_WORDS) or kept_as_percent(metric, value, self._others(metric))
        return share or (0.0 <= value <= 1.0 and not words & _COUNT_WORDS)

    def _other_row(self, q: Quantity) -> bool:
        lo, hi = self._sentence(q)
        return _OTHER_ROW.search(self.text, lo, hi) is not None

    def _sentence(self, q: Quantity) -> tuple[int, int]:
        span = self._sentences.get(q.start)
        if span is None:
            span = self._sentences[q.start] = sentence_of(self.text, q.start)
        return span

    def _named_nodes(self, q: Quantity) -> list[str]:
        """The ancestors the quantity's sentence names (``node_A's 9.87 GFlops/s``, ``29.6 vs.
        7.23 GB/s against the root``), but not one named only as what the number equals (``4.21
        GB, as in the parent``: that is the claim's own number, said to be the parent's too)."""
        lo, hi = self._sentence(q)
        out = []
        for pos, n in self.mentions:
            said_equal = _AS_IN.search(self.text[max(lo, pos - 30) : pos]) is not None
            # at a validation node, "n1a's recipe gives …" is the re-run's number, not n1a's
            method = _METHOD_OF.match(self.text, pos) if self._reruns(n) else None
            if method is not None and method.group(1).lower() not in _METHOD_WORDS:
                method = None
            if lo <= pos < hi and n in self.ev.ancestors and n != self.ev.node_id and not said_equal and not method:
                out.append(n)
        return out

    def _said_as_own(self, q: Quantity) -> bool:
        """The node named last before the number in its clause is the claim's own (``n1a
        sustains 2.52 TFLOPS``): a node named later (``against 4,242 for the parent``) is another
        number's."""
        if not self.mentions:
            return False
        start = self._clause_start(q)  # a node of an earlier clause is another number's
        before = [n for pos, n in self.mentions if start <= pos < q.start]
        return bool(before) and before[-1] == self.ev.node_id

    def _clause_start(self, q: Quantity) -> int:
        """Where the number's clause begins: after the last clause end (a comma, ``and``, …)
        before it in its sentence."""
        lo, _ = self._sentence(q)
        ends = [m.end() for m in _CLAUSE_END.finditer(self.text, lo, q.start)]
        return ends[-1] if ends else lo

    def _reruns(self, node: str) -> bool:
        """The claim's node is a validation that re-runs ``node`` (its parent)."""
        return self.ev.label == "validation" and list(self.ev.ancestors)[-1:] == [node]

    def _named_outside(self, q: Quantity) -> list[str]:
        """Nodes outside the lineage that the quantity's sentence names."""
        lo, hi = self._sentence(q)
        return list(dict.fromkeys(n for pos, n in self.mentions if lo <= pos < hi and n in self.ev.others))

    def _range_problem(self, q: Quantity, metric: str) -> Verdict | None:
        problem = range_problem(metric, self.ev.metrics[metric], self.ev.ranges)
        return self._out(q, "mismatch", problem, ("metric range",)) if problem else None

    def _run_metric_names(self) -> tuple[str, ...]:
        """Every metric name in reach: the own report's, the ancestors', the cited tables' columns."""
        return self.ev.names_in_reach

    def _out_of_reach(self, q: Quantity, i: int) -> str | None:
        """A number the run cannot speak for: its clause names something the run never writes
        (a dataset, a sample, a model, a device: ``ImageNet-V2``, ``HG005``, ``H100``)."""
        lo, hi = self._phrases[i].scope
        if not self.ev.words:
            return None
        s_lo, _ = self._sentence(q)
        key = (lo, hi, s_lo)  # the numbers of one clause share its answer
        if key not in self._reach:
            self._reach[key] = self._named_outside_run(lo, hi, s_lo)
        return self._reach[key]

    def _named_outside_run(self, lo: int, hi: int, s_lo: int) -> str | None:
        """Why the clause ``[lo, hi)`` of the sentence starting at ``s_lo`` is out of reach, or None."""
        clause = self.text[lo:hi]
        vocabulary = self.ev.vocabulary
        for m in _IDENTIFIER.finditer(clause):
            word = m.group(1)
            if _UPPER_OR_DIGIT.search(word) is None:
                continue  # a lowercase word is neither a proper name nor an identifier
            low = word.lower()
            # a capitalised word inside a sentence is a proper name too ("on Common Voice", "a Jetson Orin")
            inside = _after_a_word(self.text, s_lo, lo + m.start())
            proper = inside and _CAPITALISED.fullmatch(word) is not None
            if low in _GENERIC_IDS or low.rstrip("s") in _GENERIC_IDS or not (proper or _looks_like_a_name(word)):
                continue
            parts = [p for p in _NAME_PARTS.split(low) if p]
            if low in vocabulary or low.rstrip("s") in vocabulary or all(p in vocabulary for p in parts):
                continue
            if units.parse(word) is not None or is_measure_word(word):
                continue  # "Peak RSS was 503.8 MB": a measure's name, not a thing the run never saw
            return f"the sentence names {word}, which the run never mentions: not its measurement"
        return None

    # ------------------------------------------------------------------- naming

    def _naming(
        self,
        i: int,
        metrics: Iterable[str],
        *,
        wide: bool = True,
        before: bool = False,
        unsaid: frozenset[str] = frozenset(),
    ) -> tuple[list[Named], str | None]:
        """The metrics of ``metrics`` the number's words name, nearest words first (``wide``: then
        its sentence; ``before``: then the words of its sentence before it); and a quantity word
        its own phrase holds that no metric in reach carries. ``unsaid``: words that name nothing
        here (a comparison's ``above``)."""
        metrics = list(metrics)
        phrase = self._phrases[i]
        unsaid = unsaid | self._other_side(i) | self._placing()
        if unsaid:
            phrase = _Phrase(
                [w for w in phrase.own if w not in unsaid],
                [w for w in phrase.leading if w not in unsaid],
                [w for w in phrase.sentence if w not in unsaid],
                phrase.scope,
                sum(1 for w in phrase.own[: phrase.after] if w not in unsaid),
            )
        q = self.found[i]
        if q.name is not None:
            by_name = [m for m in metrics if name_key(m) == name_key(q.name)]
            if not by_name and self._explicit(q):  # "Cd = 1.3521": a metric that carries every word of it
                carried = {w for part in re.split(r"[_.]+", q.name) if part for w in canon(part)}
                by_name = [m for m in metrics if carried and carried <= set(metric_words(m)) | {m.lower()}]
            if not by_name and self._explicit(q):  # "prec=0.6512", "IS=84.7": the one metric it abbreviates
                short = [m for m in metrics if abbreviates(q.name, m)]
                by_name = short if len(short) == 1 else []
            if by_name or self._explicit(q):  # name=value: that metric, or none
                return [Named(m, 10.0) for m in by_name], None
        metrics = [m for m in metrics if not m.startswith("_")]  # ARI's own (_scientific_score): by name only
        tiers = [[w for w in self._own_words(i) + self._predicate_sides(i) if w not in unsaid], list(phrase.leading)]
        paired = self._paired_word(q)
        if paired is not None:  # "SNP and INDEL F1 of 99.54% and 99.84%, respectively"
            word, others = paired
            tiers = [[word] + [w for w in t if w not in others] for t in tiers]
        if wide:
            tiers.append([w for w in phrase.sentence if paired is None or w not in paired[1]])
        elif before:
            lo, _ = self._sentence(q)
            tiers.append([w for w, _ in phrase_words(_blank(self.text[lo : q.start], self.found, lo))])
        run = self._run_metric_names()
        for tier, words in enumerate(tiers):
            if not words:
                continue
            named = name_metrics(words, metrics, complements=tier < 2)
            if named and tier == 0 and not any(n.complement for n in named) and phrase.leading:
                flipped = name_metrics(list(phrase.leading), [n.metric for n in named], complements=True)
                if flipped and all(f.complement for f in flipped):  # "word accuracy on test-clean is 95.6%"
                    named = flipped
            if named:
                after = phrase.own[: phrase.after] if tier == 0 else []
                for wider in [after, *tiers[tier + 1 :]]:  # "final CER on test-clean": CER breaks the tie; "2.9 GB of
                    # GPU memory", the words after the number first; never another number's name ("AP 36.6%, AP50 55.6%")
                    if len(named) < 2:
                        break
                    wider = self._not_theirs(i, wider)
                    fewer = name_metrics(wider, [n.metric for n in named], complements=False)
                    if fewer and len(fewer) < len(named):
                        named = [n for n in named if n.metric in {f.metric for f in fewer}]
                return named, None
            if tier == 0:  # its own phrase, not its sentence's
                missing = names_a_quantity(
                    words, run, change=q.unit in ("%", "x", "pp") and q.direction in ("up", "down")
                )
                if missing is not None:
                    return [], missing
        return [], None

    def _predicate_sides(self, i: int) -> list[str]:
        """``3.7% of the exact nearest neighbours are lost``, ``88.2% of samples stay inside``: a
        share's predicate says which side of a complement it is (its words of a side, once the
        ``of`` phrase is read past)."""
        q = self.found[i]
        if q.unit != "%" or not _OF_SHARE.match(self.text, q.end):
            return []
        _, hi = self._sentence(q)
        verb = _PREDICATE.search(self.text, q.end, hi)
        if verb is None:
            return []
        end = _CLAUSE_END.search(self.text, verb.end(), hi)
        words = phrase_words(self.text[verb.start() : end.start() if end else hi])
        return [w for w, _ in words if w in _SIDES]

    def _placing(self) -> frozenset[str]:
        """The position words that place the claim against a node the text names (``stays above
        n1's 0.874``, ``below the parent``): they name no metric (``games_above_human``)."""
        if self._placed is None:
            self._placed = frozenset(
                m.group(1).lower()
                for pos, _ in self.mentions
                if (m := _PLACED.search(self.text, max(0, pos - 20), pos)) is not None
            )
        return self._placed

    def _other_side(self, i: int) -> frozenset[str]:
        """When the sentence says both sides of a complement (``At the Recall@100 cut-off BM25
        misses 34.2%``), the side the number is nearest to is the one it states: the other
        side's words name nothing for it (so ``recall_at_100`` is named as the complement)."""
        if i in self._sides:
            return self._sides[i]
        q, phrase = self.found[i], self._phrases[i]
        side: frozenset[str] = frozenset()
        sentence = set(phrase.sentence) | set(self._predicate_sides(i))
        if any(not one.isdisjoint(sentence) and not other.isdisjoint(sentence) for one, other in COMPLEMENTS):
            lo, _ = self._sentence(q)
            before = [w for w, _ in phrase_words(_blank(self.text[lo : q.start], self.found, lo))]
            words = [*phrase.own[: phrase.after], *self._predicate_sides(i), *reversed(before)]  # nearest first
            side = next((s for w in words if (s := _unsaid_side(w)) and sentence & s), frozenset())
        self._sides[i] = side
        return side

    def _not_theirs(self, i: int, words: list[str]) -> list[str]:
        """The words, without those that name the sentence's other numbers and not this one."""
        if i not in self._theirs:
            mine = set(self._own_words(i))
            self._theirs[i] = {w for j in range(len(self.found)) if j != i for w in self._own_words(j)} - mine
        return [w for w in words if w not in self._theirs[i]]

    # ----------------------------------------------------------------------- roles

    def _value(self, q: Quantity, i: int, *, bare: bool = False) -> Verdict:
        """A value (a number with a unit, a percentage stating a quantity, a named number), a
        bound or a range end (docs/grounding.md, 3 and 4)."""
        explicit = self._explicit(q)
        phrase = self._phrases[i]
        # "the 5 ms budget", "the 1e-5 per day tolerance": a goal, not a result (its noun, not a later clause's)
        head = phrase.own[: min(phrase.after, 3)]
        # "the 1e-5 per day tolerance" is a goal; "96.4 s per target", "31.2 targets/h" count protein targets
        goals = [w for k, w in enumerate(head) if w in _TARGETS and (k == 0 or head[k - 1] != "per")]
        if goals and _A_RATE_NEXT.match(self.text, q.end):
            goals = []
        if not explicit and goals:
            goal = self._fact(q, i)  # a budget the run's words state; another number of its unit is no refutation
            return (
                goal
                if goal.verdict == "checked"
                else self._out(q, "unchecked", "a target the run's words do not state")
            )
        said = name_key(q.name) if q.name else None
        each = _PER_THING.match(self.text, q.end) if q.unit is None and q.per is None and not explicit else None
        if each is not None:  # "about 58 per passage": only a metric kept per passage says it
            thing = canon(each.group(1))[0]
            if not any(thing in metric_words(m) for m in self.ev.metrics):
                return self._out(q, "unchecked", f"no metric in reach is per {each.group(1)}")
        own_all = [m for m in self.ev.metrics if explicit or not units.is_spread(m) or name_key(m) == said]
        own_all = [m for m in own_all if self._could_be(q, m, self.ev.metrics[m])]
        near = frozenset(phrase.own) | frozenset(phrase.leading)
        own_all = [m for m in own_all if not other_member(near, metric_words(m))]  # "13.6 ms p99": never the p50
        if "wall" in near:  # "122.4 h of wall-clock time": never a time kept per device (expansion_gpu_h)
            own_all = [m for m in own_all if "wall" in metric_words(m) or not _DEVICES & set(metric_words(m))]
        dim = self._of_dimension(own_all, q) if q.unit not in (None, "%", "x") else None
        if dim is not None and q.per:  # "3.0 min/epoch" is epoch_time_s, never wall_clock_h
            dim = [m for m in dim if canon(q.per)[0] in metric_words(m)]
        pool = dim if dim is not None else own_all
        wide = dim is None
        named, missing = self._naming(i, pool, wide=wide)
        if q.unit == "%" and set(self._phrases[i].own[self._phrases[i].after :]) & _REMAINDER:
            # "takes 27.4% of the time, leaving 72.6% for the rest": the other side of the sentence's share
            whole = name_metrics(self._phrases[i].sentence, pool, complements=False)
            named, missing = [Named(n.metric, n.score, complement=True) for n in whole], None
        if dim and not named and missing is None:  # "training takes 5.51 h": of the times, the training's
            own = set(self._phrases[i].own)
            overlap = {m: len(own & set(metric_words(m))) for m in dim}
            best = max(overlap.values())
            if best and list(overlap.values()).count(best) < len(dim):
                named = [Named(m, float(best)) for m, n in overlap.items() if n == best]
        asked = set(self._asking_words(i)) & (QUANTITY_WORDS | {"fp", "fn", "tp"})
        if named and asked and not explicit and not any(asked & _asked_of(n.metric) or n.complement for n in named):
            named = []  # "SNP false positives": not snp_recall, although both say SNP
        by_words = bool(named)
        if dim is not None and not named and missing is None:
            setting = self._unit_setting(q, i)
            if setting is not None:  # "a 180 s time step" of --dt 180: the setting's, never wall_clock_h's
                return setting
            named = [Named(m, 0.0) for m in dim]  # a unit alone: every metric of its dimension
        if not named and missing is None and q.unit == "%" and not explicit and self._is_unnamed_share(q, i):
            return self._out(q, "unchecked", "a share of something no metric measures")
        if not named and missing is None and not bare and q.unit == "%" and not explicit and not q.bound:
            if _OF_EACH.match(self.text, q.end):  # "Sampling accounts for 73% of each epoch": a share of an epoch
                return self._out(q, "unchecked", "a share of each thing, which no metric keeps")
            named = self._primary_share(q)  # "reaches 76.1%"; never "up to 15% of the utterance"
        # of metrics named alike, the one the sentence names best: "55.6% box AP" is bbox_mAP's, never AP50's
        candidates = (
            fewest_unsaid(named, self._not_theirs(i, self._phrases[i].sentence)) if by_words and not explicit else named
        )
        if q.bound:  # an inequality of the own report's metric, exactly; nothing else decides it
            return self._bound(q, candidates)
        paired = self._paired_node(q) or self._subject_node(q)
        after = self._owned_after(q) if self.found[i].noun is None and q.name is None and not explicit else None
        paired = paired or (after if after in self.ev.ancestors else None)  # "against 2.52 for the parent"
        if paired is not None:
            return self._of_node(q, i, paired, named)
        own_holds = next((n for n in candidates if self._held_by(q, n.metric, self.ev.metrics[n.metric], n)), None)
        if explicit and own_holds is not None:  # snp_f1=0.9984: that metric's, whatever row the line names
            return self._range_problem(q, own_holds.metric) or self._out(q, "checked")
        to_end = q.from_range and not q.range_first
        if own_holds is None and not to_end and self._named_nodes(q):  # "the parent's: 361.5 vs 389.2 kops/s"
            found, _ = self._elsewhere(q, i, named, artifacts=False)
            if found is not None:
                return found
        # a range's ends may sit on two rows; the to-end of "from A to B" is the row its sentence points at
        ends = q.range_with is not None and not (q.from_range and not q.range_first)
        keyed = q.unit not in (None, "%", "x", "pp") and not by_words and self.ev.sources
        if keyed and own_holds is None and any(self._keyed_by_unit(q, t) for p in self.ev.places for t in p.tables):
            return self._out(q, "checked")  # "a 60 Ry cutoff": a row of the pinned table's key column
        pointed = None if ends else self._pointed(q, i, named)
        if pointed is not None:
            decided = self._pointed_decides(q, pointed, own_holds.metric if own_holds is not None else None)
            if decided is not None:
                return decided
        if own_holds is not None:
            return self._range_problem(q, own_holds.metric) or self._out(q, "checked")
        # a value whose words or unit name a metric of the own report is that metric's, unless the
        # sentence points at a row, names a range or a list: the artifacts back only what it lacks
        artifacts = (not by_words and not dim) or q.range_with is not None or q.from_range or q.list_pos is not None
        artifacts = artifacts or self._other_row(q)  # "another configuration"
        # "6.71 s of the step goes to the walk": a unit that names the report's times, words that name an
        # artifact's key (walk_s) the report lacks: that key's, never another column of the unit's
        keyed_by_words = bool(dim) and not by_words and not artifacts
        artifacts = artifacts or keyed_by_words
        if q.from_range and not q.range_first and (by_words or dim):
            artifacts = False  # "rises from 1,203 µs to 1.9 ms": the to-end is the node's own, as reported
        found, looked = self._elsewhere(q, i, named, artifacts=artifacts, by_words=keyed_by_words)
        if found is not None:
            return found
        if artifacts and not by_words and not dim and q.unit not in (None, "%", "x", "pp"):
            refuted = self._artifact_refutes(q, i)
            if refuted is not None:
                return refuted
        fact: Verdict | None = self._fact(q, i) if (q.unit is not None or q.noun is not None) and not by_words else None
        if fact is not None and fact.verdict == "checked" and not self._measurement(i):
            return fact
        outside = self._named_outside(q)
        if outside:
            lineage = ", ".join(self.ev.ancestors) or "none"
            why = f"the sentence names {', '.join(outside)}, outside {self.ev.node_id}'s lineage ({lineage})"
            return self._out(q, "unchecked", why)
        if missing is not None:
            if fact is not None and fact.verdict == "mismatch" and not self._measurement(i):
                return fact  # a setup statement ("each DIMM holds 64 GB") against the run's own words
            return self._out(q, "unchecked", f"no metric or fact in reach measures its quantity ({missing})")
        if not named:
            return self._unnamed(q, fact, i)
        around = self._around(q, [n.metric for n in named])
        if around is not None:
            return around
        said = ", ".join(
            f"{n.metric}={self.ev.metrics[n.metric]!r}" + (" (its complement)" if n.complement else "") for n in named
        )
        return self._out(q, "mismatch", f"no value in reach equals it: the node report says {said}", looked)

    def _unnamed(self, q: Quantity, fact: Verdict | None, i: int) -> Verdict:
        """A value no metric of the own report is named by: a fact decides it, or nothing does."""
        if q.unit not in (None, "%", "x"):
            measured = any(self._of_dimension(m, q) for m in self.ev.ancestors.values())
            if measured or not self.ev.metrics:
                where = f"{self.ev.node_id}'s report" if self.ev.node_id else "the node report"
                return self._out(q, "unchecked", f"{where} has no metric of dimension {q.unit}")
            if fact is not None and fact.verdict != "unchecked" and not self._measurement(i):
                return fact  # a setup statement of the machine; a measurement the spec does not decide
            return self._out(q, "unchecked", f"no metric or fact of dimension {q.unit} in reach")
        if q.name is not None:
            where = f"{self.ev.node_id}'s report" if self.ev.node_id else "the node report"
            return self._out(q, "unchecked", f"{where} has no metric {q.name!r}")
        setting = self._setting(q, i)
        if setting is not None:
            return setting
        what = "a percentage that names no metric" if q.unit == "%" else "a number that names no metric"
        return self._out(q, "unchecked", what)

    def _is_unnamed_share(self, q: Quantity, i: int) -> bool:
        """``wins 68% of comparisons``: a share of a thing the words after ``of`` name."""
        tail = self.text[q.end : q.end + 40]
        m = re.match(r"\s+of\s+(?:the\s+|all\s+|its\s+|their\s+)?([A-Za-z][\w-]*)", tail)
        if m is None or q.direction != "share":
            return False
        word = canon(m.group(1))
        run = self._run_metric_names()
        return not name_metrics(word, run) and not any(w in self.ev.vocabulary for w in word)

    def _bound(self, q: Quantity, named: list[Named]) -> Verdict:
        """``under 0.9 s``, ``at least 0.9``: the own metric it names, exactly (no rounding slack)."""
        for n in named:
            if self._held_by(q, n.metric, self.ev.metrics[n.metric], n):
                return self._range_problem(q, n.metric) or self._out(q, "checked")
        if named:
            said = ", ".join(f"{n.metric}={self.ev.metrics[n.metric]!r}" for n in named)
            return self._out(q, "mismatch", f"the bound does not hold: the node report says {said}", (OWN,))
        return self._out(q, "unchecked", f"no metric of this quantity ({q.unit or 'named'}) decides the bound")

    def _of_node(self, q: Quantity, i: int, node: str, named: list[Named]) -> Verdict:
        """``n1, n2 and n3 reach 71.2, 73.5 and 74.0 % respectively``: the paired node's value."""
        if node == self.ev.node_id:
            metrics, where = self.ev.metrics, OWN
        elif node in self.ev.ancestors:
            metrics, where = self.ev.ancestors[node], f"{node}'s report"
        else:
            return self._out(q, "unchecked", f"it is {node}'s, outside {self.ev.node_id}'s lineage")
        words = {n.metric for n in named}
        theirs = [m for m in metrics if m in words] or self._same_kind(q, i, metrics)
        for metric in theirs:
            flipped = next((n for n in named if n.metric == metric), None)
            if self._held_by(q, metric, metrics[metric], flipped):
                return self._out(q, "checked")
        if not theirs:
            return self._out(q, "unchecked", f"{node}'s report has no metric it names")
        said = ", ".join(f"{m}={metrics[m]!r}" for m in theirs)
        lead = "respectively, " if q.respectively else ""
        return self._out(q, "mismatch", f"{lead}it is {node}'s: {node}'s report says {said}", (where,))

    def _primary_share(self, q: Quantity) -> list[Named]:
        """A percentage that names no quantity (``reaches 76.1%``) is the primary metric's,
        when the primary metric is a share."""
        primary = self.ev.primary
        if primary in self.ev.metrics and not units.of_metric(primary):
            value = self.ev.metrics[primary]
            if kept_as_percent(primary, value, self._others(primary)) or 0.0 <= value <= 1.0:
                return [Named(primary, 0.0)]
        return []

    def _measurement(self, i: int) -> bool:
        """The number's sentence says it was measured (a hardware number does not decide it)."""
        phrase = self._phrases[i]
        after = set(phrase.own[: phrase.after]) - _PEAK  # "a 312 TFLOPS dense FP16 peak": the machine's, a noun
        if after & _MEASURED_WORDS or set(phrase.own[phrase.after :]) & _MEASURED_WORDS:
            return True
        if set(phrase.leading) & _MEASURED_WORDS:
            return True
        q = self.found[i]  # "eight pools the FFTs stream at the full 409.6 GB/s": the verb after the last number
        lo, _ = self._sentence(q)
        last = max((o.end for o in self.found[:i] if lo <= o.start and o.end <= q.start), default=None)
        between = {w for w, _ in phrase_words(self.text[last : q.start])} if last is not None else set()
        return bool(between & (_MEASURED_WORDS - _PEAK))  # "9.7 TFLOPS FP32 peak and 2,039 GB/s": a noun, no verb

    def _elsewhere(
        self, q: Quantity, i: int, named: list[Named], *, artifacts: bool = True, by_words: bool = False
    ) -> tuple[Verdict | None, list[str]]:
        """``checked`` when a named ancestor's metric (any ancestor's for the first end of ``from
        A to B``) or, with ``artifacts``, a pinned artifact's number equals the quantity (with
        ``by_words``, only a key its words name)."""
        if q.from_range:  # "from A to B": A may be any ancestor's (the one the sentence names), B is the node's own
            nodes = (self._named_nodes(q) or list(self.ev.ancestors)) if q.range_first else []
        else:
            nodes = [] if self._said_as_own(q) else self._named_nodes(q)
        by_name = {n.metric: n for n in named}
        for node in nodes:
            metrics = self.ev.ancestors[node]
            theirs = [m for m in metrics if m in by_name] or self._same_kind(q, i, metrics)
            for metric in theirs:
                if self._held_by(q, metric, metrics[metric], by_name.get(metric)):
                    return self._out(q, "checked"), []
        looked = [OWN] + [f"{n}'s report" for n in nodes]
        if q.approximate or not artifacts:
            return None, looked  # a cited artifact's rows back an exact number only: "roughly 12" is no row's
        for place in self.ev.places:
            for key in self._named_keys(q, i, place.by_key):
                if by_words and not key.score:
                    continue
                looked.append(f"{place.where} ({key.metric})")
                values = place.by_key[key.metric]
                # ends of a range are two rows; "another configuration ran at 9.80" is any row's
                anyrow = q.range_with is not None or self._other_row(q)
                said = values if anyrow else self._unpointed(place, key.metric)
                if not anyrow and q.list_pos is None:  # "averages 80.06M edges/s": the seeds' mean, not seed 0
                    said = [v for v in said if v not in self._mean_cells(place, key.metric)]
                if any(self._held_by(q, key.metric, v, key, column=values) for v in said):
                    return self._out(q, "checked"), []
        return None, looked

    def _artifact_refutes(self, q: Quantity, i: int) -> Verdict | None:
        """A value with a unit no metric of the own report measures, whose own words name the
        one key of its dimension a pinned artifact holds as the run reported it (a JSON's
        number, a log's row of the report's values): a mismatch when that value does not hold
        it (``The tree build sustains 1,555 GB/s`` against summary.json's 612.4 GB/s). Not a
        rounded number, a bound, a range, a list member, another row's or another node's."""
        if q.approximate or q.bound or q.range_with is not None or q.from_range or q.list_pos is not None:
            return None
        if self._other_row(q) or any(n != self.ev.node_id for n in self._named_nodes(q)):
            return None
        refuting = []
        for place in self.ev.places:
            for key in self._named_keys(q, i, place.by_key):
                said = set(self._unpointed(place, key.metric)) if key.score >= 2.0 else set()
                if len(said) == 1:
                    refuting.append((place.where, key.metric, said.pop()))
        if len({(k, v) for _, k, v in refuting}) != 1:
            return None  # none, or two keys that say different things: nothing decides it
        where, name, value = refuting[0]
        return self._out(q, "mismatch", f"{where} says {name}={value:g}", [where])

    def _unpointed(self, place: Place, key: str) -> list[float]:
        """The values of a key a sentence that points at no row may state: a table's column only
        in the rows that hold the node report's values (the configuration it reported), when the
        report's numbers single them out; every value otherwise. Of the evidence alone: once."""
        return self.ev.memo(("unpointed", id(place), key), lambda: self._unpointed_values(place, key))

    def _unpointed_values(self, place: Place, key: str) -> list[float]:
        values = place.by_key[key]
        for table in place.tables:
            if key not in table.header or is_key_column(table, key):
                continue  # a key's cells name rows: any of them is a row the table has
            j = table.header.index(key)
            column = {float(r[j]) for r in table.rows if isinstance(r[j], float)}
            if len(column) < 2:
                continue
            rows = self._report_rows(table)
            if rows:
                kept = {float(r[j]) for r in rows if isinstance(r[j], float)}
                values = [v for v in values if v not in column or v in kept]
        if len(set(values)) > 1 and not any(key in t.header for t in place.tables):
            # a log's series (eval@2000: lddt_ca=0.848 … eval@8000: lddt_ca=0.858): the lines that
            # write a value the report holds, else the last line, as a table keeps the report's row
            reported = [v for v in values if any(self._reported_in(m, key, [v]) for m in self.ev.metrics)]
            values = reported or values[-1:]
        return values

    def _mean_cells(self, place: Place, key: str) -> frozenset[float]:
        """The cells of a table column the own report keeps only as their mean, under the column's
        name (three seeds' rows of ``train_edges_per_s_M`` and the report's 79.26): none of them is
        what a sentence states that points at no row and lists none. Of the evidence alone: once."""
        return frozenset(self.ev.memo(("mean_cells", id(place), key), lambda: self._find_mean_cells(place, key)))

    def _find_mean_cells(self, place: Place, key: str) -> frozenset[float]:
        if key not in self.ev.metrics:
            return frozenset()
        for table in place.tables:
            if key not in table.header or is_key_column(table, key):
                continue
            j = table.header.index(key)
            cells = sorted(float(r[j]) for r in table.rows if isinstance(r[j], float))
            if len(set(cells)) < 2 or self._reported_in(key, key, cells):
                continue
            if self._reported_in(key, key, [sum(cells) / len(cells)]):
                return frozenset(cells)
        return frozenset()

    def _report_rows(self, table: Table) -> list[list[Cell]]:
        """The rows of a table the node report's metrics come from: each holds, in a column named
        like a report metric, that metric's value to the digits the report wrote."""
        pairs = [
            (table.header.index(m), m) for m in self.ev.metrics if m in table.header and not is_key_column(table, m)
        ]
        if not pairs:
            return []
        picked = []
        for row in table.rows:
            hits = [
                m
                for j, m in pairs
                if isinstance(row[j], float) and self._reported_in(m, table.header[j], [float(row[j])])
            ]
            if len(hits) == len(pairs):
                picked.append(row)
        return picked if len(picked) < len(table.rows) else []

    def _same_kind(self, q: Quantity, i: int, metrics: Mapping[str, float]) -> list[str]:
        """An ancestor's metrics the quantity may be: named by its words, else of its dimension."""
        pool = [m for m in metrics if not units.is_spread(m) and self._could_be(q, m, metrics[m])]
        named, _ = self._naming(i, pool)
        if named:
            return [n.metric for n in named]
        if q.unit not in (None, "%", "x"):
            return self._of_dimension(metrics, q)
        return []

    def _keys_for(self, q: Quantity, i: int, by_key: Mapping[str, object]) -> list[str]:
        return [n.metric for n in self._named_keys(q, i, by_key)]

    def _named_keys(
        self, q: Quantity, i: int, by_key: Mapping[str, object], *, wide: bool = True, sentence: bool = False
    ) -> list[Named]:
        """The keys of an artifact a quantity may be: of its unit when it has one, and among
        those the ones its words name (a complement too)."""
        said = set(
            self._phrases[i].sentence
        )  # a value is never a spread's (iqm_hns_ci95), unless its sentence says one
        keys = [k for k in by_key if q.spread or not units.is_spread(k) or not _SPREAD_SAID.isdisjoint(said)]
        if q.unit not in (None, "%", "x", "pp"):
            keys = [k for k in keys if (u := units.of_metric(k)) is not None and _comparable(u, q.unit)]
            named, _ = self._naming(i, keys, wide=False)
            return named or [Named(k, 0.0) for k in keys]
        if q.unit == "%":
            keys = [k for k in keys if self._share_values(k, by_key[k])]
        if q.noun:  # "16 GPUs" is never config.devices.gpu_nodes: the GPU there qualifies the nodes it counts
            noun = canon(q.noun)[0]
            keys = [k for k in keys if noun not in metric_words(k)[:-1] or not _counts_another(k, noun)]
        named, _ = self._naming(i, keys, wide=sentence or (wide and q.unit == "%"))
        return named

    def _share_values(self, key: str, values: object) -> bool:
        """Whether an artifact's key may hold a share (a fraction or a percent)."""
        numbers = [float(v) for v in values if isinstance(v, float)] if isinstance(values, list) else []
        words = set(metric_words(key))
        if words & _COUNT_WORDS or (set(canon(key)) & {"seed", "epoch", "step", "thread", "rank", "node"}):
            return False
        return bool(words & SHARE_WORDS) or not numbers or all(0.0 <= v <= 100.0 for v in numbers)

    # ---------------------------------------------------------------- pointed rows

    def _pointed(self, q: Quantity, i: int, named: list[Named]) -> _Pointed | None:
        """The number in the rows of a pinned table its clause points at (``at epoch 60``,
        ``with 64 threads``, ``the final epoch``, ``the SNP PASS row``, ``the best run``), the
        key columns it does not name filled from the row the own report's value sits in; and
        which of the ``named`` metrics that table reports (one it does not report is not what
        its rows say, and they cannot refute it), and whether the rows pointed at are the ones
        the report's values are of (else the report's values are another row's)."""
        if q.approximate or not self.ev.sources:
            return None
        lo, hi = self._sentence(q)
        c_lo, c_hi = self._phrases[i].scope
        if any(c_lo <= pos < c_hi and n != self.ev.node_id for pos, n in self.mentions):
            return None  # "prev best 9.87 GFlops/s @ node_A": another node's number, not a row of these files
        results: list[_Pointed] = []
        for p, place in enumerate(self.ev.places):
            for t, table in enumerate(place.tables):
                ptr = self._clause_pointer(p, t, table, i)
                paired = self._paired_key(q, table) or self._paired_cell(q, table)
                if paired is not None:  # the list's other members point at no row of this member's
                    listed = {
                        o.value
                        for o in self.found
                        if lo <= o.start < hi and o.respectively and o.list_len == q.list_len and o.unit != q.unit
                    }
                    kept = tuple(k for k in ptr.keys if k[0] == paired[0] or not listed & set(k[1]))
                    ptr = Pointer(kept, ptr.last, ptr.extreme, ptr.extreme_of).with_key(*paired)
                shaped = self._paired_shape(q, table)
                if shaped:  # "tiles of 64x64x8, …, 256x128x8 give 10.68, …, 12.11 TFLOP/s respectively"
                    ptr = Pointer(
                        tuple(k for k in ptr.keys if k[0] not in {c for c, _ in shaped}) + shaped,
                        ptr.last,
                        ptr.extreme,
                        ptr.extreme_of,
                    )
                crossed = self._crossed_key(q, table, ptr) if ptr else None
                if crossed is not None:  # "64 GPUs on 32 nodes" where the 64-GPU row has 16 nodes
                    every_named = frozenset(n.metric for n in named)
                    crossed_out = self._out(q, "mismatch", f"{place.where} ({crossed})", [place.where])
                    results.append(_Pointed(crossed_out, every_named, False))
                    continue
                if not ptr or self._is_key_cell(q, ptr):
                    continue
                for col in self._columns_for(q, i, table, ptr) or self._columns_like(table, named, ptr):
                    column = col.metric
                    j = table.header.index(column)
                    every = [float(r[j]) for r in table.rows if isinstance(r[j], float)]
                    anchor = self._anchor(table, column, named, ptr)
                    rows = pointed_rows(table, anchor, column)
                    if len(rows) == len(table.rows) and not ptr.extreme:
                        continue  # points at no row in particular
                    values = [float(r[j]) for r in rows if isinstance(r[j], float)]
                    # the report keeps one of its cells, or their mean (4.107 s of three seeds' rows)
                    held = [*every, sum(every) / len(every)] if len(every) > 1 else every
                    in_table = frozenset(n.metric for n in named if self._reported_in(n.metric, column, held))
                    if values and any(self._held_by(q, column, v, col, column=every) for v in values):
                        return _Pointed(self._out(q, "checked"), in_table, False)
                    if values:
                        shown = ", ".join(f"{k}={'/'.join(map(_cell, c))}" for k, c in anchor.keys)
                        shown = shown or ("the last row" if anchor.last else f"the {anchor.extreme} row")
                        said = ", ".join(f"{v:g}" for v in values[:3])
                        why = f"{place.where} ({shown}) says {column}={said}"
                        mine = self._report_rows(table)  # [] when no row holds all its values (a mean, a max)
                        elsewhere = bool(mine) and not any(r in mine for r in rows)
                        results.append(_Pointed(self._out(q, "mismatch", why, [place.where]), in_table, elsewhere))
        return results[0] if results else None

    def _pointed_decides(self, q: Quantity, pointed: _Pointed, held: str | None) -> Verdict | None:
        """What the rows a sentence points at decide of a value the own report's ``held`` metric
        holds (None: no metric holds it): their verdict, unless their table does not keep that
        metric (``would finish the production run in 1 h 38 min`` beside a sweep of step times:
        then nothing, and the report decides) or they are known to be another row than the
        report's (``At 16 nodes … 0.743 h`` of a 32-node report: unchecked)."""
        verdict, reported, elsewhere = pointed
        if verdict.verdict == "checked" or held is None or held in reported:
            return verdict
        if elsewhere:
            why = f"{verdict.why}; the report's {held} is not of the row the sentence points at"
            return self._out(q, "unchecked", why, verdict.looked)
        return None

    def _crossed_key(self, q: Quantity, table: Table, ptr: Pointer) -> str | None:
        """A count that is a key cell of a column named for its noun, in no row the numbers the
        sentence gives the table's earlier key columns pick (``64 GPUs on 32 nodes`` where gpus=64
        is the row of 16 nodes): what that row says, else None."""
        if q.noun is None or not ptr.keys:
            return None
        noun = canon(q.noun)[0]
        for column, cells in ptr.keys:
            if noun not in metric_words(column) or not any(self._holds(q, c) for c in cells if isinstance(c, float)):
                continue
            before = table.header.index(column)  # the row is the earlier key's: gpus, then its nodes
            others = Pointer(
                tuple(
                    (k, c)
                    for k, c in ptr.keys
                    if k != column
                    and table.header.index(k) < before
                    and all(isinstance(x, float) and not self._holds(q, x) for x in c)  # another number's
                )
            )
            rows = pointed_rows(table, others) if others.keys else []
            if not rows or len(rows) == len(table.rows):
                continue
            j = table.header.index(column)
            said = [r[j] for r in rows]
            if not any(isinstance(c, float) and self._holds(q, c) for c in said):
                picked = ", ".join(f"{k}={'/'.join(map(_cell, c))}" for k, c in others.keys)
                return f"{picked} says {column}={'/'.join(map(_cell, said[:3]))}"
        return None

    def _is_key_cell(self, q: Quantity, ptr: Pointer) -> bool:
        """The number is the key cell its pointer names (``4`` of ``a 4 fs timestep`` when the
        rows are keyed by ``timestep_fs``): it picks the row, it is not a value of it."""
        return (
            any(isinstance(c, float) and abs(c - q.value) <= q.tolerance for _, cells in ptr.keys for c in cells)
            and len(ptr.keys) == 1
        )

    def _reported_in(self, metric: str, column: str, values: list[float]) -> bool:
        """Whether the own report's value of a metric is one of a table column's, to the digits
        the report wrote it with, in the column's unit (286.1 kops/s is 286,104.6 ops/s)."""
        value, tol, factor, scale = self.ev.memo(("reported_in", metric, column), lambda: self._scales(metric, column))
        return any(abs(v * scale - value * factor) <= tol * abs(factor) * 1.0000001 for v in values)

    def _scales(self, metric: str, column: str) -> tuple[float, float, float, float]:
        """The own report's value of a metric, its tolerance, and the factors that bring it and
        a column's cells to one unit."""
        value = self.ev.metrics[metric]
        mine, theirs = units.of_metric(metric), units.of_metric(column)
        factor = (
            units.factor(mine, theirs) if mine and theirs and units.dimension(mine) == units.dimension(theirs) else 1.0
        )
        # a column in millions against a report in units (reads_M against reads); none when both keep millions
        return (
            value,
            tolerance(repr(value)),
            factor,
            count_scale(column) / count_scale(metric) if factor == 1.0 else 1.0,
        )

    def _pointer(self, p: int, t: int, table: Table, scope: tuple[int, int], *, sentence: bool) -> Pointer:
        key = (p, t, scope[0], scope[1], sentence)
        if key not in self._pointers:
            lo, hi = scope
            numbers = []
            for k, keyed in self._row_numbers():
                other = self.found[k]
                if not lo <= other.start < hi:
                    continue
                if keyed == "bare":
                    numbers.append((other.value, self._row_words(k)))
                else:
                    numbers += self._keyed_by_unit(other, table)  # "a 60 Ry cutoff": ecutwfc_Ry=60
            if sentence:
                context = None
            else:
                s_lo, s_hi = sentence_of(self.text, lo)
                context = self._blanked(s_lo, s_hi, digits=False)
            self._pointers[key] = pointer(table, self._blanked(lo, hi, digits=True), numbers, context)
        return self._pointers[key]

    def _row_numbers(self) -> list[tuple[int, str]]:
        """The numbers that may pick a table's row, whatever the table: a bare one (``epoch 60``)
        or one with a unit a key column may be kept in (``a 60 Ry cutoff``); once per claim."""
        if self._row_picks is None:
            self._row_picks = []
            for k, other in enumerate(self.found):
                replicates = other.noun is not None and canon(other.noun)[0] in _REPLICATES and other.text.endswith("s")
                if _INSTEAD.search(self.text, max(0, other.start - 16), other.start):
                    continue  # "15,000 instead of 5,000 steps": the row is the 15,000, not the one set aside
                if other.noun is not None and _OVER_A_SPAN.search(self.text, max(0, other.start - 24), other.start):
                    continue  # "Over ten steps the mean step time is …": the span averaged over, never its last row
                if other.unit is None and not other.change and not replicates:
                    self._row_picks.append((k, "bare"))
                elif other.unit not in (None, "%", "x", "pp") and not other.change:
                    self._row_picks.append((k, "unit"))
        return self._row_picks

    def _blanked(self, lo: int, hi: int, *, digits: bool) -> str:
        """The text between ``lo`` and ``hi`` with the claim's numbers blanked, once per span."""
        key = (lo, hi, digits)
        if key not in self._blanks:
            self._blanks[key] = _blank(self.text[lo:hi], self.found, lo, digits=digits)
        return self._blanks[key]

    def _keyed_by_unit(self, q: Quantity, table: Table) -> list[tuple[float, tuple[str, ...]]]:
        """A number with a unit as a key cell: in a key column kept in a unit of its dimension,
        converted to it, with that column's words (so that the pointer names its row)."""
        out = []
        assert q.unit is not None
        dimension = units.dimension(q.unit)
        for unit, column_dimension, cells, words in _unit_keys(table):
            if column_dimension != dimension:
                continue
            value = q.value * units.factor(q.unit, unit)
            if any(abs(c - value) <= 1e-9 * max(1.0, abs(c)) for c in cells):
                out.append((value, words))
        return out

    def _columns_for(self, q: Quantity, i: int, table: Table, ptr: Pointer) -> list[Named]:
        """The numeric columns of a table the number may be (its words, its unit), never a key."""
        keyed = {k for k, _ in ptr.keys}
        numeric = [
            h
            for h in table.header
            if h not in keyed
            and not is_key_column(table, h)
            and any(isinstance(r[table.header.index(h)], float) for r in table.rows)
        ]
        said = frozenset(self._phrases[i].sentence)  # "at batch size 2 median latency is 26.8 ms": never the p99
        numeric = [h for h in numeric if self._could_be_column(q, table, h) and not other_member(said, metric_words(h))]
        columns: dict[str, object] = {h: [] for h in numeric}
        named = self._named_keys(q, i, columns, wide=False)
        if not named and q.unit is None and q.noun is None:  # "With 20 steps FID is 11.62": its sentence names it
            named = self._named_keys(q, i, columns, sentence=True)
        return fewest_unsaid(named, said)  # "G interactions/s": interactions_per_s_G, not its per-step column

    def _columns_like(self, table: Table, named: list[Named], ptr: Pointer) -> list[Named]:
        """The columns of a table that keep what the named report metrics do (``METRIC.Precision``
        for ``snp_precision``): a measure word of theirs, a row key the pointer names for the rest."""
        keyed = {k for k, _ in ptr.keys}
        out: list[Named] = []
        for n in named:
            if n.metric in table.header and n.metric not in keyed and not is_key_column(table, n.metric):
                out.append(Named(n.metric, 0.0, n.complement))  # test_acc's own column, never val_acc beside it
                continue
            mine = set(metric_words(n.metric)) - {"val", "train", "test", "mean", "final", "peak"}
            like: dict[str, float] = {}
            for h in table.header:
                if h in keyed or is_key_column(table, h) or h in {o.metric for o in out}:
                    continue
                theirs = set(metric_words(h))
                if other_member(frozenset(metric_words(n.metric)), tuple(theirs)):
                    continue  # latency_ms_p99 is never kept in a column of the p50
                if (mine - QUANTITY_WORDS) and (theirs - QUANTITY_WORDS) and not (mine & theirs) - QUANTITY_WORDS:
                    continue  # force_err_rms never keeps momentum_err_rel: both say what they are, and differ
                if theirs & mine & QUANTITY_WORDS:  # wer for wer_test_other before n_err, which shares "error"
                    like[h] = sum(weight(w) for w in theirs & mine)
            best = max(like.values(), default=0.0)
            out += [Named(h, 0.0, n.complement) for h, score in like.items() if score == best]
        return out

    def _could_be_column(self, q: Quantity, table: Table, column: str) -> bool:
        if q.unit != "%":
            return True
        values = [float(c) for c in table.column(column) if isinstance(c, float)]
        words = set(metric_words(column))
        return bool(words & SHARE_WORDS) or all(0.0 <= v <= 1.0 for v in values) or kept_as_percent(column, 0.0, values)

    def _anchor(self, table: Table, column: str, named: list[Named], ptr: Pointer) -> Pointer:
        """The pointer with the key columns it leaves open filled from the row that holds the
        own report's value (its workload, its filter), where the rows it points at still
        differ there: the sentence changes only what it names."""
        if ptr.last or ptr.extreme:
            return ptr
        j = table.header.index(column)
        reported = [n.metric for n in named if n.metric in self.ev.metrics]
        home = [
            r
            for r in table.rows
            if isinstance(r[j], float) and any(self._reported_in(m, column, [float(r[j])]) for m in reported)
        ]
        if not home:
            return ptr
        keyed = {k for k, _ in ptr.keys}
        out = ptr
        for key in table.varying():
            if key in keyed or not is_key_column(table, key):
                continue
            k = table.header.index(key)
            left = {r[k] for r in pointed_rows(table, out)}
            cells = {r[k] for r in home}
            if len(left) > 1 and len(cells) == 1 and next(iter(cells)) in left:
                out = out.with_key(key, next(iter(cells)))
        return out

    def _row_words(self, k: int) -> tuple[str, ...]:
        """The words that name the row a number points at (a list member takes its head's); once
        per number, as each table's pointer asks again."""
        if k not in self._row_words_of:
            self._row_words_of[k] = self._row_words_read(k)
        return self._row_words_of[k]

    def _row_words_read(self, k: int) -> tuple[str, ...]:
        other = self.found[k]
        phrase = self._phrases[k]
        words = list(phrase.own) + ([other.noun] if other.noun else [])
        if other.noun and not _PER_NEXT.match(self.text, other.end):
            # a count's words end at its noun: "16 nodes each GPU" is nodes=16, never gpus=16
            words = [*phrase.own[phrase.after :], other.noun]
        if other.list_pos:
            head = next((j for j in range(k - 1, -1, -1) if self.found[j].list_pos == 0), None)
            if head is not None:
                noun = self.found[head].noun
                words += self._phrases[head].own + ([noun] if noun else [])
        return tuple(w for word in words for w in canon(word))

    def _row_key(self, q: Quantity, i: int) -> Verdict | None:
        """A number that names a row of a pinned table (``60`` of ``at epoch 60``, ``64`` of
        ``with 64 threads``): checked when the table has that row."""
        words = set(self._row_words(i))
        if not words or q.unit is not None or not self.ev.sources:
            return None
        if q.noun is not None and _FOR_A_SPAN.search(self.text, 0, q.start):
            return None  # "trained for ten epochs": how long it ran, never a row of its log
        for p, place in enumerate(self.ev.places):
            for t, table in enumerate(place.tables):
                for key in table.varying():
                    if not is_key_column(table, key):
                        continue
                    if words & ((set(metric_words(key)) | set(canon(key))) - {"time", "size"}):
                        cells = [c for c in table.column(key) if isinstance(c, float)]
                        scale = count_scale(key)  # "at 5M frames" of a column frames_M
                        if any(min(abs(c - q.value), abs(c * scale - q.value)) <= q.tolerance for c in cells):
                            crossed = self._crossed_key(q, table, self._clause_pointer(p, t, table, i))
                            if crossed is not None:  # "64 GPUs on 32 nodes": a row, but not the 64-GPU one
                                return self._out(q, "mismatch", f"{place.where} ({crossed})", [place.where])
                            return self._out(q, "checked")
        return None

    def _clause_pointer(self, p: int, t: int, table: Table, i: int) -> Pointer:
        """The rows of a table the number's sentence, then its clause, point at."""
        q = self.found[i]
        lo, hi = self._sentence(q)
        base = _BASE_MARK.search(self.text, q.end, hi)
        cut = base.start() if base is not None else hi  # "0.97 s, 87% more than with GPUDirect": the base's row
        sentence = self._pointer(p, t, table, (lo, cut), sentence=True)
        c_lo, c_hi = self._phrases[i].scope
        clause = self._pointer(p, t, table, (c_lo, min(c_hi, cut)), sentence=False)
        merged = sentence.merged(clause)
        if q.list_pos is not None:
            return merged  # a list's members pair with the keys' list
        named = {k for k, _ in clause.keys}
        for key, cells in sentence.keys:
            if len(cells) > 1 and key not in named:  # the sentence names two rows of a key its clause does not
                row = self._row_before(i, cells, lo)
                if row is not None:
                    merged = merged.with_key(key, row)
        return merged

    def _row_before(self, i: int, cells: tuple[Cell, ...], lo: int) -> Cell | None:
        """The row a number takes when its sentence names several of a key's cells: the one
        cell named before it in its clause (``At step 200000 the FID was 30.12, down from 41.37
        at step 100000``; ``… and at step 200000 it was 30.12``). None when a cell follows the
        number right after its clause (``94.8 % at 256 ranks``: that one is its row), when the
        cells are a list (``scales of 1.25 and 2.0 give …``), or when its clause names two."""
        q = self.found[i]
        mentions = [(k, o) for k, o in enumerate(self.found) if o.start >= lo and o.value in cells]
        if any(o.list_pos is not None for _, o in mentions):
            return None
        _, c_hi = self._phrases[i].scope
        if any(o.start == c_hi and k > i for k, o in mentions):
            return None
        start = self._clause_start(q)
        before = {o.value for k, o in mentions if k < i and o.start >= start}
        return before.pop() if len(before) == 1 else None

    def _paired_key(self, q: Quantity, table: Table) -> tuple[str, float] | None:
        """``respectively``: the key this list member is paired with (``with 16, 32 and 64
        threads … reaches 210K, 380K and 412K ops/s respectively``), as a row of ``table``."""
        if not q.respectively or q.list_pos is None:
            return None
        lo, hi = self._sentence(q)
        for k, other in enumerate(self.found):
            if other is q or not (lo <= other.start < hi) or not other.respectively or other.list_len != q.list_len:
                continue
            if other.list_pos != q.list_pos or other.start > q.start:
                continue
            words = set(self._row_words(k))
            keys = [key for key in table.varying() if is_key_column(table, key)]
            for key in keys:
                if words & (set(metric_words(key)) | set(canon(key))):
                    return key, other.value
            mates = [
                o.value
                for o in self.found
                if lo <= o.start < hi
                and o.respectively
                and o.list_len == q.list_len
                and o.start < q.start
                and o.unit == other.unit
            ]
            every = [key for key in table.varying() if len(mates) > 1 and all(v in table.column(key) for v in mates)]
            holding = [key for key in keys if all(v in table.column(key) for v in mates)] or every
            # "tile heights of 64, 128 and 256": the one column (BM) that holds every listed value; never
            # one of two that hold them ("block heights of 128 and 256" of BM 64/128/256, threads 128/256/512)
            if len(holding) == 1 and len(every) <= 1:
                return holding[0], other.value
        return None

    def _paired_shape(self, q: Quantity, table: Table) -> tuple[tuple[str, tuple[float | str, ...]], ...]:
        """``respectively`` over a list of shapes: the row of the shape this member is paired with."""
        if not q.respectively or q.list_pos is None:
            return ()
        lo, _hi = self._sentence(q)
        written = shapes(self.text[lo : q.start])
        if len(written) != q.list_len:
            return ()
        return shape_keys(table, written[q.list_pos])

    def _paired_cell(self, q: Quantity, table: Table) -> tuple[str, str] | None:
        """``respectively`` over a list of words that are a table's text cells (``SNP and INDEL F1
        of 99.54% and 99.84%``): the row this list member is paired with."""
        paired = self._paired_word(q)
        if paired is None:
            return None
        for key in table.varying():
            for cell in {c for c in table.column(key) if isinstance(c, str)}:
                if canon(cell)[0] == paired[0]:
                    return key, cell
        return None

    def _own_words(self, i: int) -> list[str]:
        """The words of a number's own phrase, with its noun's (``7,449 truth SNPs``) and, in a
        list, the list's (``97.3%, 88.1% and 94.0% efficiency``); once per number."""
        if i not in self._owns:
            self._owns[i] = tuple(self._find_own_words(i))
        return list(self._owns[i])

    def _find_own_words(self, i: int) -> list[str]:
        q = self.found[i]
        own = list(self._phrases[i].own)
        if q.noun:
            own += [w for w, _ in phrase_words(q.text[len(q.written) :])]
        if q.list_pos is not None:
            head, last = i - q.list_pos, i - q.list_pos + q.list_len - 1
            if head >= 0 and last < len(self.found) and self.found[last].list_pos == q.list_len - 1:
                own += self._phrases[head].own + self._phrases[last].own
        nxt = self.found[i + 1] if i + 1 < len(self.found) else None
        if nxt is not None and _WORD_AND_OR.fullmatch(self.text[q.end : nxt.start]):
            after = self._phrases[i + 1]  # "1,621 SNP and 4,034 indel false positives": SNP false positives
            written = phrase_words(self.text[nxt.end : nxt.end + 60])
            first = sum(1 for _, at in written if at == written[0][1]) if written else 1  # AP_S is one written word
            own += after.own[first : after.after]
        if q.range_with is not None and not q.range_first:  # "takes SNP FPs from 14,655 to 4,104"
            own += self._phrases[q.range_with].own
        return own

    def _asking_words(self, i: int) -> list[str]:
        """The words that say which quantity a number is: its own, but for a percentage's ``of``
        tail, which names the whole it is a share of (``27.4% of the wall time``)."""
        q = self.found[i]
        if q.unit == "%" and _OF_NEXT.match(self.text, q.end):
            return self._phrases[i].own[self._phrases[i].after :]
        return self._own_words(i)

    def _paired_word(self, q: Quantity) -> tuple[str, set[str]] | None:
        """``respectively`` over a list of words (``SNP and INDEL F1 of 99.54% and 99.84%``): the
        canonical word this list member is paired with, and the list's other words."""
        if not q.respectively or q.list_pos is None:
            return None
        lo, hi = self._sentence(q)
        text = _blank(self.text[lo:hi], self.found, lo)
        nodes = {n for _, n in self.mentions}
        for m in re.finditer(r"\b([A-Za-z][\w-]*)((?:\s*,\s*[A-Za-z][\w-]*)*)\s*,?\s+and\s+([A-Za-z][\w-]*)\b", text):
            items = [m.group(1), *re.findall(r"[A-Za-z][\w-]*", m.group(2)), m.group(3)]
            items = items[-q.list_len :] if q.list_len >= 2 else items  # "For Transformer-big, TER and chrF": the last
            if len(items) != q.list_len or any(item in nodes for item in items):
                continue
            words = [canon(item)[0] for item in items]
            return words[q.list_pos], set(words) - {words[q.list_pos]}
        return None

    def _paired_node(self, q: Quantity) -> str | None:
        """``respectively`` over a list of nodes: the node this list member is paired with."""
        if not q.respectively or q.list_pos is None:
            return None
        lo, hi = self._sentence(q)
        for named in (
            list(dict.fromkeys(n for pos, n in self.mentions if lo <= pos < q.start)),
            list(dict.fromkeys(n for pos, n in self.mentions if q.end <= pos < hi)),
        ):
            if len(named) == q.list_len:
                return named[q.list_pos]
        return None

    def _subject_node(self, q: Quantity) -> str | None:
        """The node a value's sentence says it is of (``the full system n1a_lm reaches 3.91%``,
        ``n1a_lm's single-seed result was 3.38% … and 8.27%``): the last node named before it in
        its sentence, as a subject (never after a preposition: ``over the baseline``), when that
        node is not the claim's own."""
        if q.range_with is not None or q.bound:
            return None
        lo, _hi = self._sentence(q)
        before = [(pos, n) for pos, n in self.mentions if lo <= pos < q.start]
        if not before:
            return None
        pos, node = before[-1]
        if node == self.ev.node_id:
            return None
        if self.ev.label == "validation" and list(self.ev.ancestors)[-1:] == [node]:
            return None  # "over five repetitions dbuf gives …" at dbuf's re-run: the re-run's value
        lead = self.text[max(lo, pos - 25) : pos].lower()
        if re.search(r"\b(?:" + "|".join(_PREPOSITIONS) + r")\s+(?:the\s+|its\s+|our\s+)?$", lead):
            return None
        between = self.text[pos : q.start].lower()
        said = _STATED.match(between)
        if said is not None and said.group("at") and any(pos < o.start < q.start for o in self.found):
            said = None  # "the parent's history settles at 1.3386 …, and the finer mesh gives 1.3342"
        words = said.group(1).split() if said is not None and said.group(1) else []
        if said is None or set(words) & (_METHOD_WORDS | set(_PREPOSITIONS)):
            return None  # "reproduces pidx: 412", "n1a's recipe gives 77.78": the value is the claim node's
        if re.search(r"\b[a-z]+ing\s+(?:the\s+|its\s+)?$", lead):
            return None  # "re-running the parent's configuration gives …": this run's doing
        return node

    # ----------------------------------------------------------------- the rest

    def _around(self, q: Quantity, own: list[str]) -> Verdict | None:
        """``between 0.8 and 0.9 s`` when neither end is a value of the run but the own value lies
        inside: a range *around* the value, said ``unchecked`` (its ends are nobody's numbers)."""
        if q.range_with is None or q.from_range:
            return None
        k = q.range_with
        other = self.found[k]
        if other.unit in ("x", "pp") or (q.unit is None) != (other.unit is None):
            return None  # both ends with a unit, or both without ("MRR@10 lies between 0.33 and 0.34")
        if any(self._held_by(other, m, self.ev.metrics[m]) for m in own):
            return None  # the other end is a value: this one had to be one too
        if self._elsewhere(other, k, [Named(m, 0.0) for m in own])[0] is not None:
            return None
        factor = (
            units.factor(other.unit, q.unit) if q.unit not in (None, "%") and other.unit not in (None, "%") else 1.0
        )
        low, high = sorted((q.value, other.value * factor))
        for metric in own:
            for value in self._readings(q, metric, self.ev.metrics[metric]):
                if low <= value <= high:
                    return self._out(
                        q,
                        "unchecked",
                        f"a range around {metric}={self.ev.metrics[metric]!r}: its ends are not values of the run",
                    )
        return None

    def _fact(self, q: Quantity, i: int, base: bool = False) -> Verdict:
        """A hardware or setup fact: a number of the same unit, noun or setting in the run's words."""
        dim = units.dimension(q.unit) if q.unit not in (None, "%", "x", "pp") else None
        noun = canon(q.noun)[0] if q.noun else None
        same_kind = [
            f
            for f in self.ev.facts
            if (dim is not None and f.unit is not None and units.dimension(f.unit) == dim)
            or (noun is not None and f.noun is not None and canon(f.noun)[0] == noun and f.per == q.per)
        ]
        form = number_form(self.text, q.start, q.end) if dim is not None else None
        if form is not None:  # "9.7 TFLOPS FP32 peak": never the spec's FP64 9.7
            same_kind = [f for f in same_kind if f.form in (None, form)]
        for f in same_kind:
            value = f.value * units.factor(f.unit, q.unit) if dim is not None and f.unit else f.value
            if self._holds(q, value):
                return self._out(q, "checked")
        if same_kind:
            said = "; ".join(
                sorted(
                    {
                        f"{f.where} says {f.value:g}{' ' + str(f.unit) if f.unit else ' ' + str(f.noun) + 's' if f.noun else ''}"
                        for f in same_kind
                    }
                )
            )
            return self._out(q, "mismatch", said, [f.where for f in same_kind])
        what = f"of dimension {q.unit}" if dim is not None else f"counting {q.noun}s" if q.noun else "of its kind"
        lead = "a base written in the sentence: " if base else ""
        return self._out(q, "unchecked", f"{lead}no metric or fact {what} in reach")

    def _setting(self, q: Quantity, i: int, near: str | None = None) -> Verdict | None:
        """A number of a setting the run writes (``--lr 1e-3``, ``batch size to 4096``), named by
        the words beside it (``learning rate``, ``batch``)."""
        words = set(self._phrases[i].own) - {"the", "a", "of", "to", "is", "at"}
        if not words or q.unit is not None:
            return None
        near = near or self._near_word(q)
        if near not in _SETTING_WORDS:
            return None
        own = set(self._own_words(i))
        same = [f for f in self.ev.facts if f.key and {near} & (set(f.key) - {"size", "num", "n", "the"})]
        scope = own & _SCOPES
        if scope:  # "per-device batch size of 64": never the "global batch 64" of the run's words
            same = [f for f in same if not (set(f.key) - own) & _SCOPES]
        for f in same:  # a setting is restated, not rounded: "learning rate 3e-4" is never --lr 2.5e-4
            if self._holds(q, f.value, exact=not q.approximate):
                if scope & _PER_DEVICE and not set(f.key) & scope:  # "a batch of 65,536 per GPU" of --batch-size 65536
                    return self._out(
                        q, "unchecked", f"{f.where} does not say whether its {f.value:g} is per {min(scope)}"
                    )
                return self._out(q, "checked")
        if same and self._phrases[i].own and set(self._phrases[i].own) & _SETTING_WORDS:
            said = "; ".join(sorted({f"{f.where} says {f.value:g}" for f in same}))
            return self._out(q, "mismatch", said, [f.where for f in same])
        return None

    def _flag(self, q: Quantity, i: int) -> Verdict | None:
        """A bare number beside every word of one of the run's command-line settings (``an LM
        weight of 0.3`` for ``--lm_weight 0.3``): that setting's value decides it."""
        if q.from_range and q.range_first:
            return None  # "raised from 2e-4 to 1e-3": the from-end is the parent's setting
        own = set(self._own_words(i))
        flags = [
            f
            for f in self.ev.facts
            if f.key
            and own.issuperset(f.key)
            and set(f.key) - {"num", "n", "per", "max", "min"}
            and "_command (" in f.where
        ]
        if not flags:  # "min-SNR weighting (gamma 5)" of --snr-gamma 5: the setting's last word right
            near, sentence = self._near_word(q), set(self._phrases[i].sentence)  # before it, its others in the sentence
            flags = [
                f
                for f in self.ev.facts
                if len(f.key) > 1 and f.key[-1] == near and sentence.issuperset(f.key) and "_command (" in f.where
            ]
        if not flags:
            return None
        if any(self._holds(q, f.value) for f in flags) or self._names_a_row(q, own):
            return self._out(q, "checked")
        said = "; ".join(sorted({f"{f.where} says {f.value:g}" for f in flags}))
        return self._out(q, "mismatch", said, [f.where for f in flags])

    def _unit_setting(self, q: Quantity, i: int) -> Verdict | None:
        """A number with a unit whose own words are every word of one of the run's command-line
        settings (``a 180 s time step`` for ``--dt 180``): the setting's value or a fact of its
        unit decides it; a command writes no unit, so another value is not refuted by it."""
        if q.from_range and q.range_first:
            return None
        own = set(self._phrases[i].own)
        dim = units.dimension(q.unit) if q.unit else None
        flags = [
            f
            for f in self.ev.facts
            if f.key and own.issuperset(f.key) and "_command (" in f.where and _setting_dimension(f.key) == dim
        ]
        if not flags:
            return None
        if any(self._holds(q, f.value, exact=not q.approximate) for f in flags):
            return self._out(q, "checked")
        fact = self._fact(q, i)
        if fact.verdict != "unchecked":
            return fact
        said = "; ".join(sorted({f"{f.where} says {f.value:g}, without a unit" for f in flags}))
        return self._out(q, "unchecked", said)

    def _names_a_row(self, q: Quantity, own: set[str]) -> bool:
        """The number is a row of a cited table its words name by the key column (``at lead day 6``
        of ``lead_day``, 1..10): a row the run has, not the run's setting (``--lead-days 10``)."""
        for place in self.ev.places:
            for table in place.tables:
                for key in table.header:
                    words = set(metric_words(key)) - {"time", "size"}
                    if not words or not words <= own:
                        continue
                    if not is_key_column(table, key) and not is_index_column(table, key):
                        continue
                    if any(isinstance(c, float) and c == q.value for c in table.column(key)):
                        return True
        return False

    def _list_head(self, i: int) -> Quantity:
        """The first member of the list a number is in (itself when it is in none)."""
        q = self.found[i]
        if not q.list_pos:
            return q
        return next((self.found[j] for j in range(i - 1, -1, -1) if self.found[j].list_pos == 0), q)

    def _near_word(self, q: Quantity) -> str | None:
        """The canonical word right before a number (``batch`` of ``batch size of 128``)."""
        lead = [w for w, _ in phrase_words(self.text[max(0, q.start - 30) : q.start])]
        lead = [w for w in lead if w not in ("of", "to", "is", "was", "at", "a", "the", "size", "=", "with")]
        return lead[-1] if lead else None

    def _count(self, q: Quantity, i: int) -> Verdict:
        """A count (``16 threads``, ``25.6M parameters``): a metric named like the noun or by the
        words beside it (at the magnitude its name keeps), else a setup fact."""
        noun = canon(q.noun or "")[0] if q.noun else ""
        noun = "rep" if noun in ("run", "repetition", "trial", "replicate") else noun
        countable = [
            m
            for m in self.ev.metrics
            if not m.startswith("_") and not units.is_spread(m) and _countable(m, self.ev.metrics[m])
        ]
        per = canon(q.per)[0] if q.per else None
        c_lo, c_hi = self._phrases[i].scope
        clause = {w for w, _ in phrase_words(self.text[c_lo:c_hi])}  # its clause's words
        if re.search(r"\d\s+(?:out\s+)?of\s+(?:the\s+|all\s+)?$", self.text[max(0, q.start - 20) : q.start]):
            clause = set()  # "5 of the 10 games": the 10 is the whole, never the qualified count
        own = [
            m
            for m in countable
            if noun in metric_words(m) and (per is None or per in metric_words(m)) and self._qualified(m, noun, clause)
        ]
        if not own and q.per is None:  # "612 LINCS warnings": named by its words; "12 residues" of no metric
            named, _ = self._naming(i, countable, wide=False)
            own = [n.metric for n in named if not noun or not _counts_another(n.metric, noun)]
        held = next((m for m in own if self._held_by(replace(q, unit=None), m, self.ev.metrics[m])), None)
        pointed = self._pointed(replace(q, unit=None), i, [Named(m, 0.0) for m in own])
        if pointed is not None:
            # "At fanout 15 the sampler draws 989.9M edges" where the fanout-15 row says 2,885.2M: that
            # row refutes the report's own count (of another row), as it refutes a value
            decided = self._pointed_decides(q, pointed, held)
            if decided is not None:
                return decided
        if held is not None:
            return self._out(q, "checked")
        span = _FOR_A_SPAN.search(self.text, 0, q.start) is not None  # "for ten epochs": no row of a log's
        found, _ = self._elsewhere(
            replace(q, unit=None), i, [Named(m, 0.0) for m in own], artifacts=not own and not q.per and not span
        )
        if found is not None:
            return found
        if own:  # "completed 100,000 steps" of a report that counts 38,400: the report, never the plan
            said = ", ".join(f"{m}={self.ev.metrics[m]!r}" for m in own)
            return self._out(q, "mismatch", f"the node report says {said}", (OWN,))
        fact = self._fact(q, i)
        if fact.verdict == "unchecked":
            return self._setting(q, i) or self._counted_in_artifacts(q, i, noun) or fact
        return fact

    @staticmethod
    def _qualified(metric: str, noun: str, said: set[str]) -> bool:
        """A count metric that qualifies its noun (``games_above_human``: the games above human)
        counts ``N games`` only when the sentence says the qualifier (``beats human on seven
        games``), never the whole (``across ten games``)."""
        rest = set(metric_words(metric)) - {noun} - _COUNT_WORDS - _QUALIFIER_NOISE
        return not rest or bool(rest & said)

    def _counted_in_artifacts(self, q: Quantity, i: int, noun: str) -> Verdict | None:
        """A count of a thing a cited artifact counts under a key named for it (``1,907
        insertions`` of ``results.test-clean.insertions``) that no value of those keys equals:
        a mismatch, unless the sentence names another node."""
        if not noun or q.approximate or self._named_nodes(q) or self._named_outside(q):
            return None
        shown = []
        for place in self.ev.places:
            keys = [
                k
                for k in self._named_keys(replace(q, unit=None), i, place.by_key)
                if metric_words(k.metric)[-1:] == (noun,)  # results.test-clean.insertions, never cells_M
                and not any(self._holds(q, v) for v in place.by_key[k.metric])
            ]
            shown += [
                f"{place.where} says {k.metric}={'/'.join(f'{v:g}' for v in place.by_key[k.metric][:3])}" for k in keys
            ]
        if not shown:
            return None
        return self._out(q, "mismatch", "; ".join(shown), [s.split(" says ")[0] for s in shown])

    def _spread(self, q: Quantity, i: int) -> Verdict:
        """``± 0.13 GFlops/s``, ``76.1 ± 0.2 %``: a spread metric of that quantity (named by the
        words of the value it spreads)."""
        spreads = [m for m in self.ev.metrics if units.is_spread(m)]
        if q.unit not in (None, "%", "x", "pp"):
            cands = self._of_dimension(spreads, q, spread=True)
            if not cands:  # throughput_std beside throughput_kops_per_s: the spread in its quantity's unit
                for base in self._of_dimension(self.ev.metrics, q):
                    stem = set(metric_words(base)) - {"time", "size", "bw", "throughput", "ops", "kops"}
                    mates = [
                        m
                        for m in spreads
                        if units.of_metric(m) is None and (set(metric_words(m)) - {"std"}) & (stem | {"throughput"})
                    ]
                    for m in mates:
                        value = self.ev.metrics[m] * units.factor(units.of_metric(base) or q.unit, q.unit)
                        if self._holds(q, value):
                            return self._out(q, "checked")
                    if mates:
                        said = ", ".join(f"{m}={self.ev.metrics[m]!r} (in {base}'s unit)" for m in mates)
                        return self._out(q, "mismatch", f"the node report says {said}", (OWN,))
        else:
            prev = next((k for k in range(i - 1, -1, -1) if self.found[k].end <= q.start), None)
            words = self._phrases[prev].own + self._phrases[prev].leading if prev is not None else []
            words = (words + self._phrases[i].own) or self._phrases[i].sentence  # "77.78 ± 0.01% top-1"
            bases = {m: set(metric_words(m)) - {"std"} for m in spreads}
            cands = [m for m, w in bases.items() if w & set(words) - {"val", "train", "test", "mean"}]
            if not cands and len(spreads) == 1 and not set(words) & _named_measures(self._run_metric_names()):
                cands = spreads
            if prev is not None and len(cands) > 1:  # "64.51 ± 0.10% test accuracy": test_acc's, never val_acc's
                before = self.found[prev]
                bases_of = {m: units.spread_base(m) for m in cands}
                of_value = [
                    m
                    for m, b in bases_of.items()
                    if b in self.ev.metrics and self._held_by(before, b, self.ev.metrics[b])
                ]
                cands = of_value or cands
        for metric in cands:
            if self._held_by(replace(q, unit="%" if q.unit == "pp" else q.unit), metric, self.ev.metrics[metric]):
                return self._out(q, "checked")
        if cands:
            said = ", ".join(f"{m}={self.ev.metrics[m]!r}" for m in cands)
            return self._out(q, "mismatch", f"the node report says {said}", (OWN,))
        return self._out(q, "unchecked", "the node report has no spread metric (_std, _sd, _err) of this quantity")

    def _share_of_quantity(self, q: Quantity, i: int, base: Quantity, base_verdict: Verdict) -> Verdict:
        """``7% of the ~35 GFlops/s roofline``: 100 · own metric / that quantity, when it is a fact;
        ``within 10% of the 1,555 GB/s peak``: |own / that quantity − 1| at most the figure. A
        percentage whose words name a metric (``stalled for 38.4% of the 600 s run``) is its value."""
        named, _ = self._naming(i, [m for m in self.ev.metrics if self._could_be(q, m, self.ev.metrics[m])], wide=False)
        if named and not q.closeness and any(self._held_by(q, n.metric, self.ev.metrics[n.metric], n) for n in named):
            return self._out(q, "checked")
        if base_verdict.verdict != "checked":
            return self._out(q, "unchecked", f"it is a share of {base.text}, which is not checked ({base_verdict.why})")
        slack = 0.1 * abs(q.value) if base.approximate else 0.0
        k = self.found.index(base)
        if base.unit is None:  # 2.3% of the 7.24B base: a count, its numerator named in the sentence
            countable = [m for m in self.ev.metrics if not m.startswith("_") and _countable(m, self.ev.metrics[m])]
            sized, _ = self._naming(i, countable)
            cands = [n.metric for n in sized]
        else:
            cands = self._of_dimension(self.ev.metrics, base)
            sized, _ = self._naming(k, cands, wide=False)
            cands = [n.metric for n in sized] or cands
        figures = []
        for metric in cands:
            for value in self._readings(base, metric, self.ev.metrics[metric]):
                if not base.value:
                    continue
                share = 100 * value / base.value
                figures.append(f"{metric}: {share:.3g}%")
                if q.closeness and abs(share - 100) <= q.value:
                    return self._out(q, "checked")
                if not q.closeness and abs(share - q.value) <= q.tolerance + slack:
                    return self._out(q, "checked")
        if not cands:
            return self._out(q, "unchecked", f"no metric of the dimension of {base.text} to take a share of")
        return self._out(q, "mismatch", f"the share of {base.text} is {', '.join(figures)}", (OWN,))

    def _base(self, q: Quantity) -> tuple[str | None, str | None]:
        """The named base of a comparison: the nearest node named after it in its sentence, else
        before it (never the claim's own node); and why there is none."""
        lo, hi = self._sentence(q)
        named = [(pos, n) for pos, n in self.mentions if lo <= pos < hi and n != self.ev.node_id]
        i = next((k for k, f in enumerate(self.found) if f.start == q.start), None)
        if i is not None:  # "Against kgrid the speedup is 6.0x, against the root 22.3x": its own clause's first
            c_lo, c_hi = self._phrases[i].scope
            named = [(pos, n) for pos, n in named if c_lo <= pos < c_hi] or named
        after = [n for pos, n in named if pos >= q.end]
        before = [n for pos, n in named if pos < q.start]
        base = after[0] if after else before[-1] if before else None
        if base is None:
            return None, "no named base (a node id, the baseline or the parent)"
        if base not in self.ev.ancestors:
            lineage = ", ".join(self.ev.ancestors) or "none"
            return None, f"its base {base} is not in {self.ev.node_id}'s lineage ({lineage})"
        return base, None

    def _sentence_direction(self, q: Quantity) -> str | None:
        """``rises 11.9 points over the parent (49% relative)``: the direction its sentence says."""
        if q.change_kind != "relative":
            return None
        lo, hi = self._sentence(q)
        for other in self.found:
            if lo <= other.start < hi and other is not q and other.direction in ("up", "down"):
                return other.direction
        return None

    def _is_comparison(self, q: Quantity, i: int) -> bool:
        """A percentage or factor is a comparison when a comparison word or a base says so: a
        direction (faster, lower, a sign), or ``of``/``vs``/``over`` a node it names; a factor
        whose words name a metric and that names no node (``30.2x coverage``) is a value, and so
        is an end of a range (``from 76.13% to 77.05%``)."""
        if q.range_with is not None and q.unit == "%":
            return False
        if q.direction in ("up", "down") or q.signed or (q.change_kind == "relative" and self._sentence_direction(q)):
            return True
        _lo, _hi = self._sentence(q)
        if q.unit == "x":
            follows = re.findall(r"[a-z]+", self.text[q.end : q.end + 30].lower())[:1]
            if q.direction != "share" or (follows and follows[0] in _COMPARING):
                return True
            m = re.match(r"\s*(?:the|its|that of)?\s*", self.text[q.end : q.end + 20])
            if m is not None and any(pos == q.end + m.end() and n != self.ev.node_id for pos, n in self.mentions):
                return True  # "2.32x its parent in ns/day
            named, _ = self._naming(i, [m for m in self._run_metric_names() if not units.is_spread(m)], wide=False)
            return not named  # "mean coverage of 30.2x": a value kept in x
        if q.direction == "share":  # "139% of node_A2's throughput", never "71.9% of FP32 peak, … below vec4"
            m = re.match(
                r"\s*(?:of|vs\.?|versus|that of|compared to|against)\s+(?:the\s+|its\s+)?",
                self.text[q.end : q.end + 40],
            )
            # "27.4% of the baseline's wall time" written at the baseline: its own share, no comparison
            return m is not None and any(pos == q.end + m.end() and n != self.ev.node_id for pos, n in self.mentions)
        return False

    def _pairs(self, base: str) -> dict[str, str]:
        """Own metric → the base's metric of the same quantity: the same name, else (a run that
        renamed it, ``ops_per_s`` for ``throughput_kops_per_s``) the one of its dimension."""
        theirs = self.ev.ancestors[base]
        out: dict[str, str] = {}
        for m in self.ev.metrics:
            if m.startswith("_") or units.is_spread(m):
                continue
            if m in theirs:
                out[m] = m
                continue
            unit = units.of_metric(m)
            if unit is None:
                continue
            same = [
                t
                for t in theirs
                if t not in self.ev.metrics
                and (u := units.of_metric(t)) is not None
                and units.dimension(u) == units.dimension(unit)
            ]
            if len(same) == 1:
                out[m] = same[0]
        return out

    def _base_value(self, base: str, pairs: Mapping[str, str], metric: str) -> float:
        """The base's value of a metric, in the own metric's unit."""
        theirs = pairs[metric]
        value = self.ev.ancestors[base][theirs]
        if theirs != metric:
            value *= units.factor(units.of_metric(theirs) or "", units.of_metric(metric) or "")
        return value

    def _compared(self, q: Quantity, i: int, base: str) -> tuple[list[Named], str | None, dict[str, str]]:
        """The metrics a comparison is about: named by its words (by a word of their name or a
        synonym) or by the unit of another number in its sentence, else, for speed words, the
        time metrics and the primary metric, else the primary metric; never the primary metric
        when its words name a quantity no metric measures."""
        pairs = self._pairs(base)
        both = list(pairs)
        if q.unit == "pp":  # points are differences of percentages: only a share is compared so
            both = [m for m in both if self._could_be(replace(q, unit="%"), m, self.ev.metrics[m])]
        if q.speed:  # "2.1x faster", "6.8-fold faster": a time or a rate, never "mixed precision"
            paced = [
                m for m in both if (u := units.of_metric(m)) is not None and units.kind(u) in ("time", "throughput")
            ]
            both = paced or both
        named, missing = self._naming(i, both, wide=False, unsaid=_POSITIONS)  # "6.7% below the parent"
        if named:  # "within 0.2% of the parent's mAP" is bbox_mAP's, never bbox_mAP_50's
            return fewest_unsaid(named, self._not_theirs(i, self._phrases[i].sentence)), None, pairs
        if missing is not None:
            return [], missing, pairs
        lo, hi = self._sentence(q)
        by_unit: list[Named] = []
        for other in self.found:
            if lo <= other.start < hi and other is not q and other.unit not in (None, "%", "x", "pp"):
                by_unit += [
                    Named(m, 0.0) for m in self._of_dimension(both, other) if m not in {n.metric for n in by_unit}
                ]
            elif lo <= other.start < hi and other is not q and other.noun is not None and other.unit is None:
                thing = canon(other.noun)[0]  # "458.1M parameters, 3.5x the baseline's": the count's metric
                by_unit += [
                    Named(m, 0.0)
                    for m in both
                    if thing in metric_words(m)
                    and _countable(m, self.ev.metrics[m])
                    and m not in {n.metric for n in by_unit}
                ]
        if by_unit and not q.speed:
            return by_unit, None, pairs
        if not q.speed:
            named, _ = self._naming(i, both, wide=False, before=True, unsaid=_POSITIONS)
            if named:
                return named, None, pairs
        if _LONGER.match(self.text, q.end):  # "takes 10.8% longer than the baseline": a time, as its word says
            timed = [Named(m, 0.0) for m in both if (u := units.of_metric(m)) is not None and units.kind(u) == "time"]
            if timed:
                return timed, None, pairs
        primary = [Named(self.ev.primary, 0.0)] if self.ev.primary in both else []
        if not primary and self.ev.primary is not None:
            primary = [Named(m, 0.0) for m, t in pairs.items() if t == self.ev.primary and m in both]
        if q.speed:
            timed = [Named(m, 0.0) for m in both if (u := units.of_metric(m)) is not None and units.kind(u) == "time"]
            rates = [
                Named(m, 0.0) for m in both if (u := units.of_metric(m)) is not None and units.kind(u) == "throughput"
            ]
            return timed + [p for p in primary + rates if p.metric not in {t.metric for t in timed}], None, pairs
        return primary, None, pairs

    def _near(self, q: Quantity, i: int) -> Verdict:
        """``within 0.1 kcal/mol of the baseline``, ``within 0.01 of n1a``: |own − base| at most
        the figure, for a metric of its dimension (or one without a unit its sentence names)."""
        base, why = self._base(q)
        if base is None:
            return self._out(q, "unchecked", f"a closeness with {why}")
        metrics = self._differenced(q, i, base)
        if isinstance(metrics, Verdict):
            return metrics
        shown = []
        for metric, own, other, said in self._read_against(q, base, metrics):
            shown.append(f"{metric}: {said[0]:g} vs {base}'s {said[1]:g}")
            if abs(own - other) <= q.value * (1 + 1e-9) + 1e-12:  # at most the figure, exactly, as a % closeness
                return self._out(q, "checked")
        return self._out(q, "mismatch", "further apart than that: " + "; ".join(shown), (OWN, f"{base}'s report"))

    def _read_against(
        self, q: Quantity, base: str, metrics: list[str]
    ) -> Iterator[tuple[str, float, float, tuple[float, float]]]:
        """Each metric as the quantity states it at this node and at ``base`` (skipping one that
        cannot be read so), with the two values as the reports write them."""
        pairs = self._pairs(base)
        for metric in metrics:
            own = self._readings(q, metric, self.ev.metrics[metric])
            other = self._readings(q, metric, self._base_value(base, pairs, metric))
            if own and other:
                yield metric, own[0], other[0], (self.ev.metrics[metric], self.ev.ancestors[base][pairs[metric]])

    def _differenced(self, q: Quantity, i: int, base: str) -> list[str] | Verdict:
        """The metrics a difference or a closeness against ``base`` is of: without a unit, those
        its sentence names; with one, those of its dimension (the named ones, if any)."""
        pairs = self._pairs(base)
        if q.unit is None:  # "drops by 0.0011 against the parent": of a metric its words name, kept without a unit
            plain = [m for m in pairs if units.of_metric(m) is None and not units.is_spread(m)]
            named, _ = self._naming(i, plain)  # "eval loss, 0.3312, is 0.0025 higher": its sentence names it
            if not named:  # "gives 28.49 BLEU, +0.73 over the parent": the name the value before it carries
                named = self._named_before(q, plain)
            if not named:
                return self._out(q, "unchecked", f"its words name no metric of both this report and {base}'s")
            return [n.metric for n in named]
        metrics = self._of_dimension(list(pairs), q)
        named, _ = self._naming(i, metrics, wide=False)
        metrics = [n.metric for n in named] or metrics
        if not metrics:
            return self._out(q, "unchecked", f"no metric of dimension {q.unit} in both this report and {base}'s")
        return metrics

    def _named_before(self, q: Quantity, metrics: list[str]) -> list[Named]:
        """The metrics the name written beside the nearest earlier number of the sentence names
        (``28.49 BLEU``), when that number is a value, not a change."""
        before = self._number_before(q)
        if before is None or before.name is None or before.change:
            return []
        words = [w for part in re.split(r"[\s_.-]+", before.name) if part for w in canon(part)]
        return name_metrics(words, metrics, complements=False)

    def _difference(self, q: Quantity, i: int) -> Verdict:
        """``+5.95 GFlops/s over node_A``, ``0.5 s faster than node_A``: own − base of a metric of
        its dimension, in the stated direction (for a time and a speed word, less time is faster)."""
        base, why = self._base(q)
        if base is None:
            by = re.search(r"\bby\s*$", self.text[max(0, q.start - 8) : q.start]) is not None
            if q.signed or q.unit is None or by:  # "drops by 0.0011": a change, of a base the sentence does not name
                return self._out(q, "unchecked", f"a difference with {why}")
            return self._value(replace(q, difference=False), i)  # "more than" with no base: a plain value
        metrics = self._differenced(q, i, base)
        if isinstance(metrics, Verdict):
            return metrics
        shown = []
        for metric, own, other, said in self._read_against(q, base, metrics):
            timed = (u := units.of_metric(metric)) is not None and units.kind(u) == "time"
            diff = other - own if q.speed and timed else own - other
            if q.judged and self._lower(metric):  # "0.5 m worse than the parent": an RMSE that rose
                diff = -diff
            stated = q.value if q.signed else (q.value if q.direction == "up" else -q.value)
            shown.append(f"{metric}: {said[0]:g} − {base}'s {said[1]:g}")
            if self._holds(replace(q, value=stated), diff):
                return self._out(q, "checked")
        return self._out(q, "mismatch", "the difference is " + "; ".join(shown), (OWN, f"{base}'s report"))

    def _lower(self, metric: str) -> bool:
        """Less of the metric is better: by its name (a loss, an error, FID) or, for the
        experiment's primary metric, by the run's own ``higher_is_better: false``."""
        return lower_is_better(metric) or (metric == self.ev.primary and self.ev.primary_lower)

    def _is_share(self, metric: str) -> bool:
        return bool(set(metric_words(metric)) & SHARE_WORDS) and units.of_metric(metric) is None

    def _percent(self, metric: str, value: float) -> float:
        """A share metric's value at one node in percent: a node keeps it as a fraction or as a
        percent (one run may do both), so each value says which it is."""
        return value if kept_as_percent(metric, value) else 100 * value

    def _points(self, q: Quantity, i: int) -> Verdict:
        """``+1.8 pp over the baseline``, ``1.8 points higher than n1``, ``within 0.5 pp of the
        parent``: own − base of a share metric in percentage points, in the stated direction."""
        base, why = self._base(q)
        if base is None:
            return self._out(q, "unchecked", f"a difference of percentage points with {why}")
        named, missing, pairs = self._compared(q, i, base)
        if not named:
            return self._out(
                q, "unchecked", f"no share metric to compare with {base}" + (f" ({missing})" if missing else "")
            )
        shown = []
        for n in named:
            own = self._percent(n.metric, self.ev.metrics[n.metric])
            theirs = self._percent(n.metric, self._base_value(base, pairs, n.metric))
            if n.complement:
                own, theirs = 100 - own, 100 - theirs
            diff = own - theirs
            shown.append(f"{n.metric}: {diff:+.3g} pp against {base}")
            if q.closeness:
                if abs(diff) <= q.value + 1e-9:
                    return self._out(q, "checked")
                continue
            stated = -abs(q.value) if (q.direction == "down" or q.value < 0) else abs(q.value)
            if q.judged and self._lower(n.metric):  # "0.018 points worse": an error that rose
                stated = -stated
            if self._holds(replace(q, value=stated), diff):
                return self._out(q, "checked")
        return self._out(q, "mismatch", "; ".join(shown), (OWN, f"{base}'s report"))

    def _closeness(self, q: Quantity, i: int) -> Verdict:
        """``within 2 % of node_A``: |own / base − 1| at most the figure, exactly."""
        base, why = self._base(q)
        if base is None:
            return self._out(q, "unchecked", f"a closeness with {why}")
        named, missing, pairs = self._compared(q, i, base)
        if not named:
            return self._out(q, "unchecked", f"no metric to compare with {base}" + (f" ({missing})" if missing else ""))
        shown = []
        for n in named:
            own, theirs = self.ev.metrics[n.metric], self._base_value(base, pairs, n.metric)
            if self._is_share(n.metric):
                own, theirs = self._percent(n.metric, own), self._percent(n.metric, theirs)
            if not theirs:
                continue
            gap = abs(own / theirs - 1) * 100
            shown.append(f"{n.metric} {own:g} vs {base}'s {theirs:g}: {gap:.3g}% apart")
            if gap <= q.value + 1e-9:
                return self._out(q, "checked")
        return self._out(q, "mismatch", "; ".join(shown), (OWN, f"{base}'s report"))

    def _comparison(self, q: Quantity, i: int) -> Verdict:
        """``N x faster than node_A``, ``+38 % over node_A``, ``N % of the baseline``. A change in
        % is relative (``absolute`` makes it a difference of percentage points)."""
        base, why = self._base(q)
        if base is None:
            return self._out(q, "unchecked", why)
        direction = q.direction or self._sentence_direction(q)
        if direction is None:
            return self._out(q, "unchecked", "a percentage with no direction (faster, lower, of, over, …)")
        named, missing, pairs = self._compared(q, i, base)
        if not named:
            extra = f": its words name {missing}, which no metric measures" if missing else ""
            return self._out(
                q, "unchecked", f"no metric to compare with {base}{extra} (name one, or set the primary metric)"
            )
        shown = []  # "-28 %" states a 28 % drop (stated, per metric below)
        ambiguous: list[str] = []
        absolute = q.unit == "%" and q.change_kind == "absolute" and direction in ("up", "down")
        for n in named:
            way = direction
            if q.judged and self._lower(n.metric):  # "FID improves 4.3%": an FID that fell by 4.3 %
                way = "down" if direction == "up" else "up"
            stated = replace(q, value=abs(q.value)) if way == "down" else q
            own, theirs = self.ev.metrics[n.metric], self._base_value(base, pairs, n.metric)
            if self._is_share(n.metric):  # one node may keep it as a fraction, another as a percent
                own, theirs = self._percent(n.metric, own), self._percent(n.metric, theirs)
                if n.complement:
                    own, theirs = 100 - own, 100 - theirs
            elif n.complement:
                if kept_as_percent(n.metric, own, self._others(n.metric)):
                    own, theirs = 100 - own, 100 - theirs
                else:
                    own, theirs = 1 - own, 1 - theirs
            if absolute:
                if (
                    not self._is_share(n.metric)
                    and units.of_metric(n.metric) is None
                    and 0 <= min(own, theirs) <= max(own, theirs) <= 1
                ):
                    own, theirs = 100 * own, 100 * theirs  # "Box AP improves 4.6% absolute": a score kept in [0, 1]
                figure = own - theirs if way == "up" else theirs - own
            elif own and theirs:
                timed = (u := units.of_metric(n.metric)) is not None and units.kind(u) == "time"
                r = theirs / own if q.speed and timed else own / theirs
                figure = _figure(q, way, r)
                if q.speed and timed and way == "down" and q.unit == "%":
                    # "N % slower" of a time: a drop of speed, 100 · (1 − t_base/t_node), or a rise of
                    # time, 100 · (t_node/t_base − 1); fields write both, so only both together decide
                    rise = 100 * (own / theirs - 1)
                    if self._holds(stated, figure) != self._holds(stated, rise):
                        ambiguous.append(
                            f"{n.metric} {own:g} vs {base}'s {theirs:g}: {figure:.4g}% as a drop of speed, {rise:.4g}% as a rise of time"
                        )
                        continue
            else:
                continue
            shown.append(f"{n.metric} {own:g} vs {base}'s {theirs:g}: {figure:.4g}{'%' if q.unit == '%' else 'x'}")
            if self._holds(stated, figure):
                return self._out(q, "checked")
        if ambiguous:
            why = "; ".join(ambiguous) + " (write `takes N % longer` or `N % lower throughput`)"
            return self._out(q, "unchecked", f"one reading of `slower` holds, the other does not: {why}")
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


def _blank_nodes(text: str, mentions: list[tuple[int, str]]) -> str:
    """``text`` with every node it names blanked (``over smem`` is a node, ``smem_KB`` a metric)."""
    for pos, _ in mentions:
        m = _NAME_AT.match(text, pos)
        if m:
            text = text[:pos] + " " * (m.end() - pos) + text[m.end() :]
    return text


def _blank(text: str, found: list[Quantity], offset: int, *, digits: bool = False) -> str:
    """``text`` (starting at ``offset`` of the claim) with every number's own words blanked
    (``digits``: only the number as written, its noun kept: ``7,449 truth SNPs`` names a row)."""
    for q in found:
        end = q.start + len(q.written) if digits and q.text.startswith(q.written) else q.end
        a, b = max(q.start - offset, 0), min(end - offset, len(text))
        if a < b:
            text = text[:a] + " " * (b - a) + text[b:]
    return text


def _setting_dimension(key: tuple[str, ...]) -> str | None:
    """The dimension a command-line setting's name gives its value (``--res-km``: a length,
    ``--dt``: a time step), or None when its name says none (``--epochs``, ``--overlap-halo``)."""
    if "timestep" in key:
        return units.dimension("second")
    unit = units.of_metric("_".join(key))
    return units.dimension(unit) if unit else None


def _comparable(unit: str, other: str) -> bool:
    return other not in ("%", "x", "pp") and units.dimension(unit) == units.dimension(other)


_COMMON_COUNTS = frozenset({"count", "number", "num", "n", "cnt", "total"})


_LONGER = re.compile(r"\s*(?:longer|shorter)\b")  # a comparison that says a duration
_PARTICIPLES = frozenset(
    {"seen", "done", "taken", "given", "written", "chosen", "kept", "lost", "sent", "built", "read", "run"}
)


def _asked_of(metric: str) -> set[str]:
    """The quantity words that ask for a metric: its own, and ``accuracy`` for an error kept as a
    size (``force accuracy 0.18% RMS`` asks for force_err_rms)."""
    words = set(metric_words(metric))
    return words | {"acc"} if is_size_error(words) else words


def _counts_another(metric: str, noun: str) -> bool:
    """Whether a count metric counts a thing of its own other than ``noun`` (``lincs_warnings``
    counts warnings, never residues)."""
    words = metric_words(counted_part(metric))  # particles_per_gpu_M counts particles, not GPUs
    last = words[-1:]
    if metric.lower().rstrip("_").endswith(("ed", "ing")) or (last and last[0] in _PARTICIPLES):
        return False  # n_converged, n_failing, images_seen_M: what happened to the things, not another thing
    return bool(last) and last[0] != noun and count_noun(last[0] + "s") is not None and last[0] not in _COMMON_COUNTS


def _countable(metric: str, value: float) -> bool:
    """A metric a count may be: kept at a magnitude (``params_M``), named like a count, or a
    whole number above one without a unit."""
    if units.of_metric(metric) is not None:
        return False  # time_per_step_s is a time, never a count of steps
    if count_scale(metric) != 1.0 or set(metric_words(metric)) & _COUNT_WORDS:
        return True
    return units.of_metric(metric) is None and value >= 1.0 and value == int(value)


def _cell(cell: object) -> str:
    return f"{cell:g}" if isinstance(cell, float) else str(cell)


def _named_measures(names: Iterable[str]) -> set[str]:
    return {w for n in names for w in metric_words(n)}


def _after_a_word(text: str, lo: int, at: int) -> bool:
    """Whether ``text[lo:at]`` ends with a lowercase letter or a comma, then white space (the
    word at ``at`` is inside a sentence, not its first)."""
    j = at
    while j > lo and text[j - 1].isspace():
        j -= 1
    return lo < j < at and text[j - 1] in _LOWER_OR_COMMA


_LOWER_OR_COMMA = frozenset("abcdefghijklmnopqrstuvwxyz,")


@functools.lru_cache(maxsize=8192)
def _looks_like_a_name(word: str) -> bool:
    """A proper name of a thing a run may or may not have used: letters with digits (``HG005``,
    ``H100``, ``CIFAR-100``), all capitals (``LARS``, ``MATH``), or capitals inside a word
    (``HumanEval``, ``ImageNet-Sketch``)."""
    letters = re.sub(r"[^A-Za-z]", "", word)
    if len(letters) < 2:
        return False
    if re.search(r"[A-Za-z]", word) and re.search(r"\d", word):
        return True
    if letters.isupper() and len(letters) >= 3:
        return True
    if any(len(part) >= 3 and part.isupper() for part in word.split("-")):
        return True  # ARC-Challenge
    return bool(re.search(r"[a-z][A-Z]", word))


# where a number's own phrase ends: punctuation or a boundary word (strict: on, in and at too)
# verbs that never name a quantity: a noun phrase after a number ends before them ("13 km grid spacing raises ...")
_PHRASE_VERBS = frozenset(
    ["raises", "raised", "lifts", "lifted", "lowers", "lowered", "reduces", "reduced", "boosts", "boosted", "improves", "improved", "achieves", "achieved", "reaches", "reached", "yields", "yielded", "halves", "halved", "doubles", "doubled", "brings", "brought", "cuts", "had", "has", "have", "was", "were", "is", "are"]
)  # fmt: skip
_STOP = re.compile(
    r"[,;:\[\]|]|\s(?:" + "|".join(sorted((_BOUNDARY - {"on", "in", "at"}) | _PHRASE_VERBS)) + r")\b|[.!?](?:\s|$)"
)
_KEY_AFTER = re.compile(
    r"\s*(?:[A-Za-z/%]+\s+)?(?:at|with|for|on)\s+(?:a\s+|an\s+|the\s+)?[A-Za-z][\w-]*(?:\s+[A-Za-z][\w-]*)?\s+(?:of\s+)?"
)
_PER_THING = re.compile(r"\s+per\s+([A-Za-z][\w-]*)", re.I)  # "58 per passage"
# a node, maybe its possessive and a few words, then a verb that states a result ("n1 reaches",
# "the parent n1 trained at", "n1 samples at": any verb before "at")
_STATED = re.compile(
    r"[\w-]+(?:'s\s+([\w-]+(?:\s+[\w-]+){0,3}?))?\s+(?:" + "|".join(_STATES) + r"|(?P<at>[a-z]+(?:s|ed)\s+at))\b"
)
_FOR_NODE = re.compile(r"\s+(?:for|of|at|in|on)\s+(?:the\s+)?", re.I)  # "3796.5 for the parent"
_INSTEAD = re.compile(r"\b(?:instead\s+of|rather\s+than)\s+$", re.I)  # the number after it is set aside
_POSSESSIVE_END = re.compile(r"[\w-]'s\s+$")
# a determiner opens another noun phrase (never after a preposition: "68% of the CPU")
_NEW_PHRASE = re.compile(
    r"(?<!\bof)(?<!\bin)(?<!\bon)(?<!\bat)(?<!\bto)(?<!\bfor)(?<!\bby)(?<!\bwith)(?<!\bfrom)"
    r"\s(?:the|a|an|its|their|our|this|that)\s",
    re.I,
)
_STRICT = re.compile(r"\s(?:" + "|".join(sorted(_BOUNDARY)) + r")\b")


_SIDES = frozenset(w for pair in COMPLEMENTS for side in pair for w in side)


def _unsaid_side(word: str) -> frozenset[str]:
    """The other side of the complement pair ``word`` is a side of (empty: none)."""
    for one, other in COMPLEMENTS:
        if word in one:
            return other
        if word in other:
            return one
    return frozenset()


def _unit_keys(table: Table) -> list[tuple[str, object, list[float], tuple[str, ...]]]:
    """The table's key columns kept in a unit: each column's unit, the unit's dimension, its
    numeric cells and its words; once per table."""
    memo = ("unit_keys", len(table.rows))
    if memo not in table.memo:
        out = []
        for column in table.header:
            unit = units.of_metric(column)
            if unit is None or not is_key_column(table, column):
                continue
            cells = [c for c in table.column(column) if isinstance(c, float)]
            out.append((unit, units.dimension(unit), cells, tuple(metric_words(column)) + tuple(canon(column))))
        table.memo[memo] = out
    return table.memo[memo]


def _phrases(text: str, found: list[Quantity]) -> list[_Phrase]:
    """For each number, the canonical words that may name its quantity, nearest first: its own
    phrase (the noun phrase right after it, to the next boundary word or punctuation, at most
    four words, and its leading words back to the last boundary word), all its leading words
    (from the end of the last number's phrase), and its sentence; and its clause."""
    for q in found:  # a number's own words ("1.6 times", "GFlops/s") never name another's quantity
        text = text[: q.start] + " " * (q.end - q.start) + text[q.end :]
    trailing: list[list[str]] = []
    trailing_end: list[int] = []
    stop_re, strict_re = _STOP, _STRICT
    for k, q in enumerate(found):
        nxt = next((o.start for o in found[k + 1 :] if o.start >= q.end), None)
        rest = text[q.end : min(q.end + 60, nxt if nxt is not None else len(text))]
        stop = stop_re.search(rest)
        if (
            nxt is not None and nxt <= q.end + 60 and _PUNCT.search(rest) is None and stop is None
        ):  # "0.9846 at INDEL recall 0.9912", never "9.87% WER on test-clean and 4.16% …"
            stop = strict_re.search(rest) or stop
        span = rest[: stop.start()] if stop else rest
        if nxt is not None and q.unit != "x" and (np_ := _NEW_PHRASE.search(span)) is not None:
            span = span[: np_.start()]  # "At 5M frames the baseline IQM was 0.418": "the baseline IQM" is 0.418's
        if "(" in span and ")" not in span and nxt is not None:
            span = span[: span.index("(")]  # "2.39 (eval loss 0.817)": the parenthesis is the next number's
        words = [w for w, _ in phrase_words(span)][:6]
        if q.noun is not None and _COUNT_ENDS.match(span):
            words = []  # "At 128 clusters lDDT-Cα is 85.7%": a count's phrase ends at its noun
        elif q.unit is None and q.noun is None and _KEYED_BEFORE.search(text, max(0, q.start - 40), q.start):
            words = []  # "At recycle 1 mean pLDDT is 81.6": the 1 names a row; the words after are the 81.6's
        trailing_end.append(q.end + (len(span) if words else 0))
        trailing.append(words)
    result = []
    sentences: dict[tuple[int, int], list[str]] = {}  # the numbers of one sentence share its words
    for k, q in enumerate(found):
        lo, hi = sentence_of(text, q.start)
        start = lo
        for j in range(k - 1, -1, -1):
            if found[j].end <= q.start and found[j].start >= lo:
                start = max(start, found[j].end)
                break
        own_start = max(start, max((trailing_end[j] for j in range(k) if found[j].end <= q.start), default=lo))
        clause_start = own_start
        lead_text = text[own_start : q.start]  # "0.0009 kJ/mol/ns per atom, a 92% cut": "per atom" is not the 92%'s
        lead_words = phrase_words(lead_text)
        leading = [w for w, _ in lead_words]
        near: list[str] = []
        marked = lead_text
        if marked.rstrip().endswith("(") and text[q.end : q.end + 1] == ")":
            marked = marked.rstrip()[:-1]  # "the final epoch (36)": the number restates its noun phrase
        cut = max((m.end() for m in _CLAUSE_MARKS.finditer(marked)), default=0)
        for word in reversed([w for w, at in lead_words if at >= cut]):  # no word spans the mark at the cut
            if word in _BOUNDARY:
                if near or word in ("and", "or", "but", "while", "whereas", "vs", "versus"):
                    break  # "1,621 SNP and 4,034 …": the word before "and" is the last number's
                continue
            near.insert(0, word)
        if (lo, hi) not in sentences:
            sentences[(lo, hi)] = [w for w, _ in phrase_words(text[lo:hi])]
        sentence = sentences[(lo, hi)]
        # the words after a number are its own until a conjunction, a comma or the next number
        after = _CLAUSE_END.search(text, q.end, hi)
        clause_end = after.start() if after else hi
        nxt_q = next((o for o in found[k + 1 :] if q.end <= o.start < clause_end), None)
        if nxt_q is not None:
            keyed = _KEY_AFTER.fullmatch(text, q.end, nxt_q.start) and nxt_q.unit is None and nxt_q.noun is None
            # "18.4k QPS at concurrency 32": the row's key is the clause's; never the next value's clause
            clause_end = nxt_q.end if keyed else nxt_q.start
        result.append(_Phrase(trailing[k] + near, leading, sentence, (clause_start, clause_end), len(trailing[k])))
    return result
