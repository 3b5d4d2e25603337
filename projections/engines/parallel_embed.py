"""One large embedding call spread over several threads, with the vectors one thread gives.

A cold fold spends most of its time embedding, and :class:`~projections.models.embedder.StaticEmbedder`
runs on one core. Its heavy parts (the tokenizer's ``encode_batch``, the gather of token
vectors and the matmul) release the GIL, so threads can share the work.

A row's vector does not depend on the texts embedded with it, so any split gives the same
bits; :class:`ParallelEmbedder` still cuts a call only between the batches the embedder itself
would make of it (``StaticEmbedder.batch_plan``), and gives each thread its batches' texts in
that order: each thread's call makes exactly those batches again, no smaller ones.

Threads live for one call (started and joined inside it): there is no pool to leak at close or
to be inherited, dead, by a forked child. A call too small to share runs on the caller's thread.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import numpy as np

from projections.models.embedder import StaticEmbedder
from projections.models.semantic import Embedder

__all__ = ["MIN_SHARED_TEXTS", "ParallelEmbedder", "usable_cores"]

MIN_SHARED_TEXTS = 256  # fewer texts than this are embedded on the caller's thread: a thread costs more


def usable_cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class ParallelEmbedder:
    """An :class:`~projections.models.semantic.Embedder` that embeds a large call on ``workers``
    threads (the caller's among them), each row bit-identical to ``inner.embed``'s.

    Only a :class:`StaticEmbedder`'s batching is known here; any other embedder is called as is.
    """

    def __init__(self, inner: Embedder, workers: int | None = None, min_texts: int = MIN_SHARED_TEXTS) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.dim: int = inner.dim
        self.workers = max(1, workers if workers is not None else min(2, usable_cores()))
        self.min_texts = min_texts

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``inner.embed(texts)``, computed on up to ``workers`` threads."""
        parts = self.split(texts)
        if len(parts) < 2:
            return self.inner.embed(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)  # blank texts stay zero rows, as inner's
        results: list[np.ndarray | None] = [None] * len(parts)
        errors: list[BaseException] = []

        def run(k: int) -> None:
            try:
                results[k] = self.inner.embed([texts[i] for i in parts[k]])
            except BaseException as exc:  # re-raised on the caller's thread
                errors.append(exc)

        threads = [
            threading.Thread(target=run, args=(k,), name=f"embed-{k}", daemon=True) for k in range(1, len(parts))
        ]
        for thread in threads:
            thread.start()
        try:
            run(0)
        finally:
            _join(threads)
        if errors:
            raise errors[0]
        for rows, vectors in zip(parts, results):
            out[rows] = vectors
        return out

    def split(self, texts: Sequence[str]) -> list[list[int]]:
        """The texts' indices, cut into at most ``workers`` parts of about equal work, each a
        run of whole batches in the order the embedder embeds them (blank texts in none); one
        part or none when the call is not worth sharing."""
        if self.workers < 2 or len(texts) < self.min_texts or not isinstance(self.inner, StaticEmbedder):
            return []
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            return []  # the inner embedder says what is wrong with them
        batches = self.inner.batch_plan(texts)
        # A batch costs about its padded size: its texts times its longest (the last, sorted).
        costs = np.cumsum([len(b) * len(texts[b[-1]]) for b in batches])
        if not len(costs):
            return []
        cuts = np.searchsorted(costs, costs[-1] * np.arange(1, self.workers) / self.workers)
        bounds = [0, *sorted({int(c) + 1 for c in cuts if int(c) + 1 < len(batches)}), len(batches)]
        return [[i for b in batches[lo:hi] for i in b] for lo, hi in zip(bounds, bounds[1:])]


def _join(threads: list[threading.Thread]) -> None:
    """Join every thread, a Ctrl-C meanwhile notwithstanding (each ends within its batches):
    the caller then raises it with no thread of its call still running."""
    interrupted: KeyboardInterrupt | None = None
    for thread in threads:
        while thread.is_alive():
            try:
                thread.join()
            except KeyboardInterrupt as exc:
                interrupted = exc
    if interrupted is not None:
        raise interrupted
