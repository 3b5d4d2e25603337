"""Which metric a number of a claim is about, from the words around it (docs/grounding.md, 2).

A metric is named by a word of its name (``loss`` of ``val_loss``), a common synonym
(``accuracy`` for ``acc``, ``validation`` for ``val``, ``perplexity`` for ``ppl``), an
identifier written as the field writes it (``top-1`` for ``top1``, ``99th percentile`` for
``p99``, ``Acc@1``), or the kind of quantity its unit measures (a time metric is a ``time``,
a rate a ``throughput``). Both sides are reduced to the same canonical words; a metric's score
is the weight of its words the phrase holds, identifiers (``gsm8k``, ``snp``, ``p99``) weighing
more than the measure words every field shares (``accuracy``, ``loss``). The best-scored
metrics are the ones a number is checked against; a tie keeps them all.

A complement is read where the phrase names the other side of a share: an ``error`` of an
accuracy, a ``miss`` rate of a hit rate (:data:`COMPLEMENTS`). Magnitude units in a count
metric's name (``params_M``, ``reads_M``, ``kops``) and percentages kept as fractions are said
by :func:`count_scale` and :func:`kept_as_percent`. Pure functions over names and words.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from projections.evidence.grammar.text_caches import per_text

# canonical word ← the ways fields write it
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "acc": ("acc", "accuracy", "accuracies", "accurate"),
    "val": ("val", "valid", "validation", "eval", "evaluation", "dev", "held-out", "heldout"),
    "train": ("train", "training", "trn"),
    "test": ("test", "testing"),
    "loss": ("loss", "losses"),
    "ppl": ("ppl", "perplexity", "perplexities"),
    "throughput": ("throughput", "throughputs", "tput", "thpt"),
    "latency": ("latency", "latencies", "lat"),
    "bw": ("bw", "bandwidth", "bandwidths"),
    "mem": ("mem", "memory", "rss", "vram", "footprint"),
    "time": ("time", "times", "runtime", "runtimes", "duration", "elapsed", "walltime", "wallclock", "makespan"),
    "param": ("param", "params", "parameter", "parameters"),
    "err": ("err", "error", "errors"),
    "eff": ("eff", "efficiency", "efficiencies"),
    "util": ("util", "utilization", "utilisation", "usage"),
    "speedup": ("speedup", "speed-up", "speedups"),
    "recall": ("recall", "sensitivity", "tpr", "detect", "detects", "detected", "detection"),
    "precision": ("precision", "ppv"),
    "f1": ("f1", "f-score", "fscore", "f1-score", "f-measure"),
    "em": ("em", "exact-match", "exactmatch"),
    "coeff": ("coeff", "coef", "coefficient", "coefficients"),
    "iter": ("iter", "iters", "iteration", "iterations"),
    "epoch": ("epoch", "epochs"),
    "checkpoint": ("checkpoint", "checkpoints", "ckpt", "ckpts"),
    "step": ("step", "steps"),
    "dim": ("dim", "dims", "dimension", "dimensions", "dimensionality"),
    "timestep": ("timestep", "timesteps", "time-step", "time-steps", "dt"),
    "thread": ("thread", "threads"),
    "register": ("register", "registers", "reg", "regs"),
    "occupancy": ("occupancy",),
    "residual": ("residual", "residuals", "res"),
    "hit": ("hit", "hits"),
    "miss": ("miss", "misses"),
    "amplification": ("amplification", "amplifications"),
    "std": ("std", "stddev", "stdev", "sd", "deviation"),
    "peak": ("peak", "max", "maximum"),
    "cpu": ("cpu", "cpus", "processor"),
    "gpu": ("gpu", "gpus"),
    "size": ("size", "sizes"),
    "rate": ("rate", "rates", "ratio", "fraction", "share"),
    "cell": ("cell", "cells"),
    "read": ("read", "reads"),
    "write": ("write", "writes", "written"),
    "token": ("token", "tokens", "tok", "toks"),
    "sample": ("sample", "samples"),
    "image": ("image", "images", "img", "imgs"),
    "node": ("node", "nodes"),
    "rank": ("rank", "ranks"),
    "batch": ("batch", "batches", "bs"),
    "lr": ("lr",),
    "wer": ("wer",),
    "cer": ("cer",),
    "p99": ("tail",),
    "p50": ("median",),
    "hour": ("hour", "hours", "hr", "hrs"),
    "cost": ("cost", "costs", "price", "usd", "dollars"),
    "energy": ("energy", "kwh", "joules"),
    "power": ("power", "watts", "wattage"),
    "coverage": ("coverage",),
    "rep": ("rep", "reps", "repetition", "repetitions", "trial", "trials", "replicate", "replicates"),
    "smem": ("smem",),
    "dup": ("dup", "dups", "duplicate", "duplicates", "duplication", "duplicated"),
    "fp": ("fp", "fps"),
    "fn": ("fn", "fns", "undetected"),
    "tp": ("tp", "tps"),
    "score": ("score", "scores"),
    "ap": ("ap", "map"),  # COCO's AP is the mean over classes: mAP
    "box": ("box", "bbox", "boxes"),
    "comm": ("comm", "communication", "communications"),
}
_CANON: dict[str, str] = {w: c for c, ws in _SYNONYMS.items() for w in ws}
# an acronym a metric's name carries for a rate of errors: the words it abbreviates, so that "error"
# names it and "word accuracy" names its complement
_ACRONYMS: dict[str, tuple[str, ...]] = {
    "wer": ("word", "err"),
    "cer": ("character", "err"),
    "knn": ("nearest", "neighbour", "neighbor"),
    "ann": ("approximate", "nearest", "neighbour", "neighbor"),
}
# words a metric's name carries for its unit or its aggregation, which say nothing of what it measures
_NAME_NOISE = frozenset(
    [
        "vs",
        "versus",
        "per",
        "s",
        "sec",
        "ms",
        "us",
        "ns",
        "h",
        "hr",
        "min",
        "mins",
        "secs",
        "gb",
        "mb",
        "kb",
        "tb",
        "gib",
        "mib",
        "kib",
        "b",
        "pct",
        "percent",
        "frac",
        "value",
        "metric",
        "mean",
        "avg",
        "average",
        "total",
        "overall",
        "all",
        "the",
        "of",
        "in",
        "at",
        "to",  # time_to_solution_h: a preposition names no quantity ("to 6.8e-5")
        "for",
        "from",
        "by",
        "with",
    ]
)
# the measure words every field shares: they weigh less than an identifier (gsm8k, snp, top1, p99)
_COMMON = frozenset(_SYNONYMS) | frozenset(
    [
        "final",
        "best",
        "mean",
        "median",
        "min",
        "max",
        "avg",
        "total",
        "overall",
        "sweep",
        "run",
        "runs",
        "seed",
        "seeds",
        "new",
        "old",
        "sustained",
        "achieved",
        "effective",
        "measured",
        "number",
        "count",
        "counts",
        "per",
        "above",  # prepositions a metric's name may carry (games_above_human): a sentence writes them anyway
        "below",
        "over",
        "under",
        "within",
    ]
)
# words that say which quantity a sentence talks about; a phrase with one that no metric carries
# names a quantity the run did not measure (never the primary metric's)
QUANTITY_WORDS = frozenset(
    ["acc", "loss", "ppl", "throughput", "latency", "bw", "mem", "time", "param", "err", "eff", "util", "recall", "precision", "f1", "em", "coeff", "occupancy", "residual", "amplification", "cost", "energy", "power", "coverage"]
)  # fmt: skip
# a share and its complement: the words of one side, the words of the other
COMPLEMENTS: tuple[tuple[frozenset[str], frozenset[str]], ...] = (
    (frozenset({"err"}), frozenset({"acc", "em", "f1", "precision", "recall"})),
    (frozenset({"miss", "fnr", "lost"}), frozenset({"hit", "recall", "ar"})),  # AR: a detector's average recall
    (frozenset({"fdr"}), frozenset({"precision"})),
    (
        frozenset({"idle", "unused", "wasted", "unutilized", "unutilised"}),
        frozenset({"util", "occupancy", "eff", "rate"}),
    ),
    (frozenset({"failure", "fail", "failed"}), frozenset({"success", "pass"})),
    (frozenset({"below", "under"}), frozenset({"above", "over"})),
    (frozenset({"outside", "clipped", "clip", "miss"}), frozenset({"inside", "within"})),  # "still miss it"
)
_COMPLEMENT_WORDS = frozenset(w for pair in COMPLEMENTS for side in pair for w in side)
# words that name what is measured, beyond the shared vocabulary: a complement's phrase must not hold one
_MEASURES = frozenset(["calibration", "confidence", "coverage", "agreement", "consistency"])
_GENERIC = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "on",
        "in",
        "at",
        "for",
        "with",
        "by",
        "to",
        "from",
        "and",
        "or",
        "is",
        "are",
        "was",
        "were",
        "its",
        "their",
        "our",
        "this",
        "that",
    ]
)
SHARE_WORDS = frozenset({"acc", "em", "f1", "precision", "recall", "hit", "miss", "err", "util", "eff", "rate"})
_PERCENT_NAMES = frozenset({"pct", "percent", "percentage"})
_WORD = re.compile(r"[pP]\d+(?:\.\d+)?(?![\w.])|[A-Za-z][A-Za-z0-9]*(?:[-@_][A-Za-z0-9]+)*|\d+(?:\.\d+)?th\b")
# words that stand for one metric word when written together
# words kept whole, never stemmed: the sides of a complement ("unused" is not "unus")
_KEPT_WHOLE = frozenset(
    {"unused", "wasted", "failed", "detected", "undetected", "unutilized", "unutilised", "duplicated"}
)
_BIGRAMS = {
    ("learning", "rate"): "lr",
    ("exact", "match"): "em",
    ("word", "error"): "wer",
    ("character", "error"): "cer",
    ("batch", "size"): "batch",
    ("time", "step"): "timestep",  # a step of a simulation's clock (dt), never a time it took
    ("time", "steps"): "timestep",
    ("real", "time"): "rtf",
    ("label", "smoothing"): "ls",
    ("shared", "memory"): "smem",
    ("false", "positive"): "fp",
    ("false", "positives"): "fp",
    ("false", "negative"): "fn",
    ("false", "negatives"): "fn",
    ("true", "positive"): "tp",
    ("true", "positives"): "tp",
    ("false", "discovery"): "fdr",
    # a number format, never the precision of a classifier
    ("double", "precision"): "fp64",
    ("single", "precision"): "fp32",
    ("half", "precision"): "fp16",
    ("mixed", "precision"): "amp",
    ("anomaly", "correlation"): "acc",
    (
        "halo",
        "exchange",
    ): "comm",  # a stencil code's communication  # ACC, the anomaly correlation coefficient of a forecast
}
_CAMEL = re.compile(r"([a-z])([A-Z])")
_MAP = re.compile(r"(?<![A-Za-z])mAP(?![a-z])")
_OBJECT_SIZES = {"s": "small", "m": "medium", "l": "large"}
_SPLIT = re.compile(r"[^A-Za-z0-9@]+")
_MAGNITUDE = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_MAGNITUDE_WORDS = {"thousand": 1e3, "thousands": 1e3, "million": 1e6, "millions": 1e6, "billion": 1e9, "billions": 1e9}
_COUNT_PREFIXED = re.compile(r"^([kKMGB])(ops|reads|writes|bases|cells|tok|tokens|lups|updates|reqs|samples|img)$")


_BIGRAM_FIRST = frozenset(first for first, _ in _BIGRAMS)


@functools.lru_cache(maxsize=65536)
def canon(word: str) -> tuple[str, ...]:
    """The canonical words one written word stands for (``Top-1`` → ``top1``, ``Acc@1`` →
    ``acc``, ``top1``, ``99th`` → ``p99``, ``validation`` → ``val``, ``threads`` → ``thread``)."""
    low = word.lower().strip("-'")
    if low.endswith("'s"):
        low = low[:-2]
    m = re.fullmatch(r"p(\d+)(?:\.(\d+))?", low)  # p99, p99.9 (p999)
    if m:
        return (f"p{m.group(1)}{m.group(2) or ''}",)
    m = re.fullmatch(r"(\d+)(?:\.(\d+))?th", low)
    if m:
        return (f"p{m.group(1)}{m.group(2) or ''}",)
    m = re.fullmatch(r"([a-z]+)@(\d+)", low)
    if m:
        return (*canon(m.group(1)), f"top{m.group(2)}")
    m = re.fullmatch(r"([a-z]+)-(\d+)", low)  # top-1, top-5, p-99
    if m:
        return (f"{m.group(1)}{m.group(2)}",)
    if low in _CANON:
        return (_CANON[low],)
    if low.startswith(_BOUND_PREFIXES) and low.count("-") == 1 and low[low.index("-") + 1 :].isalpha():
        return canon(low.replace("-", ""))  # re-ranking is reranking (rerank_depth), pre-training pretraining
    if "-" in low:
        pair = tuple(low.split("-"))
        if pair in _BIGRAMS:  # "false-positive", "word-error": as the two words
            return (_BIGRAMS[pair],)
        parts = tuple(p for part in low.split("-") if part for p in canon(part))
        head, _, rest = low.partition("-")
        if len(head) == 1 and rest.isalpha():  # k-points, k-mers, n-grams: one word as code writes it (kpoints)
            return (*canon(head + rest), *parts)
        return parts
    if len(low) > 3 and low.endswith("s") and not low.endswith(("ss", "us", "is")) and low[:-1] in _CANON:
        return (_CANON[low[:-1]],)
    if len(low) > 4 and low.endswith("ies"):
        return (low[:-3] + "y",)
    if (
        len(low) >= 6
        and low.endswith(("ed", "ing"))
        and not low.endswith(("eed", "ring", "ning", "ting"))
        and low not in _KEPT_WHOLE
    ):
        stem = low[:-2] if low.endswith("ed") else low[:-3]  # "stalled" and "stall", "scaling" and "scal(ed)"
        return (_CANON.get(stem, stem),)
    if len(low) > 3 and low.endswith("s") and not low.endswith(("ss", "us", "is")):
        return (low[:-1],)
    return (low,)


def is_measure_word(word: str) -> bool:
    """A word the metric vocabulary knows (``RSS``, ``VRAM``, ``TPR``): no proper name."""
    return word.lower() in _CANON


_GREEK = {
    "α": "alpha", "β": "beta", "γ": "gamma", "Γ": "gamma", "δ": "delta", "Δ": "delta", "ε": "epsilon",
    "ϵ": "epsilon", "ζ": "zeta", "η": "eta", "θ": "theta", "ϑ": "theta", "Θ": "theta", "ι": "iota", "κ": "kappa",
    "λ": "lambda", "Λ": "lambda", "μ": "mu", "ν": "nu", "ξ": "xi", "π": "pi", "Π": "pi", "ρ": "rho", "σ": "sigma",
    "Σ": "sigma", "τ": "tau", "υ": "upsilon", "φ": "phi", "ϕ": "phi", "Φ": "phi", "χ": "chi", "ψ": "psi",
    "Ψ": "psi", "ω": "omega", "Ω": "omega",
}  # fmt: skip
_GREEK_TAIL = re.compile("(?<=[A-Za-z])([" + "".join(_GREEK) + "])(?![^\\W\\d_])")
_GREEK_WORD = re.compile("(?<![^\\W\\d_])([" + "".join(_GREEK) + "])(?![^\\W\\d_])")


def spell_greek(text: str) -> str:
    """A Greek letter written alone as the name a run's code gives it (``θ = 0.5`` is ``theta =
    0.5``, as a sweep's column ``theta`` or a flag ``--theta`` writes it), and one that ends a
    Latin name as code writes it, by its first letter (``lDDT-Cα`` is ``lDDT-Ca``, as
    ``mean_lddt_ca`` does); never one that opens a word or a unit (``ΔE``, ``µs``)."""
    if text.isascii():
        return text
    text = _GREEK_TAIL.sub(lambda m: _GREEK[m.group(1)][0], text)
    return _GREEK_WORD.sub(lambda m: _GREEK[m.group(1)], text)


def phrase_words(text: str) -> list[tuple[str, int]]:
    """The canonical words of a piece of claim text, each with its position."""
    return list(_phrase_words(text))


@per_text
def _phrase_words(text: str) -> tuple[tuple[str, int], ...]:
    out: list[tuple[str, int]] = []
    matches = list(_WORD.finditer(text))
    last = len(matches) - 1
    skip = False
    for k, m in enumerate(matches):
        if skip:
            skip = False
            continue
        word, at = m.group(), m.start()
        if k < last and (low := word.lower()) in _BIGRAM_FIRST:
            following = matches[k + 1]
            pair = (low, following.group().lower())
            if pair in _BIGRAMS and text[m.end() : following.start()].strip(" -") == "":
                out.append((_BIGRAMS[pair], at))
                skip = pair[1] not in ("error",)  # "word error rate": wer, and the rate
                continue
        if "_" in word:  # an identifier as code writes it (AP_S, val_loss): its words as a metric's name
            out.extend((c, at) for c in metric_words(word))
            continue
        for c in canon(word):
            out.append((c, at))
    return tuple(out)


_COUNT_OF = re.compile(r"n[b-df-hj-np-tv-z][a-z]{3,}")  # a count's name in code: n + the thing, lowercase
_BOUND_PREFIXES = ("re-", "pre-", "de-", "co-")  # prefixes that are no word of their own


@functools.lru_cache(maxsize=8192)
def metric_words(name: str) -> tuple[str, ...]:
    """A metric's name as canonical words (``val_top1_acc`` → ``val``, ``top1``, ``acc``;
    ``p99_latency_us`` → ``p99``, ``latency``; ``METRIC.F1_Score`` → ``f1``, ``score``), its
    unit's kind added (``time`` for a time, ``throughput`` for a rate, ``bw`` for bytes per
    time, ``mem`` for a size in bytes)."""
    from projections.evidence.grammar import units  # pint loads with the first claim checked, not on import

    spaced = _CAMEL.sub(r"\1 \2", _MAP.sub("MAP", name).replace("/", " per "))  # bbox_mAP: one word, not m AP
    raw = [t for t in _SPLIT.split(spaced) if t]
    out: list[str] = []
    for k, token in enumerate(raw):
        low = token.lower()
        if k and raw[k - 1].lower() == "at" and token.isdigit():
            out.append(f"top{token}")  # recall_at_100 is Recall@100, never Recall@1000
            continue
        if k and token.isdigit() and raw[k - 1].isalpha():  # bbox_mAP_50 is written AP50 too
            out.extend(f"{c}{token}" for c in canon(raw[k - 1]))
        if k and low in _OBJECT_SIZES and raw[k - 1].lower() in ("map", "ap", "ar"):
            out.append(_OBJECT_SIZES[low])  # bbox_mAP_s: the AP of small objects (COCO's AP_S)
            continue
        if low in _NAME_NOISE or low == "metric":
            continue
        m = _COUNT_PREFIXED.match(token)
        if m:
            out.extend(canon(m.group(2)))
            continue
        if token in _MAGNITUDE and len(raw) > 1:
            continue  # params_M: the magnitude, see count_scale
        out.extend(canon(token))
        out.extend(w for c in canon(token) for w in _ACRONYMS.get(c, ()))
        if _COUNT_OF.fullmatch(token):  # nprobe, nthreads, nnodes: the count of probes, threads, nodes
            out.extend(canon(token[1:]))
    unit = units.of_metric(name)
    if unit is not None:
        kind = units.kind(unit)
        if kind is not None:
            out.append(kind)
    if "top1" in out and "acc" not in out and "err" not in out:
        out.append("acc")
    return tuple(dict.fromkeys(out))


@functools.lru_cache(maxsize=8192)
def abbreviates(name: str, metric: str) -> bool:
    """A log line's short name for a metric (``prec=0.6512`` of ``precision``, ``IS=84.7`` of
    ``inception_score``): a word of three letters or more that begins one of the metric's words
    (and is not all of it), or two to four letters that are its words' initials."""
    low = name.lower()
    if not low.isalpha() or len(low) < 2:
        return False
    words = [w for w in _SPLIT.split(_CAMEL.sub(r"\1 \2", metric).lower()) if w and not w.isdigit()]
    if len(low) >= 3 and any(w.startswith(low) and w != low for w in words):
        return True
    return 2 <= len(low) <= 4 and len(words) == len(low) and "".join(w[0] for w in words) == low


def weight(word: str) -> float:
    """How much a word says about which metric is meant: an identifier more than a shared word."""
    return 1.0 if word in _COMMON or word in QUANTITY_WORDS else 2.0


@dataclass(frozen=True)
class Named:
    """A metric a phrase names, and how its value reads as the phrase's quantity."""

    metric: str
    score: float
    complement: bool = False  # the phrase names the other side of a share (an error of an accuracy)


def name_metrics(words: Iterable[str], metrics: Iterable[str], *, complements: bool = True) -> list[Named]:
    """The metrics the canonical ``words`` name best (see :func:`_name_metrics`)."""
    return list(_name_metrics(frozenset(words), tuple(metrics), complements))


@per_text
def _name_metrics(said: frozenset[str], metrics: tuple[str, ...], complements: bool) -> tuple[Named, ...]:
    """The metrics the canonical ``words`` name best (all tied at the best score), or [].

    A metric is named when the words hold one of its words that says what it measures; a
    complement (an ``error`` of an ``acc`` metric) is named when the words hold the other side
    of a pair in :data:`COMPLEMENTS` and every other word of theirs that the metric has."""
    scored: list[Named] = []
    complements = complements and ("complement" in said or not said.isdisjoint(_COMPLEMENT_WORDS))
    if not complements and said.isdisjoint(_words_of_all(metrics)):
        return ()  # no word of any metric: none is named
    for metric in metrics:
        if metric.startswith("_"):
            continue  # ARI's own (_scientific_score, _axis_scores): never what a sentence names
        mine = metric_words(metric)
        if not mine or (not complements and said.isdisjoint(mine)):
            continue
        if other_member(said, mine):
            continue  # "p99 latency" never names latency_ms_p50, "top-5" never val_top1_acc
        hit = sum(weight(w) for w in mine if w in said)
        # a complement is of a metric that keeps one side of a pair
        flipped = _complement(said, set(mine)) if complements and not _COMPLEMENT_WORDS.isdisjoint(mine) else None
        if flipped is not None:
            scored.append(Named(metric, flipped, complement=True))
            continue
        if hit and _names_its_measure(said, mine):
            scored.append(Named(metric, hit))
    if not scored:
        return ()
    best = max(n.score for n in scored)
    return tuple(n for n in scored if n.score == best)


# words of which a name holds one at most: a sentence saying one never names a metric with another
_SIZES = frozenset({"small", "medium", "large"})  # a detector's object size classes (AP_S, AP_M, AP_L),
_SIZED = frozenset({"ap", "ar"})  # of its average precision and recall only ("a large batch" sizes nothing)
_EXCLUSIVE = (
    frozenset({"p50", "p90", "p95", "p99", "p999"}),
    frozenset({"top1", "top5", "top10"}),
    frozenset({"gpu", "cpu", "host"}),  # "2 TB of host memory" is never peak_gpu_mem_GB
)
_MEMBERS = frozenset().union(*_EXCLUSIVE, _SIZES)


def other_member(said: frozenset[str], mine: tuple[str, ...]) -> bool:
    """The words say one member of a family of which the name holds another (p99 vs p50), or a
    size class the name holds none of (``AP_large`` is never the all-sizes ``bbox_mAP``)."""
    if said.isdisjoint(_MEMBERS):
        return False
    if not said.isdisjoint(_SIZES) and not said.isdisjoint(_SIZED) and not _SIZED.isdisjoint(mine):
        return _SIZES.isdisjoint(mine) or not (_SIZES & said) & set(mine)  # AP_large: never bbox_mAP nor AP_S
    return any(not theirs & said and family & said for family, theirs in _families_in(mine))


@functools.lru_cache(maxsize=8192)
def _families_in(mine: tuple[str, ...]) -> tuple[tuple[frozenset[str], frozenset[str]], ...]:
    """The exclusive families a name holds a member of, with the members it holds."""
    return tuple((family, family.intersection(mine)) for family in _EXCLUSIVE if family.intersection(mine))


@functools.lru_cache(maxsize=4096)
def _words_of_all(metrics: tuple[str, ...]) -> frozenset[str]:
    return frozenset(w for m in metrics for w in metric_words(m))


def fewest_unsaid(tied: list[Named], said: Iterable[str]) -> list[Named]:
    """Of metrics the words name equally, those that add the fewest words the sentence does not
    say and the others do not share: "box AP" is ``bbox_mAP``, not ``bbox_mAP_50`` (its 50 is
    unsaid); "latency" stays ``latency_ms_p50`` and ``latency_ms_p99`` (each adds one)."""
    if len(tied) < 2:
        return tied
    said = set(said)
    words = {n.metric: set(metric_words(n.metric)) for n in tied}
    shared = set.intersection(*words.values())
    extra = {m: len(w - shared - said) for m, w in words.items()}
    least = min(extra.values())
    return [n for n in tied if extra[n.metric] == least]


def _names_its_measure(said: AbstractSet[str], mine: tuple[str, ...]) -> bool:
    """The phrase names what the metric measures, not only a qualifier both share (``val``,
    ``peak``): one of its words other than qualifiers, or an identifier."""
    core = _core(mine)
    if core and all(w in ("rate",) for w in core):  # peak_fraction: "of FP32 peak" names it, "hit rate" does not
        return any(w in said for w in mine if w in _QUALIFIERS) or (
            all(w in said for w in core) and len(mine) == len(core)
        )
    return any(w in said for w in core) or not core


_QUALIFIERS = frozenset({"val", "train", "test", "peak", "final", "best", "mean", "max", "min", "total", "std"})


@functools.lru_cache(maxsize=8192)
def _core(mine: tuple[str, ...]) -> tuple[str, ...]:
    """A metric's words that say what it measures, without its qualifiers."""
    return tuple(w for w in mine if w not in _QUALIFIERS)


# words that make an error a size of a deviation (root-mean-square, relative, absolute, worst, a
# percentile of it), never a share of cases with a complement
_DEVIATIONS = frozenset({"rms", "rel", "abs", "max", "p50", "p90", "p95", "p99", "p999"})


def is_size_error(mine: Iterable[str]) -> bool:
    """An error a metric's words keep as a size of a deviation (``force_err_rms``,
    ``energy_err_rel``), which ``accuracy`` names as it is, never as its complement."""
    mine = set(mine)
    return "err" in mine and not mine.isdisjoint(_DEVIATIONS)


def _complement(said: AbstractSet[str], mine: AbstractSet[str]) -> float | None:
    """The score of a metric as the complement of what the phrase names, or None: the phrase
    names the other side of a share the metric keeps (``top-1 error`` of ``val_top1_acc``), and
    no measure word the metric lacks (``calibration error`` is another quantity)."""
    if is_size_error(mine):
        return None  # an RMS or relative error is a size, not a share: "force accuracy 0.18% RMS" is the error
    named_other = "complement" in said  # "a 0.38% SNP error rate (complement of F1)": the F1's other side
    if named_other:
        said = said | {"err"}
    for one, other in COMPLEMENTS:
        for asked, kept in ((one, other), (other, one)):
            if said & asked and mine & kept and not mine & asked and (named_other or not said & (mine & kept)):
                foreign = {w for w in said - mine - asked if w not in _COMMON and w not in _GENERIC}
                if foreign & _MEASURES:
                    return None
                rest = [w for w in mine if w not in kept]
                side = 1.0 if said & mine & kept else 0.0  # "the complement of F1": the F1, not the precision
                return sum(weight(w) for w in rest if w in said) + 1.0 + side
    return None


def names_a_quantity(words: Iterable[str], metrics: Iterable[str], *, change: bool = False) -> str | None:
    """A quantity word of the phrase that none of ``metrics`` carries (``energy`` when nothing
    measures energy), or None: such a number is never checked against another metric."""
    carried, complements = _carried(tuple(metrics))
    for word in words:
        if change and word in ("loss", "gain"):
            continue  # "a 9.5 percentage-point loss": a fall, not the loss a model minimises
        if word in QUANTITY_WORDS and word not in carried and word not in complements:
            return word
    return None


@functools.lru_cache(maxsize=1024)
def _carried(metrics: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """The words a run's metric names carry, and the complements of those words."""
    carried = frozenset(w for m in metrics for w in metric_words(m))
    complements = frozenset(
        w for one, other in COMPLEMENTS for side in (one, other) if side & carried for w in (one | other)
    )
    return carried, complements


def counted_part(name: str) -> str:
    """A name's part before its ``per``: what it counts or measures (``particles_per_gpu_M``
    counts particles, per GPU); the whole name when it has none."""
    return re.split(r"(?i)(?:^|_)per_", name, maxsplit=1)[0] or name


@functools.lru_cache(maxsize=8192)
def count_scale(name: str) -> float:
    """The magnitude a count metric is kept in, from its name: ``params_M`` 10⁶, ``reads_M``
    10⁶, ``throughput_kops_per_s`` 10³, ``tokens_B`` 10⁹; 1 otherwise. Case matters: ``M`` is a
    million, ``m`` is not a magnitude."""
    spaced = _CAMEL.sub(r"\1 \2", name.replace("/", " per "))
    raw = [t for t in _SPLIT.split(spaced) if t]
    for token in raw:
        if token in _MAGNITUDE and len(raw) > 1:
            return _MAGNITUDE[token]
        if token.lower() in _MAGNITUDE_WORDS:
            return _MAGNITUDE_WORDS[token.lower()]
        m = _COUNT_PREFIXED.match(token)
        if m:
            return _MAGNITUDE[m.group(1)]
    return 1.0


def kept_as_percent(name: str, value: float, others: Iterable[float] = ()) -> bool:
    """Whether a metric's value is a percentage (``mapped_pct`` 99.71, an accuracy kept as
    76.13), not a fraction (``val_top1_acc`` 0.7613): its name says so, or it is a share whose
    value, or another value of it (``others``: its column, its value at other nodes), is
    above 1.5 (an accuracy of 0.10 % after a divergence is still kept as a percentage)."""
    percent_named, share = _share_name(name)
    if percent_named and abs(value) > 1.0:
        return True
    return share and any(1.5 < abs(v) <= 100.0 for v in (value, *others) if math.isfinite(v))


@functools.lru_cache(maxsize=8192)
def _share_name(name: str) -> tuple[bool, bool]:
    """Whether a metric's name says percent (``mapped_pct``), and whether it names a share."""
    words = {t.lower() for t in _SPLIT.split(name) if t}
    percent_named = bool(words & _PERCENT_NAMES)
    return percent_named, bool(set(metric_words(name)) & SHARE_WORDS) or percent_named
