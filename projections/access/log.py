"""ARI's access log, ``memory_access.jsonl``: one JSON line per memory read and write.

ARI's viz (``/api/checkpoint/<id>/memory_access``) and ``ari memory compact-access`` read this
file, so every line starts with ARI's own fields, spelled as ARI writes them; this library's
additions (``tool``, ``pid`` and whatever the caller passes) follow as extra keys. It is an
audit trail, not a source of truth: nothing here may fail a memory call, so failures (disk
full, permissions, a read-only file system) are kept in ``problems`` and logged once.

A call encodes its line and queues it; :mod:`projections.access.writer` appends it from a
thread of its own, chained onto the line before it, under a ``flock`` shared by every process
of the checkpoint, rotating the file as ARI names rotations. Readers in the same process call
:meth:`AccessLog.flush` first (``flush_and_close`` for ARI's tests).
"""

from __future__ import annotations

import collections
import logging
import os
import stat
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

import msgspec

from ledger import config, layout
from ledger.anchor import HeadFile
from ledger.checkpoint_format import ACCESS_LOG_NAME as ACCESS_LOG_NAME
from ledger.checkpoint_format import ACCESS_STEM
from ledger.events import utc_now
from ledger.output import replace_file
from ledger.safe_io import open_file
from projections import settings
from projections.access.chain import link, rechain
from projections.access.writer import HEAD_ID, LineWriter

log = logging.getLogger(__name__)

KEEP_PROBLEMS = 10
CHAIN_KEYS = ("n", "prev", "hash")  # added by the chain, never a caller's
_CHAIN_SET = frozenset(CHAIN_KEYS)
# str.splitlines() (ARI's readers) also breaks on these; JSON allows them raw in a string,
# so they are escaped to keep one event on one line as ARI reads it.
_LINE_BREAKS = ((b"\xc2\x85", b"\\u0085"), (b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"))
_encoder = msgspec.json.Encoder(enc_hook=str)


class ReadTool(StrEnum):
    """The reads a replay runs again (``projections.tools.reads``), each by the tool name its line
    is recorded with: a closed table, as ``PerEventType`` is for events. The services record these
    reads with it and the replayer dispatches on it; a read not named here
    (``bulk_get_node_memory``) is recorded, never replayed."""

    SEARCH_MEMORY = "search_memory"
    SEARCH_RESEARCH_MEMORY = "search_research_memory"
    BUILD_WORKING_CONTEXT = "build_working_context"
    GET_VERIFIED_CONTEXT = "get_verified_context"
    GET_NODE_MEMORY = "get_node_memory"
    REACT_SEARCH = "react_search"


# the fields of a read's line that read_fields gives, in the order a replay compares them (the
# most telling first; projections.tools.reads says why these and no others)
READ_FIELDS = ("ids", "results", "limit", "collection", "query", "ancestor_ids")


def read_fields(
    collection: str, query: str, ancestor_ids: list[str] | None, limit: int, results: list[dict]
) -> dict[str, Any]:
    """ARI's fields of a read line, and ``ids`` (the entry ids returned, in order): what a
    replay compares."""
    return {
        "collection": collection,
        "query": query,
        "ancestor_ids": None if ancestor_ids is None else list(ancestor_ids),
        "limit": limit,
        "results": results,
        "ids": [r.get("entry_id") for r in results if isinstance(r, dict)],
    }


class AccessLines:
    """ARI's line shapes (:meth:`write`, :meth:`read`, :meth:`node_search`, :meth:`record`),
    and where a shaped line goes (:meth:`_keep`): :class:`AccessLog` appends it to
    ``memory_access.jsonl``, :class:`ReadCapture` keeps a replayed read's line in memory. A
    session's services call these; none of them raises into the caller."""

    def _recording(self) -> bool:
        """Whether lines are kept at all."""
        return True

    def _keep(self, line: dict[str, Any], tool: str, extra: dict[str, Any]) -> None:
        """Keep one shaped line: ARI's fields (``line``), the calling ``tool`` and the caller's ``extra``."""
        raise NotImplementedError

    # ARI's two line shapes --------------------------------------------------------------

    def write(
        self,
        collection: str,
        entry_id: str,
        text: str,
        metadata: dict,
        *,
        tool: str,
        node: str | None = None,
        **extra: Any,
    ) -> None:
        """ARI's write line (``collection`` is ``node_scope`` or ``react_step``)."""
        if not self._recording():
            return
        self._keep(
            {
                **self._head("write", node),
                "collection": collection,
                "entry_id": entry_id,
                "text_preview": (text or "")[: settings.access_log_preview_chars()],
                "metadata": dict(metadata or {}),  # as it was at the call (the line is encoded later)
            },
            tool,
            extra,
        )

    def read(
        self,
        collection: str,
        query: str,
        ancestor_ids: list[str] | None,
        limit: int,
        results: list[dict],
        *,
        tool: str,
        node: str | None = None,
        **extra: Any,
    ) -> None:
        """ARI's read line; ``ancestor_ids`` is None for ReAct reads, ``results`` carry
        ``entry_id``/``src_node_id``/``score`` (inheritance reads: ``query="inherit:…"``). Added:
        ``ids`` (the entry ids returned, in order) and what the caller passes, such as ``at``
        (the log position read at) and ``args`` (what else a replay needs)."""
        if not self._recording():
            return
        fields = read_fields(collection, query, ancestor_ids, limit, results)
        ids = fields.pop("ids")
        self._keep({**self._head("read", node), **fields}, tool, {"ids": ids, **extra})

    def node_search(
        self,
        query: str,
        scope: list[str],
        limit: int,
        results: list[Any],
        *,
        tool: str,
        as_of: int | None,
        **extra: Any,
    ) -> None:
        """The read line of a scored search of node memory (``results``: entry views with
        ``entry_id``, ``node_id`` and ``score``)."""
        refs = [{"entry_id": r["entry_id"], "src_node_id": r["node_id"], "score": r["score"]} for r in results]
        self.read("node_scope", query, scope, limit, refs, tool=tool, as_of=as_of, **extra)

    def record(self, op: str, tool: str, *, node: str | None = None, **fields: Any) -> None:
        """A line for this library's other operations (``refused``, ``clear``, ``purge``,
        ``seed``, ``import``, ``audit``, ``context``, …): ARI's ``ts``/``node_id``/``op`` then
        ``fields``. ``write``/``read`` lines must carry ARI's fields, so they go through
        :meth:`write` and :meth:`read` and are refused here."""
        if not self._recording():
            return
        if op in ("write", "read"):
            self._problem("record", ValueError(f"op {op!r} has ARI's shape; use AccessLog.{op}()"))
            return
        self._keep(self._head(op, node), tool, fields)

    @staticmethod
    def _head(op: str, node: str | None) -> dict[str, Any]:
        who = node if node is not None else (config.current_node() or "")
        return {"ts": time.time(), "node_id": who, "op": op}

    def _problem(self, what: str, exc: BaseException) -> None:
        """A failure kept for ``problems`` (never raised); the base keeps none."""

    # what a session asks of any of them ---------------------------------------------------

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every line so far is kept; False if that took longer than ``timeout``."""
        return True

    def flush_and_close(self) -> None:
        """Every line kept, and what holds them closed."""

    @property
    def problems(self) -> list[str]:
        """The last few failures, newest last, for ``health()``/``status``; never raised."""
        return []


class AccessLog(AccessLines):
    """memory_access.jsonl in ARI's line format; never raises into the caller."""

    def __init__(self, checkpoint_dir: Path, *, muted: bool = False) -> None:
        self.path = Path(checkpoint_dir) / ACCESS_LOG_NAME
        self.muted = muted  # a read-only backend (a person's `ari-ledger search`) writes nothing
        self.head = HeadFile(layout.store_dir(checkpoint_dir) / ACCESS_LOG_NAME)  # the chain's newest line
        self._problems: collections.deque[str] = collections.deque(maxlen=KEEP_PROBLEMS)
        self._warned: set[tuple[str, int | None]] = set()
        self._writer = LineWriter(self.path, self.head, self._problem, _encode)

    def _recording(self) -> bool:
        return not self.muted and settings.access_log_enabled()

    # ARI compatibility and health ---------------------------------------------------------

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every line queued so far is in the file (what a reader in this process
        needs first); False if that took longer than ``timeout``."""
        return self._writer.flush(timeout)

    def flush_and_close(self) -> None:
        """ARI's tests drain its queue with this: every queued line written, the descriptors
        closed, the file fsynced. The log stays usable afterwards (the next line reopens)."""
        self._writer.close()
        if self.muted or not settings.access_log_enabled():
            return
        try:
            fd = open_file(self.path, os.O_RDONLY)  # never through a link; a FIFO never blocks
        except FileNotFoundError:
            return
        except OSError as exc:
            self._problem("fsync", exc)
            return
        try:
            os.fsync(fd)
        except OSError as exc:
            self._problem("fsync", exc)
        finally:
            os.close(fd)

    def rewrite(self, scrub: Callable[[Any], tuple[Any, bool]]) -> list[str]:
        """Pass every line of the access log and its rotations through ``scrub`` (a JSON value ->
        (value, changed)), chain the lines again from the first changed line on, and replace each
        file whose bytes changed, atomically, under that file's lock: a writer waiting for it
        finds the new file (as after a rotation) and no line is lost. Returns the names of the
        files rewritten. For ``ari-ledger redact``."""
        self.flush()
        rewritten = []
        running: str | None = None  # the hash the next file's first line must name
        for path in sorted(self.path.parent.glob(f"{ACCESS_STEM}*.json*")):
            try:
                fd = open_file(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            except OSError as exc:  # a link, a FIFO, a directory: never followed, never rewritten
                self._problem("rewrite", exc)
                continue
            lines: list[bytes] = []
            try:
                self._writer.lock(fd)
                if os.fstat(fd).st_ino != os.stat(path).st_ino:
                    continue  # rotated meanwhile: its new name comes later in the listing, or not at all
                with open(fd, "rb", closefd=False) as f:
                    raw = f.read()
                if path.suffix == ".jsonl":
                    lines, running = rechain(_scrub_lines(raw, scrub), running)
                    new = b"".join(line + b"\n" for line in lines)
                else:
                    new = _scrub_whole(raw, scrub)
                if new != raw:
                    _replace(path, fd, new)
                    rewritten.append(path.name)
                if path == self.path and lines and (last := link(lines[-1])).n is not None:
                    self.head.write(HEAD_ID, last.n, last.hash, both=True)
            finally:
                os.close(fd)
        return rewritten

    @property
    def problems(self) -> list[str]:
        """The last few failures, newest last, for ``health()``/``status``; never raised."""
        return list(self._problems)

    # internals ----------------------------------------------------------------------------

    def _keep(self, line: dict[str, Any], tool: str, extra: dict[str, Any]) -> None:
        try:
            line["tool"] = tool
            line["pid"] = os.getpid()
            if extra.keys() & line.keys() or extra.keys() & _CHAIN_SET:
                clash = [k for k in extra if k in line or k in _CHAIN_SET]
                self._problem("fields", ValueError(f"extra fields {clash} would overwrite fixed ones; dropped"))
                extra = {k: v for k, v in extra.items() if k not in clash}
            line.update(extra)
            self._writer.put(line)  # encoded in the writer thread
        except Exception as exc:  # telemetry must not fail a memory call
            self._problem("append", exc)

    def _problem(self, what: str, exc: BaseException) -> None:
        self._problems.append(f"{utc_now()} {what}: {type(exc).__name__}: {exc}")
        key = (what, getattr(exc, "errno", None))
        if key not in self._warned:
            self._warned.add(key)
            log.warning("access log %s, %s: %s (kept in problems; memory calls are unaffected)", self.path, what, exc)


class ReadCapture(AccessLines):
    """Stands in for a session's access log while a recorded read is replayed: keeps the read
    lines the call makes (``lines``: ARI's fields as :meth:`AccessLines.read` shapes them, and
    ``ids``, as the log would hold them in JSON), writes nothing, and keeps nothing else."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def _keep(self, line: dict[str, Any], tool: str, extra: dict[str, Any]) -> None:
        if line["op"] == "read":
            fields = {k: v for k, v in {**line, **extra}.items() if k in READ_FIELDS}
            self.lines.append(msgspec.json.decode(_encode(fields)))  # the JSON the log would hold


def _replace(path: Path, fd: int, data: bytes) -> None:
    """Replace ``path`` (open as ``fd``) with ``data``, atomically and durably (the rename is
    what a redaction's promise rests on), keeping the old file's permission bits; the
    temporary file is hidden, never taken for an access log by a glob."""
    replace_file(path, data, mode=stat.S_IMODE(os.fstat(fd).st_mode), hidden=True)


def _encode(line: dict[str, Any]) -> bytes:
    """One JSON object (no newline), UTF-8 as is (``ensure_ascii=False``), big ints exact;
    values JSON cannot hold are turned into strings rather than losing the line."""
    try:
        data = _encoder.encode(line)
    except (TypeError, ValueError, RecursionError, msgspec.EncodeError):
        data = _encoder.encode(_plain(line, 0))
    if b"\xc2\x85" in data or b"\xe2\x80" in data:
        for raw, escaped in _LINE_BREAKS:
            data = data.replace(raw, escaped)
    return data


def _plain(value: Any, depth: int) -> Any:
    """``value`` with string keys and JSON types only (cycles and deep nesting cut)."""
    if depth > 32:
        return "…"
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v, depth + 1) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _scrub_lines(raw: bytes, scrub: Callable[[Any], tuple[Any, bool]]) -> list[bytes]:
    """The lines of ``raw`` (no newlines) through ``scrub``; a changed line is encoded anew."""
    out = []
    for line in raw.splitlines():
        try:
            value, hit = scrub(msgspec.json.decode(line))
            new = _encode(value) if hit else line
        except msgspec.DecodeError:  # not a JSON line (a torn write): scrubbed as text
            text, hit = scrub(line.decode("utf-8", "replace"))
            new = text.encode() if hit else line
        out.append(new)
    return out


def _scrub_whole(raw: bytes, scrub: Callable[[Any], tuple[Any, bool]]) -> bytes:
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return raw
    value, hit = scrub(value)
    return msgspec.json.encode(value) if hit else raw
