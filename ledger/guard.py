"""Copy-on-write guard: a node writes only its own memory, so ancestors stay byte-stable.

The refusal texts are ARI's, word for word, so hooks that match on them keep working.
"""

from __future__ import annotations

from typing import Any

from . import config
from .errors import CopyOnWriteViolation
from .events import EventType, check_node_id, validate_body

GUARDED_TYPES: frozenset[EventType] = frozenset({"node_started", "memory_added", "node_cleared"})

NOT_SET = "ARI_CURRENT_NODE_ID not set"
MISMATCH = "node_id does not match current node (CoW violation)"


def check_writer(node_id: str, event_type: EventType, current_node: str | None = None) -> None:
    """Refuse a node-scope write unless ``node_id`` is the current node.

    ``current_node`` given explicitly (in-process callers) wins over ``ARI_CURRENT_NODE_ID``.
    Checkpoint-wide events (ReAct steps, the core seed) are not node-scoped and pass.
    """
    if event_type not in GUARDED_TYPES:
        return
    current = current_node if current_node is not None else config.current_node()
    if not current:
        raise CopyOnWriteViolation(NOT_SET)
    if node_id != current:
        raise CopyOnWriteViolation(MISMATCH)


def prepare_event(
    node_id: str, type: EventType, body: Any, current_node: str | None
) -> tuple[str, EventType, dict[str, Any]]:
    """Validate and guard one event (no lock needed): (node, type, canonical body)."""
    check_node_id(node_id, "node_id")
    canonical_body = validate_body(type, body)
    check_writer(node_id, type, current_node)
    return node_id, type, canonical_body
