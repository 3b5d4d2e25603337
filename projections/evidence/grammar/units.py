"""Units, by pint: what a unit written in a claim or a metric's name means, and conversion.

The registry is pint's own definitions plus one dimension pint lacks, floating-point
operations (``flop``; ``FLOPS`` = flop per second). It is built once per process, and only
when a claim is checked (about half a second): hooks that never ground a claim never pay it.
Two units are comparable when their root units are equal (``GB/s`` and ``MiB/s`` are;
``GB/s`` and ``GHz`` are not, although pint counts bytes as dimensionless).
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

_LOCK = threading.Lock()
_FLOPS = re.compile(r"^([kKMGTPEmgtpe]?)(flop|FLOP|Flop)(s|S)?(/s)?$")
_BITS = re.compile(r"^([kKMGT])b(/s|ps)?$")
_LOWER_BYTES = re.compile(r"^([kmgt])b(/s)?$")
# English words pint also knows as units: never read as one after a number
_NOT_UNITS = frozenset(
    [
        # old surveying and trade lengths that are also nouns a run counts ("12,382 PDB chains", "4 links")
        "chain",
        "chains",
        "link",
        "links",
        "rod",
        "rods",
        "pole",
        "poles",
        "hand",
        "hands",
        "league",
        "leagues",
        "ca",  # circa, or an alpha carbon (lddt_ca): never pint's centiare
        "a",
        "an",
        "and",
        "as",
        "at",
        "by",
        "d",
        "for",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "per",
        "than",
        "the",
        "to",
        "vs",
        "was",
        "we",
        "with",
        "x",
        "t",
        "l",
        "g",
        "b",
        "c",
        "e",
        "k",
        "m",
        "point",
        "points",
        "percent",
        "pct",
        "count",
        "counts",
        "fold",
        "times",
        "pp",
        "pt",
        "pts",
        "are",
        "mil",
        "turn",
        "turns",
        "cycle",
        "cycles",
        "gr",
        "st",
        "cd",
        "ex",
        "re",
        "per",
        "th",
        "st",
        "nd",
        "rd",
        "acc",
        "rtf",
        "cl",
        "amp",
        "shot",
        "shots",
        "dt",
        "ne",  # normalised entropy (val_ne), never nano-elementary charges
        "particle",  # a count of particles (N-body), never pint's 1/N_A mole
        "particles",
    ]
)
# a count per unit of time: 412K ops/s, 1.3k tokens/s, 2,100 MLUPS, 1.5M IOPS (one dimension, ``item``:
# a run measures one kind of thing per second where it measures any)
_COUNT_RATE = re.compile(
    r"^([kKMGB]?)(ops?|operations?|tok|toks|tokens?|img|imgs|images?|samples?|seqs?|sequences?|req|reqs|requests?"
    r"|quer(?:y|ies)|reads?|writes?|updates?|lups?|txns?|transactions?|items?|records?|keys?|bases?|events?|msgs?"
    r"|messages?|frames?|pairs?|cells?|genomes?)(?P<per>/s|/sec|/second|ps|/h|/hr|/hour|/min)$"
    r"|^([kKMGB]?)(iops|qps|tps|lups|ops|fps)$",
    re.I,
)
# a simulation's pace, as MD and climate codes write it: ns/day, µs/day, ps/h (simulated per wall time),
# and its inverse, h/ns or days/µs
_WALL = {"day": "day", "days": "day", "d": "day", "h": "hour", "hr": "hour", "hour": "hour", "hours": "hour"}
_WALL_WORDS = "days?|d|h|hrs?|hours?"
_SIM_PACE = re.compile(rf"^([fpnum]?)s/({_WALL_WORDS})$")
_SIM_COST = re.compile(rf"^({_WALL_WORDS})/([fpnum]?)s$")
_CLIMATE_PACE = {"sypd": "simyear/day", "sdpd": "simday/day"}  # how climate and weather codes write their pace
_PREFIX = {"": "", "k": "kilo", "K": "kilo", "M": "mega", "G": "giga", "B": "giga"}
# prefixes and units no run reports in, which pint still finds in plain words
_ODD = re.compile(
    r"\b(?:atto|zepto|yocto|ronto|quecto|zetta|yotta|ronna|quetta|exa)|cubic|metric_ton|shot|point|elementary_charge"
)
# what a rate is shared over (never what a count is spent on): tflops_per_gpu is a rate per GPU
_RESOURCES = frozenset(
    {
        "gpu",
        "gpus",
        "device",
        "devices",
        "node",
        "nodes",
        "core",
        "cores",
        "chip",
        "chips",
        "socket",
        "rank",
        "ranks",
        "card",
        "cards",
    }
)
_AGGREGATE = re.compile(r"p\d+(?:\.\d+)?|mean|avg|median|max|total|final|best")  # never min: minutes
_SCORE_WORDS = frozenset({"map", "ap", "ar", "acc", "f1", "iou", "auc", "precision", "recall", "dice"})
_CI_LEVEL = re.compile(r"ci\d{2}")  # ci95, ci90: a confidence interval at that level
_SPREAD_WORDS = frozenset({"std", "stddev", "stdev", "sd", "sem", "err", "ci", "var", "spread", "jitter"})


@functools.lru_cache(maxsize=1)
def registry() -> Any:
    """The process's unit registry (pint), with ``flop``."""
    with _LOCK:
        import pint

        ureg: Any = pint.UnitRegistry(cache_folder=None)
        ureg.define("flop = [floating_point_operation] = FLOP")
        ureg.define("item = [item]")
        ureg.define("USD = [currency] = usd = dollar = dollars")
        ureg.define("simsecond = [simulated_time]")  # the time a simulation covers, never the wall clock's
        ureg.define("simday = 86400 * simsecond")
        ureg.define("simyear = 365 * simday")  # a climate model's year (the 365-day calendar SYPD counts in)
        return ureg


def _normalise(word: str) -> str:
    """``GFlops/s``, ``GFLOP/s``, ``Gflop/s`` and ``GFLOPS`` as pint reads them; ``ns/day`` and
    ``h/ns`` (a simulation's pace: simulated time per wall time, or its inverse) in simulated time."""
    word = word.replace("µ", "u").replace("μ", "u").replace("Å", "angstrom").strip()
    if word == "FPs":
        return word  # false positives (a count), never frames per second
    if word.lower() in _CLIMATE_PACE:  # SYPD, SDPD: simulated years (days) per wall-clock day
        return _CLIMATE_PACE[word.lower()]
    m = _SIM_PACE.match(word)
    if m:
        return f"{m.group(1)}simsecond/{_WALL[m.group(2).lower()]}"
    m = _SIM_COST.match(word)
    if m:
        return f"{_WALL[m.group(1).lower()]}/{m.group(2)}simsecond"
    m = _COUNT_RATE.match(word)
    if m:
        prefix = m.group(1) if m.group(2) else m.group(4)
        per = {"/h": "hour", "/hr": "hour", "/hour": "hour", "/min": "minute"}.get(m.group("per") or "", "s")
        return f"{_PREFIX.get(prefix or '', '')}item/{per}"
    m = _FLOPS.match(word)
    if m:
        prefix = m.group(1)
        prefix = "k" if prefix in "kK" and prefix else prefix.upper()  # gflop/s is giga: no milli-flops
        # GFLOPS, GFlops, FLOPS: a rate; Gflop/s, GFlops/s: a rate; flop, flops: a count
        # GFLOPS, GFlops: a rate; GFLOPs (a lowercase plural of FLOP): a count, as papers write a model's cost
        plural = m.group(2) == "FLOP" and m.group(3) == "s"
        per_second = m.group(4) or (m.group(3) and (prefix or m.group(2) == "FLOP") and not plural)
        return f"{prefix}flop" + ("/s" if per_second else "")
    m = _LOWER_BYTES.match(word)
    if m:  # kb, mb, gb as ARI's mem_total_kb writes them: bytes (pint reads kb as kilobarn)
        return f"{m.group(1).replace('m', 'M').replace('g', 'G').replace('t', 'T')}B" + (m.group(2) or "")
    m = _BITS.match(word)
    if m:  # Gb/s, Gbps: bits (pint reads Gb as gilbert)
        return f"{m.group(1).replace('K', 'k')}bit" + ("/s" if m.group(2) else "")
    if word.startswith("K") and word[1:2] in ("B", "i"):
        word = "k" + word[1:]  # KB, KiB: kilo, not kelvin
    return word


@functools.lru_cache(maxsize=4096)
def parse(word: str) -> str | None:
    """The canonical unit a written word names (``'GFlops/s'`` → ``'gigaflop / second'``), or None
    when it is not a unit of a measured quantity (plain words, counts, dimensionless ratios)."""
    if not word or word.lower() in _NOT_UNITS or not re.match(r"^[A-Za-zµμÅ]", word):
        return None
    ureg = registry()
    try:
        unit = ureg.parse_units(_normalise(word))
    except Exception:  # pint raises several kinds for words it does not know
        return None
    root = ureg.Quantity(1, unit).to_root_units()
    if not str(root.units) or str(root.units) == "dimensionless":
        return None  # a count, a ratio, a percentage: not a unit here
    if _ODD.search(str(unit)):
        return None  # pint reads "acc" as attocubic centimeter: a word, not a unit a run reports in
    return str(unit)


@functools.lru_cache(maxsize=4096)
def dimension(unit: str) -> str:
    """What makes two units comparable: their root units (``'bit / second'``)."""
    ureg = registry()
    return str(ureg.Quantity(1, unit).to_root_units().units)


@functools.lru_cache(maxsize=4096)
def factor(unit: str, to: str) -> float:
    """How many ``to`` one ``unit`` is (``factor('millisecond', 'second')`` = 0.001)."""
    ureg = registry()
    return float(ureg.Quantity(1.0, unit).to(to).magnitude)


@functools.lru_cache(maxsize=4096)
def of_metric(name: str) -> str | None:
    """The unit a metric's name ends in (``time_s`` → second, ``effective_bandwidth_GB_per_s`` →
    gigabyte / second, ``GFlops_per_s_std`` → gigaflop / second), or None."""
    parts = [p for p in re.split(r"[_\s]+", name) if p]
    while parts and (parts[-1].lower() in _SPREAD_WORDS or _AGGREGATE.fullmatch(parts[-1].lower())):
        parts.pop()  # latency_ms_p50, time_s_mean: the unit before how the values were aggregated
    for start in range(len(parts)):
        tail = parts[start:]
        if tail[0].lower() == "per" or (start and parts[start - 1].lower() == "per"):
            continue  # a denominator alone is not the metric's unit (samples_per_s is not seconds)
        if start and len(tail) == 1 and len(tail[0]) == 1 and parts[start - 1].lower() in _SCORE_WORDS:
            continue  # bbox_mAP_s, AP_m: a score of small or medium objects, never seconds or metres
        if tail == ["A"] and start:  # median_rmsd_A: ångström, as kspacing_inv_A is per ångström
            return parse("Å")
        if len(tail) == 2 and tail[0].lower() == "inv":  # kspacing_inv_A: per ångström (never per ampere)
            inverse = parse("Å⁻¹" if tail[1] == "A" else f"{tail[1]}⁻¹")
            if inverse is not None:
                return inverse
        if any(p.lower() in _NOT_UNITS and p.lower() != "per" for p in tail):
            continue  # lift_coeff_Cl_amp: a word that is no unit makes the tail none (never ampere·clausius)
        unit = parse(_join_per(tail))
        if unit is not None:
            return unit
        lowered = [p.lower() for p in tail]
        if "per" in lowered[1:]:  # gflops_per_img: a count per image is kept in the count's unit
            cut = lowered.index("per")
            written = _join_per(tail[:cut])
            per = lowered[cut + 1 :]
            if per and per[0] in _RESOURCES:  # model_tflops_per_gpu: TFLOPS (a rate) each GPU sustains
                head = parse(written)
            else:
                head = parse(written.rstrip("sS")) or parse(written)  # gflops_per_img: GFLOPs (a count) per image
            if head is not None and parse(_join_per(tail[cut + 1 :])) is None:
                return head
    return None


def _join_per(parts: list[str]) -> str:
    """``['GB', 'per', 's']`` → ``'GB/s'``."""
    out: list[str] = []
    for p in parts:
        if p.lower() == "per":
            out.append("/")
        else:
            if out and out[-1] != "/":
                out.append("*")
            out.append(p)
    return "".join(out)


@functools.lru_cache(maxsize=8192)
def spread_base(name: str) -> str:
    """The metric a spread's name spreads (``test_acc_std`` → ``test_acc``); the name itself when
    it ends in no spread word."""
    parts = re.split(r"([_\s]+)", name)
    if len(parts) >= 3 and (parts[-1].lower() in _SPREAD_WORDS or _CI_LEVEL.fullmatch(parts[-1].lower())):
        return "".join(parts[:-2])
    return name


@functools.lru_cache(maxsize=8192)
def is_spread(name: str) -> bool:
    """A metric that measures a spread (``GFlops_per_s_std``), not a value. Cached: the checker asks
    it of every metric name for every number it reads."""
    parts = [p.lower() for p in re.split(r"[_\s]+", name) if p]
    # "err" is a spread only as a suffix (GFlops_per_s_err), never rel_err_Cd_vs_ref, a relative error,
    # nor n_err, a count of errors; a confidence interval at its level (iqm_hns_ci95) is one too
    counted = len(parts) > 1 and parts[-2] in ("n", "num", "count", "total")
    return any(
        (p in _SPREAD_WORDS and (p != "err" or (k == len(parts) - 1 and not counted)))
        or _CI_LEVEL.fullmatch(p) is not None
        for k, p in enumerate(parts)
    )


_KINDS = (("second", "time"), ("byte / second", "bw"), ("bit / second", "bw"), ("byte", "size"), ("bit", "size"))


@functools.lru_cache(maxsize=1024)
def kind(unit: str) -> str | None:
    """What kind of quantity a unit measures, as a word a sentence names it by: ``time``, ``bw``
    (bytes per time), ``size`` (bytes), ``throughput`` (any other count or work per time)."""
    dim = dimension(unit)
    for root, word in _KINDS:
        if dim == root:
            return word
    if dim.endswith("/ second") and "meter" not in dim:
        return "throughput"
    return None
