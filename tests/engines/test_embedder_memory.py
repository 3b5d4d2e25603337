"""The embedder's light model (issue 30): the weights at their stored float16 (read as tokens
need them: tests/engines/test_token_rows.py), the
tokenizer without wordllama, and the same vectors, bit for bit, as the float32 matrix gave a
text alone (in a batch the old path multiplied over the padded length, which changed the last
bits of some vectors: now a text's vector is its vector alone, in any batch)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from projections.models import embedder as module
from projections.models.embedder import get_embedder
from support.env import ROOT as REPO

CASES = json.loads((REPO / "fixtures" / "retrieval_quality.json").read_text(encoding="utf-8"))


class _Float32Path:
    """The path before, verbatim: WordLlamaInference (the weights widened to one float32 copy,
    its tokenizer settings) and the embedder's arithmetic over it, one matmul per batch (its
    batches are the embedder's ``batch_plan``, unchanged)."""

    def __init__(self) -> None:
        from safetensors import safe_open
        from tokenizers import Tokenizer

        with safe_open(str(module._resource(module._WEIGHTS)), framework="np") as tensors:
            matrix = tensors.get_tensor(module._TENSOR_KEY)
        tok = Tokenizer.from_file(str(module._resource(module._TOKENIZER)))
        tok.model._resize_cache(module._WORD_CACHE)
        self.inference = module._import_wordllama()(matrix, tok)

    def embed_with_usage(self, texts: list[str]) -> tuple[np.ndarray, int]:
        dim = self.inference.embedding.shape[1]
        if len(texts) == 1:
            if not texts[0] or texts[0].isspace():
                return np.zeros((1, dim), dtype=np.float32), 0
            encoding = self.inference.tokenize([texts[0]])[0]
            ids = np.array([encoding.ids], dtype=np.intp)
            mask = np.array([encoding.attention_mask], dtype=np.float32)
            out = np.matmul(mask[:, None, :], self.inference.embedding[ids])[:, 0, :]
            return _old_normalised(out), len(encoding.ids)
        out = np.zeros((len(texts), dim), dtype=np.float32)
        tokens = 0
        for rows in get_embedder().batch_plan(texts):
            encodings = self.inference.tokenize([texts[k] for k in rows])
            ids = np.array([e.ids for e in encodings], dtype=np.intp)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
            tokens += int(mask.sum())
            out[rows] = np.matmul(mask[:, None, :], self.inference.embedding[ids])[:, 0, :]
        return _old_normalised(out), tokens


def _old_normalised(out: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


@pytest.fixture(scope="module")
def before() -> _Float32Path:
    return _Float32Path()


def _random_texts(rng: random.Random, n: int) -> list[str]:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 _-=.,:/()[]{}αβγ∑√→日本語 \t\n"
    texts = []
    for _ in range(n):
        length = rng.choice([0, 1, 3, 10, 40, 200, 1500])
        texts.append("".join(rng.choice(alphabet) for _ in range(length)))
    return texts


def _all_texts() -> list[str]:
    texts = [c["query"] for c in CASES] + [e for c in CASES for e in c["entries"]]
    return texts + _random_texts(random.Random(30), 300) + ["x " * 20_000, "   ", ""]


def test_vectors_and_token_counts_are_bit_identical_to_the_float32_path_alone(before: _Float32Path) -> None:
    now = get_embedder()
    texts = _all_texts()
    new_batch, new_tokens = now.embed_with_usage(texts)
    old_alone = []
    for text in texts:  # the single-text (query) path
        new_one, new_n = now.embed_with_usage([text])
        old_one, old_n = before.embed_with_usage([text])
        assert new_n == old_n
        np.testing.assert_array_equal(new_one, old_one)
        old_alone.append(old_one[0])
    np.testing.assert_array_equal(new_batch, np.array(old_alone))  # a batch's rows: each text alone
    old_batch, old_tokens = before.embed_with_usage(texts)
    assert new_tokens == old_tokens > 0
    # The old batches padded their texts: the same sums in another order, so within float32 rounding.
    diff = float(np.max(np.abs(new_batch - old_batch)))
    assert diff <= 1e-7, f"largest difference from the old batch path: {diff:.3g}"
    assert 0 < np.mean(new_batch != old_batch) < 0.01  # a few last bits differ (0.26% of the values here)


def test_concurrent_embeds_give_the_sequential_vectors() -> None:
    embedder = get_embedder()
    texts = _random_texts(random.Random(3), 400)
    expected = embedder.embed(texts)
    got: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: got.append(embedder.embed(texts))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4
    for vectors in got:
        np.testing.assert_array_equal(vectors, expected)


def test_embedding_neither_imports_wordllama_nor_holds_a_float32_copy() -> None:
    """In a fresh process: the first embedding adds less anonymous memory than the float32
    matrix alone took before, and never imports wordllama (requests, its logging set-up)."""
    script = textwrap.dedent(
        """
        import json, sys
        from projections.models import embedder as module

        def anon_bytes():
            with open("/proc/self/status") as f:
                return next(int(l.split()[1]) for l in f if l.startswith("RssAnon")) * 1024

        header, _ = module._header(module._resource(module._WEIGHTS))
        rows, cols = header[module._TENSOR_KEY]["shape"]
        e = module.get_embedder()
        before = anon_bytes()
        e.embed(["roofline of the stencil kernel", "loss diverged after warmup"] * 50)
        print(json.dumps({"grew": anon_bytes() - before, "float32": rows * cols * 4,
                          "wordllama": "wordllama" in sys.modules, "safetensors": "safetensors" in sys.modules}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert not found["wordllama"] and not found["safetensors"]
    assert found["grew"] < found["float32"], found
