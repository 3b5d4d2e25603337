"""The flat ReAct trace of a checkpoint: ARI's ``react_add``, ``react_search``, ``react_get_all``,
``list_react_entries`` (lists, as ARI's agent loop expects) — no ancestor filter."""

from __future__ import annotations

from typing import Any

from ledger import InvalidInput, config
from ledger.ari.importer import step_node
from ledger.errors import kind_of
from ledger.events import TRUNCATED, ReactStep, check_text
from projections import settings
from projections.access.log import ReadTool
from projections.api import checks
from projections.api.session import Session
from projections.models.shapes import ReactAdded, StepView
from projections.models.views import step_view


class ReactTrace:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, content: str, metadata: dict[str, Any] | None) -> ReactAdded:
        """Append a step; ``ARI_REACT_MEMORY_MAX_ENTRY_CHARS`` cuts long steps as ARI does."""
        if not isinstance(content, str):
            raise InvalidInput("content", f"must be a string, got {kind_of(content)}")
        meta = checks.metadata(metadata)
        body: dict[str, Any] = {"content": content, "metadata": meta}
        cap = settings.react_max_entry_chars()
        if cap and len(content) > cap:
            body["content"] = content[:cap] + TRUNCATED
            body["findings"] = [
                {
                    "field": "content",
                    "reason": f"{len(content)} characters cut to ARI_REACT_MEMORY_MAX_ENTRY_CHARS={cap}",
                }
            ]
        event = self.session.append(step_node(meta, config.current_node()), "react_step", body)
        stored = event.body_as(ReactStep)
        self.session.access.write("react_step", event.id, stored.content, meta, tool="react_add", seq=event.seq)
        return {"ok": True, "id": event.id, "seq": event.seq}

    def search(self, query: str, limit: int, as_of: int | None) -> list[StepView]:
        """Semantic search over the whole trace, best first."""
        check_text(query, "query")
        limit = checks.limit(limit)
        with self.session.reading() as catalog:
            hits = self.session.engine.react_search(query, limit, as_of) if limit else []
            steps = {s.step_id: s for s in catalog.steps_as_of(as_of)}
            results: list[StepView] = [{**step_view(steps[sid]), "score": score} for sid, score in hits]
            stamp = self.session.read_stamp(as_of)
        self.session.access.read(
            "react_step",
            query,
            None,
            limit,
            [{"entry_id": r["id"], "src_node_id": "", "score": r["score"]} for r in results],
            tool=ReadTool.REACT_SEARCH,
            as_of=as_of,
            **stamp,
        )
        return results

    def entries(self, limit: int | None, as_of: int | None) -> list[StepView]:
        """The trace in order; with ``limit``, its last ``limit`` steps (as ARI)."""
        if limit is not None:
            checks.limit(limit)
        with self.session.reading() as catalog:
            steps = catalog.steps_as_of(as_of)
        if limit is not None:
            steps = steps[-limit:] if limit else []
        return [step_view(s) for s in steps]
