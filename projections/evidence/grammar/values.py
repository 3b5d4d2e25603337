"""Value grounding: is each number a claim states the number its evidence holds?

Pure functions over text and numbers (the API reads the files). A claim's numbers are read as
quantities (:mod:`projections.evidence.grammar.quantities`), and each gets a verdict by the grammar of
``docs/grounding.md`` (:mod:`projections.evidence.grammar.roles`): a *value* equals the metric it names
in the claim's own report (a percentage of a fraction, a complement, a magnitude, after unit
conversion, within the precision written), or the row of a pinned artifact the sentence
points at; a *comparison* equals the figure computed from a *named* base in the claim's
lineage, in the stated direction; a *fact* equals a number of the run's own words; a *bound*
is an inequality; a *range* holds at both ends. A number whose evidence is not in reach is
``unchecked`` with its reason; when in doubt the answer is ``unchecked``, never ``checked``.
This module is the face: the evidence (:mod:`projections.evidence.grammar.sources`), the artifacts'
tables (:mod:`projections.evidence.grammar.tables`) and the roles live beside it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from projections.evidence.grammar import written_numbers
from projections.evidence.grammar.metric_names import spell_greek
from projections.evidence.grammar.quantities import BASE_WORDS, name_key, read, tolerance
from projections.evidence.grammar.roles import Checker
from projections.evidence.grammar.sources import (
    OWN,
    Evidence,
    Fact,
    Verdict,
    facts_in,
    numeric_metrics,
    range_problem,
    same,
    tokens,
    tokens_key,
)
from projections.evidence.grammar.tables import Place, numbers_in
from projections.models.verdicts import NOTHING_NUMERIC

__all__ = [
    "OWN",
    "Evidence",
    "Fact",
    "Miss",
    "Place",
    "Verdict",
    "check_claim",
    "check_metric_ptr",
    "facts_in",
    "numbers_in",
    "numeric_metrics",
    "range_problem",
    "same",
    "summarise",
    "tokens",
    "tokens_key",
]

_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Miss:
    """A number that did not hold, and where it was looked for."""

    value: str
    reason: str
    looked: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "reason": self.reason, "looked_in": list(self.looked)}


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


def check_claim(text: str, evidence: Evidence) -> list[Verdict]:
    """A verdict for every number of ``text`` (docs/grounding.md)."""
    if _DIGIT.search(text) is None and not written_numbers.may_hold(text):
        return []
    text = spell_greek(text)  # "θ = 0.5" as the run's code names it: theta
    names = evidence.memo(("name_keys",), lambda: _name_keys(evidence))
    found = read(text, names)
    mentions = _node_mentions(text, evidence)
    checker = Checker(text, found, mentions, evidence)
    return [checker.verdict(i) for i in range(len(found))]


def _name_keys(evidence: Evidence) -> frozenset[str]:
    """The lineage's metric names as a sentence may write them (``name_key``), once per evidence."""
    theirs = (n for metrics in evidence.ancestors.values() for n in metrics)
    return frozenset(name_key(n) for n in evidence.metrics) | frozenset(name_key(n) for n in theirs)


@functools.lru_cache(maxsize=1024)
def _ids_pattern(ids: frozenset[str]) -> re.Pattern[str]:
    """The node ids of a lineage as whole words, the longest first."""
    return re.compile(r"(?<![\w])(" + "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True)) + r")(?![\w])")


_BASE_WORD = re.compile(r"\b(baseline|root|parent)\b", re.I)


def _node_ids(evidence: Evidence) -> frozenset[str]:
    """The ids a claim of this evidence may name: its lineage, the run's other nodes, its own."""
    own = {evidence.node_id} if evidence.node_id else set()
    return frozenset(set(evidence.ancestors) | set(evidence.others) | own)


def _node_mentions(text: str, evidence: Evidence) -> list[tuple[int, str]]:
    """(position, node id) of every node the text names, ``the baseline`` and ``the parent``
    resolved in the claim's lineage (the claim's own node included: it is never a base)."""
    ids = evidence.memo(("node_ids",), lambda: _node_ids(evidence))
    found: list[tuple[int, str]] = []
    if ids:
        found += [(m.start(), m.group(1)) for m in _ids_pattern(ids).finditer(text)]
    lineage = list(evidence.ancestors)
    for m in _BASE_WORD.finditer(text):
        role = BASE_WORDS[m.group(1).lower()]
        if lineage:
            found.append((m.start(), lineage[0] if role == "root" else lineage[-1]))
        elif evidence.node_id:
            found.append((m.start(), evidence.node_id))
    return sorted(found)


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
        view["why"] = "; ".join(f"{v.text}: {v.why}" for v in unchecked) if unchecked else NOTHING_NUMERIC
    if unchecked:
        view["unchecked"] = [{"value": v.text, "why": v.why or ""} for v in unchecked]
    return view
