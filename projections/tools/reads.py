"""What each node read, checked and replayed: the access log as evidence.

Every read through ARI's calls leaves a line in ``memory_access.jsonl`` with the log position
it read at (``at``), the ids it returned in order (``ids``) and what else a replay needs
(``args``), chained like the log (``projections.access.chain``). The log's reader, beside its
writer in ``projections.access.reader``, checks the chain (an edited, inserted, removed or
reordered line; a tail cut against the head file) and turns the read lines into records.
:class:`Replayer` runs each recorded read again as of its position and compares: the engines
are deterministic, so the same line is expected.

Compared (:data:`READ_FIELDS`), each the replay's line against the recorded one: what a
read returned and ARI shows — ``ids`` (the entry ids, in order), ``results`` (ARI's per-hit
objects: ``entry_id``, ``src_node_id``, ``score`` or ``type`` as the call writes them, in
order), ``limit`` (for the reads that record their count there, the count), and the read's
description ``collection``, ``query`` and ``ancestor_ids``. A ``score`` may differ by
:data:`SCORE_TOLERANCE` (float32 dot products summed in another order), nothing else may.
A recorded line that lacks one of them differs (every line that carries ``at`` was written
with all of them).

Not compared, and why: ``ts`` and ``pid`` (when and in which process it ran: a replay runs
now, elsewhere); ``n``, ``prev`` and ``hash`` (the chain, checked by ``projections.access.reader.check_chain``);
``node_id`` and ``op`` (who called, from the caller's environment; the chain holds them);
``as_of``, ``at``, ``engine``, ``args`` and ``tool`` (the replay's inputs: it runs with them,
so a rewritten one shows as different results, or as not replayable for another engine).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from projections.access.log import READ_FIELDS, ReadCapture, ReadTool
from projections.access.reader import ReadRecord

if TYPE_CHECKING:  # (the backend, its engines and numpy load with a replay, not with the command line)
    from projections.api import MemoryBackend

REPLAYABLE = (
    "search_memory",
    "search_research_memory",
    "build_working_context",
    "get_verified_context",
    "get_node_memory",
    "react_search",
)
SCORE_TOLERANCE = 1e-6


# reads whose ranking weighs each entry by its scope's other entries (the lexical channel's
# document frequencies): an entry of the scope redacted since changes the order of the rest
SCOPE_RANKED = frozenset({ReadTool.SEARCH_MEMORY})
SCOPE_REDACTED = "an entry of its scope was redacted since (its ranking weighs the scope's own entries)"


@dataclass
class Replayed:
    """A recorded read run again."""

    record: ReadRecord
    verdict: str  # same, differs, not_replayable
    got: list[str] = field(default_factory=list)
    why: str = ""
    differing: list[str] = field(default_factory=list)  # the READ_FIELDS that differ

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.record.as_dict(),
            "verdict": self.verdict,
            "got": self.got,
            "why": self.why,
            "differing": self.differing,
        }


VerifiedKey = tuple[tuple[str, ...], str, int | None, int]  # scope, purpose, limit, as_of


def verified_key(scope: list[str], purpose: str, limit: int | None, as_of: int) -> VerifiedKey:
    """What names a verified-context read: the claims it returns (ids and order) depend on
    these and the log alone — ``min_evidence``, ``keep_mismatches`` and the experiments root
    choose ``usable_for_claims`` and grade the claims, never which claims or their order."""
    return tuple(scope), purpose, limit, as_of


class Replayer:
    """Runs recorded reads again on a read-only backend (it records nothing).

    ``built``: verified-context reads the caller already made on this backend, by
    :func:`verified_key`, with the line each wrote (``prove`` builds the context again as of
    its anchor; the read that built the context is the same read, not made twice)."""

    def __init__(self, backend: MemoryBackend, built: dict[VerifiedKey, dict[str, Any]] | None = None) -> None:
        self.backend = backend
        self._built = built or {}
        self._captured: ReadCapture | None = None
        self._calls: dict[ReadTool, Callable[[ReadRecord], list[str]]] = {
            ReadTool.SEARCH_MEMORY: self._search,
            ReadTool.SEARCH_RESEARCH_MEMORY: self._research,
            ReadTool.BUILD_WORKING_CONTEXT: self._working,
            ReadTool.GET_VERIFIED_CONTEXT: self._verified,
            ReadTool.GET_NODE_MEMORY: self._node_memory,
            ReadTool.REACT_SEARCH: self._react,
        }

    def replay(self, record: ReadRecord) -> Replayed:
        try:
            tool = ReadTool(record.tool)
        except ValueError:
            return Replayed(record, "not_replayable", why=f"{record.tool or 'this read'} is not a read ARI replays")
        call = self._calls[tool]
        if record.at is None:
            return Replayed(record, "not_replayable", why="recorded before reads carried their log position")
        engine = self.backend.engine_name
        if record.engine is not None and record.engine != engine:
            return Replayed(record, "not_replayable", why=f"read ranked by {record.engine}; this replay uses {engine}")
        redacted = self.backend.fresh_catalog().redacted
        gone = [i for i in record.ids if i in redacted]
        if gone:
            return Replayed(record, "not_replayable", why=f"{len(gone)} of its results were redacted since")
        if tool in SCOPE_RANKED and any(
            r.node_id in (record.scope or ()) and r.seq <= record.at and r.type == "memory_added"
            for r in redacted.values()
        ):
            return Replayed(record, "not_replayable", why=SCOPE_REDACTED)
        try:
            with self.backend.capturing_reads() as captured:
                self._captured = captured
                got = call(record)
        except Exception as exc:  # a recorded read this checkpoint can no longer answer
            return Replayed(record, "differs", why=f"the replay failed: {type(exc).__name__}: {exc}")
        if not captured.lines:
            return Replayed(record, "differs", got, why="the replay recorded no read to compare", differing=["ids"])
        whys = {} if got == record.ids else {"ids": _difference(record.ids, got)}
        whys.update((k, v) for k, v in _line_differences(record.recorded, captured.lines[-1]).items() if k not in whys)
        if not whys:
            return Replayed(record, "same", got)
        return Replayed(record, "differs", got, why="; ".join(whys.values()), differing=list(whys))

    def _scope(self, record: ReadRecord) -> list[str]:
        return list(record.scope or [])

    def _search(self, r: ReadRecord) -> list[str]:
        return [
            h["entry_id"] for h in self.backend.search_memory(r.query, self._scope(r), r.limit, as_of=r.at)["results"]
        ]

    def _research(self, r: ReadRecord) -> list[str]:
        hits = self.backend.search_research_memory(
            r.query,
            self._scope(r),
            kinds=r.args.get("kinds"),
            require_artifacts=bool(r.args.get("require_artifacts")),
            limit=r.limit,
            as_of=r.at,
        )["results"]
        return [h["entry_id"] for h in hits]

    def _working(self, r: ReadRecord) -> list[str]:
        node = str(r.args.get("node_id") or r.node_id)
        ctx = self.backend.build_working_context(node, self._scope(r), r.args.get("eval_summary"), as_of=r.at)
        return [s["entry_id"] for s in ctx["ancestor_summaries"] + ctx["supplement"]]

    def _verified(self, r: ReadRecord) -> list[str]:
        limit = r.args.get("limit")
        limit = limit if isinstance(limit, int) and not isinstance(limit, bool) else None
        purpose = str(r.args.get("purpose") or "paper")
        line = self._built.get(verified_key(self._scope(r), purpose, limit, r.at)) if r.at is not None else None
        if line is not None and self._captured is not None:
            self._captured.lines.append(line)  # the same read, made already
            return [str(i) for i in line["ids"]]
        ctx = self.backend.get_verified_context(self._scope(r), purpose, limit, as_of=r.at)
        return [c["entry_id"] for c in ctx["claims"]]

    def _node_memory(self, r: ReadRecord) -> list[str]:
        return [e["entry_id"] for e in self.backend.get_node_memory(self._scope(r)[0], as_of=r.at)["entries"]]

    def _react(self, r: ReadRecord) -> list[str]:
        return [s["id"] for s in self.backend.react_search(r.query, r.limit, as_of=r.at)]


def _difference(expected: list[str], got: list[str]) -> str:
    if set(expected) == set(got):
        return "the same ids in another order"
    missing, extra = [i for i in expected if i not in got], [i for i in got if i not in expected]
    return f"{len(missing)} recorded id(s) not returned now, {len(extra)} returned now that were not"


def _line_differences(recorded: dict[str, Any], replayed: dict[str, Any]) -> dict[str, str]:
    """Field → why, for the READ_FIELDS where the replay's line is not the recorded one."""
    out = {}
    for key in READ_FIELDS:
        if key not in recorded:
            out[key] = f"{key}: missing from the recorded line"
        elif key == "results":
            why = _results_difference(recorded[key], replayed.get(key))
            if why:
                out[key] = why
        elif _canonical(recorded[key]) != _canonical(replayed.get(key)):
            out[key] = f"{key}: recorded {_short(recorded[key])}, replayed {_short(replayed.get(key))}"
    return out


def _results_difference(recorded: object, replayed: object) -> str | None:
    if not isinstance(recorded, list) or not isinstance(replayed, list):
        return f"results: recorded {_short(recorded)}, replayed {_short(replayed)}"
    if len(recorded) != len(replayed):
        return f"results: {len(recorded)} recorded, {len(replayed)} replayed"
    for i, (a, b) in enumerate(zip(recorded, replayed), 1):
        if not _same_result(a, b):
            return f"results #{i}: recorded {_short(a)}, replayed {_short(b)}"
    return None


def _same_result(a: object, b: object) -> bool:
    if not isinstance(a, dict) or not isinstance(b, dict) or a.keys() != b.keys():
        return a == b
    for key, x in a.items():
        y = b[key]
        if key == "score" and _number(x) and _number(y):
            if not math.isclose(float(x), float(y), rel_tol=0.0, abs_tol=SCORE_TOLERANCE):
                return False
        elif _canonical(x) != _canonical(y):
            return False
    return True


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _short(value: object, width: int = 80) -> str:
    text = _canonical(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def replay_all(
    backend: MemoryBackend, records: list[ReadRecord], built: dict[VerifiedKey, dict[str, Any]] | None = None
) -> list[Replayed]:
    replayer = Replayer(backend, built)
    return [replayer.replay(r) for r in records]
