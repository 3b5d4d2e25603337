"""A verified context checked whole against what the library builds as of its anchor (its
claims, ``usable_for_claims`` and ``limitations``, item by item and in order), or, without an
anchor, its usable items traced to its claims; for ``ari-ledger prove``
(:mod:`projections.tools.prove` says what is compared and why)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger import InvalidInput
from ledger.anchor import Anchor
from projections.api import MemoryBackend
from projections.evidence.grounding import CitedFiles
from projections.evidence.usable import not_usable
from projections.tools.claim_trace import ClaimProof, trace_claims
from projections.tools.reads import VerifiedKey, verified_key

SAVED_KEYS = frozenset({"event_hash"})  # added by VerifiedContext.save; traced against the log instead
TRACED_KEYS = frozenset({"text", "metric_ptr", "repro_status"})  # the tracing compares these
DISK_KEYS = frozenset({"values", "evidence", "exclusions"})  # read from the work dirs on disk now


@dataclass
class ContextCheck:
    """What checking a context found: its claims traced, and the context-level findings."""

    claims: list[ClaimProof] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    recomputed: dict[str, Any] | None = None
    built: dict[VerifiedKey, dict[str, Any]] = field(default_factory=dict)  # for the replay of reads


def check_context(
    backend: MemoryBackend,
    ctx: Mapping[str, Any],
    name: str,
    anchor: Anchor | None,
    roots: list[Path],
    experiments_root: str | Path | None = None,
    cited_files: CitedFiles | None = None,
) -> ContextCheck:
    """Trace every claim of ``ctx`` and its ``usable_for_claims``; with an ``anchor`` the log
    holds, build the context again as of it and compare (see the module docstring).
    ``cited_files``: what reading the cited files found, shared with the backend's reads."""
    out = ContextCheck()
    claims = _objects(ctx.get("claims"), "claims", name, out)
    usable = _objects(ctx.get("usable_for_claims", []), "usable_for_claims", name, out)
    last_seq = backend.last_seq
    at = anchor.seq if anchor is not None and anchor.seq is not None and anchor.seq <= last_seq else None
    lib: dict[str, Any] | None = None
    if anchor is None:
        out.unchecked.append(
            f"{name} carries no anchor (ARI's pipeline writes none): the log position it was built at is not "
            "known, so it cannot be built again and compared; its claims and usable_for_claims are still traced "
            "to their events"
        )
    elif at is None:  # an anchor past the log's end: verify() has said so
        out.unchecked.append(f"{name}: its anchor (seq {anchor.seq}) is not in the log: not built again")
    else:
        if at < last_seq:
            later = last_seq - at
            out.notes.append(
                f"{name} was built at seq {at}, the log is at {last_seq}: {later} event{'s' if later > 1 else ''} later"
            )
        lib = _build(backend, ctx, usable, at, experiments_root, out)
    known = {c["entry_id"]: c["values"] for c in lib["claims"] if isinstance(c.get("values"), dict)} if lib else {}
    out.claims, no_work_dir = trace_claims(backend, claims, roots, at, known, cited_files)
    by_id: dict[str, ClaimProof] = {}
    listed: dict[str, Mapping[str, Any]] = {}
    for claim, proof in zip(claims, out.claims):
        if proof.entry_id in listed:
            proof.fail("listed twice in claims")
        else:
            by_id[proof.entry_id], listed[proof.entry_id] = proof, claim
    _usable_are_claims(usable, listed, by_id, whole=at is not None, out=out)
    if lib is not None and at is not None and out.recomputed is not None:
        _compare(ctx, lib, listed, usable, by_id, no_work_dir, at, out)
    else:
        _usable_as_the_library_judges(backend, usable, by_id, experiments_root)
    _what_the_paper_reads_is_checked(usable, by_id)
    return out


def _usable_as_the_library_judges(
    backend: MemoryBackend,
    usable: list[Mapping[str, Any]],
    by_id: Mapping[str, ClaimProof],
    experiments_root: str | Path | None,
) -> None:
    """A context that cannot be built again (no anchor: ARI's own pipeline writes it so) still
    lists nothing the library would leave out: each usable item is judged as the library judges
    it now, in its node's lineage (:func:`~projections.api.verified.not_usable`)."""
    catalog = backend.fresh_catalog()
    built: dict[str, dict[str, Mapping[str, Any]]] = {}
    for item in usable:
        proof = by_id.get(str(item.get("entry_id")))
        entry = catalog.entries.get(proof.entry_id) if proof is not None else None
        if proof is None or entry is None:
            continue  # not a claim of the log: said by the tracing
        if entry.node_id not in built:
            with backend.capturing_reads():  # a reviewer's read is not one of the run's
                ctx = backend.get_verified_context(
                    catalog.lineage(entry.node_id), "review", experiments_root=experiments_root
                )
            built[entry.node_id] = {c["entry_id"]: c for c in ctx["claims"]}
        mine = built[entry.node_id].get(entry.entry_id)
        why = not_usable(mine) if mine is not None else "not a claim of its node's lineage"
        if why is not None:
            proof.fail(f"in usable_for_claims, but the library leaves it out ({why}): the paper would state it")


def _what_the_paper_reads_is_checked(usable: list[Mapping[str, Any]], by_id: Mapping[str, ClaimProof]) -> None:
    """What the paper stage renders as verified is proved only when nothing of it went
    unchecked: an unchecked number, an artifact not re-hashed, a work dir absent."""
    for eid in dict.fromkeys(str(u.get("entry_id")) for u in usable):
        proof = by_id.get(eid)
        if proof is not None and proof.unchecked:
            for why in proof.unchecked:
                proof.fail(f"in usable_for_claims, not checked: {why}")
            proof.unchecked = []


def _objects(items: object, key: str, name: str, out: ContextCheck) -> list[Mapping[str, Any]]:
    if not isinstance(items, list):
        out.failures.append(f"{name}: {key} is not a list")
        return []
    kept = [i for i in items if isinstance(i, Mapping)]
    if len(kept) != len(items):
        out.failures.append(f"{name}: {len(items) - len(kept)} item(s) of {key} are not objects")
    return kept


def _usable_are_claims(
    usable: list[Mapping[str, Any]],
    listed: Mapping[str, Mapping[str, Any]],
    by_id: Mapping[str, ClaimProof],
    *,
    whole: bool,
    out: ContextCheck,
) -> None:
    """Every usable item is one of the claims, the same (``whole``, for an anchored context:
    every field but ``event_hash``; else its ``text`` and ``metric_ptr``), and the event hash
    it carries, when it carries one, is its event's."""
    seen: set[str] = set()
    for item in usable:
        eid = str(item.get("entry_id"))
        if eid in seen:
            out.failures.append(f"usable_for_claims: {_named(item)} is listed twice")
            continue
        seen.add(eid)
        claim, proof = listed.get(eid), by_id.get(eid)
        if claim is None or proof is None:
            out.failures.append(
                f"usable_for_claims: {_named(item)} is not one of the context's claims "
                "(the paper would state a claim nothing here traces)"
            )
            continue
        if whole:
            differ = _differing(claim, item, skip=SAVED_KEYS, said=False)
        else:
            differ = [k for k in ("metric_ptr", "text") if _canonical(claim.get(k)) != _canonical(item.get(k))]
        if differ:
            proof.fail(f"its copy in usable_for_claims differs from the claim in claims: {', '.join(differ)}")
        traced = proof.event["hash"] if proof.event else None
        if "event_hash" in item and traced is not None and item["event_hash"] != traced:
            proof.fail(f"its copy in usable_for_claims names event {str(item['event_hash'])[:12]}…, not its event")


def context_as_of(
    backend: MemoryBackend, ctx: Mapping[str, Any], at: int, experiments_root: str | Path | None = None
) -> dict[str, Any] | None:
    """The verified context the library builds as of ``at`` from what ``ctx`` records (its
    lineage, purpose, min_evidence, limit, keep_mismatches), as ``VerifiedContext.save``
    would have written it then: anchored at ``at`` and each claim with its event's hash. What
    a proof "as of seq N" proves when the context file was built after N (or cannot be placed
    in time); None when ``ctx`` records no lineage or cannot be built from what it records."""
    usable = [u for u in ctx.get("usable_for_claims") or [] if isinstance(u, Mapping)]
    lib = _build(backend, ctx, usable, at, experiments_root, ContextCheck())
    if lib is None:
        return None
    found = backend.event_hashes([at, *(c["seq"] for c in lib["claims"])])
    for claim in [*lib["claims"], *lib["usable_for_claims"]]:
        claim["event_hash"] = found[claim["seq"]][1] if claim["seq"] in found else None
    anchor = {"seq": at, "hash": found[at][1]} if at in found else None
    return {**lib, "as_of_seq": at, "anchor": anchor}


def _build(
    backend: MemoryBackend,
    ctx: Mapping[str, Any],
    usable: list[Mapping[str, Any]],
    at: int,
    experiments_root: str | Path | None,
    out: ContextCheck,
) -> dict[str, Any] | None:
    """The context the library builds as of ``at`` from what the file records (its lineage,
    purpose and, when recorded, min_evidence, limit and keep_mismatches), as JSON holds it."""
    lineage, purpose = ctx.get("lineage"), ctx.get("purpose")
    if not isinstance(lineage, list) or not all(isinstance(n, str) for n in lineage):
        out.unchecked.append("the context records no lineage: it cannot be built again and compared")
        return None
    purpose = purpose if isinstance(purpose, str) else "paper"
    min_evidence = ctx.get("min_evidence") if isinstance(ctx.get("min_evidence"), str) else None
    limit = ctx.get("limit") if isinstance(ctx.get("limit"), int) and not isinstance(ctx.get("limit"), bool) else None
    keep = ctx.get("keep_mismatches")
    if not isinstance(keep, bool):
        keep = any(_values_verdict(u) == "mismatch" for u in usable)
    try:
        with backend.capturing_reads() as captured:
            built = backend.get_verified_context(
                lineage,
                purpose,
                limit,
                min_evidence=min_evidence,
                experiments_root=experiments_root,
                as_of=at,
                keep_mismatches=keep,
            )
    except InvalidInput as exc:
        out.failures.append(f"the context cannot be built again from what it records: {exc}")
        return None
    if captured.lines:  # the read that built the context, when the access log recorded it, replays as this one
        out.built[verified_key(built["lineage"], purpose, limit, at)] = captured.lines[-1]
    lib: dict[str, Any] = json.loads(json.dumps(built, ensure_ascii=False))  # as save() writes it
    out.recomputed = {"as_of": at, "lineage": lineage, "purpose": purpose, "min_evidence": min_evidence}
    out.recomputed.update(limit=limit, keep_mismatches=keep, claims=len(lib["claims"]))
    return lib


def _compare(
    ctx: Mapping[str, Any],
    lib: Mapping[str, Any],
    listed: Mapping[str, Mapping[str, Any]],
    usable: list[Mapping[str, Any]],
    by_id: Mapping[str, ClaimProof],
    no_work_dir: set[str],
    at: int,
    out: ContextCheck,
) -> None:
    """The file against the library's build, claim by claim, list by list."""
    lineage = lib.get("lineage") or []
    where = f"as of seq {at} for lineage {' → '.join(lineage) or '(none)'}"
    lib_claims = {c["entry_id"]: c for c in lib["claims"]}
    for eid, claim in lib_claims.items():
        if eid not in listed:
            out.failures.append(f"claims: {_named(claim)} is missing: the library chooses it {where} (dropped)")
    for eid, proof in by_id.items():
        mine = lib_claims.get(eid)
        if mine is None:
            proof.fail(f"not a claim the library chooses {where} (added to the context)")
            continue
        for key in _differing(listed[eid], mine, skip=SAVED_KEYS | TRACED_KEYS):
            why = _field_difference(key, listed[eid].get(key, _ABSENT), mine.get(key, _ABSENT), at)
            if key in DISK_KEYS and eid in no_work_dir:
                proof.unchecked.append(f"{why}; its work dir is not here, so this is not checked")
            else:
                proof.fail(why)
    if list(listed) != [c for c in lib_claims if c in listed] and set(listed) <= set(lib_claims):
        out.failures.append(f"claims: not in the order the library ranks them {where}")
    _compare_usable(usable, lib, by_id, no_work_dir, where, out)
    _compare_limitations(ctx.get("limitations", []), lib["limitations"], where, out)


def _compare_usable(
    usable: list[Mapping[str, Any]],
    lib: Mapping[str, Any],
    by_id: Mapping[str, ClaimProof],
    no_work_dir: set[str],
    where: str,
    out: ContextCheck,
) -> None:
    theirs = [str(u.get("entry_id")) for u in usable]
    mine = [c["entry_id"] for c in lib["usable_for_claims"]]
    lib_claims = {c["entry_id"]: c for c in lib["claims"]}
    for eid in dict.fromkeys(theirs):
        proof = by_id.get(eid)
        if eid in mine or proof is None:  # not a claim at all: said by _usable_are_claims
            continue
        why = _why_not_usable(lib_claims.get(eid))
        if eid in no_work_dir:
            proof.unchecked.append(f"in usable_for_claims; the library leaves it out {where}{why}, its work dir absent")
        else:
            proof.fail(
                f"in usable_for_claims, but the library leaves it out {where}{why} (added to what the paper reads)"
            )
    for eid in mine:
        if eid in theirs:
            continue
        if eid in by_id and eid in no_work_dir:
            by_id[eid].unchecked.append(f"the library puts it in usable_for_claims {where}; its work dir is absent")
        elif eid in by_id:
            by_id[eid].fail(f"the library puts it in usable_for_claims {where}; the context leaves it out (dropped)")
        else:
            out.failures.append(f"usable_for_claims: {_named(lib_claims[eid])} is missing {where} (dropped)")
    if set(theirs) == set(mine) and theirs != mine:
        out.failures.append(f"usable_for_claims: not in the order the library ranks them {where}")


def _compare_limitations(theirs: object, mine: list[dict[str, Any]], where: str, out: ContextCheck) -> None:
    """The failed attempts the paper is told not to present as results."""
    if not isinstance(theirs, list):
        out.failures.append("limitations: not a list")
        return
    listed = {str(i.get("entry_id")): i for i in theirs if isinstance(i, Mapping)}
    lib = {i["entry_id"]: i for i in mine}
    for eid, item in lib.items():
        if eid not in listed:
            out.failures.append(f"limitations: {_named(item)} is missing {where} (dropped)")
        elif differ := _differing(listed[eid], item, skip=SAVED_KEYS):
            out.failures.append(f"limitations: {_named(item)} differs from the log's: {', '.join(differ)}")
    for eid, theirs_item in listed.items():
        if eid not in lib:
            out.failures.append(f"limitations: {_named(theirs_item)} is not one the library lists {where} (added)")
    if len(listed) != len(theirs):
        out.failures.append(f"limitations: {len(theirs) - len(listed)} item(s) not objects or listed twice")


_ABSENT = object()


def _canonical(value: object) -> str:
    """JSON with sorted keys: 1, 1.0 and true stay apart, NaN equals NaN."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=_absent_or_str)


def _absent_or_str(value: object) -> str:
    return "<absent>" if value is _ABSENT else str(value)


def _differing(
    theirs: Mapping[str, Any], mine: Mapping[str, Any], *, skip: frozenset[str], said: bool = True
) -> list[str]:
    """The fields that differ; ``values`` by what it says (:func:`_values_said`) when ``said``."""
    keys = sorted((set(theirs) | set(mine)) - skip)
    if not said:
        pairs = {key: (theirs.get(key, _ABSENT), mine.get(key, _ABSENT)) for key in keys}
    else:
        pairs = {key: _comparable(key, theirs.get(key, _ABSENT), mine.get(key, _ABSENT)) for key in keys}
    if _canonical({k: a for k, (a, _) in pairs.items()}) == _canonical({k: b for k, (_, b) in pairs.items()}):
        return []  # one comparison for the usual case, where all are the same
    return [key for key, (a, b) in pairs.items() if _canonical(a) != _canonical(b)]


def _comparable(key: str, a: object, b: object) -> tuple[object, object]:
    if key == "values" and isinstance(a, Mapping) and isinstance(b, Mapping):
        return _values_said(a), _values_said(b)
    return a, b


def _values_said(values: Mapping[str, Any]) -> tuple[object, list[str]]:
    """What a ``values`` verdict states about the claim: its verdict and the numbers that do not
    hold. Its diagnostics (counts, the numbers read, ``why``, which names local directories)
    are how it was found, and grow as the checks do."""
    misses = values.get("mismatches")
    return values.get("verdict"), sorted(str(m.get("value")) for m in misses or [] if isinstance(m, Mapping))


def _field_difference(key: str, theirs: object, mine: object, at: int) -> str:
    if key == "values":
        return (
            f"values: the context says {_values_text(theirs)}, its artifacts on disk now give {_values_text(mine)} "
            "(the file states what the bytes no longer back)"
        )
    if key == "evidence":
        return f"evidence: the context says {_short(theirs)}, the log as of seq {at} and the artifacts on disk now give {_short(mine)}"
    return f"{key}: the context has {_short(theirs)}, the library gives {_short(mine)} as of seq {at}"


def _values_text(values: object) -> str:
    if not isinstance(values, Mapping):
        return _short(values)
    verdict, misses = _values_said(values)
    return f"{verdict}" + (f" ({'; '.join(misses)})" if misses else "")


def _values_verdict(claim: Mapping[str, Any]) -> object:
    values = claim.get("values")
    return values.get("verdict") if isinstance(values, Mapping) else None


def _why_not_usable(claim: Mapping[str, Any] | None) -> str:
    if claim is None:
        return ""
    why = not_usable(claim) or f"evidence {claim.get('evidence')} is below the context's minimum"
    return f" ({why})"


def _short(value: object, width: int = 60) -> str:
    text = "absent" if value is _ABSENT else _canonical(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _named(item: Mapping[str, Any]) -> str:
    return f"{item.get('entry_id')} ({item.get('node_id')}: {_short(item.get('text'), 50)})"
