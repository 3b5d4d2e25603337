"""Redaction: the bodies of chosen events removed from the log, the chain still verifying.

An append-only, hash-chained log is where a leaked secret (an API key in a ReAct observation,
a token in an environment dump) cannot simply be deleted. A redaction replaces each chosen
event's line by its stub (``ledger.chain.stub_line``: the body replaced by its digest, the
envelope and hash unchanged) and appends an ``events_redacted`` event naming them, the digest
of each removed body and of each stub, with who did it and why. The chain still links; a
version-3 stub still checks against its own hash, and ``verify`` requires every stub to be named
by a later redaction (``ledger.verify.Redactions``).

The log is rewritten under its lock, in one checked pass, into a temporary file beside it (members
holding no chosen event copied byte for byte, the others rebuilt, then the redaction event), synced,
and renamed over the log: a SIGKILL at any point leaves either the old log (and a temporary file
the next writable open removes) or the new one. Processes holding the log open notice the rename
at their next lock or refresh and continue on the new file (replacing the log is the ledger's own
operation, :meth:`Ledger.replace_log`: this module only writes the new file's members); a
writer waiting for the old file's lock appends to the new one. The side index is rewritten and
the head file anchored at the redaction event.

What else forgets the removed text: one rule, :class:`Scrub`, built once per redaction
(``RedactionReport.rule``) and used for every file outside the log — the files set aside
beside it (here), the access log and ``verified_context.json`` (``projections.tools.redaction``).
A redaction removes what its selector chose, and nothing else:

1. **The selector's matches** (``--match`` / ``--regex``), wherever they occur, in any string
   and any key: each replaced by ``[redacted]``.
2. **The records of a chosen event** — a JSON object whose ``entry_id`` or ``id`` names it (the
   access log's write line of it, a claim, an item of ``usable_for_claims`` or ``limitations``)
   — lose their text (``text``, ``content``, ``text_preview``, ``persona``, ``human``: each
   ``[redacted]``), their ``metadata`` (``{}``), the typed pointers a claim copies out of that
   metadata (``metric_ptr``, ``artifact_refs``, …: ``[]``, ``{}`` or ``null`` by type) and their
   ``values`` (the numbers quoted from the text: ``{}``). Their ids, node, seq and scores stay. An object that only
   names a chosen event (a result row of a read: id, node, score) holds none of these.
3. **The removed texts** (:func:`removed_texts`): the free text of each removed body (a memory's
   ``text``, a ReAct step's ``content``, a core seed's ``persona`` and ``human``; never its
   metadata, the core seed's ``context`` or any key) that is a phrase — :data:`MIN_TEXT` or more
   characters and at least two words (a single word cannot be told from a label, an id, a
   hash or a tool name, which the files are full of) — and that no event the redacted log
   keeps holds as a string value (another entry with the same text: the log still says it,
   so it is not this redaction's to remove). A string value *equal* to one is replaced by
   ``[redacted]`` (a query that quoted an entry whole); never a part of a longer string, never
   a key.
4. **Never**: the chain and anchor fields (``n``, ``prev``, ``hash``, ``event_hash``,
   ``anchor``, :data:`NEVER`): counters and hashes, never caller text, at any depth. The access
   log's lines are chained again from the first changed line on.

Every other record of every file stays as it was. So a selection by id or node (no text) may
leave a *part* of a removed text inside a longer string elsewhere (a query that quoted a few
words of it): to remove a text wherever it occurs, select it by ``--match``/``--regex``, which
replaces it everywhere (1). Files set aside beside the log (torn tails, rolled back or repaired
bytes) are deleted, never edited: one whose bytes (also inside gzip members cut short) hold a
chosen event's id, a removed text or a match.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import zlib
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO, assert_never

import msgspec

from .. import layout
from ..chain import body_digest, canonical, decode_line, stub_line, unhashed_bytes
from ..checkpoint_format import (
    HEAD_SUFFIX,
    INDEX_SUFFIX,
    OLD_INDEX_TMP_SUFFIX,
    REDACT_INTENT_SUFFIX,
    REPAIR_INTENT_SUFFIX,
    ROLLBACKS_SUFFIX,
)
from ..errors import InvalidInput, LedgerError
from ..events import CHECKPOINT_NODE, Event, EventsRedacted, Redacted, check_text, is_stub_body, upcast
from ..ledger import Ledger
from ..log import compress_member, fsync_dir
from ..output import replace_file
from ..recovery import walk
from ..replacement import LogReplacement
from ..safe_io import SET_ASIDE_MODE, SIDE_FILE_LIMIT, read_file
from ..typed import TYPED_KEYS

log = logging.getLogger("ledger")

REDACTABLE = ("memory_added", "react_step", "core_seeded")  # the event types that carry caller text
MARK = "[redacted]"  # what a removed text is replaced by, in every file outside the log
MIN_TEXT = 8  # a removed free text shorter than this (or of one word) is not searched for elsewhere (rule 3)
FREE_TEXT = {"memory_added": ("text",), "react_step": ("content",), "core_seeded": ("persona", "human")}
RECORD_TEXT = frozenset({"text", "content", "text_preview", "persona", "human"})  # a record's text (rule 2)
NEVER = frozenset({"n", "prev", "hash", "event_hash", "anchor"})  # chain and anchor fields (rule 4)
INTENT_SUFFIX = REDACT_INTENT_SUFFIX  # memory_ledger.jsonl.gz.redact: derived files not all scrubbed yet
# beside the log: never deleted here
_KEEP = (HEAD_SUFFIX, INDEX_SUFFIX, OLD_INDEX_TMP_SUFFIX, ROLLBACKS_SUFFIX, REPAIR_INTENT_SUFFIX, INTENT_SUFFIX)


@dataclass(frozen=True)
class Selector:
    """Which events to redact: by id, by node, by a literal or regular expression over their
    text (every string of the body: text, metadata, ReAct content, core memory)."""

    ids: tuple[str, ...] = ()
    node: str | None = None
    text: str | None = None
    regex: bool = False

    def __post_init__(self) -> None:
        if not (self.ids or self.node or self.text):
            raise InvalidInput("selector", "say what to redact: event ids, a node, or a text to match")
        if self.text is not None:
            try:
                pattern = self.pattern  # a bad expression fails here, before anything is read
            except re.error as exc:
                raise InvalidInput("text", f"not a valid regular expression ({exc})") from None
            if pattern is not None and pattern.fullmatch(""):
                raise InvalidInput("text", "matches the empty string: it would choose every event and mark every gap")

    @cached_property
    def pattern(self) -> re.Pattern[str] | None:
        if self.text is None:
            return None
        return re.compile(self.text if self.regex else re.escape(self.text))

    def describe(self) -> str:
        """How the events were chosen, never the matched text (it may be the secret)."""
        parts = [f"{len(self.ids)} event id(s)"] if self.ids else []
        parts += [f"node {self.node}"] if self.node else []
        parts += [("a regular expression" if self.regex else "a literal text") + " match"] if self.text else []
        return ", ".join(parts)

    def matches(self, event: Event) -> bool:
        if event.type not in REDACTABLE or is_stub_body(event.body):
            return False
        if self.ids and event.id not in self.ids:
            return False
        if self.node and event.node != self.node:
            return False
        pattern = self.pattern
        return pattern is None or any(pattern.search(s) for s in strings_of(event.body))

    def found_in(self, data: bytes) -> bool:
        """Whether the text matches anywhere in raw bytes (read as UTF-8, damage replaced)."""
        pattern = self.pattern
        return pattern is not None and pattern.search(data.decode("utf-8", "replace")) is not None


def strings_of(value: Any) -> Iterable[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings_of(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_of(v)


def _held_into(value: Any, held: set[int]) -> None:
    """Add the hash of every string value (not key) of ``value`` long enough to be a removed
    text (rule 3) to ``held``."""
    if isinstance(value, str):
        if len(value) >= MIN_TEXT:
            held.add(hash(value))
    elif isinstance(value, dict):
        for v in value.values():
            _held_into(v, held)
    elif isinstance(value, list):
        for v in value:
            _held_into(v, held)


def removed_texts(chosen: Iterable[Event], held: Set[int] = frozenset()) -> frozenset[str]:
    """Rule 3 of the module: the free texts of the removed bodies that are phrases (:data:`MIN_TEXT`
    characters or more, two words or more) no event the log keeps holds as a string value
    (``held``: their hashes, from the rewrite's pass; a hash another string shares only keeps a
    text out, never adds one)."""
    out: set[str] = set()
    for event in chosen:
        for name in FREE_TEXT.get(event.type, ()):
            text = event.body.get(name)
            if not isinstance(text, str) or len(text) < MIN_TEXT or len(text.split(maxsplit=1)) < 2:
                continue
            if hash(text) not in held:
                out.add(text)
    return frozenset(out)


@dataclass(frozen=True)
class Scrub:
    """The one rule (the module's 1-4) for what a redaction removes outside the log: called on
    a JSON value, returns it scrubbed and whether anything changed; :meth:`deletes` judges a
    file set aside beside the log."""

    ids: frozenset[str] = frozenset()  # the chosen events
    pattern: re.Pattern[str] | None = None  # the selector's text (rule 1)
    texts: frozenset[str] = frozenset()  # the removed texts (rule 3)
    typed: Mapping[str, frozenset[str]] = field(default_factory=dict)  # id → typed keys of its metadata

    @classmethod
    def of(cls, chosen: Iterable[Event], selector: Selector, texts: frozenset[str]) -> Scrub:
        events = list(chosen)
        typed = {
            e.id: frozenset(k for k in TYPED_KEYS if k in e.body.get("metadata", {}))
            for e in events
            if isinstance(e.body.get("metadata"), dict)
        }
        return cls(frozenset(e.id for e in events), selector.pattern, texts, typed)

    def __call__(self, value: Any) -> tuple[Any, bool]:
        if isinstance(value, str):
            new = self._string(value)
            return new, new != value
        if isinstance(value, list):
            pairs = [self(v) for v in value]
            return [v for v, _ in pairs], any(hit for _, hit in pairs)
        if isinstance(value, dict):
            return self._record(value)
        return value, False

    def _string(self, value: str) -> str:
        if value in self.texts:
            return MARK
        return self.pattern.sub(MARK, value) if self.pattern is not None else value

    def _record(self, value: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        mine = next(
            (value[k] for k in ("entry_id", "id") if isinstance(value.get(k), str) and value[k] in self.ids), None
        )
        emptied = (self.typed.get(mine, frozenset()) | {"values"}) if mine is not None else frozenset()
        out: dict[str, Any] = {}
        changed = False
        for k, v in value.items():
            if k in NEVER:
                out[k] = v
                continue
            key = self.pattern.sub(MARK, k) if self.pattern is not None else k  # rule 1 only: never 3
            changed = changed or key != k
            if mine is not None and k in RECORD_TEXT:
                out[key] = MARK
                changed = changed or v != MARK
            elif mine is not None and k == "metadata":
                out[key] = {}
                changed = changed or v != {}
            elif k in emptied:
                out[key] = [] if isinstance(v, list) else {} if isinstance(v, dict) else None
                changed = changed or out[key] != v
            else:
                out[key], hit = self(v)
                changed = changed or hit
        return out, changed

    def quotes(self, value: Any) -> bool:
        """Whether ``value`` holds a match (rule 1) or a removed text (rule 3): what a record
        that names no chosen event loses."""
        if isinstance(value, str):
            return value in self.texts or (self.pattern is not None and self.pattern.search(value) is not None)
        if isinstance(value, dict):
            return any(
                (self.pattern is not None and self.pattern.search(k) is not None) or self.quotes(v)
                for k, v in value.items()
                if k not in NEVER
            )
        if isinstance(value, list):
            return any(self.quotes(v) for v in value)
        return False

    def deletes(self, data: bytes) -> bool:
        """Whether a file set aside beside the log goes: its bytes (raw, or inflated from the gzip
        members it holds) hold a chosen event's id, a removed text (as is, or as JSON writes it)
        or a match."""
        both = data + b"\n" + _inflate(data)
        if any(i.encode() in both for i in self.ids):
            return True
        if any(t.encode() in both or msgspec.json.encode(t)[1:-1] in both for t in self.texts):
            return True
        return self.pattern is not None and self.pattern.search(both.decode("utf-8", "replace")) is not None


@dataclass
class RedactionReport:
    """What a redaction chose, and (unless a dry run) what it wrote and removed."""

    chosen: list[Event]
    selector: str
    event: Event | None = None  # the events_redacted event (None: dry run or nothing chosen)
    bytes_before: int = 0
    bytes_after: int = 0
    removed_files: list[str] = field(default_factory=list)
    rule: Scrub = field(default_factory=Scrub)  # what every file outside the log loses (the module's rule)
    backup: tuple[str, ...] = ()  # backup_key of each chosen record (what ARI's backup holds of it)
    resumed: Pending | None = None  # an interrupted redaction this run found (and, log-level, finished)

    def lines(self) -> list[str]:
        head = "would redact" if self.event is None else "redacted"
        out = [self.resumed.line()] if self.resumed is not None else []
        out += [f"{head} {len(self.chosen)} event(s) chosen by {self.selector}"]
        out += [f"  seq {e.seq}  {e.type}  node {e.node}  id {e.id}" for e in self.chosen]
        if self.event is not None:
            out.append(
                f"recorded as seq {self.event.seq} (events_redacted); log {self.bytes_before} -> {self.bytes_after} bytes"
            )
            out += [f"deleted {name} (it held a removed body)" for name in self.removed_files]
        return out


def redact(
    checkpoint_dir: str | Path,
    selector: Selector,
    *,
    reason: str,
    by: str,
    dry_run: bool = False,
    keep_intent: bool = False,
) -> RedactionReport:
    """Redact the events ``selector`` chooses (see the module); ``dry_run`` only lists them.

    Journaled: before the log is renamed, the intent (:data:`INTENT_SUFFIX`) records what the
    files derived from the log must lose. Called alone (the log and the files set aside beside
    it), this removes the intent when done, and first finishes an interrupted redaction's
    intent (at the log level); ``keep_intent`` leaves it for the caller, who scrubs the derived
    files and then calls :func:`finish` (``projections.tools.redaction``).

    Raises InvalidInput for an empty reason or who (nothing written)."""
    for name, value in (("reason", reason), ("by", by)):
        check_text(value, name)
        if not value.strip():
            raise InvalidInput(name, "must say something: a redaction records who removed what, and why")
    if dry_run:  # a read-only open: a dry run moves and writes nothing, an old layout included
        with layout.moves_suspended(), Ledger.open_readonly(checkpoint_dir) as ledger:
            return RedactionReport(
                [e for e in ledger.events() if selector.matches(e)],
                selector.describe(),
                bytes_before=ledger.state.head.end,
            )
    resumed = None if keep_intent else pending(checkpoint_dir)
    if resumed is not None:
        resumed.scrubbed = [f"{n} (deleted)" for n in scrub_aside(layout.log_path(Path(checkpoint_dir)), resumed.rule)]
        finish(checkpoint_dir, resumed.seq)
    with Ledger.open(checkpoint_dir, create=False) as ledger, ledger.locked():
        report = RedactionReport([], selector.describe(), bytes_before=ledger.state.head.end, resumed=resumed)
        held: set[int] = set()
        report.event, report.bytes_after, report.rule, report.backup = _rewrite(
            ledger, selector, reason, by, report.chosen, held
        )
        if report.event is not None:
            report.removed_files = scrub_aside(ledger.path, report.rule)
    if report.event is not None and not keep_intent:
        finish(checkpoint_dir, report.event.seq)
    return report


# ------------------------------------------------------------------- the journal (the intent)


class _Intent(msgspec.Struct, forbid_unknown_fields=True):
    """What the files derived from the log must lose, recorded (0600, durably) before the log is
    renamed, removed once they have: it holds the removed texts and the selector's text (the
    secret) only while the derived files still do."""

    seq: int  # the events_redacted event…
    hash: str  # …and its hash: the log holds it once the rename happened
    selector: str  # Selector.describe()
    ids: list[str]
    pattern: str | None  # the selector's expression (a literal escaped)
    texts: list[str]  # the removed texts (rule 3)
    typed: dict[str, list[str]]
    backup: list[str]  # backup_key of each chosen record


@dataclass
class Pending:
    """An interrupted redaction: the log is redacted, its derived files may not be."""

    seq: int
    selector: str
    rule: Scrub
    backup: tuple[str, ...]
    scrubbed: list[str] = field(default_factory=list)  # filled by whoever finishes it

    def line(self) -> str:
        done = f": {', '.join(self.scrubbed)}" if self.scrubbed else ""
        return (
            f"resumed: an interrupted redaction (seq {self.seq}, {len(self.rule.ids)} event(s) chosen by "
            f"{self.selector}) finished: its derived files scrubbed{done}"
        )


def intent_path(checkpoint_dir: str | Path) -> Path:
    path = layout.log_path(Path(checkpoint_dir))
    return path.with_name(path.name + INTENT_SUFFIX)


def pending(checkpoint_dir: str | Path) -> Pending | None:
    """The interrupted redaction the checkpoint's intent records, or None. An intent whose
    redaction event the log does not hold (killed before the rename: the log was never
    redacted, so neither need its derived files be) is removed, durably, and None returned.
    Checked under the log's lock (a redaction under way holds it until its rename)."""
    path = intent_path(checkpoint_dir)
    if not path.exists() and not path.is_symlink():
        return None
    with Ledger.open(checkpoint_dir, create=False) as ledger, ledger.locked():
        try:
            raw = read_file(path, SIDE_FILE_LIMIT)
        except FileNotFoundError:
            return None
        try:
            intent = msgspec.json.decode(raw, type=_Intent)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise LedgerError(
                f"{path.name} (an interrupted redaction's record) cannot be read ({exc}); the files derived from "
                f"the log may still hold what it removed: remove {path.name}, then run `ari-ledger redact` again "
                "with the same selector"
            ) from None
        event = ledger.event_at(intent.seq) if intent.seq <= ledger.last_seq else None
        if event is None or event.hash != intent.hash or event.type != EventsRedacted.type_name:
            path.unlink(missing_ok=True)  # the rename never happened: nothing to finish
            fsync_dir(path.parent)
            return None
    rule = Scrub(
        frozenset(intent.ids),
        re.compile(intent.pattern) if intent.pattern is not None else None,
        frozenset(intent.texts),
        {k: frozenset(v) for k, v in intent.typed.items()},
    )
    return Pending(intent.seq, intent.selector, rule, tuple(intent.backup))


def finish(checkpoint_dir: str | Path, seq: int) -> None:
    """The last step of a redaction: its intent removed, durably (only the one for ``seq``)."""
    path = intent_path(checkpoint_dir)
    try:
        intent = msgspec.json.decode(read_file(path, SIDE_FILE_LIMIT), type=_Intent)
    except FileNotFoundError:
        return
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return  # not ours to remove: pending() says what to do with it
    if intent.seq == seq:
        path.unlink(missing_ok=True)
        fsync_dir(path.parent)


def _write_intent(ledger: Ledger, event: Event, selector: Selector, rule: Scrub, backup: tuple[str, ...]) -> Path:
    path = ledger.path.with_name(ledger.path.name + INTENT_SUFFIX)
    intent = _Intent(
        event.seq,
        event.hash,
        selector.describe(),
        sorted(rule.ids),
        rule.pattern.pattern if rule.pattern is not None else None,
        sorted(rule.texts),
        {k: sorted(v) for k, v in rule.typed.items()},
        list(backup),
    )
    replace_file(path, msgspec.json.encode(intent), mode=SET_ASIDE_MODE)  # synced, renamed, dir synced
    return path


def backup_key(kind: str, *parts: Any) -> str:
    """What identifies a record in ARI's backup (``memory_backup.jsonl.gz``): its kind and text
    (a node entry's node too; a core seed's persona and human), as a digest."""
    return hashlib.sha256(msgspec.json.encode([kind, *parts])).hexdigest()


def _backup_keys(chosen: Iterable[Event]) -> tuple[str, ...]:
    keys = []
    for e in chosen:
        match e.type:
            case "memory_added":
                keys.append(backup_key("node_scope", e.node, e.body.get("text")))
            case "react_step":
                keys.append(backup_key("react_step", e.body.get("content")))
            case "core_seeded":
                keys.append(backup_key("core_seed", e.body.get("persona"), e.body.get("human")))
            case "node_started" | "node_cleared" | "checkpoint_purged" | "events_redacted":
                pass  # ARI's backup holds no record of these
            case _:
                assert_never(e.type)
    return tuple(keys)


def _rewrite(
    ledger: Ledger, selector: Selector, reason: str, by: str, chosen: list[Event], held: set[int]
) -> tuple[Event | None, int, Scrub, tuple[str, ...]]:
    """Under the lock, in one pass over the log: write the redacted log beside the old one
    (``chosen`` and ``held`` filled as it goes), record the intent, and have the ledger replace
    the old log by it (:meth:`Ledger.replace_log`); (None, 0, …) when nothing matched."""
    with ledger.replace_log() as new:
        records: list[dict[str, Any]] = []
        with ledger.file.reader() as f:
            _write_redacted(ledger, f, new, selector, chosen, records, held)
        if not chosen:
            return None, 0, Scrub(), ()  # no commit: the new file is removed
        body = {"reason": reason, "by": by, "selector": selector.describe(), "redacted": records}
        event = new.append(CHECKPOINT_NODE, EventsRedacted.type_name, body)  # the new log's last member
        size = new.size
        rule = Scrub.of(chosen, selector, removed_texts(chosen, held))
        backup = _backup_keys(chosen)
        intent = _write_intent(ledger, event, selector, rule, backup)  # durable before the rename
        try:
            new.commit()
        except BaseException:
            if not new.replaced:
                intent.unlink(missing_ok=True)
            raise
    return event, size, rule, backup


def _write_redacted(
    ledger: Ledger,
    f: BinaryIO,
    new: LogReplacement,
    selector: Selector,
    chosen: list[Event],
    records: list[dict[str, Any]],
    held: set[int],
) -> None:
    """Every member of the log into the ``new`` one: byte for byte, or rebuilt with the chosen
    events' stubs (``chosen`` and their ``records`` filled as it goes, and ``held`` with the hashes
    of what the events it keeps say: rule 3)."""
    for member, events in walk(ledger, f, 0, seq=1, prev=""):
        mine = [selector.matches(e) for e in events]
        for event, redacted in zip(events, mine, strict=True):
            if not redacted:
                held.add(hash(event.node))
                _held_into(event.body, held)
        if not any(mine):
            new.member(_raw(f, member.offset, member.end), events)  # untouched members stay byte for byte
            continue
        lines = []
        for event, line, redacted in zip(events, member.data.split(b"\n")[:-1], mine, strict=True):
            line += b"\n"
            if redacted:
                stub = stub_line(line)
                chosen.append(event)
                records.append(_record(event, line, stub))
                line = stub
            lines.append(line)
        new.member(compress_member(b"".join(lines), single_event=len(lines) == 1), events)


def _record(event: Event, line: bytes, stub: bytes) -> dict[str, Any]:
    """What the redaction event says of one removed body (``events.Redacted``), from the stored
    line and its stub."""
    metadata = event.body.get("metadata")
    kind = metadata.get("type") if isinstance(metadata, dict) else None
    record: dict[str, Any] = msgspec.to_builtins(
        Redacted(
            seq=event.seq,
            id=event.id,
            hash=event.hash,
            node=event.node,
            type=event.type,
            digest=body_digest(unhashed_bytes(line)),
            stub=hashlib.sha256(canonical(upcast(decode_line(stub[:-1])))).hexdigest(),  # as verify reads it
            kind=kind if isinstance(kind, str) else "",
        )
    )
    return record


def _raw(f: Any, start: int, end: int) -> bytes:
    here = f.tell()
    f.seek(start)
    data = f.read(end - start)
    f.seek(here)
    return bytes(data)


def scrub_aside(path: Path, rule: Scrub) -> list[str]:
    """Delete the files set aside beside ``path`` (the log, ``verified_context.json``, ARI's
    backup: ``<name>.torn-*``, ``.rolled-back-*``, ``.damaged-*``, ``.repaired-*``, a killed
    replacement's ``.tmp-*``) that ``rule`` says hold a removed body (a torn tail may hold an
    event that never reached the log), durably; return their names."""
    removed = []
    for other in sorted(path.parent.glob(path.name + ".*")):
        if any(other.name == path.name + keep for keep in _KEEP) or other.is_symlink() or not other.is_file():
            continue
        try:
            data = read_file(other, None)
        except OSError:
            continue
        if rule.deletes(data):
            other.unlink()
            removed.append(other.name)
    if removed:
        fsync_dir(path.parent)
    return removed


def _inflate(raw: bytes) -> bytes:
    """Whatever the gzip members in ``raw`` decompress to, a member cut short included."""
    out, pos = [], 0
    while pos < len(raw):
        at = raw.find(b"\x1f\x8b\x08", pos)
        if at < 0:
            break
        d = zlib.decompressobj(31)
        with contextlib.suppress(zlib.error):
            out.append(d.decompress(raw[at:]))
        pos = at + 1 if not d.eof else len(raw) - len(d.unused_data)
    return b"".join(out)
