"""Retrieval quality on the blind corpora (issue 38): the project's ``search_memory`` beside BM25
and an RRF fusion of BM25 with the embedding alone, on the same scoped candidates.

    python -m bench.retrieval_bench [--corpora fixtures/corpora/retrieval] [--scores out.json]

Each corpus (``fixtures/corpora/retrieval/<domain>/corpus.json``, authored blind from
``BRIEF.md`` and frozen with its hash before any ranker ran) is written into a fresh checkpoint
as ARI writes memory (``add_memory`` per entry, in log order, each by its own node); each query
is asked as ARI asks it (``search_memory(query, ancestor_ids)``). The references rank exactly
the entries of ``ancestor_ids`` (the same candidates the project's scope admits):

- **BM25**: ``bm25s``, Lucene's variant (k1 1.2, b 0.75), English Snowball stemming
  (PyStemmer) and English stop words, indexed over the query's candidates;
- **RRF**: reciprocal-rank fusion (k = 60) of that BM25 ranking with the cosine ranking of the
  project's embedder alone.

Metrics, from the graded judgments (3 answers, 2 substantially useful, 1 related, unlisted 0):
nDCG@5 (gain 2^g − 1, ideal from every judged entry), recall@5 of the entries graded 2 or 3,
and MRR@10 of the first entry graded 2 or 3. Printed per query type, per domain and overall,
with the project's margin over the better reference.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Figure, report
from projections.adapters.cli.framework import Parser

REPO = Path(__file__).resolve().parent.parent
CORPORA = REPO / "fixtures" / "corpora" / "retrieval"
SYSTEMS = ("project", "bm25", "rrf")
METRICS = ("ndcg@5", "recall@5", "mrr@10")
RRF_K = 60
DEPTH = 10  # how many results each system returns per query


def frozen_hash(corpus: dict[str, Any]) -> str:
    """The hash ``freeze.py`` wrote: every field but the hash itself, canonical JSON."""
    body = {k: v for k, v in corpus.items() if k != "frozen_sha256"}
    canon = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def load(path: Path) -> dict[str, Any]:
    corpus: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if corpus.get("frozen_sha256") != frozen_hash(corpus):
        raise SystemExit(f"{path}: differs from the hash it was frozen with; a corpus is never edited to fit a ranker")
    return corpus


# ------------------------------------------------------------------------------ metrics


def ndcg(ranked: Sequence[str], grades: dict[str, int], k: int = 5) -> float:
    dcg = sum((2 ** grades.get(e, 0) - 1) / math.log2(i + 2) for i, e in enumerate(ranked[:k]))
    ideal = sorted(grades.values(), reverse=True)[:k]
    best = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / best if best else 0.0


def recall(ranked: Sequence[str], grades: dict[str, int], k: int = 5) -> float:
    useful = {e for e, g in grades.items() if g >= 2}
    return len(useful & set(ranked[:k])) / len(useful) if useful else 0.0


def mrr(ranked: Sequence[str], grades: dict[str, int], k: int = 10) -> float:
    return next((1.0 / (i + 1) for i, e in enumerate(ranked[:k]) if grades.get(e, 0) >= 2), 0.0)


def scores(ranked: Sequence[str], grades: dict[str, int]) -> dict[str, float]:
    return {"ndcg@5": ndcg(ranked, grades), "recall@5": recall(ranked, grades), "mrr@10": mrr(ranked, grades)}


# ------------------------------------------------------------------------------ rankers


class References:
    """BM25 and RRF(BM25, embedding) over a query's scoped candidates."""

    def __init__(self, entries: list[dict[str, Any]]) -> None:
        import bm25s
        import Stemmer

        from projections.models.embedder import get_embedder

        self._bm25s = bm25s
        self._stemmer = Stemmer.Stemmer("english")
        self._entries = entries
        self._embedder = get_embedder()
        self._vectors = np.asarray(self._embedder.embed([e["text"] for e in entries]), dtype=np.float32)

    def bm25(self, query: str, candidates: list[int]) -> list[int]:
        texts = [self._entries[c]["text"] for c in candidates]
        tokens = self._bm25s.tokenize(texts, stopwords="en", stemmer=self._stemmer, show_progress=False)
        index = self._bm25s.BM25(method="lucene", k1=1.2, b=0.75)
        index.index(tokens, show_progress=False)
        asked = self._bm25s.tokenize([query], stopwords="en", stemmer=self._stemmer, show_progress=False)
        if not asked.vocab:
            return []
        found, _ = index.retrieve(asked, k=min(DEPTH * 3, len(candidates)), show_progress=False, n_threads=1)
        return [candidates[int(j)] for j in found[0]]

    def embedding(self, query: str, candidates: list[int]) -> list[int]:
        q = np.asarray(self._embedder.embed([query]), dtype=np.float32)[0]
        sims = self._vectors[candidates] @ q
        order = np.argsort(-sims, kind="stable")
        return [candidates[int(j)] for j in order[: DEPTH * 3]]

    def rrf(self, query: str, candidates: list[int]) -> list[int]:
        fused: dict[int, float] = defaultdict(float)
        for ranking in (self.bm25(query, candidates), self.embedding(query, candidates)):
            for rank, c in enumerate(ranking):
                fused[c] += 1.0 / (RRF_K + rank + 1)
        return sorted(fused, key=lambda c: (-fused[c], c))


def run_domain(corpus: dict[str, Any], work: Path) -> list[dict[str, Any]]:
    """Every query of one corpus, with each system's ranking and scores."""
    from projections.api import MemoryBackend

    entries = corpus["entries"]
    backend = MemoryBackend(work / "checkpoint")
    ours: dict[str, str] = {}
    try:
        for e in entries:
            added = backend.add_memory(e["node_id"], e["text"], e.get("metadata") or {}, current_node=e["node_id"])
            ours[str(added["id"])] = e["id"]
        refs = References(entries)
        rows = []
        for q in corpus["queries"]:
            scope = set(q["ancestor_ids"])
            candidates = [k for k, e in enumerate(entries) if e["node_id"] in scope]
            found = backend.search_memory(q["query"], q["ancestor_ids"], DEPTH)
            ranked = {
                "project": [ours.get(str(r.get("entry_id")), "?") for r in found.get("results", [])],
                "bm25": [entries[c]["id"] for c in refs.bm25(q["query"], candidates)],
                "rrf": [entries[c]["id"] for c in refs.rrf(q["query"], candidates)],
            }
            outside = [r for r in ranked["project"] if r == "?" or r not in {entries[c]["id"] for c in candidates}]
            if outside:
                raise SystemExit(f"{corpus['domain']} {q['id']}: the project returned entries outside the scope")
            grades = {k: int(v) for k, v in q["judgments"].items()}
            rows.append(
                {
                    "domain": corpus["domain"],
                    "query": q["id"],
                    "type": q["type"],
                    **{s: scores(ranked[s], grades) for s in SYSTEMS},
                }
            )
    finally:
        backend.close()
    return rows


# ------------------------------------------------------------------------------ report


def table(rows: list[dict[str, Any]], by: str) -> str:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r[by]].append(r)
    groups["all"] = rows
    width = max(len(str(k)) for k in groups) + 2
    head = f"{by:<{width}}{'n':>4}" + "".join(f"{s + ' ' + m:>18}" for m in METRICS for s in SYSTEMS) + f"{'margin':>9}"
    lines = [head]
    for name, group in groups.items():
        mean = {(s, m): sum(r[s][m] for r in group) / len(group) for s in SYSTEMS for m in METRICS}
        margin = mean[("project", "ndcg@5")] - max(mean[("bm25", "ndcg@5")], mean[("rrf", "ndcg@5")])
        cells = "".join(f"{mean[(s, m)]:>18.3f}" for m in METRICS for s in SYSTEMS)
        lines.append(f"{name:<{width}}{len(group):>4}{cells}{margin:>+9.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, default=CORPORA)
    parser.add_argument("--scores", type=Path, default=None, help="write every query's scores here (JSON)")
    args = parser.parse_args(argv)
    paths = sorted(args.corpora.glob("*/corpus.json"))
    if not paths:
        raise SystemExit(f"no corpus under {args.corpora}")
    rows: list[dict[str, Any]] = []
    for path in paths:
        corpus = load(path)
        work = Path(tempfile.mkdtemp(prefix="retrieval-bench-"))
        try:
            rows += run_domain(corpus, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"retrieval on {len(paths)} blind corpora, {len(rows)} queries")
    print(table(rows, "domain"))
    print()
    print(table(rows, "type"))
    if args.scores is not None:
        args.scores.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return report(targets(rows))


def _mean(rows: list[dict[str, Any]], system: str) -> float:
    return sum(r[system]["ndcg@5"] for r in rows) / len(rows)


def targets(rows: list[dict[str, Any]]) -> list[Figure]:
    """Issue 38's quality targets, each beside its reference measured in the same run."""
    ours, bm25, rrf = (_mean(rows, s) for s in SYSTEMS)
    better = max(bm25, rrf)
    kinds = sorted({r["type"] for r in rows})
    margins = {
        k: _mean([r for r in rows if r["type"] == k], "project") - _mean([r for r in rows if r["type"] == k], "bm25")
        for k in kinds
    }
    worst = min(margins, key=margins.__getitem__)
    return [
        Figure(f"nDCG@5 over {len(rows)} blind queries", ours, "", 0.60, ">= 0.60", ours >= 0.60),
        Figure(
            f"nDCG@5 beside the better reference ({'BM25' if bm25 >= rrf else 'RRF'}: {better:.3f})",
            ours,
            "",
            better,
            ">= the better reference + 0.05",
            ours >= better + 0.05,
        ),
        Figure(
            f"the query type furthest below BM25 ({worst}: {margins[worst]:+.3f})",
            margins[worst],
            "",
            None,
            ">= 0: no query type below BM25",
            margins[worst] >= 0.0,
        ),
    ]


if __name__ == "__main__":
    raise SystemExit(main())
