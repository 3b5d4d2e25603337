"""The default semantic engine: the static WordLlama model that ships inside the wheel.

A static embedder (token vectors averaged) is what lets ARI rank memories by meaning
on a laptop or an air-gapped HPC login node: no GPU, no download, ~20k short texts/s on two cores.
The model is built straight from the wheel's own files, without importing wordllama:
``WordLlama.load()`` looks for the tokenizer in a folder the wheel does not have and then
falls back to Hugging Face, and its import brings requests and a root-logger setup. The
weights stay at their stored precision (float16), read from the wheel's file a page at a time
as tokens need them (``token_rows``), and only the rows a batch reads are widened to float32,
the values a float32 copy of the matrix would hold.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ledger.errors import InvalidInput, LedgerError, kind_of
from projections.models.token_rows import TokenRows
from projections.models.tokenizer import BpeTokenizer

if TYPE_CHECKING:
    from tokenizers import Tokenizer
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
_GATHER_TOKENS = 1024  # token vectors widened to float32 at once (1 MB at dim 256)
# New pieces the Python tokenizer merges before the Rust library takes over (see _Model):
# ~2 s of merging, ~100,000 words of notes.
_PYTHON_PIECES = 50_000


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


# safetensors dtypes the weights may be stored in, as numpy dtypes (safetensors is little-endian).
_DTYPES: dict[str, np.dtype[Any]] = {"F16": np.dtype("<f2"), "F32": np.dtype("<f4")}


def _header(path: Path) -> tuple[dict[str, Any], int]:
    """The safetensors header of ``path`` (8-byte little-endian length, then JSON) and where its data starts."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(size)), 8 + size


def _model_dim() -> int:
    """The model's dimension, from the weights file's header (the weights are not read)."""
    return int(_header(_resource(_WEIGHTS))[0][_TENSOR_KEY]["shape"][1])


def _token_rows(path: Path) -> TokenRows:
    """The embedding matrix of the weights file ``path``, at its stored precision, read as tokens need it."""
    header, start = _header(path)
    tensor = header[_TENSOR_KEY]
    dtype = _DTYPES.get(tensor["dtype"])
    if dtype is None:
        raise LedgerError(f"{path}: {_TENSOR_KEY} is stored as {tensor['dtype']}, not one of {sorted(_DTYPES)}")
    rows, cols = (int(n) for n in tensor["shape"])
    begin, end = (int(n) for n in tensor["data_offsets"])
    if end - begin != rows * cols * dtype.itemsize:
        raise LedgerError(f"{path}: {_TENSOR_KEY} holds {end - begin} bytes, not {rows} x {cols} {dtype}")
    return TokenRows(path, start + begin, rows, cols, dtype)


def _load_tokenizer(path: Path) -> Tokenizer:
    """The wheel's tokenizer, set up as ``WordLlamaInference`` sets it up (pad to the longest, never truncate)."""
    # Rayon's thread pool in `tokenizers` costs more than it gains on small batches and
    # keeps ~100 MB of per-thread heap after the first large fold; run it on the caller's thread.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    # The BPE word cache fills with every distinct word (numbers, ids: research notes are full
    # of them) and held ~85 MB after 100k entries; 1,000 words keep the speed at ~13 MB.
    resize = getattr(tok.model, "_resize_cache", None)
    if resize is not None:
        resize(_WORD_CACHE)
    tok.enable_padding()
    tok.no_truncation()
    return tok


class _Model:
    """The token vectors (``TokenRows``, safe to share between threads) and two tokenizers of one
    rule: the Python one (``tokenizer.BpeTokenizer``, ~5 MB) first, and the Rust library
    (~25 MB) once the Python one has merged _PYTHON_PIECES new pieces in this process. Most
    pieces of research notes repeat, and the Python reader serves a repeated piece from its
    cache faster than Rust tokenises it; a new piece costs it tens of µs, Rust a few, so a
    process that keeps meeting new ones (a cold fold of a large log) is better served by
    Rust, which also releases the GIL for the fold's second thread. Both give the same ids
    (``tests/engines/test_tokenizer.py``)."""

    def __init__(self, weights: TokenRows) -> None:
        self.weights = weights
        self._small: BpeTokenizer | None = None
        self._bulk: Tokenizer | None = None
        self._lock = threading.Lock()

    def token_ids(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """WordLlama's tokenisation (no special tokens) as ids padded with 0 to the longest
        text, and the mask of the real tokens."""
        if self._bulk is None and self.small.merged < _PYTHON_PIECES:
            rows = [self.small.encode(text) for text in texts]
            ids = np.zeros((len(rows), max(map(len, rows), default=0)), dtype=np.intp)
            mask = np.zeros(ids.shape, dtype=np.float32)
            for k, row in enumerate(rows):
                ids[k, : len(row)] = row
                mask[k, : len(row)] = 1.0
            return ids, mask
        encodings = self.bulk.encode_batch(texts, is_pretokenized=False, add_special_tokens=False)
        ids = np.array([e.ids for e in encodings], dtype=np.intp)
        return ids, np.array([e.attention_mask for e in encodings], dtype=np.float32)

    @property
    def small(self) -> BpeTokenizer:
        if self._small is None:
            with self._lock:
                if self._small is None:
                    self._small = BpeTokenizer(_resource(_TOKENIZER))
        return self._small

    @property
    def bulk(self) -> Tokenizer:
        if self._bulk is None:
            with self._lock:
                if self._bulk is None:
                    self._bulk = _load_tokenizer(_resource(_TOKENIZER))
        return self._bulk

    def widened(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The distinct tokens of ``ids`` as float32 rows, and ``ids`` as indices into them.

        Only those rows are read and widened (float16 → float32 is exact: the values a float32
        copy of the matrix holds); a batch repeats its tokens, so this is cheaper than widening
        every token of it."""
        distinct, local = np.unique(ids, return_inverse=True)
        return self.weights.take(distinct).astype(np.float32), local.reshape(ids.shape)


def _load_model() -> _Model:
    """The weights of the installed wheel, read as tokens need them; its tokenizers load when first used."""
    return _Model(_token_rows(_resource(_WEIGHTS)))


def _load_inference() -> WordLlamaInference:
    """WordLlama's own inference object (a float32 copy of the weights), for ``raw_embed`` only."""
    inference_cls = _import_wordllama()
    from tokenizers import Tokenizer

    rows = _token_rows(_resource(_WEIGHTS))
    return inference_cls(rows.take(np.arange(rows.shape[0])), Tokenizer.from_file(str(_resource(_TOKENIZER))))


def _sums(mask: np.ndarray, table: np.ndarray, local: np.ndarray) -> np.ndarray:
    """Each text's sum of its token vectors: its mask times its tokens' vectors over its own
    length, the product ``_embed_single`` makes of the text alone.

    A product over the batch's padded length sums in another order (BLAS blocks by that
    length), so a text's vector would depend on the texts beside it. Texts of as many tokens
    share a call, a few at a time (the widened token vectors held at once stay near
    _GATHER_TOKENS rows)."""
    counts = mask.sum(axis=1).astype(np.intp)
    sums = np.empty((len(mask), table.shape[1]), dtype=np.float32)
    order = np.argsort(counts, kind="stable")
    for group in np.split(order, np.flatnonzero(np.diff(counts[order])) + 1):
        n = int(counts[group[0]])
        step = max(1, _GATHER_TOKENS // max(1, n))
        for at in range(0, len(group), step):
            part = group[at : at + step]
            sums[part] = np.matmul(mask[part, None, :n], table[local[part, :n]])[:, 0, :]
    return sums


class StaticEmbedder:
    """L2-normalised sentence vectors from the wheel's static WordLlama model.

    The model (the weights, read from the wheel's file at their stored float16, and a
    tokenizer: see ``_Model``) is loaded by the first embedding, not by the constructor: a
    backend that only reads entries, the Letta engine's setup and ``status`` never pay for
    it. ``name`` and ``dim`` are known without it. ``embed`` may be called from several threads.
    """

    name: str = MODEL_NAME

    def __init__(self) -> None:
        self.dim: int = _model_dim()
        self._loaded: _Model | None = None
        self._load_lock = threading.Lock()
        self._raw: WordLlamaInference | None = None

    @property
    def loaded(self) -> bool:
        return self._loaded is not None

    def load(self) -> None:
        """Load the model now (a process that exists to embed, such as the HTTP endpoint,
        wants it loaded before it says it is ready)."""
        self._model  # noqa: B018 - the property loads it

    @property
    def _model(self) -> _Model:
        if self._loaded is None:
            with self._load_lock:
                if self._loaded is None:
                    self._loaded = _load_model()
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
                raise InvalidInput(f"texts[{i}]", f"must be a string, got {kind_of(text)}")
        if len(texts) == 1:
            return self._embed_single(texts[0])
        model = self._model
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        tokens = 0
        for rows in self.batch_plan(texts):
            ids, mask = model.token_ids([texts[k] for k in rows])
            tokens += int(mask.sum())
            # Sums of the real (unpadded) token vectors; the mean's divisor cancels in the norm.
            out[rows] = _sums(mask, *model.widened(ids))
        return _normalised(out), tokens

    def batch_plan(self, texts: Sequence[str]) -> list[list[int]]:
        """The indices of the non-blank texts, in the batches ``embed`` makes of them and in
        the order it embeds them: shortest first, at most _MAX_BATCH texts and about
        _BATCH_CHAR_BUDGET characters of padded text a batch. Blank texts (empty or white
        space) are in none: their rows stay zero."""
        lengths = np.fromiter((0 if t.isspace() else len(t) for t in texts), np.int64, len(texts))
        order = np.argsort(lengths, kind="stable")
        order = order[np.searchsorted(lengths[order], 1) :].tolist()
        plan, start = [], 0
        while start < len(order):
            end = min(start + _MAX_BATCH, len(order))
            longest = int(lengths[order[end - 1]])
            end = start + max(1, min(end - start, _BATCH_CHAR_BUDGET // longest))
            plan.append(order[start:end])
            start = end
        return plan

    def _embed_single(self, text: str) -> tuple[np.ndarray, int]:
        """One text (a query) with the batch path's arithmetic, without its machinery."""
        if not text or text.isspace():
            return np.zeros((1, self.dim), dtype=np.float32), 0
        model = self._model
        ids, mask = model.token_ids([text])
        # A query's few tokens are widened where they stand (np.unique costs more than it saves).
        out = np.matmul(mask[:, None, :], model.weights.take(ids).astype(np.float32))[:, 0, :]
        return _normalised(out), ids.shape[1]

    def embed_one(self, text: str) -> np.ndarray:
        """Embed a single text; shape ``(dim,)``."""
        if not isinstance(text, str):
            raise InvalidInput("text", f"must be a string, got {kind_of(text)}")
        return self.embed([text])[0]

    def raw_embed(self, texts: list[str]) -> np.ndarray:
        """WordLlama's own embed call with its defaults: the baseline for benchmarks (it
        imports wordllama and holds its own float32 copy of the weights, ~32 MB)."""
        if self._raw is None:
            with self._load_lock:
                if self._raw is None:
                    self._raw = _load_inference()
        return self._raw.embed(texts)


def _normalised(out: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in place (zero rows stay zero)."""
    # np.linalg.norm's own arithmetic for real rows, without its dispatch (a query's cost).
    norms = np.sqrt(np.add.reduce(out * out, axis=1, keepdims=True))
    np.divide(out, norms, out=out, where=norms > 0)
    return out


_instance: StaticEmbedder | None = None
_instance_lock = threading.Lock()


def get_embedder() -> StaticEmbedder:
    """The process-wide embedder; the model is loaded once, when the first text is embedded."""
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
