"""Every fold of the log handles every event type (issue 19, item 2): the set of types is closed
(``ledger.events.EventType``, tied to the body types at import), and each fold's dispatch table is
checked complete when its module is imported, so a new type fails loudly, naming each fold."""

from __future__ import annotations

import subprocess
import sys
from typing import get_args

import pytest

import projections.engines.letta.projection
import projections.engines.local  # noqa: F401
from ledger.ari.importer import _PLANNERS, ARI_KINDS, plan_entries
from ledger.errors import InvalidInput
from ledger.events import (
    BODY_TYPES,
    EVENT_TYPES,
    FOLDS,
    EventType,
    PerEventType,
    event_type_of,
    handlers,
    validate_body,
)
from support.env import subprocess_env

FOLD_NAMES = {"Catalog.apply", "SemanticIndex.apply_batch", "snapshot_check.event_problem", "LettaProjection._fold"}


def test_the_event_types_are_the_body_types() -> None:
    assert set(EVENT_TYPES) == set(BODY_TYPES)
    assert get_args(EventType) == tuple(BODY_TYPES) == EVENT_TYPES
    assert all(cls.type_name == name for name, cls in BODY_TYPES.items())


def test_every_event_type_is_a_key_of_the_fold_tables_type() -> None:
    """``PerEventType`` is what the type checker holds each fold's table to (a missing key is a
    type error): it names exactly the event types."""
    assert PerEventType.__required_keys__ == frozenset(EVENT_TYPES)
    assert not PerEventType.__optional_keys__


@pytest.mark.parametrize("value", ["memory_redacted", "", "Memory_Added", None, 3, ["memory_added"]])
def test_an_event_type_from_outside_is_checked_once_naming_the_field(value: object) -> None:
    with pytest.raises(InvalidInput) as raised:
        event_type_of(value, "entries[0].type")
    assert raised.value.field == "entries[0].type"
    assert raised.value.reason == f"unknown event type {value!r}; expected one of {', '.join(EVENT_TYPES)}"
    with pytest.raises(InvalidInput) as raised:
        validate_body(value, {})  # type: ignore[arg-type]  # the write side's own door checks it too
    assert raised.value.field == "type"


def test_each_event_type_is_its_own_type() -> None:
    assert [event_type_of(t) for t in EVENT_TYPES] == list(EVENT_TYPES)


def test_each_kind_of_aris_entries_has_its_planner() -> None:
    assert set(_PLANNERS) == set(ARI_KINDS)
    with pytest.raises(InvalidInput, match="unknown kind 'note'; expected one of node_scope, react_step, core_seed"):
        plan_entries([], "note")


@pytest.mark.parametrize("fold", sorted(FOLD_NAMES))
def test_each_fold_handles_every_event_type(fold: str) -> None:
    assert FOLDS[fold] == set(EVENT_TYPES)


def test_a_table_without_a_type_is_refused_naming_the_fold_and_the_type() -> None:
    table = {t: None for t in EVENT_TYPES if t != "node_cleared"}
    with pytest.raises(TypeError, match=r"my fold: no handler for event types \['node_cleared'\]"):
        handlers("my fold", table)


def test_a_new_event_type_fails_at_import_in_every_fold_that_does_not_handle_it() -> None:
    code = (
        "import ledger.events as e\n"
        "e.EVENT_TYPES = (*e.EVENT_TYPES, 'memory_redacted')\n"
        "import projections.models.catalog\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env())
    assert run.returncode == 1
    assert "TypeError: Catalog.apply: no handler for event types ['memory_redacted']" in run.stderr
