"""Reading the numbers of a claim as quantities (docs/grounding.md, sections 1 and 2).

Pure text work: each number that is not part of a name becomes a :class:`Quantity` with its
value (times its suffix), the precision it was written to, its unit (by pint, see
:mod:`projections.evidence.grammar.units`), a metric name or count noun beside it, a qualifier
(approximate, or a bound) and its sign. The quantity itself is
:mod:`projections.evidence.grammar.quantity`; linking quantities to each other (ranges, lists,
shares, changes and their direction) is :mod:`projections.evidence.grammar.quantity_links`.
What a quantity must match is :mod:`projections.evidence.grammar.values`' business.
"""

from __future__ import annotations

import functools
import re

from projections.evidence.grammar import units, written_numbers
from projections.evidence.grammar.metric_names import abbreviates, canon, metric_words
from projections.evidence.grammar.quantity import APPROX, Quantity, new_quantity, replace
from projections.evidence.grammar.quantity_links import linked

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
_SUFFIXES = {
    "k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12,
}  # fmt: skip
_SUFFIX_FIRST = frozenset(w[0] for w in _SUFFIXES)  # a text after a number that starts otherwise holds none
_APPROX_MARKS = ("~", "≈", "∼")
_BOUNDS = (
    ("less than", "<"), ("fewer than", "<"), ("below", "<"), ("under", "<"), ("no more than", "<="),
    ("up to", "<="), ("at most", "<="), ("within", "<="), ("<=", "<="), ("≤", "<="), ("<", "<"),
    ("more than", ">"), ("greater than", ">"), ("higher than", ">"), ("above", ">"), ("over", ">"),
    ("exceeding", ">"), ("beyond", ">"), ("no less than", ">="), ("at least", ">="), (">=", ">="), ("≥", ">="),
    (">", ">"), ("exceeds", ">"), ("clears", ">="), ("tops", ">"), ("surpasses", ">"),
)  # fmt: skip
_DEVICE_TIME = re.compile(
    r"(GPU|CPU|core|node|device|vCPU)(?:[- ]?(hours?|hrs?|minutes?|mins?|seconds?)|[- ](h|s))(?![A-Za-z])", re.I
)
_DEGREES = re.compile(r"°\s?([CF])\b")
_TIMES = re.compile(r"(?:[x×X](?![A-Za-z0-9])|times\b|-fold\b|fold\b)")
_BOUND_ENDS = tuple(words for words, _ in _BOUNDS)  # one C-level test before the loop over them
_SPREAD_MARKS = ("±", "+/-", "+-", "plus or minus")
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

BASE_WORDS = {"baseline": "root", "root": "root", "parent": "parent"}
_SPACES = " \u00a0\u202f\u2009\u2006\u200a\t"  # a space, no-break and thin spaces between a number and its unit


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
        q = new_quantity(written, written, d.start, d.end, d.value, d.tolerance, unit="second")
        found.append(_before(text, q, metric_names))
    for w in written_numbers.words(text):
        if any(a <= w.start < b for a, b in taken) or any(q.start <= w.start < q.end for q in found):
            continue
        written = text[w.start : w.end]
        # a count in words is exact; a ratio word (twice, half, two-fold) rounds to within 10 %
        q = new_quantity(
            written, written, w.start, w.end, w.value, 0.1 * w.value if w.unit == "x" else 0.5, unit=w.unit
        )
        if w.unit is None:
            q = _after(text, q, metric_names) or q
        found.append(_before(text, q, metric_names))
    found.sort(key=lambda q: q.start)
    return linked(text, found)


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
            new_quantity(digits, raw, start, end, float(digits.replace(",", "")), tolerance(digits), noun=noun),
            names,
        )
    digits = raw.lstrip("+-−")
    value = float(digits.replace(",", ""))
    if raw[0] in "-−":
        value = -value
    tol = tolerance(digits)
    q = new_quantity(digits, raw, start, end, value, tol, signed=signed)
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
    elif stripped.endswith(_APPROX_MARKS) or _ends_with_word(low, APPROX):
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
