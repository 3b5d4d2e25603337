"""A text's vector does not depend on the texts embedded with it: together, alone, in other
groupings or on several threads, the same bits. Replay == incremental fold rests on it (a replay
embeds a chunk's texts together, the live fold each event's texts alone)."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from projections.engines.parallel_embed import ParallelEmbedder
from projections.models.embedder import get_embedder
from support.trees import WORDS

_blank = st.sampled_from(["", " ", "\n", "\t \u3000"])
_unicode = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=80)
_words = st.lists(st.sampled_from([*WORDS, "日本語", "αβγ", "naïve", "0x7ffd", "😀"]), min_size=1, max_size=60).map(
    " ".join
)
_long = st.builds(lambda word, n: f"{word} " * n, st.sampled_from([*WORDS, "日本語"]), st.integers(300, 3000))
_texts = st.lists(st.one_of(_words, _words, _unicode, _blank, _long), min_size=2, max_size=40)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b) and a.tobytes() == b.tobytes()


def _differing_rows(a: np.ndarray, b: np.ndarray) -> list[int]:
    return [i for i in range(len(a)) if a[i].tobytes() != b[i].tobytes()]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(texts=_texts, seed=st.integers(0, 2**32 - 1))
def test_a_texts_vector_is_the_same_in_any_batch(texts: list[str], seed: int) -> None:
    embedder = get_embedder()
    together = embedder.embed(texts)
    alone = np.vstack([embedder.embed([t]) for t in texts])
    assert _same(together, alone), f"rows {_differing_rows(together, alone)} differ alone"
    rng = random.Random(seed)
    order = list(range(len(texts)))
    rng.shuffle(order)
    cuts = sorted(rng.sample(range(1, len(texts)), rng.randint(0, len(texts) - 1)))
    regrouped = np.zeros_like(together)
    for lo, hi in zip([0, *cuts], [*cuts, len(texts)]):
        part = order[lo:hi]
        regrouped[part] = embedder.embed([texts[i] for i in part])
    assert _same(together, regrouped), f"rows {_differing_rows(together, regrouped)} differ regrouped"
    padded = embedder.embed([*texts, "stencil " * 3000])[: len(texts)]  # every text padded to a long one's length
    assert _same(together, padded), f"rows {_differing_rows(together, padded)} differ beside a long text"
    shared = ParallelEmbedder(embedder, workers=2, min_texts=2)
    assert _same(together, shared.embed(texts))


def test_a_fixed_mix_is_the_same_alone_together_and_on_two_threads() -> None:
    """Many texts of every length (the batches pad most of them), beyond what the property draws."""
    rng = random.Random(30)
    words = [*WORDS, "日本語", "αβγ", "∑√→", "x86_64"]
    texts = [" ".join(rng.choices(words, k=rng.choice([1, 2, 5, 12, 40, 150, 600]))) for _ in range(600)]
    texts += ["", " ", "\n", "x", "x " * 20_000]
    rng.shuffle(texts)
    embedder = get_embedder()
    together = embedder.embed(texts)
    alone = np.vstack([embedder.embed([t]) for t in texts])
    assert _same(together, alone), f"rows {_differing_rows(together, alone)} differ alone"
    shared = ParallelEmbedder(embedder, workers=2)
    assert len(shared.split(texts)) == 2  # really shared
    assert _same(together, shared.embed(texts))
    for lo in range(0, len(texts), 37):  # the chunks of another fold
        assert _same(together[lo : lo + 37], embedder.embed(texts[lo : lo + 37]))
