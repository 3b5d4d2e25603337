"""One ranking from the two channels, knowing ARI's entries.

The semantic channel (the engine's cosine, which answers paraphrases) and the lexical one
(BM25, which answers the rare token) are fused as a weighted sum of each channel's scores
scaled to the query's best (the lexical weighted more: on the blind corpora its ranking alone
beats the embedding's in every query type but paraphrase). Two facts of ARI's tree then move
an entry up: the asking node's parent wrote it (ARI passes ``ancestor_ids`` root first, parent
last: the parent's state is the one the child continues), and the query asks what failed while
the entry tells of a failure (a traceback, an error, ``Attempt: …; failed``, a root cause).
Scores stay in [0, 1], best first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

LEXICAL_WEIGHT = 0.7
PARENT_BOOST = 1.2
FAILURE_BOOST = 1.3
POOL = 50  # how many of each channel's best are fused
FULL_COVERAGE = 0.5  # the best lexical match holds half the query's weight: the lexical weight in full

_FAILURE_ASKED = re.compile(
    r"\b(?:fail\w*|broke|break|broken|crash\w*|errors?|wrong|abort\w*|diverg\w*|why|avoid|didn't|did not"
    r"|not work\w*|blew up|blow[- ]?up|nan|oom|hang|hung|stuck|problem|issue|bug)\b",
    re.IGNORECASE,
)


# a row that tells of a failure: an error, a traceback, an attempt that failed, its root cause
_FAILURE_SAID = re.compile(
    r"traceback|error|failed|failure|attempt:|root cause|\boom\b|out of memory|killed|abort|diverg|\bnan\b"
    r"|exception|refus|segfault|segmentation fault|timed out|timeout|fatal|cannot|could not|unable|crash",
    re.IGNORECASE,
)


def tells_failure(text: str) -> bool:
    """The entry tells of a failure (what a failure question is lifted towards)."""
    return _FAILURE_SAID.search(text) is not None


def asks_failure(query: str) -> bool:
    """The query asks what broke, failed or should be avoided."""
    return _FAILURE_ASKED.search(query) is not None


def fuse(
    query: str,
    semantic: Sequence[tuple[str, float]],
    lexical: Mapping[str, float],
    about: Callable[[str], tuple[str | None, bool]],
    parent: str | None,
    limit: int,
    coverage: float = 1.0,
) -> list[tuple[str, float]]:
    """The ``limit`` best entries of both channels, best first, each with its score in [0, 1];
    ``coverage``: the share of the query's weight the best lexical match holds (below half, the
    lexical channel's weight falls with it: a paraphrase shares few words with its answer)."""
    pool = max(limit, POOL)
    best_lexical = sorted(lexical.items(), key=lambda kv: (-kv[1], kv[0]))[:pool]
    ids = list(dict.fromkeys([e for e, _ in semantic[:pool]] + [e for e, _ in best_lexical]))
    if not ids:
        return []
    cos = dict(semantic)
    low = min(cos.values(), default=0.0)
    high = max(cos.values(), default=0.0)
    top = max(lexical.values(), default=0.0)
    failure = asks_failure(query)
    weight = LEXICAL_WEIGHT * min(1.0, coverage / FULL_COVERAGE)
    scored = []
    for entry in ids:
        near = (cos[entry] - low) / (high - low) if entry in cos and high > low else (1.0 if entry in cos else 0.0)
        term = lexical.get(entry, 0.0) / top if top > 0 else 0.0
        score = weight * term + (1.0 - weight) * near if top > 0 else near
        node, failed = about(entry)
        if parent is not None and node == parent:
            score *= PARENT_BOOST
        if failure and failed:
            score *= FAILURE_BOOST
        scored.append((entry, min(1.0, score / (PARENT_BOOST * FAILURE_BOOST))))
    scored.sort(key=lambda kv: -kv[1])
    return scored[:limit]
