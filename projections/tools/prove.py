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
:class:`~projections.evidence.grounding.CitedFiles` for the context built again, the claims traced,
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
from ledger.checkpoint_format import VERIFIED_CONTEXT_NAME
from ledger.events import check_seq
from ledger.safe_io import SIDE_FILE_LIMIT, UnsafeFile, read_file
from projections.access.reader import ReadRecord, check_chain, made_by, read_records
from projections.api import MemoryBackend, refuse_unfinished
from projections.engines.protocol import Progress
from projections.evidence.grounding import CitedFiles, experiments_roots
from projections.models.verdicts import EVIDENCE
from projections.tools.checkpoint import Verification, verify_open
from projections.tools.claim_trace import ClaimProof
from projections.tools.context_check import ContextCheck, check_context, context_as_of
from projections.tools.lineage import lineage_data
from projections.tools.reads import Replayed, replay_all


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
    as_of: int | None = None  # the seq it proves as of, when asked (None: the log as it is)
    as_of_note: str | None = None  # with ``as_of``: what is as of then, and what is today's

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

    @property
    def as_of_seq(self) -> int | None:
        """The seq the proof is as of: the one asked, else the log's last."""
        return self.as_of if self.as_of is not None else self.chain.get("last_seq")

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "as_of_seq": self.as_of_seq,
            "ok": self.ok,
            "verdict": self.verdict,
            "evidence_counts": self.evidence_counts(),
        }


def prove(
    checkpoint_dir: str | Path,
    context: str | Path | None = None,
    experiments_root: str | Path | None = None,
    heads: Iterable[str] = (),
    *,
    strict: bool = False,
    progress: Progress | None = None,
    as_of: int | None = None,
) -> Proof:
    """Check everything a reviewer would about a checkpoint (see the module docstring).

    ``progress(done, total)`` is told how far the long parts are, each counting events from 0:
    the log and its snapshot verified, then the log folded when no snapshot holds it.
    ``as_of``: prove what existed after that seq (:meth:`Reviewer.prove`).
    Raises ``InvalidInput`` for a ``context`` file that is missing or not a verified context."""
    with Reviewer(checkpoint_dir, experiments_root, progress=progress) as reviewer:
        return reviewer.prove(context, heads, strict=strict, as_of=as_of)


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

    def _open_log(self) -> Ledger:
        """The log, opened once (refused first when a crash left a repair or a redaction
        unfinished: its files are not what the log says yet)."""
        if self._ledger is None:
            refuse_unfinished(self.checkpoint)
            self._ledger = Ledger.open_readonly(self.checkpoint)
        return self._ledger

    @property
    def last_seq(self) -> int:
        """The log's last seq: what an ``as_of`` may be at most (the log opened, once)."""
        return self._open_log().last_seq

    def _verify(self, heads: list[str], context: Path | None) -> Verification:
        """The log opened (once) and verified."""
        return verify_open(self._open_log(), heads, context, self.progress)

    def _open(self) -> MemoryBackend:
        """A read-only backend on the log already open (refused as an open refuses it)."""
        assert self._ledger is not None
        self._backend = MemoryBackend(
            self.checkpoint, readonly=True, progress=self.progress, ledger=self._ledger, cited_files=self.cited_files
        )
        return self._backend

    def prove(
        self,
        context: str | Path | None = None,
        heads: Iterable[str] = (),
        *,
        strict: bool = False,
        as_of: int | None = None,
    ) -> Proof:
        """The :class:`Proof` of the checkpoint (see :func:`prove`).

        ``as_of``: what existed after that seq is proved — the context file when it was anchored
        by then, else the context the library builds as of then from what the file records
        (:func:`~projections.tools.context_check.context_as_of`), and only the reads recorded
        by then. Files cannot travel in time: the log's chain and anchors, the access log and
        every file re-hashed are checked as they are today, and the proof says so."""
        ckpt = self.checkpoint
        context_path = Path(context) if context is not None else ckpt / VERIFIED_CONTEXT_NAME
        ctx = _load_context(context_path, given=context is not None)
        heads = list(heads)
        if as_of is not None:
            check_seq(as_of, "as_of", self.last_seq)
        failures: list[str] = []
        unchecked: list[str] = []
        notes: list[str] = []
        found = self._verify(heads, context_path if context is not None else None)
        chain = found.as_dict()
        failures += [f"log: {line}" for line in found.rollback + found.problems]
        if found.report.reason is not None:
            failures.append(f"log: {found.report.summary()}")
        anchors = _anchors_found(self._ledger, found, heads)
        name = context_path.name
        anchor = _anchor(ctx, name) if ctx is not None else None
        if anchor is not None:
            anchors.append(name)
        outside = heads or (context is not None and ckpt.resolve() not in context_path.resolve().parents)
        if not outside:
            unchecked.append(
                "no anchor kept outside the checkpoint: a copy replaced whole (log, head file and context together) "
                "cannot be told from the original; pass --head HASH or --context FILE kept elsewhere"
            )
        roots = self.roots
        backend = self._open()
        no_claims = None
        if as_of is not None and ctx is not None and found.report.reason is None:
            ctx, anchor, name, said = self._as_of(backend, ctx, name, anchor, as_of)
            if ctx is None:
                no_claims = said
            else:
                notes.append(said)
        if ctx is None:
            no_claims = no_claims or f"no verified context at {context_path}"
        elif not ctx["claims"]:
            no_claims = f"{context_path} lists no claims" if name == context_path.name else f"{name} has no claims"
        checked = ContextCheck()
        if ctx is not None and found.report.reason is None:
            checked = check_context(backend, ctx, name, anchor, roots, self.experiments_root, self.cited_files)
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
        records = read_records(lines)
        if as_of is not None:
            records, said = _reads_by(records, as_of)
            notes.append(said)
        replayed = self.replayed = replay_all(backend, records, checked.built)
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
            notes + checked.notes,
            checked.recomputed,
            no_claims,
            as_of,
            None if as_of is None else _as_of_note(as_of, self.last_seq),
        )

    def _as_of(
        self, backend: MemoryBackend, ctx: dict[str, Any], name: str, anchor: Anchor | None, as_of: int
    ) -> tuple[dict[str, Any] | None, Anchor | None, str, str]:
        """The context to prove as of ``as_of``, its anchor and name, and a note saying which:
        the file itself when its anchor is at or before ``as_of`` (it existed then), else the
        context the library builds as of ``as_of`` from what the file records (None when it
        records no lineage: nothing existed then that can be proved)."""
        if anchor is not None and anchor.seq is not None and anchor.seq <= as_of:
            return ctx, anchor, name, f"{name} was anchored at seq {anchor.seq}, by seq {as_of}: it is proved as it is"
        if as_of == 0:
            return None, None, name, "as of seq 0 the log had no event: no claim existed then"
        when = "carries no anchor" if anchor is None else f"was built at seq {anchor.seq}, after seq {as_of}"
        built = context_as_of(backend, ctx, as_of, self.experiments_root)
        if built is None:
            return None, None, name, f"{name} {when}, and records no lineage to build it as of seq {as_of} from"
        lineage = " → ".join(built["lineage"])
        said = (
            f"{name} {when}: proving instead the verified context the library builds as of seq {as_of} "
            f"for its lineage {lineage} ({built['purpose']})"
        )
        return built, _anchor(built, name), f"{name} as of seq {as_of}", said

    def lineage(self, proof: Proof) -> dict[str, Any]:
        """The lineage report's data (:func:`~projections.tools.lineage.lineage_data`) with each
        claim marked by its verdict in ``proof``, from the same open log, and with the files the
        proof hashed not hashed again (its experiments root: the first of the roots that exists)."""
        backend = self._backend if self._backend is not None else self._open()
        root = next((r for r in self.roots if r.is_dir()), None)
        return lineage_data(backend, root, traced=proof.claims, cited_files=self.cited_files, as_of=proof.as_of)


def _reads_by(records: list[ReadRecord], as_of: int) -> tuple[list[ReadRecord], str]:
    """The recorded reads made by ``as_of`` (those that read at a seq at or before it), and a
    note saying how many of all were kept: a read recorded at no position cannot be placed."""
    kept = made_by(records, as_of)
    said = f"as of seq {as_of}: {len(kept)} of {len(records)} recorded read(s) were made by then, and only they are replayed"
    return kept, said


def _as_of_note(as_of: int, last: int) -> str:
    """What a proof as of a seq is as of then, and what is today's."""
    return (
        f"as of seq {as_of} (the log is at seq {last}): the claims, the verified context and the reads as they "
        "stood then; the files checked are today's — the log's chain and anchors, the access log, and every "
        "artifact and node report re-hashed on disk (files cannot travel in time)"
    )


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
