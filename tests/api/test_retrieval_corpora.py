"""The blind retrieval corpora of issue 38 stay as they were frozen, and keep the brief's shape.

Each ``fixtures/corpora/retrieval/<domain>/corpus.json`` was authored from ``BRIEF.md`` by
someone who had not read the ranking code, checked and hashed by ``freeze.py`` before any ranker
ran on it; a judgment is changed only in a commit of its own that says why and writes the new
hash. The scores are the benchmark's (``python -m bench.retrieval_bench``), not a test's.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

HERE = Path(__file__).resolve().parents[2] / "fixtures" / "corpora" / "retrieval"
DOMAINS = sorted(p.parent.name for p in HERE.glob("*/corpus.json"))


def _freezer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("retrieval_freeze", HERE / "freeze.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FREEZE = _freezer()


def load(domain: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HERE / domain / "corpus.json").read_text(encoding="utf-8"))
    return data


def test_five_domains_and_three_hundred_queries_at_least() -> None:
    assert len(DOMAINS) >= 5, DOMAINS
    assert sum(len(load(d)["queries"]) for d in DOMAINS) >= 300


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_judgments_are_the_frozen_ones(domain: str) -> None:
    corpus = load(domain)
    assert corpus["frozen_sha256"] == FREEZE.frozen_hash(corpus), (
        f"{domain}/corpus.json differs from what was frozen before any ranker ran: a judgment is changed "
        "only in a commit of its own that says why, and that writes the new hash"
    )


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_corpus_keeps_the_brief(domain: str) -> None:
    assert FREEZE.problems(load(domain)) == []


def test_the_freezer_refuses_a_judgment_outside_the_scope() -> None:
    corpus = load(DOMAINS[0])
    query = corpus["queries"][0]
    outside = next(e for e in corpus["entries"] if e["node_id"] not in query["ancestor_ids"])
    query["judgments"][outside["id"]] = 3
    assert any("outside the asking node's ancestors" in p for p in FREEZE.problems(corpus))
