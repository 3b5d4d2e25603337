"""The block of verified results a paper's writer is shown: the usable claims, each with its
re-run status, evidence level and pinned artifacts, then the known limitations. A claim that
carries an exclusion is never listed, whatever the context file says."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.vocabulary import is_sha256


def grounded_block_data(ctx: Mapping[str, Any]) -> dict[str, list[Any]]:
    """What the block holds, as data in the shape it is rendered from (ARI's
    ``usable_for_claims`` and ``limitations``): the usable claims it lists (none carrying an
    exclusion) and, when it lists any, the limitations; both empty when the block is empty.
    ``render_grounded_block`` of it is the block itself, so a script reads what the paper reads."""
    usable = [c for c in ctx.get("usable_for_claims") or [] if not c.get("exclusions")]
    return {"usable_for_claims": usable, "limitations": list(ctx.get("limitations") or []) if usable else []}


def render_grounded_block(ctx: Mapping[str, Any]) -> str:
    """The prompt block listing usable claims with status, evidence and artifacts, or "" when none.
    A claim that carries an exclusion is never listed, whatever the context file says."""
    held = grounded_block_data(ctx)
    usable = held["usable_for_claims"]
    if not usable:
        return ""
    lines = [
        "## Verified results (artifact-grounded)",
        "State quantitative claims only from this list; cite the artifacts. "
        "Re-run status and evidence level (cited < hashed < verified < values_checked < rerun_passed) in brackets.",
    ]
    for claim in usable:
        arts = ", ".join(
            f"{r.get('path')} (sha256 {r['sha256'][:12]})"
            if is_sha256(r.get("sha256"))
            else f"{r.get('path')} (not pinned)"
            for r in claim["artifact_refs"]
            if isinstance(r, Mapping)
        )
        ptr = claim.get("metric_ptr")
        metric = f" [{ptr.get('name')}={ptr.get('value')}]" if isinstance(ptr, Mapping) and ptr.get("name") else ""
        status = claim.get("repro_status") or "unverified"
        values = claim.get("values") if isinstance(claim.get("values"), Mapping) else {}
        unchecked = [u for u in values.get("unchecked") or [] if isinstance(u, Mapping)]
        caveat = (
            " — numbers not checked (do not state them as measured): "
            + "; ".join(f"{u.get('value')} ({u.get('why')})" for u in unchecked)
            if unchecked
            else ""
        )
        lines.append(
            f"- [{status}; evidence {claim.get('evidence', 'cited')}] {claim['node_id']}{metric}: {claim['text']} — artifacts: {arts}{caveat}"
        )
    limitations = held["limitations"]
    if limitations:
        lines.append("## Known limitations (failed attempts; do not present as results)")
        lines.extend(f"- {lim['node_id']}: {lim['text']}" for lim in limitations)
    return "\n".join(lines) + "\n"
