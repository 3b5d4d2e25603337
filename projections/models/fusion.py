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

import numpy as np

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
    lexical channel's weight falls with it: a paraphrase shares few words with its answer).
    Entries are named by id here (any engine's results); :func:`fuse_keys` is the rule."""
    names = list(dict.fromkeys([e for e, _ in semantic] + list(lexical)))
    key = {name: k for k, name in enumerate(names)}
    lexical_names = list(lexical)
    by_name = sorted(range(len(lexical_names)), key=lexical_names.__getitem__)
    order = np.empty(len(lexical_names), np.int64)
    order[by_name] = np.arange(len(lexical_names))

    def told(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        said = [about(names[k]) for k in keys.tolist()]
        return np.array([parent is not None and n == parent for n, _ in said], bool), np.array(
            [f for _, f in said], bool
        )

    keys, scores = fuse_keys(
        query,
        np.array([key[e] for e, _ in semantic], np.int64),
        np.array([c for _, c in semantic], np.float64),
        np.array([key[e] for e in lexical_names], np.int64),
        np.array(list(lexical.values()), np.float64),
        order,
        told,
        limit,
        coverage,
    )
    return list(zip([names[k] for k in keys.tolist()], scores.tolist()))


def fuse_keys(
    query: str,
    semantic_keys: np.ndarray,
    semantic: np.ndarray,
    lexical_keys: np.ndarray,
    lexical: np.ndarray,
    lexical_order: np.ndarray,
    told: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    limit: int,
    coverage: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """The fusion, on entries named by integer keys: ``semantic_keys`` best first with their
    ``semantic`` scores; the lexical matches (any order) with their BM25 scores, ``lexical_order``
    the place of each one's id among theirs (ties go to the smaller id); ``told(keys)``: whether
    each entry is the parent's, and whether it tells of a failure. The best ``limit`` keys and
    their scores in [0, 1], best first (ties in pool order: the semantic pool, then the lexical)."""
    pool = max(limit, POOL)
    picked = lexical_keys[np.lexsort((lexical_order, -lexical))[:pool]]
    first = semantic_keys[:pool]
    pooled = set(first.tolist())
    keys = np.concatenate([first, picked[[k not in pooled for k in picked.tolist()]]])
    if not len(keys):
        return keys, np.zeros(0, np.float64)
    low = float(semantic.min()) if len(semantic) else 0.0
    high = float(semantic.max()) if len(semantic) else 0.0
    top = float(lexical.max()) if len(lexical) else 0.0
    weight = LEXICAL_WEIGHT * min(1.0, coverage / FULL_COVERAGE)
    size = 1 + max(int(keys.max()), int(semantic_keys.max(initial=0)), int(lexical_keys.max(initial=0)))
    cos, in_cos = _spread(size, semantic_keys, semantic)
    near = np.where(in_cos[keys], (cos[keys] - low) / (high - low) if high > low else 1.0, 0.0)
    if top > 0:
        term, _ = _spread(size, lexical_keys, lexical)
        score = weight * (term[keys] / top) + (1.0 - weight) * near
    else:
        score = near
    parents, failed = told(keys)
    score = np.where(parents, score * PARENT_BOOST, score)
    if asks_failure(query):
        score = np.where(failed, score * FAILURE_BOOST, score)
    score = np.minimum(1.0, score / (PARENT_BOOST * FAILURE_BOOST))
    best = np.argsort(-score, kind="stable")[:limit]
    return keys[best], score[best]


def _spread(size: int, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values at their keys in an array of ``size`` (0.0 elsewhere), and where a key is."""
    spread, there = np.zeros(size, np.float64), np.zeros(size, bool)
    spread[keys], there[keys] = values, True
    return spread, there
