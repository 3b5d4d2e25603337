"""The static embedder: offline loading, vector contract, and retrieval quality."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ledger.errors import InvalidInput
from projections.models.embedder import StaticEmbedder, cosine_scores, get_embedder
from support.env import ROOT as REPO

FIXTURE = REPO / "fixtures" / "retrieval_quality.json"
CASES = json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def embedder() -> StaticEmbedder:
    return get_embedder()


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_loads_from_wheel_files_without_network(tmp_path: Path) -> None:
    # A fresh interpreter with an empty HOME and an audit hook that refuses any
    # socket use: loading must come from the wheel, not a cache or a download.
    script = textwrap.dedent(
        """
        import logging, sys, threading

        def refuse_network(event, args):
            if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"):
                raise RuntimeError(f"network access attempted: {event} {args}")

        sys.addaudithook(refuse_network)
        from projections.models.embedder import get_embedder

        instances = []
        threads = [threading.Thread(target=lambda: instances.append(get_embedder())) for _ in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        assert len({id(e) for e in instances}) == 1, "get_embedder built more than one model"
        vec = instances[0].embed_one("roofline model of a stencil kernel")
        assert logging.getLogger().handlers == [], "importing wordllama configured the root logger"
        print(instances[0].name, instances[0].dim, float(abs(vec).sum()) > 0)
        """
    )
    env = {**os.environ, "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["wordllama/l2_supercat_256", "256", "True"]
    assert list(tmp_path.iterdir()) == [], "loading wrote into HOME (a download cache?)"


def test_shape_dtype_and_unit_rows(embedder: StaticEmbedder) -> None:
    vectors = embedder.embed(["MPI halo exchange", "learning rate warmup", "Lustre striping"])
    assert embedder.name == "wordllama/l2_supercat_256"
    assert embedder.dim == 256
    assert vectors.shape == (3, 256)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_blank_texts_give_zero_rows_never_nan(embedder: StaticEmbedder) -> None:
    vectors = embedder.embed(["", "   \n\t ", "build failed"])
    assert not np.isnan(vectors).any()
    assert not vectors[:2].any()
    assert np.linalg.norm(vectors[2]) == pytest.approx(1.0, abs=1e-6)
    empty = embedder.embed([])
    assert empty.shape == (0, 256) and empty.dtype == np.float32


def test_embed_one_matches_embed(embedder: StaticEmbedder) -> None:
    one = embedder.embed_one("GFlops per second on one socket")
    assert one.shape == (256,)
    np.testing.assert_array_equal(one, embedder.embed(["GFlops per second on one socket"])[0])


def test_deterministic_and_independent_of_batch_neighbours(embedder: StaticEmbedder) -> None:
    # Mixed lengths over several batches exercise the length sort and the scatter back.
    rng = np.random.default_rng(7)
    words = ["cache", "miss", "kernel", "node", "epoch", "loss", "MPI", "rank", "stencil", "tile", "GPU"]
    texts = [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(0, 120, size=150)]
    texts[3] = texts[77] = "  "
    texts.append("x " * 50_000)  # one huge text must not blow up its batch
    batch = embedder.embed(texts)
    np.testing.assert_array_equal(batch, embedder.embed(texts))
    singles = np.stack([embedder.embed_one(t) for t in texts])
    np.testing.assert_allclose(batch, singles, atol=1e-6)


def test_matches_wordllama_raw_embedding(embedder: StaticEmbedder) -> None:
    texts = ["RESULT SUMMARY metrics=[GFlops_per_s=15.82]", "checkpoint I/O on Lustre", "loss diverged"]
    np.testing.assert_allclose(embedder.embed(texts), _unit_rows(embedder.raw_embed(texts)), atol=1e-6)


def test_rejects_non_text_input(embedder: StaticEmbedder) -> None:
    with pytest.raises(InvalidInput) as single:
        embedder.embed("a single string is not a batch")
    assert single.value.field == "texts"
    with pytest.raises(InvalidInput) as mixed:
        embedder.embed(["fine", 3])
    assert mixed.value.field == "texts[1]"
    with pytest.raises(InvalidInput) as one:
        embedder.embed_one(None)  # type: ignore[arg-type]
    assert one.value.field == "text"


def test_cosine_scores_range(embedder: StaticEmbedder) -> None:
    query = embedder.embed_one("memory bandwidth bound kernel")
    matrix = np.vstack([query, -query, np.zeros(256, np.float32), embedder.embed(["validation accuracy"])])
    scores = cosine_scores(query, matrix)
    assert scores.dtype == np.float32 and scores.shape == (4,)
    assert ((scores >= 0.0) & (scores <= 1.0)).all()
    np.testing.assert_allclose(scores[:3], [1.0, 0.0, 0.5], atol=1e-6)
    assert cosine_scores(query, np.empty((0, 256), np.float32)).shape == (0,)
    with pytest.raises(InvalidInput):
        cosine_scores(query, np.ones((2, 128), np.float32))


def test_fixture_contains_the_loopline_case() -> None:
    assert 10 <= len(CASES) <= 15
    loopline = [c for c in CASES if "loopline performance model" in c["query"]]
    assert loopline, "the spec's loopline case is missing"
    relevant = loopline[0]["entries"][loopline[0]["relevant"]]
    assert relevant.startswith("RESULT SUMMARY metrics=[GFlops_per_s=15.82")
    # A substring filter on the query would find nothing in any case.
    assert all(c["query"].lower() not in e.lower() for c in CASES for e in c["entries"])


@pytest.mark.parametrize("case", CASES, ids=[c["query"][:48] for c in CASES])
def test_relevant_entry_ranks_first(embedder: StaticEmbedder, case: dict) -> None:
    scores = cosine_scores(embedder.embed_one(case["query"]), embedder.embed(case["entries"]))
    ranking = np.argsort(-scores, kind="stable")
    assert ranking[0] == case["relevant"], f"scores={np.round(scores, 3).tolist()}"


def test_the_model_is_loaded_by_the_first_embedding_not_before(tmp_path: Path) -> None:
    """An empty backend, reads that never search (also from a snapshot) and ``status`` never
    load the model (~100 MB); the first fold of an entry or search does."""
    script = textwrap.dedent(
        """
        import sys
        from projections.api import MemoryBackend
        from projections.tools.checkpoint import status
        from projections.models.embedder import get_embedder

        def loaded():
            return get_embedder().loaded or "tokenizers" in sys.modules or "wordllama" in sys.modules

        ckpt = sys.argv[1]
        b = MemoryBackend(ckpt)
        b.get_node_memory("root"), b.health(), b.get_experiment_context(), b.list_all_nodes()
        assert get_embedder().dim == 256 and not loaded(), "an empty backend loaded the model"
        b.start_node("root", current_node="root")
        assert not loaded(), "a node_started loaded the model"
        b.add_memory("root", "roofline of the stencil", current_node="root")
        assert not loaded(), "a write folds nothing (the next read does)"
        b.get_node_memory("root")
        assert loaded(), "folding an entry must embed it"
        b.close()
        print("ok")
        """
    )
    reopen = textwrap.dedent(
        """
        import sys
        from projections.api import MemoryBackend
        from projections.tools.checkpoint import status
        from projections.models.embedder import get_embedder

        status(sys.argv[1])
        b = MemoryBackend(sys.argv[1])
        assert b.session.projector.loaded_from_snapshot
        assert [e["text"] for e in b.get_node_memory("root")["entries"]] == ["roofline of the stencil"]
        assert not get_embedder().loaded and "tokenizers" not in sys.modules, "a reopen loaded the model"
        assert b.search_memory("stencil", ["root"], 1)["results"][0]["text"] == "roofline of the stencil"
        assert get_embedder().loaded
        print("ok")
        """
    )
    for code in (script, reopen):
        done = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / "ckpt")], cwd=REPO, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0 and done.stdout.split() == ["ok"], done.stderr
