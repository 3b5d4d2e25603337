"""Every fold of the log handles every event type (issue 19, item 2): the set of types is closed
(``ledger.events.EventType``, tied to the body types at import), and each fold's dispatch table is
checked complete when its module is imported, so a new type fails loudly, naming each fold."""

from __future__ import annotations

import subprocess
import sys

import pytest

import projections.engines.letta.projection
import projections.engines.local  # noqa: F401
from ledger.events import BODY_TYPES, EVENT_TYPES, FOLDS, handlers
from support.env import subprocess_env

FOLD_NAMES = {"Catalog.apply", "SemanticIndex.apply_batch", "snapshot_check.event_problem", "LettaProjection._fold"}


def test_the_event_types_are_the_body_types() -> None:
    assert set(EVENT_TYPES) == set(BODY_TYPES)


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
