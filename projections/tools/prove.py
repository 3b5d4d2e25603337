"""``ari-ledger prove``: one answer for a reviewer holding a copied checkpoint.

In one process, offline: the log's chain and every anchor (head file, snapshot, the context
file's head, ``--head``); each claim of the verified context traced to its event (by hash),
its node report and artifacts (hashes and values) and its re-run status; the context checked
whole against what the library builds; the access log's chain, and every recorded read
replayed (:mod:`projections.tools.reads`). One verdict per claim — ``holds``, ``fails`` (with
the reasons) — and what could not be checked, said plainly: that is never a pass in
disguise, and ``strict`` makes it a failure.

What the paper reads is what is checked. The paper prompt is built from
``usable_for_claims`` (:func:`~projections.api.verified.render_grounded_block`), so:

- A context with an anchor (``anchor: {seq, hash}``, written by ``VerifiedContext.save``) is
  built again by the library as of the anchor's seq, for its ``lineage`` and ``purpose``,
  over the same experiments roots, and compared whole with the file: ``claims``,
  ``usable_for_claims`` and ``limitations``, item by item keyed by ``entry_id``, and their
  order. A claim edited (any field), added or dropped in either list fails, named. Only
  ``event_hash`` (what ``save`` adds; traced against the log instead) is left out of the
  comparison, and ``text``, ``metric_ptr`` and ``repro_status`` are compared once, by the
  tracing, against the same truth. ``values`` and ``evidence`` depend on the artifacts on
  disk now (and ``exclusions``, where a node's report says it failed): when they differ from
  the file, the file states what the bytes no longer back, and that fails (``values`` by what
  it states: its verdict and the numbers that do not hold; its diagnostics — counts, the
  numbers read, ``why``, which names local directories — are not compared); when a claim's
  work dir is not here at all they are not checked, and said so.
  ``min_evidence``, ``limit`` and ``keep_mismatches`` are read from the file when it records
  them; otherwise none, none, and ``keep_mismatches`` when a usable claim's values are a
  mismatch (``export_verified_context`` keeps them; such a claim fails its values anyway).
  A context built before the log's end is a note (how many events later), not a failure.
- A context without an anchor (ARI's own pipeline writes one without) cannot be built again:
  said as "not checked", and its claims and ``usable_for_claims`` are still traced — every
  usable item must be one of the claims, with the same ``text`` and ``metric_ptr``.

A claim at evidence ``none`` cites no artifact: nothing outside the log backs it, so it is
not proved — it fails, saying so. Counting it as holding would let a context of uncited
claims print PROVED.

No false passes: a checkpoint without a verified context, or a context with no claims, has
nothing to prove — :attr:`Proof.verdict` is ``nothing_to_prove`` and :attr:`Proof.ok` false;
a ``--context`` file that does not exist is an error (``InvalidInput``).

Cost: the log is opened once per command (verified, then read through a read-only backend on
the same open log: :class:`Reviewer`), each cited file is hashed once (one
:class:`~projections.api.grounding.CitedFiles` for the context built again, the claims traced,
the reads replayed and the lineage report), and each claim's event is found by seq in one pass
over the log (``MemoryBackend.event_hashes``), not one decode of its gzip member per claim.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ledger import InvalidInput, Ledger
from ledger.anchor import Anchor
from ledger.safe_io import SIDE_FILE_LIMIT, UnsafeFile, read_file
from ledger.typed import evidence_refs
from ledger.vocabulary import is_sha256
from projections.access.reader import check_chain, read_records
from projections.api.backend import MemoryBackend
from projections.api.grounding import CitedFiles, Grounding, experiments_roots
from projections.api.unfinished import refuse_unfinished
from projections.api.verified import EVIDENCE, VERIFIED_CONTEXT_NAME, evidence_level, not_usable
from projections.engines.protocol import Progress
from projections.models.catalog import Entry
from projections.models.repro import repro_status
from projections.models.verdicts import NOTHING_NUMERIC
from projections.tools.checkpoint import Verification, verify_open
from projections.tools.lineage import lineage_data
from projections.tools.reads import Replayed, VerifiedKey, replay_all, verified_key

SAVED_KEYS = frozenset({"event_hash"})  # added by VerifiedContext.save; traced against the log instead
TRACED_KEYS = frozenset({"text", "metric_ptr", "repro_status"})  # the tracing compares these
DISK_KEYS = frozenset({"values", "evidence", "exclusions"})  # read from the work dirs on disk now
WORK_DIR_ABSENT = "its node's work dir is not present: artifacts and values not checked"


@dataclass
class ClaimProof:
    """One claim of the context, traced to the bytes it came from."""

    entry_id: str
    node_id: str
    text: str
    verdict: str  # holds, fails
    event: dict[str, Any] | None = None  # seq and hash of the event that wrote it
    evidence: str | None = None
    repro_status: str | None = None
    values: dict[str, Any] | None = None
    artifacts: dict[str, int] = field(default_factory=dict)  # status → count
    failures: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # said, but nothing the claim states rests on it

    def fail(self, why: str) -> None:
        self.failures.append(why)
        self.verdict = "fails"


@dataclass
class Proof:
    checkpoint: str
    context: str | None
    chain: dict[str, Any]
    anchors: list[str]  # what the log was checked against
    claims: list[ClaimProof]
    access: dict[str, Any]
    reads: dict[str, int]  # replay verdict → count
    read_failures: list[dict[str, Any]]
    failures: list[str]  # checkpoint-level
    unchecked: list[str]
    strict: bool = False
    notes: list[str] = field(default_factory=list)  # said, neither failed nor unchecked
    recomputed: dict[str, Any] | None = None  # how the context was built again, when it was
    no_claims: str | None = None  # why there is nothing to prove, when there is not

    @property
    def failed(self) -> bool:
        return bool(self.failures or self.read_failures or any(c.verdict == "fails" for c in self.claims))

    @property
    def verdict(self) -> str:
        """``proved``, ``not_proved`` or ``nothing_to_prove`` (no context, or no claims)."""
        if self.failed:
            return "not_proved"
        if not self.claims:
            return "nothing_to_prove"
        if self.strict and (self.unchecked or any(c.unchecked for c in self.claims)):
            return "not_proved"
        return "proved"

    @property
    def ok(self) -> bool:
        return self.verdict == "proved"

    def evidence_counts(self) -> dict[str, int]:
        """Claims by evidence level, strongest first (``unknown``: no entry to grade)."""
        levels = [*reversed(EVIDENCE), None]
        counts = {level or "unknown": sum(1 for c in self.claims if c.evidence == level) for level in levels}
        return {level: n for level, n in counts.items() if n}

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "verdict": self.verdict, "evidence_counts": self.evidence_counts()}


def prove(
    checkpoint_dir: str | Path,
    context: str | Path | None = None,
    experiments_root: str | Path | None = None,
    heads: Iterable[str] = (),
    *,
    strict: bool = False,
    progress: Progress | None = None,
) -> Proof:
    """Check everything a reviewer would about a checkpoint (see the module docstring).

    ``progress(done, total)`` is told how far the long parts are, each counting events from 0:
    the log and its snapshot verified, then the log folded when no snapshot holds it.
    Raises ``InvalidInput`` for a ``context`` file that is missing or not a verified context."""
    with Reviewer(checkpoint_dir, experiments_root, progress=progress) as reviewer:
        return reviewer.prove(context, heads, strict=strict)


class Reviewer:
    """One reviewer's command over a checkpoint, offline and read-only: the log opened once
    (verified, then read through a read-only :class:`MemoryBackend` on the same open log) and
    each cited file hashed once (one :class:`CitedFiles` for the proof and for the lineage
    report drawn from it). A context manager: :meth:`prove`, then :meth:`lineage`."""

    def __init__(
        self,
        checkpoint_dir: str | Path,
        experiments_root: str | Path | None = None,
        *,
        progress: Progress | None = None,
    ) -> None:
        self.checkpoint = Path(checkpoint_dir)
        self.experiments_root = experiments_root
        self.roots = [Path(experiments_root)] if experiments_root is not None else experiments_roots(self.checkpoint)
        self.progress = progress
        self.cited_files = CitedFiles()
        self._ledger: Ledger | None = None
        self._backend: MemoryBackend | None = None
        self.replayed: list[Replayed] = []  # every recorded read, replayed by :meth:`prove`

    def __enter__(self) -> Reviewer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()  # and the log it reads
        elif self._ledger is not None:
            self._ledger.close()
        self._backend = self._ledger = None

    def _verify(self, heads: list[str], context: Path | None) -> Verification:
        """The log opened (once) and verified (refused first when a crash left a repair or a
        redaction unfinished: its files are not what the log says yet)."""
        refuse_unfinished(self.checkpoint)
        self._ledger = Ledger.open_readonly(self.checkpoint)
        return verify_open(self._ledger, heads, context, self.progress)

    def _open(self) -> MemoryBackend:
        """A read-only backend on the log already open (refused as an open refuses it)."""
        assert self._ledger is not None
        self._backend = MemoryBackend(
            self.checkpoint, readonly=True, progress=self.progress, ledger=self._ledger, cited_files=self.cited_files
        )
        return self._backend

    def prove(self, context: str | Path | None = None, heads: Iterable[str] = (), *, strict: bool = False) -> Proof:
        """The :class:`Proof` of the checkpoint (see :func:`prove`)."""
        ckpt = self.checkpoint
        context_path = Path(context) if context is not None else ckpt / VERIFIED_CONTEXT_NAME
        ctx = _load_context(context_path, given=context is not None)
        heads = list(heads)
        failures: list[str] = []
        unchecked: list[str] = []
        found = self._verify(heads, context_path if context is not None else None)
        chain = found.as_dict()
        failures += [f"log: {line}" for line in found.rollback + found.problems]
        if found.report.reason is not None:
            failures.append(f"log: {found.report.summary()}")
        anchors = _anchors_found(self._ledger, found, heads)
        anchor = _anchor(ctx, context_path.name) if ctx is not None else None
        no_claims = None
        if ctx is None:
            no_claims = f"no verified context at {context_path}"
        elif not ctx["claims"]:
            no_claims = f"{context_path} lists no claims"
        if anchor is not None:
            anchors.append(context_path.name)
        outside = heads or (context is not None and ckpt.resolve() not in context_path.resolve().parents)
        if not outside:
            unchecked.append(
                "no anchor kept outside the checkpoint: a copy replaced whole (log, head file and context together) "
                "cannot be told from the original; pass --head HASH or --context FILE kept elsewhere"
            )
        roots = self.roots
        backend = self._open()
        checked = ContextCheck()
        if ctx is not None and found.report.reason is None:
            checked = check_context(
                backend, ctx, context_path.name, anchor, roots, self.experiments_root, self.cited_files
            )
        failures += checked.failures
        unchecked += checked.unchecked
        failures += _nothing_rehashed(checked.claims, roots)
        access, lines = check_chain(ckpt)
        failures += [f"access log: {p}" for p in access.problems]
        if not access.files and access.head is None and found.report.events:
            failures.append(
                "access log: there is none (deleted, or ARI_MEMORY_ACCESS_LOG was off): the reads the nodes and the "
                "paper stage were served cannot be replayed"
            )
        unchecked += [f"access log: {n}" for n in access.notes]
        replayed = self.replayed = replay_all(backend, read_records(lines), checked.built)
        reads = {v: sum(1 for r in replayed if r.verdict == v) for v in ("same", "differs", "not_replayable")}
        if reads["not_replayable"]:
            whys = sorted({r.why for r in replayed if r.verdict == "not_replayable"})
            unchecked.append(f"{reads['not_replayable']} recorded read(s) not replayable: {'; '.join(whys)}")
        return Proof(
            str(ckpt),
            str(context_path) if ctx is not None else None,
            chain,
            anchors,
            checked.claims,
            access.as_dict(),
            reads,
            [r.as_dict() for r in replayed if r.verdict == "differs"],
            failures,
            unchecked,
            strict,
            checked.notes,
            checked.recomputed,
            no_claims,
        )

    def lineage(self, proof: Proof) -> dict[str, Any]:
        """The lineage report's data (:func:`~projections.tools.lineage.lineage_data`) with each
        claim marked by its verdict in ``proof``, from the same open log, and with the files the
        proof hashed not hashed again (its experiments root: the first of the roots that exists)."""
        backend = self._backend if self._backend is not None else self._open()
        root = next((r for r in self.roots if r.is_dir()), None)
        return lineage_data(backend, root, traced=proof.claims, cited_files=self.cited_files)


def _anchors_found(ledger: Ledger | None, found: Verification, heads: list[str]) -> list[str]:
    """The anchors the log was checked against, only those there were: the head file when it
    exists, the snapshot when there is one, each ``--head``."""
    anchors = []
    if ledger is not None and ledger.head_file.path.exists():
        anchors.append("head file")
    if found.snapshot is not None and found.snapshot.present:
        anchors.append("snapshot")
    return anchors + [f"--head {h[:12]}…" for h in heads]


def _nothing_rehashed(claims: Sequence[ClaimProof], roots: list[Path]) -> list[str]:
    """A proof whose claims cite files but of which none could be hashed on disk backs nothing
    with bytes: the experiments directory is missing, empty or another run's."""
    cited = sum(sum(c.artifacts.values()) for c in claims)
    if not claims or any(c.artifacts.get("verified") for c in claims):
        return []
    where = ", ".join(f"{r} ({'present' if r.is_dir() else 'absent'})" for r in roots)
    said = f"none of the {cited} cited artifact(s) was found" if cited else "no claim's work dir was found"
    return [f"no artifact could be re-hashed: {said} under {where}; pass --experiments DIR"]


def _anchor(ctx: Mapping[str, Any], name: str) -> Anchor | None:
    """The anchor the context records, when it is a valid one (``verify`` reports a bad one)."""
    anchor = ctx.get("anchor")
    if not isinstance(anchor, Mapping):
        return None
    seq, hash_ = anchor.get("seq"), anchor.get("hash")
    if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(hash_, str):
        return None
    return Anchor(name, hash_, seq)


def _load_context(path: Path, *, given: bool) -> dict[str, Any] | None:
    """The context file; None when the checkpoint has none (a file named by the caller must exist).
    Read only when it is a regular file of at most 64 MiB (``ledger.safe_io.read_file``: never
    through a link, a FIFO never blocks)."""
    try:
        data = json.loads(read_file(path, SIDE_FILE_LIMIT).decode("utf-8"))
    except FileNotFoundError as exc:
        if given:
            raise InvalidInput("--context", f"{path}: no such file") from exc
        return None
    except UnsafeFile as exc:  # a link, a FIFO, a device, a directory, too big: never waited on
        raise InvalidInput("--context", f"{exc}; not a readable verified context") from None
    except (OSError, ValueError) as exc:
        raise InvalidInput("--context", f"{path} is not a readable verified context ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise InvalidInput("--context", f"{path} has no claims list: not a verified_context.json")
    return data


# ---------------------------------------------------------------------------- the context


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
    out.claims, no_work_dir = _trace(backend, claims, roots, at, known, cited_files)
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


# ---------------------------------------------------------------------------- each claim


def _trace(
    backend: MemoryBackend,
    claims: Sequence[Mapping[str, Any]],
    roots: list[Path],
    at: int | None,
    known: Mapping[str, Any],
    cited_files: CitedFiles | None = None,
) -> tuple[list[ClaimProof], set[str]]:
    """Each claim traced; and the ids of claims whose work dir is not here. ``known``: the
    ``values`` verdicts the library's build already found (entry id → values), checked once."""
    catalog = backend.fresh_catalog()
    entries = list(catalog.entries.values())
    experiment = backend.get_experiment_context()
    grounding = Grounding(roots, experiment.get("metric_ranges"), experiment, cited_files)
    grounding.learn(entries)
    events = [e for e in entries if e.kind == "reproducibility_event"]  # repro_events(), before visibility
    now = repro_status(e for e in events if e.visible(None))
    then = repro_status(e for e in events if e.visible(at)) if at is not None else now
    found = [catalog.entries.get(str(c.get("entry_id"))) if c.get("entry_id") else None for c in claims]
    hashes = backend.event_hashes(e.seq for e in found if e is not None)
    out = [_claim(e, c, grounding, hashes, now, then, known) for e, c in zip(found, claims)]
    absent = {e.entry_id for e in found if e is not None and grounding.work_dir(e) is None}
    return out, absent


def _claim(
    entry: Entry | None,
    claim: Mapping[str, Any],
    grounding: Grounding,
    hashes: Mapping[int, tuple[str, str]],
    status: Mapping[str, str],
    stated: Mapping[str, str],
    known: Mapping[str, Any],
) -> ClaimProof:
    """One claim against its entry; ``status`` is the re-run status now, ``stated`` the one the
    context should state (as of its anchor, when it has one); ``known``: values found already."""
    proof = ClaimProof(str(claim.get("entry_id")), str(claim.get("node_id")), str(claim.get("text") or ""), "holds")
    if entry is None:
        proof.fail("no entry of this id in the log (the context names a claim the log never held)")
        return proof
    event = hashes.get(entry.seq)
    proof.event = {"seq": entry.seq, "hash": event[1] if event else None}
    if event is None or event[0] != entry.entry_id:
        proof.failures.append(f"the log's event at seq {entry.seq} is not this entry")
    elif claim.get("event_hash") not in (None, event[1]):
        proof.failures.append(
            f"the context names event {str(claim['event_hash'])[:12]}…, the log holds {event[1][:12]}…"
        )
    if claim.get("text") != entry.text:
        proof.failures.append("the context's text differs from the text the log holds")
    if claim.get("metric_ptr") != entry.metadata.get("metric_ptr"):
        proof.failures.append("the context's metric_ptr differs from the log's")
    proof.repro_status = status.get(entry.entry_id)
    if proof.repro_status == "rerun_failed":
        proof.failures.append("a re-run failed")
    if claim.get("repro_status") != stated.get(entry.entry_id):
        proof.failures.append(
            f"the context says re-run {claim.get('repro_status')}, the log says {stated.get(entry.entry_id)}"
        )
    work_dir = grounding.work_dir(entry)
    if work_dir is None:
        proof.unchecked.append(WORK_DIR_ABSENT)
    else:
        unchanged = grounding.report_unchanged(entry, work_dir)
        if unchanged is False:
            proof.failures.append("node_report.json is not the report its node consolidated (edited since)")
        elif unchanged is None:
            proof.unchecked.append("node_report.json: no consolidation of its node recorded a hash to compare")
        for ref in evidence_refs(entry.metadata):
            path, sha = ref.get("path"), ref.get("sha256")
            state = grounding.artifact(work_dir, path if isinstance(path, str) else "", sha)
            proof.artifacts[state.status] = proof.artifacts.get(state.status, 0) + 1
            pinned = is_sha256(sha)
            if state.status == "mismatch":
                proof.failures.append(f"{path}: sha256 on disk is not the one recorded (edited after it was hashed)")
            elif state.status == "missing" and pinned:
                proof.failures.append(f"{path}: pinned by sha256 but missing")
            elif state.status in ("missing", "unhashed"):
                proof.notes.append(f"{path}: not pinned by sha256 ({state.status} on disk)")
    values = known.get(entry.entry_id) or grounding.values(entry, work_dir)
    proof.values = dict(values)
    if values["verdict"] == "mismatch":
        proof.failures += [f"value {m['value']}: {m['reason']}" for m in values.get("mismatches", [])]
    elif values["verdict"] == "unchecked" and values.get("why") != NOTHING_NUMERIC:
        proof.unchecked.append(f"values: {values.get('why')}")
    proof.evidence = evidence_level(entry, proof.repro_status, grounding, values)
    if proof.evidence == "none":
        proof.failures.append("it cites no artifact (evidence none): nothing backs it, so it cannot be proved")
    if proof.failures:
        proof.verdict = "fails"
    return proof
