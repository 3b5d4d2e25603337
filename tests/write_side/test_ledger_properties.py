"""Property: for any mix of valid and refused operations, earlier bytes never change (R3, R4)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import CopyOnWriteViolation, InvalidInput, Ledger
from ledger.layout import store_dir
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
                before = (store_dir(ckpt) / LOG_NAME).read_bytes()
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
                    assert (store_dir(ckpt) / LOG_NAME).read_bytes() == before
                after = (store_dir(ckpt) / LOG_NAME).read_bytes()
                assert after[: len(before)] == before
            assert list(ledger.events()) == acknowledged
        with Ledger.open(ckpt) as reopened:
            assert list(reopened.events()) == acknowledged
            assert reopened.verify().ok


# -- the bulk line check (chain.decode_lines) agrees with the line-by-line one -----------------

from ledger.chain import ChainError, check_link, decode_line, decode_lines, sign  # noqa: E402
from ledger.events import UnsignedEvent  # noqa: E402

json_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
member_bodies = st.lists(
    st.fixed_dictionaries(
        {"text": json_text, "metadata": st.dictionaries(st.sampled_from(["hash", "prev", "k"]), json_text)}
    ),
    min_size=1,
    max_size=5,
)
mutation = st.one_of(
    st.just(("none",)),
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(0, 7)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 80)),
    st.tuples(
        st.just("insert"), st.integers(0, 10**6), st.sampled_from([b" ", b"\n", b"{}", b'"}', b"\n{", b"}\n{", b","])
    ),
    st.tuples(st.just("lines"), st.sampled_from(["swap", "repeat", "drop"]), st.integers(0, 10)),
)


def _member(bodies: list[dict], seq: int, prev: str) -> bytes:
    lines = []
    for i, body in enumerate(bodies):
        unsigned = UnsignedEvent(2, seq + i, f"id{i}", "ts", "ckpt-1", "root", "memory_added", body, prev)
        event, line = sign(unsigned)
        lines.append(line)
        prev = event.hash
    return b"".join(lines)


def _mutate(data: bytes, how: tuple) -> bytes:
    if how[0] == "flip":
        i = how[1] % len(data)
        return data[:i] + bytes([data[i] ^ (1 << how[2])]) + data[i + 1 :]
    if how[0] == "delete":
        i = how[1] % len(data)
        return data[:i] + data[i + how[2] :]
    if how[0] == "insert":
        i = how[1] % (len(data) + 1)
        return data[:i] + how[2] + data[i:]
    if how[0] == "lines":
        lines = data.splitlines(keepends=True)
        i = how[2] % len(lines)
        if how[1] == "swap" and len(lines) > 1:
            j = (i + 1) % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
        elif how[1] == "repeat":
            lines.insert(i, lines[i])
        elif how[1] == "drop":
            del lines[i]
        return b"".join(lines)
    return data


def _line_by_line(data: bytes, seq: int | None, prev: str | None, ckpt: str | None) -> list | None:
    lines = data.split(b"\n")
    if lines[-1]:
        return None
    events = []
    for line in lines[:-1]:
        try:
            event = decode_line(line)
            seq = event.seq if seq is None else seq
            check_link(event, seq, event.prev if prev is None else prev, ckpt)
        except ChainError:
            return None
        ckpt, prev, seq = event.ckpt, event.hash, seq + 1
        events.append(event)
    return events


@settings(max_examples=400, deadline=None)
@given(
    member_bodies,
    mutation,
    st.sampled_from([(1, "", None), (7, "ab" * 32, "ckpt-1"), (None, None, None), (7, None, "ckpt-2")]),
)
def test_bulk_line_check_agrees_with_line_by_line(bodies, how, start) -> None:
    """The bulk check (what every read and verify runs) accepts exactly what the line-by-line
    check accepts, with the same events, for valid and damaged members alike."""
    seq, prev, ckpt = start
    data = _mutate(_member(bodies, 7 if seq is None else seq, "ab" * 32 if prev is None else prev), how)
    assert decode_lines(data, seq, prev, ckpt) == _line_by_line(data, seq, prev, ckpt)


# -- validation's JSON fast path (events._plain_json) changes no outcome -------------------------

from unittest import mock  # noqa: E402

from ledger import events as schema  # noqa: E402

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.binary(max_size=4),
    st.sampled_from(["{[", "]}", "a{b"]),
)
json_key = st.one_of(st.text(max_size=6), st.integers(-3, 3), st.floats(allow_nan=False, width=16), st.booleans())
json_like = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(json_key, inner, max_size=4),
    ),
    max_leaves=20,
)


def _nested(depth: int) -> dict:
    value: object = 1
    for _ in range(depth):
        value = {"d": value}
    return value  # type: ignore[return-value]


def _outcome(body: dict) -> object:
    try:
        return schema.validate_body("memory_added", body)
    except InvalidInput as exc:
        return ("refused", exc.field, exc.reason)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.dictionaries(json_key, json_like, max_size=5), st.integers(30, 35).map(_nested)), json_like)
def test_json_fast_path_changes_no_outcome(metadata, origin) -> None:
    """Validation skips the per-value walk when a JSON object comes back unchanged through
    JSON; with or without that shortcut, every body is stored, flagged or refused alike."""
    body = {"text": "t", "metadata": metadata, "origin": origin}
    fast = _outcome(body)
    with mock.patch.object(schema, "_plain_json", return_value=False):
        slow = _outcome(body)
    assert repr(fast) == repr(slow)  # repr: NaN never equals itself
