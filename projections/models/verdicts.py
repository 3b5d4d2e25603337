"""The verdicts the checks give, each a closed set of words, as types.

Written once, here below the rules of evidence: the fold that reaches a verdict
(``evidence/grammar/values.py``) and the shape that carries it to ARI (``models/shapes.py``,
which re-exports these) name the same set, and a word outside it is a type error. Plain strings at run time: typing them changes no output.
"""

from __future__ import annotations

from typing import Literal, TypeGuard, get_args

from ledger import InvalidInput

# A number a claim states, and all of a claim's numbers together (docs/grounding.md): the
# number its evidence holds, not that number, or nothing in reach decides it.
ValuesVerdict = Literal["checked", "unchecked", "mismatch"]
NOTHING_NUMERIC = "nothing numeric to check"  # the ``unchecked`` values verdict of a claim that states no number

# A cited artifact re-hashed on disk: its recorded sha256 again, another, no recorded sha256
# to compare with, or no regular file inside its work dir.
AuditStatus = Literal["verified", "missing", "mismatch", "unhashed"]

# How far a claim's citation can be trusted, weakest first (``evidence/usable.py``).
Evidence = Literal["none", "cited", "hashed", "verified", "values_checked", "rerun_passed"]
EVIDENCE: tuple[Evidence, ...] = get_args(Evidence)


def is_evidence(level: object) -> TypeGuard[Evidence]:
    return level in EVIDENCE


def check_evidence(level: str | None, field: str = "min_evidence") -> Evidence:
    """``level`` as an evidence level, or InvalidInput naming ``field``."""
    if not is_evidence(level):
        raise InvalidInput(field, f"unknown evidence level {level!r}; expected one of {', '.join(EVIDENCE)}")
    return level
