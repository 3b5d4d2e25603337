"""WordLlama's tokenizer in Python: what the embedder tokenises with until a process has met
many new words.

The Rust ``tokenizers`` library costs a process ~25 MB (its import, its code and a heap for a
32,000-token vocabulary), nearly half of ARI's whole memory client. This reads the same
``tokenizer.json`` (Llama's BPE with byte fallback and no pre-tokenizer) into ~5 MB (8 MB
while it loads) and gives the same ids for every text (``tests/engines/test_tokenizer.py``
holds it to the Rust library on generated and real texts). It refuses any other
configuration, so a changed file can never be tokenised by a rule it does not follow.

Why it is fast enough: no token has ``▁`` after another character, so no merge crosses the
start of a ``▁``-run and each piece "▁*[^▁]*" of the normalised text is tokenised alone; pieces
repeat (words), so their ids are cached. A new piece costs tens of µs (Rust's few), which is
why a process that keeps meeting new ones moves to the Rust library (``embedder._Model``).
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator
from pathlib import Path

import msgspec

from ledger.errors import LedgerError

__all__ = ["BpeTokenizer"]

SPACE = "\u2581"  # SentencePiece's word mark
_PIECE = re.compile(f"{SPACE}*[^{SPACE}]*")
_ID_BITS = 15  # ids below 32,768: a pair packs into one int, a merge's rank and result into another
_NO_MERGE = 1 << 62  # above every packed (rank, id)
_CACHE_PIECES = 20_000  # pieces whose ids are kept (~3 MB); the cache starts again when full


class _Added(msgspec.Struct):
    id: int
    content: str
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = True


class _Model(msgspec.Struct):
    type: str
    vocab: dict[str, int]
    merges: msgspec.Raw  # read one merge at a time (see _merges): a list of 61,249 strings costs ~4 MB at its peak
    dropout: float | None = None
    continuing_subword_prefix: str | None = None
    end_of_word_suffix: str | None = None
    byte_fallback: bool = False
    ignore_merges: bool = False


class _File(msgspec.Struct):
    model: _Model
    added_tokens: list[_Added]
    normalizer: dict[str, object] | None = None
    pre_tokenizer: dict[str, object] | None = None


# The normalizer this rule implements: "▁" before the text, every " " as "▁".
_NORMALIZER = {
    "type": "Sequence",
    "normalizers": [
        {"type": "Prepend", "prepend": SPACE},
        {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
    ],
}


class BpeTokenizer:
    """The ids ``tokenizers.Tokenizer.from_file(path).encode(text, add_special_tokens=False)``
    gives, for the Llama-style BPE files it accepts (``LedgerError`` for any other)."""

    def __init__(self, path: Path) -> None:
        spec = _read(path)
        vocab = spec.model.vocab
        self._chars = {token: i for token, i in vocab.items() if len(token) == 1}
        self._bytes = [vocab[f"<0x{b:02X}>"] for b in range(256)]
        self._merges = _merges(spec.model, vocab)
        self._added = {a.content: a.id for a in spec.added_tokens}
        # Leftmost, then longest, as the Rust library matches added tokens in the raw text.
        longest_first = sorted(self._added, key=len, reverse=True)
        self._added_re = re.compile("|".join(map(re.escape, longest_first))) if longest_first else None
        self._cache: dict[str, tuple[int, ...]] = {}
        self.merged = 0  # pieces merged (not found in the cache) so far: what this reader has cost

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` (no special tokens added, none cut)."""
        ids: list[int] = []
        if self._added_re is None:
            self._encode_part(text, ids)
            return ids
        start = 0
        for match in self._added_re.finditer(text):
            self._encode_part(text[start : match.start()], ids)
            ids.append(self._added[match.group()])
            start = match.end()
        self._encode_part(text[start:], ids)
        return ids

    def _encode_part(self, text: str, ids: list[int]) -> None:
        """A stretch between added tokens: normalised on its own, then piece by piece."""
        if not text:
            return
        cache = self._cache
        for piece in _PIECE.findall(SPACE + text.replace(" ", SPACE)):
            if not piece:
                continue
            known = cache.get(piece)
            if known is None:
                known = self._merge_piece(piece)
                self.merged += 1
                if len(cache) >= _CACHE_PIECES:
                    cache.clear()
                cache[piece] = known
            ids.extend(known)

    def _merge_piece(self, piece: str) -> tuple[int, ...]:
        """BPE: the piece's characters (or their UTF-8 bytes when not in the vocabulary), then
        the lowest-ranked adjacent pair merged, leftmost first, until no pair merges."""
        symbols: list[int] = []
        for char in piece:
            known = self._chars.get(char)
            if known is None:
                symbols.extend(self._bytes[b] for b in char.encode("utf-8"))
            else:
                symbols.append(known)
        rank = self._merges.rank
        ranks = [rank((a << _ID_BITS) | b) for a, b in zip(symbols, symbols[1:])]
        while ranks:
            best = min(ranks)  # a rank names one pair, so equal values are the same merge
            if best == _NO_MERGE:
                break
            at = ranks.index(best)
            symbols[at] = best & ((1 << _ID_BITS) - 1)
            del symbols[at + 1], ranks[at]
            if at < len(ranks):
                ranks[at] = rank((symbols[at] << _ID_BITS) | symbols[at + 1])
            if at:
                ranks[at - 1] = rank((symbols[at - 1] << _ID_BITS) | symbols[at])
        return tuple(symbols)


def _read(path: Path) -> _File:
    """The file, refused unless it is the configuration this rule implements."""
    try:
        spec = msgspec.json.decode(path.read_bytes(), type=_File)
    except (OSError, msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise LedgerError(f"{path}: not a tokenizer file this reader knows ({exc})") from exc
    model = spec.model
    differences = {
        "model.type": (model.type, "BPE"),
        "model.byte_fallback": (model.byte_fallback, True),
        "model.dropout": (model.dropout, None),
        "model.continuing_subword_prefix": (model.continuing_subword_prefix, None),
        "model.end_of_word_suffix": (model.end_of_word_suffix, None),
        "model.ignore_merges": (model.ignore_merges, False),
        "normalizer": (spec.normalizer, _NORMALIZER),
        "pre_tokenizer": (spec.pre_tokenizer, None),
    }
    for field, (found, wanted) in differences.items():
        if found != wanted:
            raise LedgerError(f"{path}: {field} is {found!r}; this tokenizer implements only {wanted!r}")
    _check_vocabulary(path, model.vocab, spec.added_tokens)
    return spec


def _check_vocabulary(path: Path, vocab: dict[str, int], added: list[_Added]) -> None:
    """The premises of piece-by-piece merging and of the packed ids."""
    if max(vocab.values(), default=0) >= 1 << _ID_BITS:
        raise LedgerError(f"{path}: {len(vocab)} tokens; this tokenizer packs ids below {1 << _ID_BITS}")
    crossing = next((t for t in vocab if SPACE in t.lstrip(SPACE)), None)
    if crossing is not None:
        raise LedgerError(f"{path}: token {crossing!r} has {SPACE!r} after another character")
    missing = [b for b in range(256) if f"<0x{b:02X}>" not in vocab]
    if missing:
        raise LedgerError(f"{path}: byte fallback without the token <0x{missing[0]:02X}>")
    for token in added:
        if token.normalized or token.single_word or token.lstrip or token.rstrip:
            raise LedgerError(f"{path}: added token {token.content!r} is matched with options this reader lacks")
        if vocab.get(token.content, token.id) != token.id:
            raise LedgerError(f"{path}: added token {token.content!r} has another id in the vocabulary")


_STRING = re.compile(rb'"((?:[^"\\]|\\.)*)"')


class _MergeTable:
    """``packed pair -> packed (rank, result)`` in two flat arrays (open addressing, linear
    probing): 1 MB where a dict of the same ints holds 6.4 MB, for ~0.2 µs more a lookup."""

    def __init__(self, pairs: array[int], results: array[int]) -> None:
        slots = 1 << max(4, (2 * len(pairs)).bit_length())  # at most half full
        self._mask = slots - 1
        fits = max(results, default=0) < 1 << 31  # 32-bit slots while ranks stay below 65,536
        self._pairs = array("i" if fits else "q", [-1]) * slots
        self._results = array("i" if fits else "q", [0]) * slots
        for pair, result in zip(pairs, results):  # a pair listed again overwrites: its last rank
            slot = self._slot(pair)
            self._pairs[slot], self._results[slot] = pair, result

    def _slot(self, pair: int) -> int:
        """Where ``pair`` is, or the empty slot where it would go."""
        slot = (pair * _SPREAD >> 16) & self._mask
        while (found := self._pairs[slot]) != pair and found != -1:
            slot = (slot + 1) & self._mask
        return slot

    def rank(self, pair: int) -> int:
        """The packed (rank, result) of merging ``pair``, or _NO_MERGE."""
        slot = (pair * _SPREAD >> 16) & self._mask
        pairs = self._pairs
        while (found := pairs[slot]) != pair:
            if found == -1:
                return _NO_MERGE
            slot = (slot + 1) & self._mask
        return self._results[slot]


_SPREAD = 0x9E3779B1  # Fibonacci hashing: spreads packed pairs, which cluster by their left id


def _merges(model: _Model, vocab: dict[str, int]) -> _MergeTable:
    """Each merge as ``packed pair -> packed (rank, result)``; a pair listed twice keeps its
    last rank, as the Rust library's map does. Merges are written "a b" or ["a", "b"]."""
    pairs, results = array("q"), array("q")
    for rank, (left, right) in enumerate(_merge_pairs(bytes(model.merges))):
        try:
            pairs.append((vocab[left] << _ID_BITS) | vocab[right])
            results.append((rank << _ID_BITS) | vocab[left + right])
        except KeyError as exc:
            raise LedgerError(f"merge {rank} ({left!r} {right!r}) names a token not in the vocabulary") from exc
    return _MergeTable(pairs, results)


def _merge_pairs(raw: bytes) -> Iterator[tuple[str, str]]:
    """The merges of the JSON array ``raw``, one at a time."""
    if raw.lstrip(b"[ \t\r\n").startswith(b"["):  # [["a", "b"], ...]: the newer form
        for left, right in msgspec.json.decode(raw, type=list[tuple[str, str]]):
            yield left, right
        return
    for match in _STRING.finditer(raw):
        body = match.group(1)
        merge = msgspec.json.decode(match.group(0), type=str) if b"\\" in body else body.decode("utf-8")
        left, space, right = merge.partition(" ")
        if not space:
            raise LedgerError(f"merge {merge!r} is not two tokens separated by a space")
        yield left, right
