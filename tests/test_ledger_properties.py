"""Property: for any mix of valid and refused operations, earlier bytes never change (R3, R4)."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import CopyOnWriteViolation, InvalidInput, Ledger
from ledger.log import LOG_NAME

NODES = ["root", "node_A", "node_A1", "node_B"]

texts = st.text(max_size=40)  # may contain lone surrogates: refused as invalid UTF-8
valid_body = st.fixed_dictionaries({"text": st.text(st.characters(exclude_categories=["Cs"]), max_size=40)})
bad_body = st.one_of(
    st.fixed_dictionaries({"text": st.integers()}),
    st.fixed_dictionaries({"text": texts, "kind": st.sampled_from(["rumour", "claim", ""])}),
    st.just({"nope": 1}),
)
op = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(NODES), st.sampled_from(NODES), valid_body),
    st.tuples(st.just("append"), st.sampled_from(NODES), st.sampled_from(NODES), bad_body),
    st.tuples(st.just("batch"), st.sampled_from(NODES), st.lists(valid_body, min_size=1, max_size=5), st.booleans()),
    st.tuples(st.just("clear"), st.sampled_from(NODES), st.sampled_from(NODES), st.just({})),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=12))
def test_cow_byte_stability_and_exact_read_back(ops) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp)
        acknowledged = []
        with Ledger.open(ckpt) as ledger:
            for kind, node, arg, body in ops:
                before = (ckpt / LOG_NAME).read_bytes()
                try:
                    if kind == "append":
                        acknowledged.append(ledger.append(node, "memory_added", body, current_node=arg))
                    elif kind == "clear":
                        acknowledged.append(ledger.append(node, "node_cleared", body, current_node=arg))
                    else:  # a batch, sometimes aborted by an exception inside it
                        queued = []
                        with ledger.batch() as batch:
                            for b in arg:
                                queued.append(batch.append(node, "memory_added", b, current_node=node))
                            if body:
                                raise KeyError("abort")
                        acknowledged.extend(queued)
                except (InvalidInput, CopyOnWriteViolation, KeyError):
                    assert (ckpt / LOG_NAME).read_bytes() == before
                after = (ckpt / LOG_NAME).read_bytes()
                assert after[: len(before)] == before
            assert list(ledger.events()) == acknowledged
        with Ledger.open(ckpt) as reopened:
            assert list(reopened.events()) == acknowledged
            assert reopened.verify().ok
