"""Property (issue 26): a redaction removes what its selector chose, and nothing else.

Random checkpoints are built through the library on top of ``ari-ledger demo``'s run (three
claims that prove, twenty recorded reads): notes on the run's nodes and on two extra nodes,
whose texts are made of what the old rule destroyed (GFlops_per_s, root, tool names, the run id,
64 zeros, kinds) with secret tokens in some and twins of other texts; ReAct steps with metadata
{tool, node, metric}; typed results with claims on the extra nodes; searches, working contexts and
ReAct searches that write access-log reads, some quoting an entry whole; the verified context
exported over the run's best lineage and the extra nodes. A random redaction (a token by text,
every token by regex, random ids, an extra node) then must:

- choose exactly the events its selector names;
- change nothing of ``memory_access.jsonl`` (chain fields aside: chained again) and of
  ``verified_context.json`` beyond the rule of ``ledger.maintenance.redact``, computed here again from its
  definition: a match replaced anywhere; a string value equal to a removed phrase (free text of a
  chosen body, 8+ characters, 2+ words, that no kept event holds) replaced whole; a record
  of a chosen entry losing its text, preview, metadata, the typed pointers copied from it and
  its values; the chain and anchor fields never;
- leave no selected token in any file, and a log that verifies;
- pass its own check: prove's verdict on every claim and read it did not involve is unchanged,
  and the demo's three claims still hold.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ledger import Ledger
from ledger.maintenance.redact import MARK, REDACTABLE, Selector, strings_of
from ledger.typed import TYPED_KEYS
from projections.api import MemoryBackend
from projections.tools.prove import prove
from projections.tools.redaction import redact_checkpoint
from support.leaks import every_file_bytes

EXAMPLES = 25
RUN_ID = "run_20261128_stencil"
DEMO_NODES = ["root", "node_A", "node_A2", "node_B"]
EXTRA_NODES = ["node_X", "node_Y"]
LINEAGE = ["root", "node_A", "node_A2", *EXTRA_NODES]
ZEROS = "0" * 64
LABELS = [
    "GFlops_per_s",
    "root",
    "node_A",
    "bash",
    "build_working_context",
    "search_memory",
    RUN_ID,
    ZEROS,
    "experiment_result",
    "node_scope",
    "react_step",
]
WORDS = ["tiling", "halo", "sweep", "vectorise", "threads", "blocking", "stencil", "cache", "NUMA", "profile"]
TOOLS = ["bash", "python", "build_working_context"]
RECORD_TEXT = {"text", "content", "text_preview", "persona", "human"}
NEVER = {"anchor", "event_hash"}  # and the access log's n/prev/hash, left out before comparing
TOKEN = re.compile(r"tok-\d+-[0-9a-f]{6}")
LABEL_FIELDS = ("op", "tool", "collection", "node_id", "engine", "ancestor_ids", "kind", "evidence", "entry_id")
OPS = ["note", "note", "step", "result", "search", "quote", "quote", "context", "react_search"]


class Builder:
    """Random library calls on a copy of the demo run; remembers what it wrote."""

    def __init__(self, backend: MemoryBackend, rnd: random.Random) -> None:
        self.backend, self.rnd = backend, rnd
        self.texts: list[str] = []
        self.tokens: list[str] = []
        self.ids: list[str] = []  # the redactable events written here

    def token(self) -> str:
        tok = f"tok-{len(self.tokens)}-{self.rnd.randbytes(3).hex()}"
        self.tokens.append(tok)
        return tok

    def text(self) -> str:
        rnd = self.rnd
        roll = rnd.random()
        if roll < 0.15 and self.texts:
            return rnd.choice(self.texts)  # a twin: the log keeps holding it when one is removed
        if roll < 0.3:
            return rnd.choice(LABELS)  # one word, a label the files are full of
        words = rnd.sample(WORDS + LABELS, rnd.randint(2, 6))
        if rnd.random() < 0.4:
            words.insert(rnd.randrange(len(words) + 1), self.token())
        return " ".join(words)

    def metadata(self, node: str) -> dict[str, Any]:
        rnd = self.rnd
        meta: dict[str, Any] = {"tool": rnd.choice(TOOLS), "node": rnd.choice(DEMO_NODES), "metric": "GFlops_per_s"}
        if rnd.random() < 0.2:
            meta["detail"] = f"curl -H 'Authorization: {self.token()}'"
        if rnd.random() < 0.1:
            meta[self.token()] = "a token as a key"
        if rnd.random() < 0.3:
            meta["node_id"] = node
        return meta

    def run(self, op: str) -> None:
        rnd, backend = self.rnd, self.backend
        node = rnd.choice(DEMO_NODES + EXTRA_NODES + EXTRA_NODES)
        extra = rnd.choice(EXTRA_NODES)
        if op in ("note", "label"):
            text = self.text() if op == "note" else rnd.choice(LABELS)
            self.ids.append(backend.add_memory(node, text, self.metadata(node), current_node=node)["id"])
            self.texts.append(text)
        elif op == "step":
            text = self.text()
            self.ids.append(backend.react_add(text, self.metadata(extra))["id"])
            self.texts.append(text)
        elif op == "result":
            text = " ".join(rnd.sample(WORDS, 3)) + (f" {self.token()}" if rnd.random() < 0.4 else "")
            sha = ZEROS if rnd.random() < 0.5 else rnd.randbytes(32).hex()
            added = backend.add_experiment_result(
                extra,
                text,
                artifact_refs=[{"path": "results.csv", "sha256": sha, "role": "data_output"}],
                node_report_ref={"run_id": RUN_ID, "node_id": extra},
                current_node=extra,
            )
            self.ids.append(added["id"])
            self.texts.append(text)
        elif op == "search":
            backend.search_memory(self.text(), ["root", extra], rnd.randint(1, 6))
        elif op == "quote" and self.texts:  # a query quoting an entry whole, or inside more words
            quoted = rnd.choice(self.texts)
            query = quoted if rnd.random() < 0.5 else f"{rnd.choice(WORDS)} {quoted} {rnd.choice(WORDS)}"
            backend.search_memory(query, ["root", *EXTRA_NODES], 5)
        elif op == "context":  # its line quotes the summary whole in args and inside "working_context:…"
            summary = rnd.choice(self.texts) if self.texts and rnd.random() < 0.5 else self.text()
            backend.build_working_context(extra, ["root"], summary)
        elif op == "react_search":
            backend.react_search(self.text(), rnd.randint(1, 5))


def access_lines(ckpt: Path) -> list[dict[str, Any]]:
    lines = (ckpt / "memory_access.jsonl").read_bytes().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in ("n", "prev", "hash")} for line in lines]


def log_events(ckpt: Path) -> list[Any]:
    with Ledger.open_readonly(ckpt) as ledger:
        return list(ledger.events())


def expected_chosen(events: list[Any], selector: Selector) -> set[str]:
    """The events the selector names, by its definition (types that carry text, ids, node, text)."""
    out = set()
    for e in events:
        if e.type not in REDACTABLE or e.body.keys() == {"sha256"}:
            continue
        if selector.ids and e.id not in selector.ids:
            continue
        if selector.node and e.node != selector.node:
            continue
        pattern = selector.pattern
        if pattern is None or any(pattern.search(s) for s in strings_of(e.body)):
            out.add(e.id)
    return out


def expected_texts(before: list[Any], after: list[Any], chosen: set[str]) -> set[str]:
    """The removed phrases, by their definition: free text of a chosen body, 8+ characters and
    2+ words, that no event of the redacted log holds as a string value (or as its node)."""
    held: set[str] = set()

    def values(value: Any) -> None:
        if isinstance(value, str):
            held.add(value)
        elif isinstance(value, dict):
            for v in value.values():
                values(v)
        elif isinstance(value, list):
            for v in value:
                values(v)

    for e in after:
        if e.id not in chosen and e.type != "events_redacted":  # what the log kept, as the rewrite read it
            held.add(e.node)
            values(e.body)
    fields = {"memory_added": ("text",), "react_step": ("content",), "core_seeded": ("persona", "human")}
    out = set()
    for e in before:
        if e.id in chosen:
            for name in fields.get(e.type, ()):
                text = e.body.get(name)
                if isinstance(text, str) and len(text) >= 8 and len(text.split()) >= 2 and text not in held:
                    out.add(text)
    return out


def _lost(key: str, value: Any) -> bool:
    """What a record of a chosen entry may become: text and preview marked, metadata, the
    typed pointers copied from it and its values emptied."""
    if key in RECORD_TEXT:
        return value == MARK
    if key == "metadata":
        return value == {}
    return key in (*TYPED_KEYS, "values") and value in ([], {}, None)


def violations(
    before: Any, after: Any, chosen: set[str], pattern: re.Pattern[str] | None, texts: set[str], where: str
) -> list[str]:
    """Where ``after`` is not ``before`` as the rule allows."""
    if isinstance(before, str):
        if after == before or (before in texts and after == MARK):
            return []
        if pattern is not None and pattern.search(before) and after == pattern.sub(MARK, before):
            return []
        return [f"{where}: {before[:60]!r} became {str(after)[:60]!r}"]
    if isinstance(before, list):
        if not isinstance(after, list) or len(after) != len(before):
            return [f"{where}: a list became {str(after)[:60]!r}"]
        return [
            v
            for i, (b, a) in enumerate(zip(before, after))
            for v in violations(b, a, chosen, pattern, texts, f"{where}[{i}]")
        ]
    if isinstance(before, dict):
        if not isinstance(after, dict):
            return [f"{where}: an object became {str(after)[:60]!r}"]
        mine = before.get("entry_id") in chosen or before.get("id") in chosen
        keys = {(pattern.sub(MARK, k) if pattern is not None and k not in NEVER else k): k for k in before}
        if set(keys) != set(after):
            return [f"{where}: keys {sorted(before)} became {sorted(after)}"]
        out = []
        for new, k in keys.items():
            b, a = before[k], after[new]
            if k in NEVER:
                out += [] if a == b else [f"{where}.{k}: a chain or anchor field changed"]
            elif not (mine and _lost(k, a)):
                out += violations(b, a, chosen, pattern, texts, f"{where}.{k}")
        return out
    return [] if after == before else [f"{where}: {before!r} became {after!r}"]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=st.lists(st.sampled_from(OPS), min_size=4, max_size=16),
    pick=st.sampled_from(["text", "regex", "ids", "node"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_random_redaction_changes_nothing_outside_its_selection(
    demo_run: Path, tmp_path: Path, plan: list[str], pick: str, seed: int
) -> None:
    rnd = random.Random(seed)
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    shutil.copytree(demo_run, work / "run", symlinks=True)
    ckpt = work / "run" / "checkpoint"
    demo_claims = [c.entry_id for c in prove(ckpt).claims]
    backend = MemoryBackend(ckpt)
    try:
        build = Builder(backend, rnd)
        for op in ["label", "step", *plan]:  # one entry whose whole text is a label, every time
            build.run(op)
        backend.export_verified_context(LINEAGE, ckpt / "verified_context.json")
    finally:
        backend.close()
    if pick == "text" and build.tokens:
        selector = Selector(text=rnd.choice(build.tokens))
    elif pick in ("text", "regex"):
        selector = Selector(text=TOKEN.pattern, regex=True)
    elif pick == "ids":
        ids = rnd.sample(build.ids, rnd.randint(1, min(3, len(build.ids))))
        selector = Selector(ids=tuple({*ids, build.ids[0]} if rnd.random() < 0.5 else ids))
    else:
        selector = Selector(node=rnd.choice(EXTRA_NODES))
    events = log_events(ckpt)
    lines = access_lines(ckpt)
    context = json.loads((ckpt / "verified_context.json").read_bytes())

    done = redact_checkpoint(ckpt, selector, reason="property", by="hypothesis")

    chosen = {e.id for e in done.log.chosen}
    assert chosen == expected_chosen(events, selector)
    event(f"selected by {pick}: {'none' if not chosen else 'one' if len(chosen) == 1 else 'several'} chosen")
    if not chosen:
        assert done.log.event is None and access_lines(ckpt) == lines
        return
    after_events = log_events(ckpt)
    texts = expected_texts(events, after_events, chosen)
    assert done.log.rule.texts == texts
    pattern = selector.pattern
    after_lines = access_lines(ckpt)
    assert len(after_lines) == len(lines)
    found = [
        v
        for i, (b, a) in enumerate(zip(lines, after_lines))
        for v in violations(b, a, chosen, pattern, texts, f"line {i + 1}")
    ]
    found += violations(
        context, json.loads((ckpt / "verified_context.json").read_bytes()), chosen, pattern, texts, "context"
    )
    assert not found, found
    for b, a in [
        *zip(lines, after_lines),
        *zip(context["claims"], json.loads((ckpt / "verified_context.json").read_bytes())["claims"]),
    ]:
        for label in LABEL_FIELDS:  # never a removed text's to take, whatever the rule computed
            if label in b and not (pattern is not None and pattern.search(json.dumps(b[label]))):
                assert a.get(label) == b[label], (label, b, a)
    changed = sum(1 for b, a in zip(lines, after_lines) if a != b)
    event(
        f"removed phrases: {bool(texts)}; access-log lines changed: {'0' if not changed else '1-3' if changed < 4 else '4+'}"
    )
    with Ledger.open_readonly(ckpt) as ledger:
        assert ledger.verify().ok
    kept = {e.id: e.hash for e in after_events}
    assert all(kept.get(e.id) == e.hash for e in events)  # every event still there, its hash unchanged
    everything = every_file_bytes(ckpt)
    if pattern is not None:
        assert not any(tok.encode() in everything for tok in build.tokens if pattern.search(tok))
    assert done.check is not None and done.check.ok, done.check.lines()
    assert all(done.check.after[c] == "holds" for c in demo_claims if c not in chosen), done.check.after
    event(
        f"check compared {done.check.claims} claims; reads skipped: {sorted(k for k, n in done.check.skipped_reads.items() if n)}"
    )
