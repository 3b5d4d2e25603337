"""Grounding a claim in its files: where its node report is, what its artifacts hash to, and
whether the numbers it states are the numbers in them (``projections.evidence.grammar.values``).

One :class:`Grounding` serves one read (a verified context, an audit, a proof): each node
report and each artifact is read once for it. An artifact is hashed as a stream; a claim
whose number is not its report's has the cited file's bytes read once more, at most 8 MiB,
and hashed again, so the numbers searched are those of the bytes that verified
(:meth:`Grounding.place`). What the reads of the files found is kept in :class:`CitedFiles`:
one per Grounding, or one a command shares across all its reads (``prove`` and its lineage
report), so each cited file is hashed once per command.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ledger import InvalidInput
from ledger.ari.provenance import resolve_inside, sha256_file
from ledger.ari.report_file import read_report_file, report_hash
from ledger.safe_io import read_file
from ledger.typed import evidence_refs
from ledger.vocabulary import is_sha256
from projections.models.catalog import Catalog, Entry
from projections.models.shapes import AuditStatus, ValuesView
from projections.models.verdicts import NOTHING_NUMERIC

# The value grammar (its word tables and patterns, ~8 MB of a process) loads with the first
# claim whose numbers are checked, not with this module: the session imports it for
# ``CitedFiles``, and a client that only writes and searches never checks a number.
if TYPE_CHECKING:
    from projections.evidence.grammar.values import Evidence, Place

REPORT_NAME = "node_report.json"
# the run's own words a fact may be read from: the experiment context's, and the node report's
CONTEXT_FACTS = ("hardware_spec", "metric_rationale", "experiment_goal")
REPORT_FACTS = ("run_command", "build_command", "what_was_done")
SEARCH_MAX_BYTES = 8 << 20  # larger artifacts are hashed, not searched for numbers


@dataclass(frozen=True)
class ArtifactState:
    current: str | None  # sha256 on disk now (None: not a readable regular file)
    status: AuditStatus
    target: Path | None = None  # the regular file inside the work dir that was hashed
    size: int = 0


def experiments_roots(checkpoint_dir: str | Path) -> list[Path]:
    """Where a checkpoint's node work dirs (``<root>/<run_id>/<node_id>``) may be, in order:
    ``experiments`` inside it or beside it, and ARI's layout, ``<workspace>/experiments``
    beside ``<workspace>/checkpoints/<run_id>``."""
    ckpt = Path(checkpoint_dir).resolve()
    return [ckpt / "experiments", ckpt.parent / "experiments", ckpt.parent.parent / "experiments"]


def work_dir_roots(checkpoint_dir: str | Path) -> list[Path]:
    """Where ARI's layouts put a node's work dir, for a checkpoint: the experiments roots
    (flat: ``<workspace>/experiments/<run_id>/<node_id>``), and the bucketed layout ARI's path
    resolver reads (``<workspace>/runs/<run_id>/workspace/<node_id>``, the workspace inferred
    from the checkpoint as ARI infers it; ``runs/<run_id>/workspace`` beside
    ``runs/<run_id>/checkpoints``)."""
    ckpt = Path(checkpoint_dir).resolve()
    workspace = _ari_workspace_root(ckpt)
    found = [
        *experiments_roots(ckpt),
        workspace / "experiments",
        workspace / "runs" / ckpt.name / "workspace",
        ckpt.parent / "workspace",
    ]
    return list(dict.fromkeys(found))


def _ari_workspace_root(ckpt: Path) -> Path:
    """ARI's ``RuntimePathResolver._infer_workspace_root``: the parent of the outermost
    ``checkpoints`` folder above the checkpoint, else the checkpoint's parent."""
    best = None
    for folder in (ckpt, *ckpt.parents):
        if folder.name == "checkpoints" and folder.parent.name != "checkpoints":
            best = folder.parent
    return best if best is not None else ckpt.parent


def check_run_id(run_id: object, field: str = "run_id") -> str:
    """A run id is one directory name under the experiments root, never a path."""
    if not isinstance(run_id, str) or run_id in ("", ".", "..") or "/" in run_id or "\\" in run_id or "\x00" in run_id:
        raise InvalidInput(field, f"{run_id!r} is not a run id (one directory name under experiments_root)")
    return run_id


def run_and_node(ref: object) -> tuple[str, str] | None:
    """(run_id, node_id) of a ``node_report_ref`` that names one work dir, else None."""
    if not isinstance(ref, Mapping):
        return None
    try:
        return check_run_id(ref.get("run_id")), check_run_id(ref.get("node_id"), "node_id")
    except InvalidInput:
        return None


def check_run(
    catalog: Catalog, experiments_root: str | Path, run_id: str, field: str = "run_id", as_of: int | None = None
) -> str:
    """``run_id`` when it names a run: a directory under the experiments root that entries of
    the log (``catalog``, folded to its end; ``as_of``: those written up to that seq) point
    into. Else InvalidInput naming the run id and where it was looked for (an audit of a run
    nobody recorded would find nothing, and say all is well)."""
    check_run_id(run_id)  # a path is malformed, whoever passed it
    work = Path(experiments_root) / run_id
    named = any(
        (pair := run_and_node(e.metadata.get("node_report_ref"))) is not None and pair[0] == run_id
        for e in catalog.entries.values()
        if as_of is None or e.seq <= as_of
    )
    log = "the log" if as_of is None else f"the log up to seq {as_of}"
    if not work.is_dir() and not named:
        raise InvalidInput(field, f"no run {run_id!r}: no directory {work}, and no entry of {log} names it")
    if not work.is_dir():
        raise InvalidInput(field, f"run {run_id!r} has no directory {work} (entries of {log} name it: wrong root?)")
    if not named:
        raise InvalidInput(field, f"no entry of {log} names run {run_id!r} (its directory {work} exists)")
    return run_id


class CitedFiles:
    """What reading cited files found, by (work dir, path, recorded sha256): each file's state
    (its hash now, one read) and, for a file that verified, the numbers its bytes hold. What a
    file holds does not depend on the experiment context or the log position a read is made
    at, so every read of one command may share one (``MemoryBackend(cited_files=…)``): each
    file is then hashed once per command. A long-lived backend shares none: an audit must
    see a file that changed since."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, str, str | None], ArtifactState] = {}
        self.places: dict[tuple[str, str, str], Place | None] = {}


class Grounding:
    """The files behind claims, under the first experiments root that holds each work dir."""

    def __init__(
        self,
        roots: list[Path],
        ranges: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        cited_files: CitedFiles | None = None,
    ) -> None:
        """``cited_files``: what reading the files found, shared with other reads (default: this
        Grounding's own)."""
        self.roots = roots
        self.ranges = _ranges(ranges)
        self.context = context or {}  # the experiment context: its facts and primary metric
        self.cited_files = cited_files if cited_files is not None else CitedFiles()
        self._reports: dict[str, Mapping[str, Any] | None] = {}
        self._artifacts = self.cited_files.states
        self._places = self.cited_files.places
        self._dirs: dict[tuple[str, str], Path | None] = {}
        self._metrics: dict[str, tuple[dict[str, float], dict[str, dict[str, float]], frozenset[str]]] = {}
        self._runs: dict[str, Mapping[str, Any]] = {}  # node id → a node_report_ref seen for it
        self._consolidated: dict[str, set[str]] = {}  # node id → report hashes its consolidations recorded
        self._words: dict[tuple[str, str], frozenset[str]] = {}

    def learn(self, entries: list[Entry]) -> None:
        """Remember each node's report pointer, so a result summary (which carries none) finds
        its node's report."""
        for entry in entries:
            ref = entry.metadata.get("node_report_ref")
            if isinstance(ref, Mapping) and run_and_node(ref) is not None and ref.get("node_id") == entry.node_id:
                self._runs.setdefault(entry.node_id, ref)  # a borrowed report is never its node's
            digest = entry.body.get("report_hash")
            if isinstance(digest, str):
                self._consolidated.setdefault(entry.node_id, set()).add(digest)

    def pointer(self, entry: Entry) -> tuple[str, str] | None:
        """(run_id, node_id) of the report the entry points at, or of its node's report."""
        return run_and_node(entry.metadata.get("node_report_ref") or self._runs.get(entry.node_id))

    def work_dir(self, entry: Entry) -> Path | None:
        """The work dir of that report, under the first root that holds it (looked up once)."""
        pair = self.pointer(entry)
        if pair is None:
            return None
        if pair not in self._dirs:
            found = (root / pair[0] / pair[1] for root in self.roots)
            self._dirs[pair] = next((d for d in found if d.is_dir()), None)
        return self._dirs[pair]

    def artifact(self, work_dir: Path, path: str, recorded: str | None) -> ArtifactState:
        """Hash one cited file (a regular file inside the work dir only), once."""
        key = (str(work_dir), path, recorded)  # str: a Path compares slowly
        if key not in self._artifacts:
            self._artifacts[key] = _read_artifact(work_dir, path, recorded)
        return self._artifacts[key]

    def place(self, work_dir: Path, path: str, recorded: str) -> Place | None:
        """The numbers of a cited file that verifies, read when a claim's number is not its
        report's: the bytes searched are hashed again, so they are the bytes that verified."""
        key = (str(work_dir), path, recorded)
        if key not in self._places:
            self._places[key] = None
            state = self.artifact(work_dir, path, recorded)
            if state.status == "verified" and state.target is not None and state.size <= SEARCH_MAX_BYTES:
                try:
                    data = read_file(state.target, SEARCH_MAX_BYTES)  # a regular file only, bounded
                except OSError:
                    data = b""  # gone (or replaced) since it was hashed: nothing to search
                if data and hashlib.sha256(data).hexdigest() == recorded and b"\x00" not in data[:8192]:
                    from projections.evidence.grammar.values import numbers_in

                    self._places[key] = numbers_in(data, path)
        return self._places[key]

    def report(self, work_dir: Path) -> Mapping[str, Any] | None:
        """The work dir's node report, read once: a regular file inside the work dir, at most
        16 MiB (``ledger.ari.report_file.read_report_file``), so a FIFO in its place never blocks; a
        report that cannot be read is None (the claims it grounds are unchecked: "no readable
        node_report.json")."""
        key = str(work_dir)
        if key not in self._reports:
            try:
                loaded = read_report_file(work_dir / REPORT_NAME, inside=work_dir)
            except (OSError, ValueError):  # InvalidInput is a ValueError
                loaded = None
            self._reports[key] = loaded if isinstance(loaded, Mapping) else None
        return self._reports[key]

    def report_unchanged(self, entry: Entry, work_dir: Path) -> bool | None:
        """Whether the node report on disk is one its node's consolidation hashed (None: no
        consolidation recorded one, or there is no readable report)."""
        pair = self.pointer(entry)
        recorded = self._consolidated.get(pair[1]) if pair is not None else None
        report = self.report(work_dir)
        if not recorded or report is None:
            return None
        try:
            return report_hash(report) in recorded
        except InvalidInput:
            return False

    def own_work_dir(self, entry: Entry) -> Path | None:
        """The work dir of the claim's *own* node's report (a claim citing another node's report
        is still checked against its own: docs/grounding.md, section 4)."""
        pair = self.pointer(entry)
        if pair is None:
            return None
        own = (pair[0], entry.node_id)
        if own not in self._dirs:
            found = (root / own[0] / own[1] for root in self.roots)
            self._dirs[own] = next((d for d in found if d.is_dir()), None)
        return self._dirs[own]

    def borrowed(self, entry: Entry) -> str | None:
        """The node whose report the claim cites, when it is not the claim's own."""
        ref = entry.metadata.get("node_report_ref")
        pair = run_and_node(ref)
        return pair[1] if pair is not None and pair[1] != entry.node_id else None

    def values(self, entry: Entry, work_dir: Path | None = None) -> ValuesView:
        """The ``values`` verdict of one claim: every number it states (and its ``metric_ptr``)
        checked against its own node's report by the grammar of docs/grounding.md."""
        from projections.evidence.grammar.values import Evidence, Verdict, check_claim, check_metric_ptr, summarise

        ptr = entry.metadata.get("metric_ptr")
        own_dir = self.own_work_dir(entry)
        report = self.report(own_dir) if own_dir is not None else None
        if report is None:
            found = check_claim(entry.text, Evidence({}))
            if not found and not isinstance(ptr, Mapping):
                return {"verdict": "unchecked", "checked": 0, "why": NOTHING_NUMERIC, "numbers": []}
            where = "no work dir found" if own_dir is None else f"no readable {REPORT_NAME} in {own_dir}"
            why = f"{where} for {entry.node_id} (looked under {_roots(self.roots)})"
            view = summarise([Verdict(v.written, v.text, "unchecked", why) for v in found])
            return cast(ValuesView, {**view, "verdict": "unchecked", "why": why})
        assert own_dir is not None
        evidence = self._evidence(entry, own_dir, report)
        extra: list[Verdict] = []
        if isinstance(ptr, Mapping) and ptr.get("name") is not None:
            miss = check_metric_ptr(ptr, evidence)
            shown = f"metric_ptr {ptr.get('name')}={ptr.get('value')!r}"
            extra.append(
                Verdict("metric_ptr", shown, "mismatch", miss.reason, miss.looked)
                if miss
                else Verdict("metric_ptr", shown, "checked")
            )
        return cast(ValuesView, summarise(check_claim(entry.text, evidence), extra))

    def _evidence(self, entry: Entry, work_dir: Path, report: Mapping[str, Any]) -> Evidence:
        from projections.evidence.grammar.values import Evidence, facts_in

        sources: list[Callable[[], Place | None]] = []
        if self.borrowed(entry) is None:  # another node's files are not this claim's evidence
            for ref in evidence_refs(entry.metadata):
                path, sha = ref.get("path"), ref.get("sha256")
                if isinstance(path, str) and path != REPORT_NAME and is_sha256(sha):
                    sources.append(functools.partial(self.place, work_dir, path, sha))
        metrics, ancestors, others = self._numbers(work_dir, report)
        texts = {f"the experiment's {k}": self.context.get(k) for k in CONTEXT_FACTS}
        texts.update({f"{work_dir.name}'s {k}": report.get(k) for k in REPORT_FACTS})
        numbers = dict(report.get("cpu_info") or {}) if isinstance(report.get("cpu_info"), Mapping) else {}
        if isinstance(report.get("mem_total_kb"), (int, float)):
            numbers["mem_total_kb"] = report["mem_total_kb"]
        primary = self.context.get("primary_metric")
        return Evidence(
            metrics,
            ancestors,
            sources,
            self.ranges,
            node_id=work_dir.name,
            others=others,
            facts=facts_in(texts, numbers),
            primary=primary if isinstance(primary, str) else None,
            primary_lower=self.context.get("higher_is_better") is False,
            words=self._run_words(work_dir, report),
            label=report.get("label") if isinstance(report.get("label"), str) else None,
        )

    def _run_words(self, work_dir: Path, report: Mapping[str, Any]) -> frozenset[str]:
        """The words the run writes about this claim's node: the experiment context, its own and
        its ancestors' reports (prose, commands, headline), the run's node ids."""
        key = ("words", str(work_dir))
        if key not in self._words:
            texts = [str(v) for k, v in self.context.items() if isinstance(v, str)]
            reports = [report]
            ids = report.get("ancestor_ids")
            for aid in ids if isinstance(ids, list) else []:
                if isinstance(aid, str) and "/" not in aid and aid not in ("", ".", ".."):
                    up = self.report(work_dir.parent / aid)
                    reports.append(up or {})
            for r in reports:
                texts += [str(r.get(k) or "") for k in (*REPORT_FACTS, "delta_vs_parent", "status", "label")]
                assessment = r.get("self_assessment")
                if isinstance(assessment, Mapping):
                    texts += [str(assessment.get("headline") or "")] + [
                        str(c) for c in assessment.get("concerns") or []
                    ]
                texts += [str(h) for h in r.get("next_steps_hints") or [] if isinstance(h, str)]
            with contextlib.suppress(OSError):
                texts += [p.name for p in work_dir.parent.iterdir()]
            from projections.evidence.grammar.sources import words_of

            self._words[key] = frozenset(w for t in texts for w in words_of(t))
        return self._words[key]

    def _numbers(
        self, work_dir: Path, report: Mapping[str, Any]
    ) -> tuple[dict[str, float], dict[str, dict[str, float]], frozenset[str]]:
        """The report's numeric metrics, its ancestors' (root first) and the run's other nodes,
        once per work dir."""
        key = str(work_dir)
        if key not in self._metrics:
            from projections.evidence.grammar.values import numeric_metrics

            ancestors: dict[str, dict[str, float]] = {}
            ids = report.get("ancestor_ids")
            for aid in ids if isinstance(ids, list) else []:
                if isinstance(aid, str) and "/" not in aid and aid not in ("", ".", ".."):
                    up = self.report(work_dir.parent / aid)
                    ancestors[aid] = numeric_metrics(up.get("metrics") if up else None)
            try:
                siblings = {p.name for p in work_dir.parent.iterdir() if p.is_dir()}
            except OSError:
                siblings = set()
            others = frozenset(siblings - set(ancestors) - {work_dir.name})
            self._metrics[key] = (numeric_metrics(report.get("metrics")), ancestors, others)
        return self._metrics[key]


def _read_artifact(work_dir: Path, path: str, recorded: str | None) -> ArtifactState:
    try:
        target = resolve_inside(work_dir, path)
        info = os.stat(target)
    except (InvalidInput, OSError):
        return ArtifactState(None, "missing")
    if not stat.S_ISREG(info.st_mode):
        return ArtifactState(None, "missing")
    try:
        current = sha256_file(target)  # opened as a regular file only: a FIFO swapped in never blocks
    except OSError:
        return ArtifactState(None, "missing")
    if recorded is None or not is_sha256(recorded):
        return ArtifactState(current, "unhashed", target, info.st_size)
    return ArtifactState(current, "verified" if current == recorded else "mismatch", target, info.st_size)


def _ranges(declared: Mapping[str, Any] | None) -> dict[str, tuple[float, float]]:
    """``metric_ranges`` of the experiment context: ``{name: [low, high]}`` (others ignored)."""
    out = {}
    for name, pair in (declared or {}).items():
        if isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(v, (int, float)) for v in pair):
            out[str(name)] = (float(pair[0]), float(pair[1]))
    return out


def _roots(roots: list[Path]) -> str:
    return ", ".join(str(r) for r in roots) or "no experiments root"
