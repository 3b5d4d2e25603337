"""The lexical channel beside the embedding: BM25 over the entries of exactly the scope.

A query's rare token (``--fuse-qkv``, ``ucp_ep_create``, ``p999``, ``lr=3e-4``) picks its
answer where an averaged embedding does not. Terms are the text's words stemmed (English
Snowball, PyStemmer) without stop words, and each identifier written with ``_ - . = / : @``
or in camelCase is kept whole too (``=ucp_ep_create`` beside ``ucp``, ``ep``, ``creat``), so
an exact token outweighs the words it shares with its neighbours.

Postings are derived, per node, from the catalog's rows (visible or not, with the seq that
added each and the seq that hid it), on the first search that reaches the node, and rebuilt
when the node's rows change (a row added, a clear, a purge, a redaction, a rebuilt catalog):
nothing here is a second source of truth, and a search as of any seq sees exactly the rows
visible then. Statistics (document frequency, mean length) are those of the scope's visible
rows, so a node's score never depends on a sibling's memory. A token's terms are kept once
worked out (a corpus says the same words again and again): the first search of a scope
tokenises its rows at about twice the speed.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np

from projections.models.frozen import NEVER
from projections.models.fusion import tells_failure

K1 = 1.2  # Lucene's BM25
B = 0.75

_EXACT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-=/:@+]*[A-Za-z0-9%]|[A-Za-z0-9]")
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+(?:\.\d+)?(?:e-?\d+)?")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "and",
        "or",
        "but",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "with",
        "by",
        "from",
        "as",
        "into",
        "than",
        "then",
        "so",
        "such",
        "not",
        "no",
        "do",
        "does",
        "did",
        "what",
        "which",
        "who",
        "whom",
        "how",
        "why",
        "when",
        "where",
        "there",
        "here",
        "i",
        "we",
        "you",
        "he",
        "she",
        "they",
        "them",
        "our",
        "your",
        "their",
        "his",
        "her",
        "my",
        "me",
        "us",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "have",
        "has",
        "had",
        "about",
        "over",
        "under",
        "again",
        "further",
        "once",
        "only",
        "own",
        "same",
        "too",
        "very",
        "s",
        "t",
        "just",
        "any",
        "all",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "some",
        "nor",
        "up",
        "down",
        "out",
        "off",
        "if",
        "because",
        "while",
        "until",
        "against",
        "between",
        "through",
        "during",
        "before",
        "after",
        "above",
        "below",
    ]
)


class _Stemmer(Protocol):
    def stemWord(self, word: str) -> str: ...


_stemmer: _Stemmer | None = None


def _stem(word: str) -> str:
    global _stemmer
    if _stemmer is None:
        import Stemmer  # PyStemmer: loaded with the first search, not on import

        _stemmer = Stemmer.Stemmer("english")
    return _stemmer.stemWord(word)


def terms(text: str) -> list[str]:
    """A text's terms: stemmed words without stop words, and each compound token whole (``=`` first)."""
    out: list[str] = []
    known = _TOKEN_TERMS
    for raw in _EXACT.findall(text):
        said = known.get(raw)
        if said is None:
            if len(known) >= _TOKENS_KEPT:
                known.clear()
            said = known[raw] = _token_terms(raw)
        out.extend(said)
    return out


_TOKEN_TERMS: dict[str, tuple[str, ...]] = {}  # a token's terms, as ``_token_terms`` gives them
_TOKENS_KEPT = 1 << 16  # words recur (a corpus's vocabulary is small beside its text): kept until this many


def _token_terms(raw: str) -> tuple[str, ...]:
    """One token's terms: whole (``=`` first) when compound, then its words stemmed."""
    out: list[str] = []
    low = raw.lower()
    parts = [p.lower() for p in _PART.findall(raw)]
    if len(parts) > 1 or (parts and parts[0] != low):
        out.append("=" + low)
    for p in parts:
        if p in _STOP or (len(p) == 1 and not p.isdigit()):
            continue
        out.append(_stem(p) if p.isalpha() else p)
    return tuple(out)


class Row(Protocol):
    """What a node's row gives the index (the catalog's ``Entry``)."""

    entry_id: str
    seq: int
    cleared_at: int

    @property
    def text(self) -> str: ...


@dataclass
class NodeTerms:
    """One node's rows as terms: each row's (term, count) pairs, its length, its life."""

    version: tuple[object, ...]
    ids: list[str] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    cleared: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    failures: list[bool] = field(default_factory=list)  # the row tells of a failure (see :func:`tells_failure`)
    terms: list[str] = field(default_factory=list)  # every (row, term) pair: the term,
    rows: list[int] = field(default_factory=list)  # its row,
    counts: list[int] = field(default_factory=list)  # and how often the row says it

    @classmethod
    def of(cls, version: tuple[object, ...], rows: Iterable[Row]) -> NodeTerms:
        node = cls(version)
        for i, row in enumerate(rows):
            text = row.text
            counted = Counter(terms(text))
            node.ids.append(row.entry_id)
            node.seqs.append(row.seq)
            node.cleared.append(row.cleared_at)
            node.lengths.append(sum(counted.values()))
            node.failures.append(tells_failure(text))
            node.terms.extend(counted)
            node.rows.extend([i] * len(counted))
            node.counts.extend(counted.values())
        return node


class ScopeIndex:
    """The postings of a scope's nodes merged, term by term (compressed rows): what a query's
    terms cost is their postings, read as arrays."""

    def __init__(self, nodes: Sequence[tuple[str, NodeTerms]]) -> None:
        self.ids: list[str] = [i for _, node in nodes for i in node.ids]
        self.where = {entry_id: k for k, entry_id in enumerate(self.ids)}
        self.seqs = np.array([q for _, node in nodes for q in node.seqs], dtype=np.int64)
        self.cleared = np.array([c for _, node in nodes for c in node.cleared], dtype=np.int64)
        self.lengths = np.array([n for _, node in nodes for n in node.lengths], dtype=np.float64)
        # each row's node name and failure flag as Python objects: what the fusion asks of ~100 rows a search
        self.row_node = [name for name, node in nodes for _ in node.ids]
        self.row_failed = [f for _, node in nodes for f in node.failures]
        self.live = self.cleared == NEVER
        self.live_count = int(self.live.sum())
        self.all_live = self.live_count == len(self.ids)  # no row hidden: a search as of now filters nothing
        self.mean_length = float(self.lengths[self.live].mean()) if self.live.any() else 0.0
        self.vocabulary: dict[str, int] = {}
        offsets = np.cumsum([0] + [len(node.ids) for _, node in nodes])
        term_ids = np.fromiter(
            (self.vocabulary.setdefault(t, len(self.vocabulary)) for _, node in nodes for t in node.terms),
            dtype=np.int64,
        )
        rows = np.concatenate([np.asarray(node.rows, dtype=np.int64) + offsets[k] for k, (_, node) in enumerate(nodes)])
        counts = np.concatenate([np.asarray(node.counts, dtype=np.float64) for _, node in nodes])
        order = np.argsort(term_ids, kind="stable")
        self.rows, self.counts = rows[order], counts[order]
        self.starts = np.searchsorted(term_ids[order], np.arange(len(self.vocabulary) + 1))
        # each posting's BM25 term-frequency part as of now (its count against the row's length
        # norm): a search as of now multiplies it by the term's weight instead of computing it
        # for every posting of the query's terms (no live row: no search as of now reads it)
        self.tf = _tf(self.counts, self.lengths[self.rows], self.mean_length or 1.0)
        self.memo: dict[object, object] = {}  # what else is derived from this scope alone (the fusion's arrays)

    def visible(self, as_of: int | None) -> np.ndarray:
        return self.live if as_of is None else (self.seqs <= as_of) & (as_of < self.cleared)


class Source(Protocol):
    """Where a node's rows and their version come from (the catalog)."""

    @property
    def changes(self) -> int:
        """Moves whenever any node's version may have (an event folded, a start over)."""
        ...

    def lexical_version(self, node_id: str) -> tuple[object, ...]: ...

    def entries_of(self, node_id: str) -> Sequence[Row]: ...


class LexicalIndex:
    """BM25 over a scope's visible rows, from terms kept per node and postings kept per scope
    (see the module's header)."""

    def __init__(self, nodes: int = 4096, scopes: int = 64) -> None:
        self._nodes: dict[str, NodeTerms] = {}
        self._scopes: dict[tuple[object, ...], ScopeIndex] = {}
        self._keys: dict[tuple[str, ...], tuple[Source, int, tuple[object, ...]]] = {}  # a scope's last key
        self._limits = (nodes, scopes)  # kept; the least recently searched go first

    def _node(self, source: Source, node_id: str) -> NodeTerms:
        version = source.lexical_version(node_id)
        node = self._nodes.pop(node_id, None)
        if node is None or node.version != version:
            node = NodeTerms.of(version, source.entries_of(node_id))
        self._nodes[node_id] = node  # most recently used last
        if len(self._nodes) > self._limits[0]:
            del self._nodes[next(iter(self._nodes))]
        return node

    def scope(self, source: Source, node_ids: Sequence[str]) -> ScopeIndex:
        """The scope's merged postings, rebuilt when one of its nodes' rows changed."""
        names = tuple(dict.fromkeys(node_ids))
        known = self._keys.get(names)
        if known is not None and known[0] is source and known[1] == source.changes:
            key = known[2]  # nothing folded since: each node's version is the one read last time
        else:
            key = (*names, *(source.lexical_version(n) for n in names))
            self._keys[names] = (source, source.changes, key)
            if len(self._keys) > self._limits[1]:
                del self._keys[next(iter(self._keys))]
        index = self._scopes.pop(key, None)
        if index is None:
            index = ScopeIndex([(n, self._node(source, n)) for n in names])
        self._scopes[key] = index
        if len(self._scopes) > self._limits[1]:
            del self._scopes[next(iter(self._scopes))]
        return index

    def scores(self, source: Source, query: str, node_ids: Sequence[str], as_of: int | None, best: int = 50) -> Matches:
        """The ``best`` visible rows of the scope by BM25 (each holds a query term), with their
        scores; and how much of the query's weight (its terms' idf) the best of them holds."""
        if not node_ids:
            return Matches({}, 0.0)
        ranked = self.ranked(source, query, node_ids, as_of, best)
        ids = ranked.scope_index.ids
        scores = dict(zip([ids[k] for k in ranked.rows.tolist()], ranked.scores.tolist()))
        return Matches(scores, ranked.coverage, ranked.scope_index)

    def ranked(self, source: Source, query: str, node_ids: Sequence[str], as_of: int | None, best: int = 50) -> Ranked:
        """:meth:`scores` as the scope index's row numbers and an array of their scores."""
        asked = Counter(terms(query))
        index = self.scope(source, node_ids)
        now = as_of is None
        shown = index.visible(as_of)
        count = index.live_count if now else int(shown.sum())
        if not asked or not count:
            return Ranked(index, np.zeros(0, np.int64), np.zeros(0, np.float64), 0.0)
        mean = index.mean_length if now else float(index.lengths[shown].mean())
        vocabulary, starts = index.vocabulary, index.starts
        known = [(vocabulary[t], n) for t, n in asked.items() if t in vocabulary]
        unknown = sum(n for t, n in asked.items() if t not in vocabulary)  # in no row: the rarest
        slices = [slice(int(starts[t]), int(starts[t + 1])) for t, _ in known]
        rows = _joined(index.rows, slices)
        lengths = [s.stop - s.start for s in slices]
        said = np.array([n for _, n in known], dtype=np.float64)
        if now and index.all_live:  # every posting counts: a term's df is its postings
            df = np.array(lengths, dtype=np.int64)
            tf = _joined(index.tf, slices)
            term = None  # the postings in term order, ``lengths`` a term
        else:
            term = np.repeat(np.arange(len(known)), lengths)
            keep = shown[rows]
            rows, term = rows[keep], term[keep]
            df = np.bincount(term, minlength=len(known))
            if now:  # some rows hidden: the kept postings' term frequency part as of now
                tf = _joined(index.tf, slices)[keep]
            else:  # as of a seq: the lengths' mean is that of the rows visible then
                tf = _tf(_joined(index.counts, slices)[keep], index.lengths[rows], mean)
        weight = said * np.log1p((count - df + 0.5) / (df + 0.5))
        weights = np.repeat(weight, lengths) if term is None else weight[term]  # each posting's term's weight
        whole = float(weight.sum()) + unknown * math.log1p((count + 0.5) / 0.5)
        n_rows = len(index.ids)  # a row holds a term once, so each (row, term) is one posting
        scores = np.bincount(rows, weights=weights * tf, minlength=n_rows)
        found = np.flatnonzero(scores)
        if len(found) > best:
            found = found[np.argpartition(-scores[found], best - 1)[:best]]
        top = int(found[np.argmax(scores[found])]) if len(found) else None
        # the weight the best row holds, summed in posting order (as a bincount over every row would)
        held = sum(weights[rows == top].tolist()) if top is not None else 0.0
        coverage = float(held / whole) if top is not None and whole > 0 else 0.0
        return Ranked(index, found, scores[found], coverage)


class Ranked(NamedTuple):
    """A lexical search as arrays: the scope's index, the rows found (its row numbers), their
    BM25 scores, and the share of the query's weight the best of them holds."""

    scope_index: ScopeIndex
    rows: np.ndarray
    scores: np.ndarray
    coverage: float


def _tf(counts: np.ndarray, lengths: np.ndarray, mean: float) -> np.ndarray:
    """BM25's term-frequency part of postings of these counts, in rows of these lengths, in a
    scope of this mean length (Lucene's: the score is the term's weight times it)."""
    return counts * (K1 + 1.0) / (counts + K1 * (1.0 - B + B * lengths / mean))


def _joined(array: np.ndarray, slices: list[slice]) -> np.ndarray:
    """The slices of a merged array (a query's terms' postings) end to end."""
    return np.concatenate([array[s] for s in slices]) if slices else array[:0]


@dataclass(frozen=True)
class Matches:
    """A lexical search: rows with their BM25 score, the share of the query's weight the best
    row holds (1.0: every term, 0.0: none), and the scope's index it read."""

    scores: dict[str, float]
    coverage: float
    index: ScopeIndex | None = field(default=None, compare=False)

    def about(self, entry_id: str) -> tuple[str | None, bool]:
        """The scope's node that holds a row, and whether the row tells of a failure."""
        index = self.index
        k = index.where.get(entry_id) if index is not None else None
        if k is None or index is None:
            return None, False
        return index.row_node[k], index.row_failed[k]
