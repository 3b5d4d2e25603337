"""Linking a claim's quantities to each other (docs/grounding.md, section 2): the two ends of a
range, the items of a list and what ``respectively`` pairs them with, a share and the quantity it
is a share of, a difference and its base, a change and its direction (``faster``, ``cut by``),
and the sentence each sits in. :func:`linked` takes the quantities
:func:`projections.evidence.grammar.quantities.read` found, in order, and returns them linked.
"""

from __future__ import annotations

import re

from projections.evidence.grammar import units
from projections.evidence.grammar.quantity import APPROX, Quantity, replace
from projections.evidence.grammar.text_caches import per_text

_WORD = re.compile(r"[A-Za-z_][\w\-]*")
_A_DIGIT = re.compile(r"\d")
_AFTER_CUT = re.compile(r"[,;:()\[\]]|(?<![A-Za-z])\d")
_BEFORE_CUT = re.compile(r"[,;:()\[\]]")
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
# a sentence ends at . ; ! ? before a space, but not after an abbreviation ("vs. 1.33 s", "e.g. 2")
# the mark first, then what may not precede it (a lookbehind tried at every position is slow)
_SENTENCE_END = re.compile(
    r"[.;!?](?<!\bvs.)(?<!\be\.g.)(?<!\bi\.e.)(?<!\bcf.)(?<!\bapprox.)(?<!\bca.)(?<!\bFig.)(?<!\bet al.)(?:\s|$)|\n"
)


def linked(text: str, found: list[Quantity]) -> list[Quantity]:
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
    while before_words and (before_words[-1] in APPROX or before_words[-1] in ("a", "an", "only", "just")):
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
