"""Working context at node start (R22): what a node is told before it runs.

Deterministic for the same log: the experiment core from the seed, then every ancestor's
result summary whole (root→parent, each capped, de-duplicated), then a small semantic
supplement from the ancestors' other memory, de-duplicated against what is already there.
"""

from __future__ import annotations

import json
from typing import Any

from projections.access.log import ReadTool
from projections.api import checks
from projections.api.context import ExperimentContext
from projections.api.session import Session
from projections.evidence.claims import is_result_summary
from projections.models.shapes import WorkingContext

SUMMARY_CAP = 2000
SUPPLEMENT = 3
# The experiment core as ARI's loop shows it (its seed's keys), with the shorter names too.
CORE_FIELDS = (
    ("experiment_goal", "goal"),
    ("primary_metric",),
    ("higher_is_better",),
    ("metric_rationale", "rationale"),
    ("hardware_spec", "hardware"),
    ("selected_idea",),
)


def _core_fields(core: dict[str, Any]) -> list[tuple[str, Any]]:
    """(name, value) of the core fields the seed has, first spelling that is present."""
    found = []
    for names in CORE_FIELDS:
        name = next((n for n in names if core.get(n) not in (None, "", {}, [])), None)
        if name is not None:
            found.append((name, core[name]))
    return found


def _cap(text: str) -> str:
    return text if len(text) <= SUMMARY_CAP else text[: SUMMARY_CAP - 1] + "…"


class WorkingContextBuilder:
    """What a node is told when it starts."""

    def __init__(self, session: Session, context: ExperimentContext) -> None:
        self.session, self.context = session, context

    def build(
        self, node_id: str, ancestor_ids: list[str], eval_summary: str | None, as_of: int | None = None
    ) -> WorkingContext:
        """The experiment core, the ancestors' result summaries (root → parent) and a few
        related ancestor entries; ``as_of`` as the node would have seen it then (a replay)."""
        ancestors = checks.node_ids(ancestor_ids)
        with self.session.reading() as catalog:
            core = self.context.get(as_of)
            summaries, seen_text, used = [], set(), set()
            for nid in ancestors:
                for entry in catalog.node_entries(nid, as_of):
                    if is_result_summary(entry) and entry.text not in seen_text:
                        seen_text.add(entry.text)
                        used.add(entry.entry_id)
                        summaries.append({"node_id": nid, "entry_id": entry.entry_id, "text": _cap(entry.text)})
            supplement = []
            if eval_summary and ancestors:
                hits = self.session.engine.search(eval_summary, ancestors, SUPPLEMENT + len(used), as_of)
                for entry_id, score in hits:
                    entry = catalog.entries[entry_id]
                    if entry_id in used or entry.text in seen_text:
                        continue
                    seen_text.add(entry.text)
                    supplement.append(
                        {"node_id": entry.node_id, "entry_id": entry_id, "text": _cap(entry.text), "score": score}
                    )
                    if len(supplement) == SUPPLEMENT:
                        break
            stamp = self.session.read_stamp(as_of)
        messages = []
        if core:
            lines = [f"{k}: {v if isinstance(v, str) else json.dumps(v)}" for k, v in _core_fields(core)]
            messages.append({"role": "system", "content": "Experiment core:\n" + "\n".join(lines)})
        if summaries:
            body = "\n".join(f"- [{s['node_id']}] {s['text']}" for s in summaries)
            messages.append({"role": "user", "content": "Results of the ancestor nodes (root → parent):\n" + body})
        if supplement:
            body = "\n".join(f"- [{s['node_id']}] {s['text']}" for s in supplement)
            messages.append({"role": "user", "content": "Related memory from the ancestors:\n" + body})
        self.session.access.read(
            "node_scope",
            f"working_context:{eval_summary or ''}"[:200],
            ancestors,
            len(summaries) + len(supplement),
            [{"entry_id": s["entry_id"], "src_node_id": s["node_id"]} for s in summaries + supplement],
            tool=ReadTool.BUILD_WORKING_CONTEXT,
            node=node_id,
            as_of=as_of,
            **stamp,
            args={"node_id": node_id, "eval_summary": eval_summary},
        )
        return {
            "node_id": node_id,
            "messages": messages,
            "core": core,
            "ancestor_summaries": summaries,
            "supplement": supplement,
        }
