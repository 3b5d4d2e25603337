"""What a claim's numbers are checked against (docs/grounding.md, 4), in order of authority:
the claim's own node report, the artifacts it pins (hash-verified, read by row), its
ancestors' reports as the sentence names them, and the run's own words (hardware spec,
commands, what was done) as facts. Plain data and the readers of facts; the roles that
decide a number's verdict are :mod:`projections.evidence.grammar.roles`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from projections.evidence.grammar import units
from projections.evidence.grammar.metric_names import canon, phrase_words
from projections.evidence.grammar.quantities import count_noun, read
from projections.evidence.grammar.tables import Place
from projections.models.verdicts import ValuesVerdict

_CAMEL = re.compile(r"([a-z])([A-Z])")
_NON_WORD = re.compile(r"[^A-Za-z0-9]+")
# scores a field keeps as a fraction or as a percent (val_top1_acc 0.7613 or 76.13)
_FRACTION_WORDS = {"accuracy", "acc", "precision", "recall", "f1", "auc", "iou"}
# what is a number in [0, 1] by its very name (clip_frac, a probability); a ratio only when it is
# a share of events (cache_hit_ratio 1.37 is impossible, titv_ratio 2.1 is not)
_UNIT_INTERVAL_WORDS = {"fraction", "probability", "frac", "prob"}
_SHARE_RATIO_WORDS = {"hit", "miss", "acceptance", "success"}
_PERCENT_WORDS = {"percent", "pct", "percentage"}
_NONNEGATIVE_WORDS = {
    "time", "latency", "duration", "runtime", "seconds", "bandwidth", "throughput", "flops", "gflops", "tflops",
    "count", "size", "memory", "bytes", "speedup", "s", "ms", "us", "ns", "sec", "error", "loss",
}  # fmt: skip
OWN = "node_report.json metrics"


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


def numeric_metrics(metrics: object) -> dict[str, float]:
    """The finite numeric metrics of a node report (booleans are not numbers)."""
    if not isinstance(metrics, Mapping):
        return {}
    return {
        str(k): float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }


def range_problem(name: str, value: float, declared: Mapping[str, tuple[float, float]]) -> str | None:
    """Why ``value`` cannot be a value of metric ``name``, or None."""
    if name in declared:
        lo, hi = declared[name]
        return None if lo <= value <= hi else f"{name}={value:g} is outside its declared range [{lo:g}, {hi:g}]"
    words = set(tokens(name))
    if words & _PERCENT_WORDS and not 0 <= value <= 100:
        return f"{name}={value:g} is a percentage outside [0, 100]"
    share = words & _UNIT_INTERVAL_WORDS or ("ratio" in words and words & _SHARE_RATIO_WORDS)
    if share and not words & _PERCENT_WORDS and not 0 <= value <= 1:
        return f"{name}={value:g} is a ratio or fraction outside [0, 1]"
    if words & _FRACTION_WORDS and not words & _PERCENT_WORDS and not 0 <= value <= 100:
        return f"{name}={value:g} is a score outside [0, 1] (or [0, 100] as a percentage)"
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
    key: tuple[str, ...] = ()  # a setting's name as canonical words (--batch-size 256: batch, size)
    form: str | None = None  # the number format beside it ("19.5 TFLOPS FP32": fp32)


# a number format written beside a quantity: a peak is per format ("19.5 TFLOPS FP32 and 9.7 TFLOPS FP64")
_FORMS = r"(fp64|fp32|fp16|fp8|bf16|tf32|int8|int4)"
_FORM_AFTER = re.compile(r"\s*(?:\w+\s+)?" + _FORMS + r"\b", re.I)
_FORM_BEFORE = re.compile(r"\b" + _FORMS + r"\s*$", re.I)


def number_form(text: str, start: int, end: int) -> str | None:
    """The number format written right after a quantity (within two words) or right before it."""
    after = _FORM_AFTER.match(text, end)
    if after is not None:
        return after.group(1).lower()
    before = _FORM_BEFORE.search(text[max(0, start - 12) : start])
    return before.group(1).lower() if before else None


@dataclass
class Evidence:
    """What one claim's numbers may be checked against. The cited artifacts are read only when
    a number needs them (``sources`` load them, once)."""

    metrics: dict[str, float]  # the claim's own node report's numeric metrics
    ancestors: dict[str, dict[str, float]] = field(default_factory=dict)  # lineage, root first: id → metrics
    sources: list[Callable[[], Place | None]] = field(default_factory=list)  # cited, hash-verified artifacts
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # declared metric ranges
    node_id: str | None = None
    others: frozenset[str] = frozenset()  # the run's other nodes (outside the lineage)
    facts: list[Fact] = field(default_factory=list)
    primary: str | None = None  # the experiment's primary metric
    primary_lower: bool = False  # the experiment says less of it is better (higher_is_better: false)
    words: frozenset[str] = frozenset()  # the run's own words, lowercase (see :attr:`vocabulary`)
    label: str | None = None  # ARI's label of the claim's node ("validation" re-runs its parent)
    _places: list[Place] | None = field(default=None, repr=False)
    _vocabulary: frozenset[str] | None = field(default=None, repr=False)
    _names: tuple[str, ...] | None = field(default=None, repr=False)
    _memo: dict[tuple[object, ...], Any] = field(default_factory=dict, repr=False)

    def memo(self, key: tuple[object, ...], derive: Callable[[], Any]) -> Any:
        """What is derived from this evidence alone (a metric's tolerance and unit factors), once
        for all the claims that share it."""
        if key not in self._memo:
            self._memo[key] = derive()
        return self._memo[key]

    @property
    def places(self) -> list[Place]:
        if self._places is None:
            self._places = [p for p in (load() for load in self.sources) if p is not None]
        return self._places

    @property
    def names_in_reach(self) -> tuple[str, ...]:
        """Every metric name in reach, once: the own report's, the ancestors', the cited
        artifacts' keys and table columns."""
        if self._names is None:
            names = list(self.metrics) + [m for ms in self.ancestors.values() for m in ms]
            for place in self.places:
                names += list(place.by_key)
                names += [h for t in place.tables for h in t.header]
            self._names = tuple(dict.fromkeys(names))
        return self._names

    @property
    def vocabulary(self) -> frozenset[str]:
        """Every word the run itself writes (its context and reports, metric names, the pinned
        artifacts' keys and cells), lowercase: a name a claim writes that is none of these (a
        dataset, a sample, a device the run never used) is out of the run's reach."""
        if self._vocabulary is None:
            found = set(self.words)
            names = list(self.metrics) + [m for ms in self.ancestors.values() for m in ms]
            for place in self.places:
                names += list(place.by_key)
                for table in place.tables:
                    names += table.header
                    names += [c for row in table.rows for c in row if isinstance(c, str)]
            for name in names:
                found.update(words_of(name))
            self._vocabulary = frozenset(found)
        return self._vocabulary


def words_of(text: str) -> set[str]:
    """The words of a text, lowercase, each also without a plural ``s``, split at ``-``, ``_``
    and ``.`` and without a version's trailing ``+`` (``ImageNet-1k`` gives ``imagenet-1k``,
    ``imagenet``, ``1k``; ``DPM-Solver++`` gives ``dpm-solver``, ``dpm``, ``solver`` too)."""
    out: set[str] = set()
    for m in re.finditer(r"[A-Za-z0-9][\w.+-]*", text):
        word = m.group().lower().strip("._-")
        for w in {word, word.rstrip("+"), *(p.rstrip("+") for p in re.split(r"[-_.]+", word))}:
            if w:
                out.add(w)
                if len(w) > 3 and w.endswith("s"):
                    out.add(w[:-1])
    return out


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


# ------------------------------------------------------------------------------ facts

_DEVICES = re.compile(r"(?<![\w.])(\d+)\s*[x×]\s+((?:[A-Za-z][\w-]*\s*){1,4})")
_GPU = re.compile(r"\b(?:NVIDIA|GPU|A100|H100|V100|A10G?|L4|T4|MI\d+|Instinct|RTX|Tesla|GH200)", re.I)
_CPU = re.compile(r"\b(?:Xeon|EPYC|Ryzen|Core|CPU|Graviton|Ampere)\b", re.I)
_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "of",
        "to",
        "from",
        "at",
        "in",
        "on",
        "with",
        "by",
        "for",
        "and",
        "or",
        "is",
        "was",
        "are",
        "were",
        "its",
        "our",
        "their",
    ]
)
_SETTING = re.compile(r"(?<![\w-])([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?![\w.])")
_FLAG = re.compile(r"(?<![\w-])--?([A-Za-z][\w-]*)(?:=|\s+)(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?![\w.])")


def facts_in(texts: Mapping[str, object], numbers: Mapping[str, object] | None = None) -> list[Fact]:
    """The facts of the run's own words: quantities with a unit or a count noun in ``texts``
    (hardware spec, commands, what was done), settings written ``NAME=16`` or ``--name 16``
    (``OMP_NUM_THREADS=16`` counts threads, ``--batch-size 256`` is a batch size), and
    ``numbers`` (``cpu_info``'s ``threads`` and ``mhz``, ``mem_total_kb``)."""
    out: list[Fact] = []
    for where, text in texts.items():
        if not isinstance(text, str) or not text:
            continue
        for q in read(text):
            if q.change or q.name is not None or q.qualifier in ("<", "<=", ">", ">="):
                continue
            if q.unit is not None or q.noun is not None:
                form = number_form(text, q.start, q.end) if q.unit is not None else None
                out.append(Fact(q.value, q.unit, q.noun, where, q.per, form=form))
        for pattern in (_SETTING, _FLAG):
            for key, raw in pattern.findall(text):
                words = tuple(w for w, _ in phrase_words(re.sub(r"[_\-]+", " ", key)))  # --label-smoothing: ls
                out.append(Fact(float(raw), None, _noun_of(key), f"{where} ({key})", None, words))
        for m in _DEVICES.finditer(text):  # "4x NVIDIA A100", "2x AMD EPYC 7763": a count of devices
            kind = "gpu" if _GPU.search(m.group(2)) else "cpu" if _CPU.search(m.group(2)) else None
            if kind is not None:
                out.append(Fact(float(m.group(1)), None, kind, f"{where} ({m.group().strip()})"))
        for q in read(text):  # a bare number of a setting written in prose: "global batch size to 4096"
            if q.unit is None and q.noun is None and not q.change and q.name is None:
                lead = re.findall(r"[A-Za-z][\w-]*", text[max(0, q.start - 40) : q.start])[-3:]
                words = tuple(w for word in lead for w in canon(word) if w not in _STOP)
                if words:
                    out.append(Fact(q.value, None, None, where, None, words))
    for key, value in (numbers or {}).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        unit = units.of_metric(key) or units.parse(key)
        noun = None if unit else _noun_of(key)
        if unit or noun:
            out.append(Fact(float(value), unit, noun, key))
    return out


def _noun_of(key: str) -> str | None:
    for word in reversed(re.split(r"[_\-]+", key) if ("_" in key or "-" in key) else [key]):
        noun = count_noun(word)
        if noun is not None:
            return noun
    return None
