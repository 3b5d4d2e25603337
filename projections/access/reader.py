"""The access log read back: its lines, their chain checked, its reads as records.

The writer (:mod:`projections.access.writer`, through :class:`projections.access.log.AccessLog`)
appends one chained line per operation to ``memory_access.jsonl`` and rotates it; this module is
its reader, beside it. :func:`check_chain` walks the rotated files and the current one and finds
an edited, inserted, removed or reordered line, and a cut tail against the head file
``memory_ledger/memory_access.jsonl.head``; :func:`read_records` turns the read lines into
records a replay runs again (``projections.tools.reads``, above the facade: a replay needs the
backend).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ledger import layout
from ledger.anchor import AnchorUnreadable, HeadFile
from ledger.checkpoint_format import ACCESS_LOG_NAME, ACCESS_SUMMARY_NAME
from ledger.safe_io import read_file
from projections.access.chain import GENESIS, link
from projections.access.log import READ_FIELDS
from projections.access.writer import HEAD_ID, ROTATED_GLOB


@dataclass
class ReadRecord:
    """One recorded read."""

    where: str  # file:line
    n: int | None
    node_id: str
    tool: str
    query: str
    scope: list[str] | None
    limit: int
    at: int | None
    ids: list[str]
    args: dict[str, Any]
    engine: str | None
    recorded: dict[str, Any] = field(default_factory=dict)  # the line's READ_FIELDS, as recorded

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ChainCheck:
    """The access log's chain, as a person would check it."""

    files: list[str] = field(default_factory=list)
    lines: int = 0
    chained: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    head: int | None = None  # the chain's newest line as the head file records it

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def access_files(checkpoint_dir: Path) -> list[Path]:
    """The rotated files, oldest first, then the current one."""
    rotated = sorted(Path(checkpoint_dir).glob(ROTATED_GLOB))
    current = Path(checkpoint_dir) / ACCESS_LOG_NAME
    return rotated + ([current] if current.exists() else [])


def _lines(checkpoint_dir: Path, check: ChainCheck) -> Iterator[tuple[str, bytes]]:
    """Every whole line of the access log's files, in order. A last line without its newline is
    one a crash tore while it was written (a flush returns only after the whole line is): never
    acknowledged, no head names it, the next writer cuts it; it is noted, not read, as the
    ledger's own torn tail is recovered, not reported as damage."""
    files = access_files(checkpoint_dir)
    for k, path in enumerate(files):
        data = read_file(path, None)  # a regular file: a FIFO never blocks
        lines = data.split(b"\n")
        torn = lines.pop()  # b"" after a final newline
        for i, line in enumerate(lines, 1):
            yield f"{path.name}:{i}", line
        if torn:
            where = f"{path.name}:{len(lines) + 1}"
            if k == len(files) - 1:
                check.notes.append(
                    f"{where}: a line a crash tore while it was written ({len(torn)} bytes, never acknowledged); "
                    "the next writer cuts it"
                )
            else:
                yield where, torn


def check_chain(checkpoint_dir: str | Path) -> tuple[ChainCheck, list[dict[str, Any]]]:
    """Check every line's link and the head file; returns the check and the decoded lines."""
    ckpt = Path(checkpoint_dir)
    check = ChainCheck(files=[p.name for p in access_files(ckpt)])
    decoded: list[dict[str, Any]] = []
    running: str | None = None  # the hash the next line must name
    last_n: int | None = None
    hashes: dict[int, str] = {}
    for where, raw in _lines(ckpt, check):
        check.lines += 1
        try:
            value = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            check.problems.append(f"{where}: not a JSON line")
            value = None
        found = link(raw)
        if found.n is None:
            if not found.intact or last_n is not None:
                check.problems.append(f"{where}: an unchained line after the chain began (inserted or edited)")
        else:
            check.chained += 1
            if not found.intact:
                check.problems.append(f"{where}: its bytes do not match its hash (the line was edited)")
            if last_n is None and found.n != 1:
                _chain_starts_late(check, ckpt, where, found.n)
            elif last_n is not None and found.n != last_n + 1:
                check.problems.append(f"{where}: line {found.n} follows line {last_n} (lines removed or reordered)")
            elif found.prev != (running or GENESIS):
                check.problems.append(f"{where}: does not commit to the line before it (a line was removed or edited)")
            last_n = found.n
            hashes[found.n] = found.hash
        running = found.hash
        if isinstance(value, dict):
            decoded.append({**value, "_where": where})
    _check_head(check, ckpt, last_n, hashes)
    return check, decoded


def _chain_starts_late(check: ChainCheck, ckpt: Path, where: str, n: int) -> None:
    if (ckpt / ACCESS_SUMMARY_NAME).exists():
        check.notes.append(
            f"{where}: the chain starts at line {n}; lines 1-{n - 1} were compacted into {ACCESS_SUMMARY_NAME}"
        )
    else:
        check.problems.append(f"{where}: the chain starts at line {n}: lines 1-{n - 1} were removed")


def _check_head(check: ChainCheck, ckpt: Path, last_n: int | None, hashes: dict[int, str]) -> None:
    head_file = HeadFile(layout.store_dir(ckpt) / ACCESS_LOG_NAME)
    try:
        anchor = head_file.read()
    except AnchorUnreadable as exc:
        check.problems.append(str(exc))
        return
    if anchor is None or anchor.ckpt != HEAD_ID or anchor.seq is None:
        if check.chained:
            check.notes.append(f"no {head_file.source}: a cut tail cannot be told from a short log")
        return
    check.head = anchor.seq
    if last_n is None or last_n < anchor.seq:
        check.problems.append(
            f"the access log ends at line {last_n or 0}, but {head_file.source} records line {anchor.seq}: lines were cut"
        )
    elif anchor.seq in hashes and hashes[anchor.seq] != anchor.hash:
        check.problems.append(
            f"line {anchor.seq} is not the line {head_file.source} records: the access log was rewritten"
        )


def made_by(records: list[ReadRecord], as_of: int) -> list[ReadRecord]:
    """The reads made by ``as_of``: those recorded as reading at a seq at or before it (a read
    recorded at no position cannot be placed in time, so it is not among them)."""
    return [r for r in records if r.at is not None and r.at <= as_of]


def read_records(lines: list[dict[str, Any]], node: str | None = None) -> list[ReadRecord]:
    """The read lines (of one node: its own reads, and those scoped to it as the last node)."""
    out = []
    for line in lines:
        if line.get("op") != "read":
            continue
        scope = line.get("ancestor_ids")
        who = str(line.get("node_id") or "")
        if node is not None and who != node and not (not who and isinstance(scope, list) and scope[-1:] == [node]):
            continue
        ids = line.get("ids")
        if not isinstance(ids, list):
            ids = [r.get("entry_id") for r in line.get("results") or [] if isinstance(r, dict)]
        args = line.get("args")
        out.append(
            ReadRecord(
                line["_where"],
                line.get("n"),
                who,
                str(line.get("tool") or ""),
                str(line.get("query") or ""),
                scope if isinstance(scope, list) else None,
                int(line.get("limit") or 0),
                line.get("at") if isinstance(line.get("at"), int) else None,
                [str(i) for i in ids],
                args if isinstance(args, dict) else {},
                line.get("engine") if isinstance(line.get("engine"), str) else None,
                {k: line[k] for k in READ_FIELDS if k in line},
            )
        )
    return out
