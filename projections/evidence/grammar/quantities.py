"""Reading the numbers of a claim as quantities (docs/grounding.md, sections 1 and 2).

Pure text work: each number that is not part of a name becomes a :class:`Quantity` with its
value (times its suffix), the precision it was written to, its unit (by pint, see
:mod:`projections.evidence.grammar.units`), a metric name or count noun beside it, a qualifier
(approximate, or a bound), its sign, a direction when it is a change (``faster``, ``cut by``,
``of``), and links to the other end of a range or to the quantity it is a share of. What a
quantity must match is :mod:`projections.evidence.grammar.values`' business.
"""

from __future__ import annotations

import functools
import re
from dataclasses import MISSING, dataclass, fields
from typing import Any

from projections.evidence.grammar import units, written_numbers
from projections.evidence.grammar.metric_names import abbreviates, canon, metric_words
from projections.evidence.grammar.text_caches import per_text

_NUM = re.compile(r"[+\-−]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE][+\-]?\d+)?")
_UNIT_WORD = re.compile(r"[A-Za-zµμÅ][A-Za-z0-9µμ]*(?:⁻?[¹²³])?(?:/[A-Za-zµμÅ][A-Za-z]*(?:⁻?[¹²³])?){0,2}")
_PER_WORDS = re.compile(r"(?:[A-Za-z]+ )?([A-Za-zµμ][A-Za-z0-9µμ]*) per (second|sec|s|hour|minute|min)\b")
# a difference of percentages: 1.8 pp, 1.8 percentage points, 1.8 p.p., 1.8 % points (plain "points" only in a change)
_POINTS = re.compile(
    r"(?:pp|p\.p\.|percentage[- ]points?|percent(?:age)? points?|%[- ]?points?|pts?)(?![A-Za-z])", re.I
)
_PLAIN_POINTS = re.compile(r"points?(?![A-Za-z])", re.I)
_CHANGE_NEAR = re.compile(
    r"\b(?:higher|lower|more|less|above|below|over|ahead|behind|better|worse|up|down|gain|gains|drop|drops|improv\w*"
    r"|increas\w*|decreas\w*|reduc\w*|rais\w*|fell|rose|boost\w*|lift\w*|cut|within|short|by|of)\b",
    re.I,
)
_WORD = re.compile(r"[A-Za-z_][\w\-]*")
_SUFFIXES = {
    "k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12,
}  # fmt: skip
_SUFFIX_FIRST = frozenset(w[0] for w in _SUFFIXES)  # a text after a number that starts otherwise holds none
_APPROX = (
    "about",
    "approximately",
    "approx.",
    "approx",
    "around",
    "roughly",
    "nearly",
    "almost",
    "some",
    "circa",
    "ca.",
)
_APPROX_MARKS = ("~", "≈", "∼")
_BOUNDS = (
    ("less than", "<"), ("fewer than", "<"), ("below", "<"), ("under", "<"), ("no more than", "<="),
    ("up to", "<="), ("at most", "<="), ("within", "<="), ("<=", "<="), ("≤", "<="), ("<", "<"),
    ("more than", ">"), ("greater than", ">"), ("higher than", ">"), ("above", ">"), ("over", ">"),
    ("exceeding", ">"), ("beyond", ">"), ("no less than", ">="), ("at least", ">="), (">=", ">="), ("≥", ">="),
    (">", ">"), ("exceeds", ">"), ("clears", ">="), ("tops", ">"), ("surpasses", ">"),
)  # fmt: skip
_A_DIGIT = re.compile(r"\d")
_DEVICE_TIME = re.compile(
    r"(GPU|CPU|core|node|device|vCPU)(?:[- ]?(hours?|hrs?|minutes?|mins?|seconds?)|[- ](h|s))(?![A-Za-z])", re.I
)
_DEGREES = re.compile(r"°\s?([CF])\b")
_TIMES = re.compile(r"(?:[x×X](?![A-Za-z0-9])|times\b|-fold\b|fold\b)")
_AFTER_CUT = re.compile(r"[,;:()\[\]]|(?<![A-Za-z])\d")
_BEFORE_CUT = re.compile(r"[,;:()\[\]]")
_BOUND_ENDS = tuple(words for words, _ in _BOUNDS)  # one C-level test before the loop over them
_SPREAD_MARKS = ("±", "+/-", "+-", "plus or minus")
_UP = {
    "faster", "quicker", "speedup", "speed-up", "higher", "more", "greater", "larger", "better", "improvement",
    "improvements", "improves", "improved", "gain", "gains", "increase", "increases", "increased", "over", "above",
    "up", "boost", "rise", "rises", "raises", "ahead", "fast", "quick", "longer",
}  # fmt: skip
_DOWN = {
    "slower", "lower", "less", "fewer", "smaller", "worse", "reduction", "reduces", "reduced", "decrease",
    "decreases", "decreased", "drop", "drops", "dropped", "loss", "below", "under", "down", "cut", "cuts",
    "behind", "regression", "slowdown", "shorter",
}  # fmt: skip
_SPEED = {"faster", "quicker", "slower", "speedup", "speed-up", "slowdown", "fast", "quick"}
_BY_VERBS_UP = {
    "improve",
    "rise",
    "grow",
    "increase",
    "improves",
    "improved",
    "increases",
    "increased",
    "rises",
    "rose",
    "grows",
    "grew",
    "up",
    "raises",
    "gains",
    "raising",
    "increasing",
    "improving",
    "boosting",
    "lifting",
    "growing",
}
_BY_VERBS_DOWN = {"worsens", "worsened", "worsen", "degrades", "degraded", "cut", "cuts", "reduced", "reduces", "reduce", "drop", "drops", "dropped", "fell", "fall", "falls", "decreased", "decreases", "decrease", "down", "lowers", "lowered", "lower", "shrinks", "shrink", "cutting", "reducing", "lowering", "dropping", "decreasing", "shrinking"}  # fmt: skip
_NOUNS = {
    "thread", "core", "cpu", "gpu", "socket", "node", "rank", "process", "worker", "repetition", "rep", "run",
    "trial", "seed", "sweep", "iteration", "step", "epoch", "sample", "layer", "point", "element", "batch", "task",
    "job", "channel", "head", "token", "parameter", "experiment", "configuration", "variant", "dimm", "device",
    "instance", "query", "request", "file", "line", "byte", "grid", "block", "tile", "lane", "register", "bp",
}  # fmt: skip
_FUNCTION_WORDS = {
    "was",
    "has",
    "this",
    "thus",
    "less",
    "does",
    "goes",
    "yes",
    "whereas",
    "always",
    "perhaps",
    "its",
    "times",
    # verbs that follow a number in a sentence ("batch 1024 reaches", "4096 gives"): never a count noun
    "reaches",
    "gives",
    "yields",
    "gets",
    "takes",
    "shows",
    "stays",
    "keeps",
    "trails",
    "lands",
    "drops",
    "falls",
    "rises",
    "needs",
    "uses",
    "loads",
    "leaves",
    "holds",
    "beats",
    "costs",
    "lifts",
    "cuts",
    "brings",
    "makes",
    "sits",
    "hits",
    "spans",
    "runs",
    "scores",
    "achieves",
    "delivers",
    "sustains",
    "remains",
    "matches",
    "lowers",
    "raises",
    "improves",
    "reduces",
    "increases",
    "decreases",
    "trains",
    "finishes",
    "completes",
    "wins",
    "loses",
    "peaks",
    "plateaus",
    "converges",
    "diverges",
    "outperforms",
    "exceeds",
    "clears",
    "tops",
    "surpasses",
    "processes",
    "serves",
    "issues",
    "streams",
    "reads",
    "writes",
    "calls",
    "detects",
    "misses",
    "passes",
    "fails",
    "means",
    "seems",
    "looks",
    "becomes",
    "ends",
    "starts",
    "begins",
    "comes",
    "these",
    "those",
    "our",
    "their",
    "each",
    "every",
}
_LINK_WORDS = {"of", "the", "a", "an", "to", "in", "on", "at", "for", "with", "by", "from", "and", "or", "per", "vs", "than", "as"}  # fmt: skip

# patterns read for every number (compiled once)
_PERCENT_WORD = re.compile(r"(percent|per cent|pct)\b")
_CODE_MARK = re.compile(r"[_.]|[A-Za-z]\d|\d[A-Za-z]")
_ASSIGNED = re.compile(r"\w\s*=\s*$")
_NUMBERED = re.compile(r"[A-Za-z]+_?[A-Za-z]*\d+")
_DASH_GAP = re.compile(r"\s*[-–—]\s*")
_HYPHEN_GAP = re.compile(r"\s*-\s*")
_AND_GAP = re.compile(r"\s+and\s+")
_BETWEEN_END = re.compile(r"\bbetween\s*$")
_PLUS_MINUS_GAP = re.compile(r"\s*(?:±|\+/-|\+-|plus or minus)\s*")
_CLAUSE_PUNCT = re.compile(r"[,;:()\[\]]")
_WITHIN_END = re.compile(r"\bwithin\s*$", re.I)

_VALUE_VERBS = {"took", "takes", "is", "was", "are", "were", "of", "at", "in", "reaches", "reached", "achieves", "achieved", "runs", "ran", "needs", "needed", "lasts", "lasted", "gives", "gave", "measured"}  # fmt: skip
_DIFF_WORDS = {"more", "less", "higher", "lower", "faster", "slower", "above", "below", "better", "worse", "shorter", "longer", "over", "up", "down", "fewer", "smaller", "larger", "bigger"}  # fmt: skip
_DIFF_ALONE = {"over", "above", "below", "up", "down"}  # "5.95 GFlops/s over node_A"; the others take "than"
BASE_WORDS = {"baseline": "root", "root": "root", "parent": "parent"}
# a sentence ends at . ; ! ? before a space, but not after an abbreviation ("vs. 1.33 s", "e.g. 2")
# the mark first, then what may not precede it (a lookbehind tried at every position is slow)
_SENTENCE_END = re.compile(
    r"[.;!?](?<!\bvs.)(?<!\be\.g.)(?<!\bi\.e.)(?<!\bcf.)(?<!\bapprox.)(?<!\bca.)(?<!\bFig.)(?<!\bet al.)(?:\s|$)|\n"
)
_SPACES = " \u00a0\u202f\u2009\u2006\u200a\t"  # a space, no-break and thin spaces between a number and its unit


@dataclass(frozen=True)
class Quantity:
    """One number of a claim, as read (see the module docstring)."""

    written: str  # the digits as written: "828.7", "1,234.5", "18.2"
    text: str  # the quantity as read: "828.7 ms"
    start: int
    end: int
    value: float  # signed, times its suffix
    tolerance: float  # half a unit of the last digit written, times the suffix
    unit: str | None = None  # a pint unit, "%" or "x"
    name: str | None = None  # a metric name written beside it (as written)
    explicit_name: bool = False  # written as name=value, name: value or a snake_case word
    noun: str | None = None  # a count noun ("thread")
    per: str | None = None  # what the count is per ("2 sweeps per k-tile": "k-tile")
    qualifier: str = "exact"  # exact, approx, <, <=, >, >=
    signed: bool = False
    spread: bool = False  # "± 0.13"
    direction: str | None = None  # up, down, share (a change or a ratio)
    speed: bool = False  # the direction is about speed (faster, slower, speedup)
    range_with: int | None = None  # the index of the other end of a range
    range_first: bool = False
    from_range: bool = False  # "from A to B": A may be an ancestor's
    of_quantity: int | None = None  # "N % of Q": Q's index
    base_of_share: bool = False  # Q itself
    difference: bool = False  # "+5.95 GFlops/s over node_A", "0.5 s faster than node_A": a signed difference
    judged: bool = False  # its direction is a judgement ("worse", "improves"): a rise of a loss is worse
    closeness: bool = False  # "within 2 % of node_A": |own / base - 1| at most the figure
    change_kind: str | None = None  # "absolute" or "relative", when the sentence says which
    list_pos: int | None = None  # its place in a list of numbers ("64, 128 and 256": 0, 1, 2)
    list_len: int = 0
    respectively: bool = False  # a list paired item by item with another ("... respectively")

    @property
    def approximate(self) -> bool:
        return self.qualifier == "approx"

    @property
    def bound(self) -> bool:
        return self.qualifier in ("<", "<=", ">", ">=")

    @property
    def change(self) -> bool:
        return self.unit in ("%", "x", "pp")


_DEFAULTS = {f.name: f.default for f in fields(Quantity) if f.default is not MISSING}


def _new(written: str, text: str, start: int, end: int, value: float, tol: float, **rest: Any) -> Quantity:
    """``Quantity(...)`` without a frozen dataclass's field-by-field ``__init__`` (every number
    of every claim is made here); ``rest`` are the other fields, the defaults for the others."""
    new = object.__new__(Quantity)
    new.__dict__.update(_DEFAULTS, written=written, text=text, start=start, end=end, value=value, tolerance=tol)
    new.__dict__.update(rest)
    return new


def replace(q: Quantity, **changes: Any) -> Quantity:
    """``dataclasses.replace`` for a quantity, without its walk over the fields on every call (a
    claim's check makes thousands); the fields are all plain values, none computed."""
    unknown = changes.keys() - q.__dict__.keys()
    if unknown:
        raise TypeError(f"Quantity has no field {sorted(unknown)[0]!r}")
    new = object.__new__(Quantity)
    new.__dict__.update(q.__dict__)
    new.__dict__.update(changes)
    return new


def read(text: str, metric_names: frozenset[str] = frozenset()) -> list[Quantity]:
    """The quantities of ``text``, in order; ``metric_names`` are the report's (normalised by
    :func:`name_key`), so a metric named beside a number is recognised."""
    found: list[Quantity] = []
    spans: list[tuple[int, int]] = []  # the number tokens, for ranges
    spelled = written_numbers.durations(text)
    taken = [(d.start, d.end) for d in spelled]
    for m in _NUM.finditer(text):
        if any(a <= m.start() < b for a, b in taken):
            continue  # a part of a compound duration: read as the whole below
        q = _quantity(text, m, metric_names, spans)
        if q is not None:
            found.append(q)
            spans.append((m.start(), m.end()))
    for d in spelled:
        written = text[d.start : d.end]
        q = _new(written, written, d.start, d.end, d.value, d.tolerance, unit="second")
        found.append(_before(text, q, metric_names))
    for w in written_numbers.words(text):
        if any(a <= w.start < b for a, b in taken) or any(q.start <= w.start < q.end for q in found):
            continue
        written = text[w.start : w.end]
        # a count in words is exact; a ratio word (twice, half, two-fold) rounds to within 10 %
        q = _new(written, written, w.start, w.end, w.value, 0.1 * w.value if w.unit == "x" else 0.5, unit=w.unit)
        if w.unit is None:
            q = _after(text, q, metric_names) or q
        found.append(_before(text, q, metric_names))
    found.sort(key=lambda q: q.start)
    return _link(text, found)


def _quantity(text: str, m: re.Match[str], names: frozenset[str], spans: list[tuple[int, int]]) -> Quantity | None:
    raw, start, end = m.group(), m.start(), m.end()
    signed = raw[0] in "+-−"
    prev = text[start - 1] if start else " "
    if signed:
        if prev.isdigit() and spans and spans[-1][1] == start and raw[0] in "-−":
            raw, start, signed = raw[1:], start + 1, False  # 15.4-15.9: a range, not a sign
        elif prev.isalnum() or prev in "_.":
            return None  # DDR4-2933, AVX-512: a name
    elif prev.isalnum() or prev in "_.^/×\\#@":
        return None  # node_A2, v0.6, 16x64's second half, MRR@10
    nxt, after = text[end : end + 1], text[end + 1 : end + 2]
    if nxt == "^" or (nxt in "xX×" and after.isdigit()) or (nxt == "." and after.isdigit()):
        return None  # 256^3, 16x64, 12.2.0
    if nxt == "-" and text[end + 1 : end + 5] == "fold" and not text[end + 5 : end + 6].isalpha():
        pass  # 6.6-fold: a ratio, read below
    elif nxt == "-" and after.isalpha():
        word = re.match(r"[A-Za-z]+", text[end + 1 :])
        noun = count_noun(word.group()) if word else None
        if noun is None:
            return None  # 3-D, 2-way: a name
        digits = raw.lstrip("+-−")
        return _before(
            text,
            _new(digits, raw, start, end, float(digits.replace(",", "")), tolerance(digits), noun=noun),
            names,
        )
    digits = raw.lstrip("+-−")
    value = float(digits.replace(",", ""))
    if raw[0] in "-−":
        value = -value
    tol = tolerance(digits)
    q = _new(digits, raw, start, end, value, tol, signed=signed)
    read_after = _after(text, q, names)
    return _before(text, read_after, names) if read_after is not None else None


def tolerance(written: str) -> float:
    """Half a unit of the last digit written: ``13.6`` → 0.05, ``1.5e-3`` → 0.00005."""
    mantissa, _, exponent = written.replace(",", "").lower().lstrip("+-−").partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (-decimals + (int(exponent) if exponent else 0)) * (1 + 1e-9)


def _after(text: str, q: Quantity, names: frozenset[str]) -> Quantity | None:
    """The suffix, unit, metric name or noun after the number (glued or after one space)."""
    pos = q.end
    glued = pos < len(text) and (text[pos].isalpha() or text[pos] in "%×µμ")
    rest = text[pos:]
    lead = 1 if rest[:1] and rest[0] in _SPACES else 0
    rest = rest[lead:]
    # a suffix: 18.2k, 1.2M, 3 million
    for word, mult in _SUFFIXES.items() if rest[:1] in _SUFFIX_FIRST else ():
        if rest.startswith(word) and not rest[len(word) : len(word) + 1].isalpha():
            if len(word) == 1 and lead:
                break  # "18.2 k" is not written; "16 M" reads as a unit below
            scaled = replace(q, value=q.value * mult, tolerance=q.tolerance * mult)
            after_suffix = q.end + lead + len(word)
            q = replace(scaled, end=after_suffix, text=text[q.start : after_suffix])
            rest = text[after_suffix:]
            lead = 1 if rest[:1] and rest[0] in _SPACES else 0
            rest = rest[lead:]
            glued = False
            break
    dh = _DEVICE_TIME.match(rest)
    if dh:  # 1.52 GPU-hours, 452.8 CPU minutes: a time kept per device (never "16 nodes")
        stop = q.end + lead + dh.end()
        word = (dh.group(2) or dh.group(3)).lower()
        unit: str | None = "hour" if word.startswith("h") else "minute" if word.startswith("m") else "second"
        return replace(q, unit=unit, name=f"{dh.group(1).lower()}_{unit}s", end=stop, text=text[q.start : stop])
    pts = _POINTS.match(rest)
    if pts is None and _PLAIN_POINTS.match(rest) and _in_a_change(text, q):
        pts = _PLAIN_POINTS.match(rest)
    if pts is not None:
        stop = q.end + lead + pts.end()
        return replace(q, unit="pp", end=stop, text=text[q.start : stop])
    deg = _DEGREES.match(rest)
    if deg:  # "3 °C": a temperature (a difference of one, as it is written beside a number)
        stop = q.end + lead + deg.end()
        return replace(q, unit=f"delta_deg{deg.group(1)}", end=stop, text=text[q.start : stop])
    if rest.startswith("%") or _PERCENT_WORD.match(rest):
        n = 1 if rest.startswith("%") else len(_PERCENT_WORD.match(rest).group())  # type: ignore[union-attr]
        return replace(q, unit="%", end=q.end + lead + n, text=text[q.start : q.end + lead + n])
    xm = _TIMES.match(rest)
    if xm:
        stop = q.end + lead + xm.end()
        return replace(q, unit="x", end=stop, text=text[q.start : stop])
    pm = _PER_WORDS.match(rest)
    um = _UNIT_WORD.match(rest)
    if pm:
        unit = units.parse(f"{pm.group(1)}/{pm.group(2)}")
        if unit is not None:
            stop = q.end + lead + pm.end()
            return replace(q, unit=unit, end=stop, text=text[q.start : stop])
    if um and rest[um.end() : um.end() + 1] in ("_", "="):
        um = None  # "0.412 db_size_GB=168.9": the next name, not a unit
    if um:
        word = um.group()
        unit = units.parse(word)
        if unit is None and word.count("/") == 2 and units.parse(word.rpartition("/")[0]) is not None:
            word = word.rpartition("/")[0]  # "12 GB/s/node": the rate, then a noun per thing
            unit = units.parse(word)
        if unit is None and "/" in word:
            top, _, per = word.partition("/")
            if units.parse(per) is None and count_noun(per + "s") is not None:  # "10 bits/key", "3.0 min/epoch"
                stop = q.end + lead + len(word)
                unit = units.parse(top)
                noun = None if unit else count_noun(top) or top.lower().rstrip("s")
                return replace(q, unit=unit, noun=noun, per=per.lower(), end=stop, text=text[q.start : stop])
            unit = units.parse(top)
            word = top if unit else word
        if unit is not None:
            stop = q.end + lead + len(word)
            return replace(q, unit=unit, end=stop, text=text[q.start : stop])
        key = name_key(word)
        if key in names:
            stop = q.end + lead + len(word)
            return replace(q, name=word, end=stop, text=text[q.start : stop])
        noun, stop = count_noun(word), q.end + lead + len(word)
        head = _HEAD_NOUN.match(rest) if noun is not None and not glued and not word.endswith("s") else None
        if head is not None and count_noun(head.group(1)) is not None:  # "16 GPU nodes" counts nodes, not GPUs
            noun, stop = count_noun(head.group(1)), q.end + lead + head.end()
        unit2 = re.match(r"[A-Za-z][\w\-]* ([A-Za-z][A-Za-z/]*)(?!\w)", rest)  # never the F of "SNP F1"
        if noun is None and not glued and unit2 and units.parse(unit2.group(1)) and word.lower() not in _LINK_WORDS:
            stop = q.end + lead + unit2.end()  # "1.5M read IOPS", "77.7K random-read IOPS": the unit after one word
            return replace(q, unit=units.parse(unit2.group(1)), end=stop, text=text[q.start : stop])
        if noun is None and not glued and word.lower() not in _LINK_WORDS:  # "100 Jacobi sweeps": a noun after one word
            nm = re.match(  # the word may be a name with a version's "+" ("25 DPM-Solver++ steps")
                r"(?!(?:this|that|these|those|the|its|our|their|each|every)\b)[A-Za-z][\w\-]*\+* ([A-Za-z]+)", rest
            )
            noun, stop = (count_noun(nm.group(1)), q.end + lead + nm.end()) if nm else (None, stop)
        if noun is not None:
            return replace(q, noun=noun, per=_per(text[stop:]), end=stop, text=text[q.start : stop])
        if glued:
            return None  # 3D, 2nd, 4th: part of a word
    elif glued:
        return None
    return q


def _in_a_change(text: str, q: Quantity) -> bool:
    """Whether plain ``points`` after a number are percentage points: a sign, or a change word near it."""
    if q.signed or text[: q.start].rstrip().endswith(("±", "+/-")):
        return True
    around = text[max(0, q.start - 25) : q.start] + " " + text[q.end : q.end + 30]
    return bool(_CHANGE_NEAR.search(around))


_PER = re.compile(r"\s+(?:per|in each|into each|for each|each)\s+([A-Za-z][\w\-]*)")
_PER_RUN = {"run", "repetition", "rep", "execution", "trial", "measurement"}  # what a plain count is already per


def _per(after: str) -> str | None:
    """What a count is per (``2 sweeps per k-tile`` → ``k-tile``); a count per run is a plain count."""
    m = _PER.match(after)
    if m is None:
        return None
    word = m.group(1).lower()
    word = word[:-1] if word.endswith("s") and not word.endswith("ss") else word
    return None if word in _PER_RUN else word


# a singular noun before a plural one is its modifier: the plural is what is counted ("GPU nodes")
_HEAD_NOUN = re.compile(r"[A-Za-z][\w\-]* ([A-Za-z]+s)\b")


def count_noun(word: str) -> str | None:
    """The count noun a word is (``threads`` → ``thread``, ``planes`` → ``plane``), or None: a
    known noun, or any plain plural that is not a function word."""
    low = word.lower()
    for cand in (low, low[:-1] if low.endswith("s") else low, low[:-2] if low.endswith("es") else low):
        if cand in _NOUNS:
            return cand
    plural = (
        word.replace("-", "").isalpha()
        and (word.islower() or (word[:1].islower() and word[1:-1].isupper()) or word[:-1].isupper())
        and (len(low) >= 4 or (len(low) == 3 and word[:-1].isupper()))
        and low.endswith("s")
        and (not low.endswith(("ss", "us", "is")) or not word.islower())
    )  # "threads", "re-runs", "vCPUs", "GPUs", "SNPs", "SMs" (not "status")
    if plural and low not in _FUNCTION_WORDS:
        return low[:-1].split("-")[-1] if "-" in low else low[:-1]
    return None


def _before(text: str, q: Quantity, names: frozenset[str]) -> Quantity:
    """The qualifier, bound, sign of a spread and metric name before the number."""
    before = text[max(0, q.start - 60) : q.start]
    stripped = before.rstrip()
    low = stripped.lower()
    if stripped.endswith(_SPREAD_MARKS) or q.text.startswith("±"):
        q = replace(q, spread=True)
    elif stripped.endswith(_APPROX_MARKS) or _ends_with_word(low, _APPROX):
        q = replace(q, qualifier="approx")
    elif not low.endswith(_BOUND_ENDS):
        pass  # no bound word before it
    elif q.unit is not None and q.unit not in ("x", "pp"):  # "over 5 repetitions" is across five, not a bound
        for words, op in _BOUNDS:
            if _ends_with_word(low, (words,)):
                q = replace(q, qualifier=op)
                break
    elif q.unit is None and q.noun is None and q.name is None:  # "a loss under 0.95": a bound on a named value
        for words, op in _BOUNDS:
            if _ends_with_word(low, (words,)) and words not in ("over", "above", "below", "up to"):
                q = replace(q, qualifier=op)
                break
    elif q.unit == "x":  # "more than twice the parent's": a bound on the factor; "over" stays a comparison word
        for words, op in _BOUNDS:
            if " " in words and words.endswith(("than", "least", "most")) and _ends_with_word(low, (words,)):
                q = replace(q, qualifier=op)
                break
    rate = _RATE_NAMED.search(stripped) if q.unit is None and q.noun is None else None
    if rate is not None and units.parse(rate.group(1)) is not None:  # "img/s=63.8": a rate's unit as its name
        return replace(q, unit=units.parse(rate.group(1)))
    name, explicit = _name_before(stripped)
    if name is not None and q.name is None:
        key = name_key(name)
        code = bool(_CODE_MARK.search(name)) and not _NUMBERED.fullmatch(name)
        code = code or (len(name) <= 2 and _ASSIGNED.search(stripped) is not None)
        code = code or (stripped.endswith("=") and _names_a_metric(name, names))  # "ppl=4.96" of valid_ppl
        code = code or (stripped.endswith("=") and any(abbreviates(name, n) for n in names))  # "prec=0.6512"
        numbered = _NUMBERED.fullmatch(name) is not None  # AP75, top5, seed3
        code = code or (explicit and numbered and _names_a_metric(name, names))  # "AP75=0.390" of bbox_mAP_75
        if key in names or (explicit and code and q.unit is None and q.noun is None):
            q = replace(q, name=name, explicit_name=explicit)
    if q.unit is None and stripped.endswith(("$", "US$")):  # $44.42, $2.72/h
        hourly = re.match(r"\s*(?:/\s*h(?:r|our)?|per\s+hour)\b", text[q.end : q.end + 12])
        if hourly:
            q = replace(q, unit="USD / hour", end=q.end + hourly.end(), text=text[q.start : q.end + hourly.end()])
        else:
            q = replace(q, unit="USD")
    return q


_RATE_NAMED = re.compile(r"(?<![\w/])([A-Za-z]+/[A-Za-z]+)\s*[=:]$")  # "img/s=", "GB/s:"


def _names_a_metric(name: str, names: frozenset[str]) -> bool:
    """An identifier (``AP75``, ``top5``) every word of which is a word of one metric's name."""
    said = set(canon(name))
    return bool(said) and any(said <= set(metric_words(n)) for n in names)


def _ends_with_word(low: str, words: tuple[str, ...]) -> bool:
    if not low.endswith(words):  # none is even a suffix (one call, not one a word)
        return False
    for w in words:
        if low.endswith(w) and (len(low) == len(w) or not low[-len(w) - 1].isalnum() or not w[0].isalnum()):
            return True
    return False


_LINKS = ("=", ":", " of", " is", " was", " reaches", " reached")  # between a name and its number


def _name_before(before: str) -> tuple[str | None, bool]:
    """The word just before a number past a link (``GFlops_per_s=``, ``time_s:``, ``accuracy of``),
    and whether it was written as a name (``=``/``:`` or snake_case). Markdown around the name
    (`` `time_s`=0.83 ``, ``**time_s**: 0.83``) is not part of it."""
    explicit = False
    before = before.rstrip("`*'\" ")
    for link in _LINKS if before.endswith(_LINKS) else ():
        if before.endswith(link):
            explicit = link in ("=", ":")
            before = before[: -len(link)].rstrip().rstrip("`*'\"")
            break
    i = len(before)
    while i and (before[i - 1].isalnum() or before[i - 1] == "_"):
        i -= 1
    word = before[i:]
    if not word or word[0].isdigit():
        return None, False
    return word, explicit


@functools.lru_cache(maxsize=8192)
def name_key(name: str) -> str:
    """A metric name as words (``GFlops_per_s`` and ``gflops per s`` alike)."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", name.replace("/", " per ").replace("µ", "u"))
    return "_".join(t for t in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if t)


def _link(text: str, found: list[Quantity]) -> list[Quantity]:
    """Ranges (``a–b``, ``between a and b``, ``from a to b``), shares (``N % of Q``) and the
    direction of every change."""
    out = list(found)
    for i in range(len(out) - 1):
        a, b = out[i], out[i + 1]
        gap = text[a.end : b.start]
        head = text[max(0, a.start - 40) : a.start].lower()
        is_range = False
        from_range = False
        dashed = _DASH_GAP.fullmatch(gap) or _HYPHEN_GAP.fullmatch(text[a.start + len(a.written) : b.start])
        if dashed or (_AND_GAP.fullmatch(gap) and _BETWEEN_END.search(head)):
            is_range = True
        elif re.fullmatch(
            r"(?:\s*\([^()\d]{1,30}\)|\s+(?:at|for|in|on|of)\s+(?:the\s+)?[A-Za-z][\w'-]*(?:\s+[A-Za-z][\w'-]*)?)?"
            r"(?:\s+(?:(?:down|up|fell|rose)\s+)?(?:to|→|->)\s+|\s*(?:→|->)\s*)",
            gap,
        ) and re.search(r"\bfrom\b[^.;]*$", head):
            is_range, from_range = True, True
        if b.spread and _PLUS_MINUS_GAP.fullmatch(gap):
            if a.unit is None and a.name is None and b.unit is not None:
                unit = "%" if b.unit == "pp" else b.unit  # 63.0 ± 1.3 points: a percentage and its spread
                out[i] = replace(a, unit=unit, text=f"{a.text} ({b.text})")
            continue
        if not is_range or a.unit in ("x", "pp") or b.unit in ("x", "pp"):
            continue
        if a.unit is None and a.name is None and a.noun is None and b.unit is not None:
            a = replace(a, unit=b.unit)
        elif (
            a.unit is None and a.name is None and a.noun is None and b.noun is not None and _NOUN_NEXT.fullmatch(b.text)
        ):
            a = replace(a, noun=b.noun, per=b.per)  # "from 4 to 32 nodes": 4 nodes
        out[i] = replace(a, range_with=i + 1, range_first=True, from_range=from_range)
        out[i + 1] = replace(b, range_with=i, from_range=from_range)
    for i, q in enumerate(out):
        if q.unit not in ("%", "x", "pp") and q.noun is None and _close(text, q) and _OF_AFTER.match(text, q.end):
            # "within 0.1 kcal/mol of the baseline", "within 0.01 of n1a": |own − base| at most it
            out[i] = replace(q, qualifier="exact", closeness=True)
            continue
        if (
            q.unit is not None
            and q.unit not in ("%", "x", "pp")
            and q.range_with is None
            and not q.bound
            and not q.spread
        ):
            after = _WORD.findall(_CLAUSE_PUNCT.split(text[q.end : q.end + 40].lower())[0])[:5]
            # "0.5 s faster than", "11.31 GB/s more bandwidth than", "0.32 s more per run than", "5.95 GFlops/s over"
            worded = bool(after) and (after[0] in _DIFF_WORDS and (after[0] in _DIFF_ALONE or "than" in after[1:]))
            worded = worded and not _OVER_A_COUNT.match(text, q.end)  # "0.61 kcal/mol over 18 crystals": across them
            before = _WORD.findall(text[max(0, q.start - 20) : q.start].lower())[-1:]
            stated = text[: q.start].rstrip().endswith(("=", ":")) or bool(before and before[0] in _VALUE_VERBS)
            if (q.signed and not stated) or worded:
                way = ("down" if q.value < 0 else "up") if q.signed else ("down" if after[0] in _DOWN else "up")
                judged = not q.signed and _judged(text, q)  # "0.29 Å better than the baseline" of an RMSD: a fall
                out[i] = replace(
                    q, difference=True, direction=way, speed=bool(after) and after[0] in _SPEED, judged=judged
                )
            elif _changed_by(text, q):  # "AMP lowers median latency by 10.6 ms"
                changed, fast = _direction(text, q)
                if changed in ("up", "down"):
                    out[i] = replace(q, difference=True, direction=changed, speed=fast, judged=_judged(text, q))
            continue
        if q.unit is None:
            counted = _count_difference(text, q)
            if counted is not None:  # "3.4 cycles more than the parent": a difference of the count
                out[i] = replace(q, difference=True, direction=counted)
                continue
            if _unitless_difference(text, q):  # "drops by 0.0011 against the parent", "0.5 m worse than"
                direction, speed = _direction(text, q)
                if direction in ("up", "down"):
                    out[i] = replace(q, difference=True, direction=direction, judged=_judged(text, q))
            continue
        if q.unit not in ("%", "x", "pp"):
            continue
        direction, speed = _direction(text, q)
        if q.unit == "x" and not speed and _elliptic(text, out, i):
            speed = True  # "the speedup is 6.0x, against the root 22.3x": the second is a speedup too
        of = None
        if direction == "share" and q.unit == "%":
            tail = text[q.end : q.end + 60]
            om = re.match(
                r"\s+of\s+(?:the\s+|a\s+|an\s+)?(?:[A-Za-z][\w'’-]*\s+){0,3}?(?:[~≈]\s*|about\s+|roughly\s+)?(?=[\d.])",
                tail,
            )
            nxt = out[i + 1] if i + 1 < len(out) else None
            sized = nxt is not None and (nxt.unit not in (None, "%", "x", "pp") or nxt.unit is None)
            if om and nxt is not None and nxt.start == q.end + om.end() and sized:
                of = i + 1
                out[i + 1] = replace(nxt, base_of_share=True)
        out[i] = replace(
            q,
            direction=direction,
            speed=speed,
            of_quantity=of,
            change_kind=_change_kind(text, q),
            closeness=_close(text, q),
            judged=q.unit in ("%", "pp") and direction in ("up", "down") and not speed and _judged(text, q),
        )
    return _lists(text, out)


_OVER_A_COUNT = re.compile(
    r"\s*(?:over|across)\s+(?:the\s+|all\s+)?(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten)\b", re.I
)


_OVER_THINGS = re.compile(_OVER_A_COUNT.pattern + r"\s+([A-Za-z]+s)\b", re.I)  # "over three seeds", not "over the 5 ms"
_NOUN_NEXT = re.compile(r"\S+\s+[A-Za-z][\w-]*")  # "32 nodes": the noun right after the number
_MORE_THAN = re.compile(r"\s+(more|fewer|less)\s+than\b", re.I)


def _count_difference(text: str, q: Quantity) -> str | None:
    """``3.4 cycles more than the parent``, ``12 fewer SNPs than``: a count that states a
    difference against a base (up or down), or None."""
    if q.noun is None or q.range_with is not None or q.bound or q.spread:
        return None
    m = _MORE_THAN.match(text, q.end)
    if m is None:
        return None
    return "up" if m.group(1).lower() == "more" else "down"


def _elliptic(text: str, out: list[Quantity], i: int) -> bool:
    """A factor that ends its clause with no word of its own after an earlier speed factor of
    its sentence (``the speedup is 6.0x, against the root 22.3x``): it says the same kind."""
    q = out[i]
    if re.match(r"\s*[A-Za-z]", text[q.end : q.end + 3]):
        return False
    for j in range(i - 1, -1, -1):
        if re.search(r"[.!?]\s", text[out[j].end : q.start]):
            return False
        if out[j].unit == "x":
            return out[j].speed
    return False


# a change said by a verb before the number ("drops by 0.0011", "gaining 0.0072")
_JUDGING = frozenset({"better", "worse", "improves", "improved", "improve", "improvement", "improving", "regression", "worsens", "worsened", "worsen", "degrades", "degraded"})  # fmt: skip
_UNIT_LETTERS = frozenset({"m", "k", "s"})  # a unit written as one letter, which no metric's unit reads ("0.5 m worse")


def _unitless_difference(text: str, q: Quantity) -> bool:
    """A number with no unit read that states a change of a metric against another node: after
    a change verb (``drops by 0.0011``, ``gaining 0.0072``), before a comparing word and ``than``
    (``0.5 m worse than the parent``) or a position word and a base (``0.91 below the parent``), or
    signed and not stated (``+0.0072 over``). Never a count, a value named as code, a range, a
    bound or a spread."""
    # a name read beside it ("+1.71 BLEU over", "BLEU is 1.71 above the baseline") is the changed metric's;
    # one written as code ("bleu=1.71") states a value
    if q.noun is not None or q.explicit_name or q.range_with is not None or q.bound or q.spread:
        return False
    before = _WORD.findall(text[max(0, q.start - 30) : q.start].lower())[-3:]
    while before and before[-1] in ("only", "just", "about", "roughly", "nearly", "almost"):
        before = before[:-1]
    if before[-2:-1] and before[-1] == "by" and (before[-2] in _CHANGE_VERBS or before[-2] in ("better", "worse")):
        return True  # "drops by 0.0011", "worse by 0.56"
    if before[-1:] and before[-1] in _CHANGE_VERBS and before[-1] not in ("up", "down", "lower"):
        return True
    after = _WORD.findall(_CLAUSE_PUNCT.split(text[q.end : q.end + 40].lower())[0])[:5]
    if after[:1] and after[0] in _UNIT_LETTERS:
        after = after[1:]
    if len(after) > 1 and after[1] in _DIFF_WORDS and _ACRONYM_NEXT.match(text, q.end):
        after = after[1:]  # "+1.71 BLEU over the baseline": the metric's acronym, then the comparing word
    if after[:1] and after[0] in _DIFF_WORDS and after[0] not in _DIFF_ALONE and "than" in after[1:3]:
        return True
    if after[:1] and after[0] in _DIFF_ALONE and _BASE_NEXT.match(" ".join(after[1:])):
        return True  # "0.91 below the parent", "2.33 BLEU above the baseline"
    stated = text[: q.start].rstrip().endswith(("=", ":")) or bool(before and before[-1] in _VALUE_VERBS)
    return q.signed and not stated and bool(after[:1]) and after[0] in ("over", "against", "vs", "versus", "than")


def _changed_by(text: str, q: Quantity) -> bool:
    """``lowers median latency by 10.6 ms``: ``by`` right before the number, a change verb among
    the four words before it."""
    before = _WORD.findall(text[max(0, q.start - 50) : q.start].lower())[-5:]
    return before[-1:] == ["by"] and not _CHANGE_VERBS.isdisjoint(before[:-1])


def _judged(text: str, q: Quantity) -> bool:
    """The change's direction is a judgement (better, worse, improves), not a rise or a fall:
    the word that says it, the verb before the number (past ``by``) or the word after it (past
    a one-letter unit), is one."""
    before = [w for w in _WORD.findall(text[max(0, q.start - 30) : q.start].lower()) if w not in ("by", "only", "just")]
    after = [w for w in _WORD.findall(text[q.end : q.end + 30].lower()) if w not in _UNIT_LETTERS]
    return not _JUDGING.isdisjoint(before[-1:] + after[:1])


_LIST_GAP = re.compile(r"\s*,\s*(?:and\s+|or\s+)?|\s*,?\s+(?:and|or)\s+|\s*/\s*|\s+(?:vs\.?|versus)\s+")


def _lists(text: str, found: list[Quantity]) -> list[Quantity]:
    """Lists of numbers (``batch sizes of 64, 128 and 256``, ``51.0, 54.3 and 56.2 EM``): the
    unit, noun or metric name one member carries is every bare member's; ``respectively`` pairs
    a sentence's lists item by item (see :mod:`projections.evidence.grammar.values`)."""
    out = list(found)
    i = 0
    while i < len(out):
        j = i
        while (
            j + 1 < len(out) and out[j].range_with is None and _LIST_GAP.fullmatch(text[out[j].end : out[j + 1].start])
        ):
            j += 1
        members = list(range(i, j + 1))
        kinds = {(out[k].unit, out[k].name, out[k].noun) for k in members if out[k].unit or out[k].name or out[k].noun}
        if len(kinds) > 1:
            members = members[:1]  # "1 h 38 min and 1.6 GPU-hours": two quantities, not a list
        if len(members) == 2 and not re.search(r"\b(?:and|or|vs\.?|versus)\b|/", text[out[i].end : out[j].start]):
            members = members[:1]  # "an occupancy of 23.6%, 76.4% of the warp slots …": two numbers, not a list
        if len(members) >= 2 and not any(out[k].range_with is not None or out[k].spread for k in members):
            lo, hi = sentence_of(text, out[i].start)
            paired = bool(re.search(r"\brespectively\b", text[lo:hi], re.I))
            last = out[members[-1]]
            carrier = last if (last.unit or last.noun) and last.unit not in ("x", "pp") else None
            named = next((out[k].name for k in members if out[k].name), None)
            for pos, k in enumerate(members):
                q = out[k]
                bare = q.unit is None and q.noun is None and q.name is None
                if bare and carrier is not None:
                    q = replace(
                        q, unit=carrier.unit, noun=carrier.noun, per=carrier.per, text=f"{q.text} ({carrier.text})"
                    )
                elif bare and named is not None:
                    q = replace(q, name=named)
                out[k] = replace(q, list_pos=pos, list_len=len(members), respectively=paired)
        i = j + 1
    return out


def _change_kind(text: str, q: Quantity) -> str | None:
    """``absolute`` or ``relative``, when the words around a change say which."""
    lo, hi = sentence_of(text, q.start)
    before = _A_DIGIT.split(text[max(lo, q.start - 40) : q.start])[-1]  # never past another number:
    after = _A_DIGIT.split(text[q.end : min(hi, q.end + 40)])[0]  # "4.41% WER, an 11.1% relative cut"
    around = (before + " " + after).lower()
    if "absolute" not in around and "relative" not in around:
        return None
    for kind in ("absolute", "relative"):
        if re.search(rf"\b{kind}(?:ly)?\b", around):
            return kind
    return None


# "of" right after a number, past its unit ("within 0.1 kcal/mol of the baseline")
_OF_AFTER = re.compile(r"(?:\s*[^\s\d,;.()]+)?\s+of\b")


def _close(text: str, q: Quantity) -> bool:
    """``within 2 % of node_A``, ``within 0.5 pp of the baseline``: a closeness, not a bound."""
    return bool(_WITHIN_END.search(text[max(0, q.start - 12) : q.start]))


_VERB_DOWN = {
    "drops",
    "dropped",
    "falls",
    "fell",
    "declines",
    "declined",
    "loses",
    "lost",
    "shrinks",
    "shrank",
    "sheds",
    "decreases",
    "decreased",
}
_VERB_UP = {"rises", "rose", "gains", "gained", "gaining", "grows", "grew", "climbs", "climbed", "jumps", "jumped", "improves", "improved", "improving", "increases", "increased"}  # fmt: skip
_NEUTRAL = {"relative", "relatively", "absolute", "absolutely", "in", "the", "a", "an", "its", "their", "of", "to"}
_ACRONYM_NEXT = re.compile(r"\s?[A-Z][A-Z0-9@]+\b")  # BLEU, AUC, F1 right after a number
_BASE_NEXT = re.compile(r"(?:the |its |their )?(?:\S+ )?(?:parent|baseline|root)\b")  # a base named right after
_CHANGE_VERBS = frozenset(_BY_VERBS_UP | _BY_VERBS_DOWN | _VERB_UP | _VERB_DOWN)


# verbs that take a share away ("saves 32.6% of the time")
_SAVING = frozenset({"saves", "save", "saved", "saving", "cuts", "cut", "shaves", "trims", "removes", "eliminates"})


def _direction(text: str, q: Quantity) -> tuple[str | None, bool]:
    """up, down or share, and whether it is about speed, from the words around a change: the
    words after it (``faster``, ``lower``, ``of``, past ``relative``/``absolute``), a verb before
    ``by`` (``cut by``, ``improves throughput by``) or a noun before ``of`` (``a drop of``)."""
    after = text[q.end : q.end + 60].lower()
    after_words = _WORD.findall(_AFTER_CUT.split(after, maxsplit=1)[0])[:6]
    across = _OVER_THINGS.match(text, q.end)
    if across and units.parse(across.group(1)) is None:
        after_words = []  # "gives 64.51% over three seeds": across them, no change over a base
    before = text[max(0, q.start - 40) : q.start].lower()
    before_words = _WORD.findall(_BEFORE_CUT.split(before)[-1])[-6:]
    speed = any(w in _SPEED for w in after_words[:2] + before_words[-2:])  # this clause's words, not the last one's
    speed = speed or (q.unit == "x" and "speed" in after_words[:4])  # "0.77x the parent's speed"
    if q.signed:
        return ("down" if q.value < 0 else "up"), speed
    while before_words and (before_words[-1] in _APPROX or before_words[-1] in ("a", "an", "only", "just")):
        before_words = before_words[:-1]
    verb = before_words[-1] if before_words else ""
    if verb in _VERB_DOWN or verb in _VERB_UP:  # "occupancy drops 1.1 points", "rises 11.9 points"
        return ("down" if verb in _VERB_DOWN else "up"), speed
    if before_words[-1:] in (["to"], ["at"]) and q.unit == "%" and after_words[:1] != ["of"]:
        return None, speed  # "drops to 31%": the value it reaches
    if before_words[-1:] in (["by"], ["of"]):  # "cut by", "improves throughput by", "a relative drop of"
        for verb in reversed(before_words[:-1]):
            if verb in _BY_VERBS_DOWN or verb in _DOWN:
                return "down", speed
            if verb in _BY_VERBS_UP or verb in _UP:
                return "up", speed
            if verb not in _NEUTRAL and before_words[-1] == "of":
                break
    content = [w for w in after_words if w not in _NEUTRAL or w == "of"]
    if q.unit == "pp":  # "0.6 points of GSM8K EM below its parent": a difference is never a share
        content = [w for w in after_words if w in _UP or w in _DOWN]
    for w in content[:3]:
        if w in _DOWN:
            return "down", speed
        if w in _UP:
            return "up", speed
        if w in ("of", "that", "vs", "versus", "compared", "against"):
            if w == "of" and before_words[-1:] and before_words[-1] in _SAVING:
                return "down", speed  # "saves 32.6% of the baseline's time": a cut, not what is left
            return "share", speed
    if after_words[:1] == ["the"]:
        return "share", speed
    if any(w in ("speedup", "speed-up") for w in before_words):
        return "up", True
    if q.unit == "x":
        return "share", speed
    return None, speed


def sentence_of(text: str, pos: int) -> tuple[int, int]:
    """The span of the sentence around ``pos``."""
    start = 0
    for begin, end in _sentence_ends(text):
        if end <= pos:
            start = end
        elif begin >= pos:
            return start, begin
    return start, len(text)


@per_text
def _sentence_ends(text: str) -> tuple[tuple[int, int], ...]:
    return tuple((m.start(), m.end()) for m in _SENTENCE_END.finditer(text))
