"""The Python tokenizer (issue 30, item 1) gives the Rust library's ids on every text, and
refuses a tokenizer file whose rule it does not implement.

The Rust ``tokenizers`` library reading the wheel's own file is the oracle: the texts are drawn
from every kind of input a research note holds (words, numbers in every notation, code, paths,
runs of spaces and tabs, scripts other than Latin, emoji, combining marks, the ``▁`` mark itself
and the special tokens written in the text), plus this repository's docs and fixtures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.errors import LedgerError
from projections.models import tokenizer as module
from projections.models.embedder import _TOKENIZER, _load_tokenizer, _resource
from projections.models.tokenizer import BpeTokenizer
from support.env import ROOT
from support.trees import WORDS

FILE = _resource(_TOKENIZER)
PYTHON = BpeTokenizer(FILE)
RUST = _load_tokenizer(FILE)
RUST.no_padding()


def rust_ids(text: str) -> list[int]:
    return list(RUST.encode(text, add_special_tokens=False).ids)


_pieces = st.sampled_from(
    [
        *WORDS,
        " ",
        "  ",
        "\t",
        "\n",
        "\u3000",
        "\u00a0",
        "\u2581",
        "\u2581\u2581",
        "<s>",
        "</s>",
        "<unk>",
        "<s",
        "s>",
        "0.93",
        "1e-3",
        "-4.5e+06",
        "±0.02",
        "3,141",
        "12.5%",
        "x86_64",
        "/tmp/run-01/node_report.json",
        "sha256:9f86d08",
        "CIFAR-10",
        "f(x)=x**2",
        "日本語",
        "αβγ",
        "naïve",
        "e\u0301",
        "😀",
        "🧪🔬",
        "\U0010fffd",
        "\x00",
        "\x7f",
    ]
)
_mixed = st.lists(_pieces, min_size=0, max_size=40).map("".join)
_any = st.text(st.characters(exclude_categories=["Cs"]), max_size=120)


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(_mixed, _any))
def test_the_same_ids_as_the_rust_library(text: str) -> None:
    assert PYTHON.encode(text) == rust_ids(text)


def test_the_same_ids_on_the_repositorys_docs_and_fixtures() -> None:
    files = [*ROOT.glob("docs/**/*.md"), *ROOT.glob("fixtures/**/*.json"), *ROOT.glob("ledger/*.py")]
    texts = [
        chunk
        for path in files
        for whole in [path.read_text(encoding="utf-8")]
        for chunk in (whole[i : i + 700] for i in range(0, len(whole), 700))
    ]
    assert len(texts) > 1000
    differing = [t[:60] for t in texts if PYTHON.encode(t) != rust_ids(t)]
    assert not differing


def test_the_same_ids_when_the_piece_cache_starts_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = BpeTokenizer(FILE)
    monkeypatch.setattr(module, "_CACHE_PIECES", 3)
    text = " ".join(WORDS) + " 0.93 ±0.02 日本語 /tmp/run-01 " + " ".join(reversed(WORDS))
    first, again = fresh.encode(text), fresh.encode(text)
    assert first == again == rust_ids(text)
    assert len(fresh._cache) <= 3


def _edited(tmp_path: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    spec = json.loads(FILE.read_text(encoding="utf-8"))
    edit(spec)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def _set(path: list[str], value: object):  # type: ignore[no-untyped-def]
    def edit(spec: dict) -> None:  # type: ignore[type-arg]
        for key in path[:-1]:
            spec = spec[key]
        spec[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (_set(["pre_tokenizer"], {"type": "Whitespace"}), "pre_tokenizer"),
        (_set(["normalizer"], {"type": "NFKC"}), "normalizer"),
        (_set(["model", "type"], "WordPiece"), "model.type"),
        (_set(["model", "byte_fallback"], False), "model.byte_fallback"),
        (_set(["model", "dropout"], 0.1), "model.dropout"),
        (_set(["model", "end_of_word_suffix"], "</w>"), "model.end_of_word_suffix"),
        (lambda spec: spec["model"]["vocab"].update({"a\u2581b": 32000}), "after another character"),
        (lambda spec: spec["model"]["vocab"].pop("<0x41>"), "<0x41>"),
        (lambda spec: spec["model"]["merges"].append("nosuch token"), "not in the vocabulary"),
        (lambda spec: spec["added_tokens"][1].update({"lstrip": True}), "'<s>'"),
        (lambda spec: spec["model"].pop("vocab"), "vocab"),
    ],
)
def test_a_rule_it_does_not_implement_is_refused_by_name(tmp_path: Path, edit, named: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(LedgerError, match=named.replace("(", r"\(")) as caught:
        BpeTokenizer(_edited(tmp_path, edit))
    assert "tokenizer" in str(caught.value) or "merge" in str(caught.value) or "token" in str(caught.value)


def test_a_pair_listed_twice_keeps_its_last_rank_as_the_rust_library_does(tmp_path: Path) -> None:
    """Listed again last, the "▁ t" merge ranks below every other: "tiling" tokenises otherwise."""
    from tokenizers import Tokenizer

    path = _edited(tmp_path, lambda spec: spec["model"]["merges"].append(spec["model"]["merges"][0]))
    rust = Tokenizer.from_file(str(path))
    for text in ("tiling", "the theory", "at the", "▁t"):
        assert BpeTokenizer(path).encode(text) == rust.encode(text, add_special_tokens=False).ids
    assert BpeTokenizer(path).encode("tiling") != PYTHON.encode("tiling")


def test_the_embedder_gives_the_same_vectors_before_and_after_the_rust_library_takes_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The embedder's two tokenisers (``_Model.token_ids``): the same bits for every row, in
    batches of every size, whichever one tokenised them."""
    from projections.models import embedder as embedder_module

    texts = [
        t
        for path in sorted(ROOT.glob("docs/*.md"))[:4]
        for whole in [path.read_text(encoding="utf-8")]
        for t in (whole[i : i + 300] for i in range(0, len(whole), 300))
    ][:400] + ["", " ", "<s> x </s>", "日本語 😀 e\u0301", "0.93 ± 0.02"]
    python_side = embedder_module.StaticEmbedder()
    before = python_side.embed(texts)
    assert python_side._model._bulk is None, "the Python tokenizer should have served this call"
    monkeypatch.setattr(embedder_module, "_PYTHON_PIECES", 0)
    rust_side = embedder_module.StaticEmbedder()
    after = rust_side.embed(texts)
    assert rust_side._model._bulk is not None
    assert before.tobytes() == after.tobytes()
    assert all(python_side.embed([t]).tobytes() == rust_side.embed([t]).tobytes() for t in texts[::37])
