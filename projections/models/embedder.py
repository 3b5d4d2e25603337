"""The default semantic engine: the static WordLlama model that ships inside the wheel.

A static embedder (token vectors averaged) is what lets ARI rank memories by meaning
on a laptop or an air-gapped HPC login node: no GPU, no download, ~20k short texts/s on two cores.
The model is built straight from the wheel's own files because
``WordLlama.load()`` looks for the tokenizer in a folder the wheel does not have
and then falls back to Hugging Face.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
from collections.abc import Iterator, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ledger.errors import InvalidInput, LedgerError

if TYPE_CHECKING:
    from wordllama.inference import WordLlamaInference

MODEL_NAME = "wordllama/l2_supercat_256"
_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
_TENSOR_KEY = "embedding.weight"

# Texts are embedded in batches padded to their longest member; sorting by length
# keeps the padding small, and the character budget keeps one huge text from
# turning a batch into gigabytes of padded token vectors.
_MAX_BATCH = 64
_WORD_CACHE = 1000
_BATCH_CHAR_BUDGET = _MAX_BATCH * 2048


def _import_wordllama() -> type[WordLlamaInference]:
    """Import wordllama without letting it configure the host's root logger.

    ``wordllama/__init__`` calls ``logging.basicConfig(level=INFO)``, which would
    make every library's INFO records appear on stderr of whatever process
    imports the ledger.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from wordllama.inference import WordLlamaInference
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    return WordLlamaInference


def _resource(parts: tuple[str, str]) -> Path:
    """A file of the installed wordllama wheel, found without importing wordllama (its
    ``__init__`` configures logging, see ``_import_wordllama``)."""
    spec = find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise LedgerError("wordllama is not installed; install wordllama==0.4.0.post1")
    resource = Path(next(iter(spec.submodule_search_locations))).joinpath(*parts)
    if not resource.is_file():
        raise LedgerError(f"wordllama wheel is missing {resource}; reinstall wordllama==0.4.0.post1")
    return resource


def _model_dim() -> int:
    """The model's dimension, from the weights file's header (the weights are not read)."""
    with open(_resource(_WEIGHTS), "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        return int(json.loads(f.read(size))[_TENSOR_KEY]["shape"][1])


def _load_inference() -> WordLlamaInference:
    """Build the inference object from the files inside the installed wheel."""
    # Rayon's thread pool in `tokenizers` costs more than it gains on small batches and
    # keeps ~100 MB of per-thread heap after the first large fold; run it on the caller's thread.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    weights, tokenizer = _resource(_WEIGHTS), _resource(_TOKENIZER)
    inference_cls = _import_wordllama()
    from safetensors import safe_open
    from tokenizers import Tokenizer

    with safe_open(str(weights), framework="np") as tensors:
        matrix = tensors.get_tensor(_TENSOR_KEY)
    tok = Tokenizer.from_file(str(tokenizer))
    # The BPE word cache fills with every distinct word (numbers, ids: research notes are full
    # of them) and held ~85 MB after 100k entries; 1,000 words keep the speed at ~13 MB.
    resize = getattr(tok.model, "_resize_cache", None)
    if resize is not None:
        resize(_WORD_CACHE)
    return inference_cls(matrix, tok)


def _batches(lengths: np.ndarray) -> Iterator[list[int]]:
    """Indices of the non-blank texts, shortest first, in batches of similar length."""
    order = np.argsort(lengths, kind="stable")
    order = order[np.searchsorted(lengths[order], 1) :].tolist()  # blank texts are skipped
    start = 0
    while start < len(order):
        end = min(start + _MAX_BATCH, len(order))
        longest = int(lengths[order[end - 1]])
        end = start + max(1, min(end - start, _BATCH_CHAR_BUDGET // longest))
        yield order[start:end]
        start = end


class StaticEmbedder:
    """L2-normalised sentence vectors from the wheel's static WordLlama model.

    The model (~100 MB with its tokenizer) is loaded by the first embedding, not by the
    constructor: a backend that only reads entries, the Letta engine's setup and ``status``
    never pay for it. ``name`` and ``dim`` are known without it.
    """

    name: str = MODEL_NAME

    def __init__(self) -> None:
        self.dim: int = _model_dim()
        self._loaded: WordLlamaInference | None = None
        self._load_lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._loaded is not None

    def load(self) -> None:
        """Load the model now (a process that exists to embed, such as the HTTP endpoint,
        wants it loaded before it says it is ready)."""
        self._inference  # noqa: B018 - the property loads it

    @property
    def _inference(self) -> WordLlamaInference:
        if self._loaded is None:
            with self._load_lock:
                if self._loaded is None:
                    self._loaded = _load_inference()
        return self._loaded

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` as float32 rows of unit length; blank texts give zero rows."""
        return self.embed_with_usage(texts)[0]

    def embed_with_usage(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """``embed`` plus the number of model tokens read (the HTTP endpoint's usage).

        Same arithmetic as WordLlama's embed (mean of token vectors, then L2 norm),
        done here so the token count comes from the one tokenisation pass.
        """
        if isinstance(texts, str):
            raise InvalidInput("texts", "expected a sequence of str, got a single str (use embed_one)")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InvalidInput(f"texts[{i}]", f"expected str, got {type(text).__name__}")
        if len(texts) == 1:
            return self._embed_single(texts[0])
        lengths = np.fromiter((0 if t.isspace() else len(t) for t in texts), np.int64, len(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        tokens = 0
        for rows in _batches(lengths):
            encodings = self._inference.tokenize([texts[k] for k in rows])
            ids = np.array([e.ids for e in encodings], dtype=np.intp)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
            tokens += int(mask.sum())
            # Sum of the real (unpadded) token vectors; the mean's divisor cancels in the norm.
            out[rows] = np.matmul(mask[:, None, :], self._inference.embedding[ids])[:, 0, :]
        return _normalised(out), tokens

    def _embed_single(self, text: str) -> tuple[np.ndarray, int]:
        """One text (a query) with the batch path's arithmetic, without its machinery."""
        if not text or text.isspace():
            return np.zeros((1, self.dim), dtype=np.float32), 0
        encoding = self._inference.tokenize([text])[0]
        ids = np.array([encoding.ids], dtype=np.intp)
        mask = np.array([encoding.attention_mask], dtype=np.float32)
        out = np.matmul(mask[:, None, :], self._inference.embedding[ids])[:, 0, :]
        return _normalised(out), len(encoding.ids)

    def embed_one(self, text: str) -> np.ndarray:
        """Embed a single text; shape ``(dim,)``."""
        if not isinstance(text, str):
            raise InvalidInput("text", f"expected str, got {type(text).__name__}")
        return self.embed([text])[0]

    def raw_embed(self, texts: list[str]) -> np.ndarray:
        """WordLlama's own embed call with its defaults: the baseline for benchmarks."""
        return self._inference.embed(texts)


def _normalised(out: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in place (zero rows stay zero)."""
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


_instance: StaticEmbedder | None = None
_instance_lock = threading.Lock()


def get_embedder() -> StaticEmbedder:
    """The process-wide embedder; the model (~32 MB in float32) is loaded once, when the
    first text is embedded."""
    global _instance
    if _instance is None:
        with _instance_lock:
            if _instance is None:
                _instance = StaticEmbedder()
    return _instance


def cosine_scores(query: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Cosine similarity of one normalised query against normalised rows, mapped to [0, 1].

    Mapping ``(cos + 1) / 2`` lets callers mix the score with other [0, 1] signals
    (recency, importance) without handling negatives.
    """
    query = np.asarray(query, dtype=np.float32)
    matrix = np.asarray(matrix, dtype=np.float32)
    if query.ndim != 1:
        raise InvalidInput("query", f"expected a 1-d vector, got shape {query.shape}")
    if matrix.ndim != 2 or matrix.shape[1] != query.shape[0]:
        raise InvalidInput("matrix", f"expected shape (n, {query.shape[0]}), got {matrix.shape}")
    scores = matrix @ query
    scores += 1.0
    scores *= 0.5
    return np.clip(scores, 0.0, 1.0, out=scores)
