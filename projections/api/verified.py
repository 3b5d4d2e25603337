"""Verified context (R21) for a lineage, and ``verified_context.json`` for the paper stage.

The rules (which claims are usable, how far each citation can be trusted, the exclusions on
top of ARI's rule) are :mod:`projections.evidence.usable`'s; this service applies them to a
session's fold at a read's ``as_of``, records the read in the access log, and writes the file
with the log's head as its anchor.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ledger import InvalidInput
from ledger.checkpoint_format import VERIFIED_CONTEXT_NAME
from ledger.output import replace_file
from projections import settings
from projections.access.log import ReadTool
from projections.api import checks
from projections.api.context import ExperimentContext
from projections.api.session import Session
from projections.evidence.grounding import Grounding, experiments_roots
from projections.evidence.usable import best_node, repro_events, verified_context
from projections.models.shapes import VerifiedContextView


class VerifiedContext:
    """The verified context of a lineage, and ``verified_context.json`` for the paper stage."""

    def __init__(self, session: Session, context: ExperimentContext) -> None:
        self.session, self.context = session, context

    def get(
        self,
        ancestor_ids: list[str],
        purpose: str,
        limit: int | None,
        min_evidence: str | None,
        experiments_root: str | Path | None,
        as_of: int | None,
        keep_mismatches: bool = False,
    ) -> VerifiedContextView:
        """ARI's verified context (``claims``, ``limitations``, ``usable_for_claims``), each claim
        with its evidence level and ``values`` verdict; artifacts are re-hashed under
        ``experiments_root`` (default: ARI's layout beside the checkpoint)."""
        scope = checks.node_ids(ancestor_ids)
        if limit is not None:
            checks.limit(limit)
        roots = self._experiments_roots(experiments_root)
        with self.session.reading() as catalog:
            experiment = self.context.get(as_of)
            grounding = Grounding(roots, experiment.get("metric_ranges"), experiment, self.session.cited_files)
            ctx = verified_context(
                catalog.scope_entries(scope, as_of),
                repro_events(catalog, as_of),
                limit,
                grounding=grounding,
                min_evidence=min_evidence,
                keep_mismatches=keep_mismatches,
            )
            stamp = self.session.read_stamp(as_of)
        ctx["purpose"] = purpose
        ctx["lineage"] = scope
        ctx["min_evidence"], ctx["limit"], ctx["keep_mismatches"] = min_evidence, limit, keep_mismatches
        self.session.access.read(
            "node_scope",
            f"verified_context:{purpose}",
            scope,
            len(ctx["claims"]),
            [{"entry_id": c["entry_id"], "src_node_id": c["node_id"]} for c in ctx["claims"]],
            tool=ReadTool.GET_VERIFIED_CONTEXT,
            as_of=as_of,
            **stamp,
            args={"purpose": purpose, "limit": limit},
        )
        return ctx

    def _experiments_roots(self, given: str | Path | None) -> list[Path]:
        """Where node work dirs may be: the given root, else :func:`experiments_roots`."""
        return [Path(given)] if given is not None else experiments_roots(self.session.checkpoint_dir)

    def write(self, nodes: Iterable[Mapping[str, Any]], experiments_root: str | Path | None) -> Path | None:
        """Pick the best node, take its root→best lineage, write ``verified_context.json``.

        ``nodes`` are ARI's node dicts (``node_id`` or ``id``, ``metrics``, optional
        ``has_real_data`` and ``status``). Nothing is written when there are no claims or
        when ``ARI_MEMORY_CONSOLIDATE`` is off; the path is returned when written. The file
        carries the log's head (``anchor``: seq and hash), so ``ari-ledger verify`` can tell
        if the log was later cut back or rewritten.
        """
        if not settings.consolidation_enabled():
            return None
        with self.session.reading() as catalog:
            candidates = [dict(n, node_id=n.get("node_id") or n.get("id")) for n in nodes]
            if any(not c["node_id"] for c in candidates):
                raise InvalidInput("nodes", "every node needs a node_id (or id)")
            context = self.context.get()
            best = best_node(
                candidates, context.get("primary_metric"), context.get("higher_is_better", True) is not False
            )
            if best is None:
                return None
            ctx = self.get(catalog.lineage(best["node_id"]), "paper", None, None, experiments_root, None)
            if not ctx["claims"]:
                return None
            best_id = best["node_id"]
            return self.save({**ctx, "best_node": best_id, "best_node_id": best_id}, self.session.checkpoint_dir)

    def save(self, ctx: VerifiedContextView | dict[str, Any], where: Path) -> Path:
        """Write a verified context with the log's head (``anchor``) and each claim's event hash
        (``event_hash``, what ``prove`` traces it by) to ``where`` (a directory: its
        ``verified_context.json``; else the file), atomically."""
        ledger = self.session.ledger
        with self.session.reading():
            found = self.session.event_hashes(c["seq"] for c in ctx.get("claims", []))  # one pass over the log
            hashes = {seq: hash for seq, (_id, hash) in found.items()}
            for claim in ctx.get("claims", []):
                claim["event_hash"] = hashes.get(claim["seq"])
            written = {
                **ctx,
                "as_of_seq": ledger.last_seq,
                "anchor": {"seq": ledger.last_seq, "hash": ledger.last_hash},
            }
        path = where / VERIFIED_CONTEXT_NAME if where.is_dir() else where
        # The old file or the whole new one after any crash, a power loss included: written beside
        # it and synced, renamed over it, the directory synced (ledger.output.replace_file).
        data = (json.dumps(written, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
        replace_file(path, data)  # through verified_context.json.tmp, as before
        return path
