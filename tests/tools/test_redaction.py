"""``ari-ledger redact`` over a whole checkpoint (issue 20): after it, no file the project writes
holds the removed text, reads never return it, and the redacted entries stay visible as such;
and (issue 26) it removes only what it chose: every other record of every file is left as it
was, and it checks that prove says what it said before about everything it did not involve."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.ari.importer import BACKUP_NAME, read_ari_file
from ledger.layout import SNAPSHOT_NAME, store_dir
from ledger.log import LOG_NAME, compress_member
from ledger.maintenance.redact import Selector, intent_path, pending, redact
from projections.access.chain import GENESIS
from projections.access.reader import check_chain
from projections.api import MemoryBackend
from projections.tools.ari_export import write_ari_backup
from projections.tools.lineage import lineage_data
from projections.tools.prove import prove
from projections.tools.redaction import MARK, redact_checkpoint
from support.env import ari_ledger
from support.leaks import every_file_bytes

SECRET = "ghp_TOKEN0123456789abcdef"


@pytest.fixture
def leaky(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkpoint where the secret reached every file: entries, a ReAct step, the access log's
    previews and a search query, the snapshot, verified_context.json and a torn tail set aside."""
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "root")
    backend = MemoryBackend(ckpt)
    for i in range(30):
        text = f"entry {i} on halo exchange" + (f" export GITHUB_TOKEN={SECRET}" if i % 10 == 3 else "")
        backend.add_memory("root", text, {"i": i}, current_node="root")
    backend.react_add(f"bash: env | grep TOKEN -> GITHUB_TOKEN={SECRET}")
    backend.add_experiment_result(
        "root", f"result with {SECRET} in it", artifact_refs=[{"path": "r.csv", "sha256": "0" * 64}]
    )
    backend.search_memory(f"where is {SECRET}", ["root"], 5)
    backend.write_verified_context([{"id": "root"}])
    backend.session.projector.save()
    backend.close()
    torn = store_dir(ckpt) / f"{LOG_NAME}.torn-20261201T000000Z"
    torn.write_bytes(compress_member(f'{{"text":"unacknowledged {SECRET}"}}\n'.encode())[:-6])
    assert SECRET.encode() in every_file_bytes(ckpt)
    return ckpt


def test_after_a_redaction_no_file_holds_the_text_and_reads_never_return_it(leaky: Path) -> None:
    as_of = 10
    done = redact_checkpoint(leaky, Selector(text=SECRET), reason="leaked token", by="tester")
    assert len(done.log.chosen) == 5  # 3 entries, the ReAct step, the result
    assert any(name.startswith(SNAPSHOT_NAME) for name in done.scrubbed)
    assert "memory_access.jsonl" in done.scrubbed and "verified_context.json" in done.scrubbed
    assert done.log.removed_files == [f"{LOG_NAME}.torn-20261201T000000Z"]
    assert SECRET.encode() not in every_file_bytes(leaky)
    backend = MemoryBackend(leaky)
    try:
        # (a query holding the secret would put it in the access log again: that is the caller's)
        found = backend.search_memory("export GITHUB_TOKEN", ["root"], 50)["results"]
        assert found and all(SECRET not in r["text"] for r in found)
        assert all(
            SECRET not in json.dumps(r) for r in backend.search_memory("token", ["root"], 50, as_of=as_of)["results"]
        )
        assert all(SECRET not in s["content"] for s in backend.react_get_all())
        assert SECRET not in json.dumps(backend.get_node_memory("root")) + json.dumps(
            backend.get_verified_context(["root"])
        )
        redacted = backend.session.projector.catalog.redacted
        assert len(redacted) == 5 and {r.reason for r in redacted.values()} == {"leaked token"}
        assert {r.kind for r in redacted.values() if r.type == "memory_added"} == {"", "experiment_result"}
        (root,) = [n for n in lineage_data(backend)["nodes"] if n["node_id"] == "root"]
        assert root["memory_counts"]["redacted"] == 4 and {r["reason"] for r in root["redacted"]} == {"leaked token"}
        backend.session.projector.save()
    finally:
        backend.close()
    assert SECRET.encode() not in every_file_bytes(leaky)  # the snapshot written afterwards neither
    assert ari_ledger("verify", leaky).returncode == 0


def test_exports_and_ari_backups_written_afterwards_hold_stubs(leaky: Path, tmp_path: Path) -> None:
    redact_checkpoint(leaky, Selector(text=SECRET), reason="leak", by="tester")
    bundle = tmp_path / "bundle"
    assert ari_ledger("export", leaky, bundle).returncode == 0
    backend = MemoryBackend(leaky)
    try:
        write_ari_backup(backend, tmp_path / "memory_backup.jsonl.gz")
    finally:
        backend.close()
    assert SECRET.encode() not in every_file_bytes(tmp_path)


def test_a_process_open_during_the_redaction_forgets_the_text(leaky: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An open backend (ARI's own process) folded the secret before the redaction: at its next
    read it rebuilds from the redacted log, and the snapshot it saves at close holds no secret."""
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "root")
    backend = MemoryBackend(leaky)
    query = "export GITHUB_TOKEN"
    assert any(SECRET in r["text"] for r in backend.search_memory(query, ["root"], 5)["results"])
    redact_checkpoint(leaky, Selector(text=SECRET), reason="leak", by="tester")
    try:
        assert all(SECRET not in r["text"] for r in backend.search_memory(query, ["root"], 50)["results"])
        backend.add_memory("root", "written after the redaction", {}, current_node="root")
        backend.session.projector.save()
    finally:
        backend.close()
    assert SECRET.encode() not in every_file_bytes(leaky)
    with Ledger.open_readonly(leaky) as ledger:
        assert ledger.verify().ok
        assert [e.body.get("text") for e in ledger.events() if e.type == "memory_added"][
            -1
        ] == "written after the redaction"


def test_the_command_dry_run_json_and_errors(leaky: Path) -> None:
    before = (store_dir(leaky) / LOG_NAME).read_bytes()
    dry = ari_ledger("redact", leaky, "--match", SECRET, "--reason", "leak", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    out = json.loads(dry.stdout)
    assert out["redact"]["dry_run"] and len(out["redact"]["chosen"]) == 5 and SECRET not in dry.stdout
    assert (store_dir(leaky) / LOG_NAME).read_bytes() == before
    bad = ari_ledger("redact", leaky, "--regex", "(unclosed", "--reason", "x")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --regex: not a valid regular expression")
    nothing = ari_ledger("redact", leaky, "--reason", "x")
    assert nothing.returncode == 2 and "say what to redact" in nothing.stderr
    done = ari_ledger("redact", leaky, "--regex", r"ghp_[A-Za-z0-9]+", "--reason", "token", "--by", "alice")
    assert done.returncode == 0, done.stderr
    assert "redacted 5 event(s) chosen by a regular expression match" in done.stdout and "verify: ok" in done.stdout
    with Ledger.open_readonly(leaky) as ledger:
        redaction = next(e for e in ledger.events() if e.type == "events_redacted")
    assert redaction.body["by"] == "alice" and redaction.body["reason"] == "token"


def test_a_selector_that_chooses_nothing_is_an_error_that_changes_nothing(leaky: Path) -> None:
    """Issue 39: a mistyped --id (or a --match nothing holds) used to print "would redact 0
    event(s)" and exit 0 without --dry-run: the secret stayed, and nothing said so."""
    before = every_file_bytes(leaky)
    with Ledger.open_readonly(leaky) as ledger:
        events = list(ledger.events())
    entry = next(e for e in events if e.type == "memory_added")
    cases = [
        (["--id", entry.id[:-1] + "x"], "error: --id: no event of this checkpoint has id"),
        (["--id", entry.id, "--id", "typo"], "error: --id: no event of this checkpoint has id 'typo'"),
        (["--match", "no entry holds this"], "error: --match: chooses no event"),
        (["--regex", "zz+q{3}"], "error: --regex: chooses no event"),
        (["--id", entry.id, "--match", "no entry holds this"], "error: --id --match: chooses no event"),
    ]
    for extra, said in cases:
        for dry in ([], ["--dry-run"]):
            run = ari_ledger("redact", leaky, *extra, "--reason", "x", *dry)
            assert run.returncode == 2, (extra, dry, run.stdout, run.stderr)
            lines = run.stderr.strip().splitlines()
            assert len(lines) == 1 and said in lines[0], (extra, run.stderr)
    assert every_file_bytes(leaky) == before
    done = ari_ledger("redact", leaky, "--id", entry.id, "--reason", "x")
    assert done.returncode == 0, done.stderr
    again = ari_ledger("redact", leaky, "--id", entry.id, "--reason", "x")
    assert again.returncode == 2 and "is already redacted; nothing changed" in again.stderr


# ---------------------------------------------------------------------------- issue 26: nothing else


CHAIN = ("n", "prev", "hash")


def access_lines(ckpt: Path) -> list[dict]:
    """The access log's lines without their chain fields (chained again by a redaction)."""
    out = []
    for line in (ckpt / "memory_access.jsonl").read_bytes().splitlines():
        value = json.loads(line)
        out.append({k: v for k, v in value.items() if k not in CHAIN})
    return out


def demo_copy(demo_run: Path, tmp_path: Path) -> Path:
    shutil.copytree(demo_run, tmp_path / "demo", symlinks=True)
    return tmp_path / "demo" / "checkpoint"


def test_the_demo_redacted_by_a_match_keeps_every_other_record(demo_run: Path, tmp_path: Path) -> None:
    """`redact --match AVX-512` on the demo used to turn GFlops_per_s, root, the tool names and
    the run id into [redacted] everywhere, and prove then failed every claim and 16 reads. Now only
    the chosen entries' write lines (text and metadata) and the two queries that quoted AVX-512
    change; verified_context.json is byte for byte the same; no read differs. One event chosen is
    the core seed (its hardware_spec says AVX-512): the root claim's "~35 GFlops/s" was checked
    against the seed's roofline, so that claim no longer proves; redact says its grounds went with
    the seed (not compared, exit 0) and the other claims and reads are the same."""
    ckpt = demo_copy(demo_run, tmp_path)
    lines_before = access_lines(ckpt)
    context_before = (ckpt / "verified_context.json").read_bytes()
    proof_before = prove(ckpt)
    assert proof_before.ok and len(proof_before.claims) == 3
    root_claim = next(c.entry_id for c in proof_before.claims if c.node_id == "root")

    run = ari_ledger("redact", ckpt, "--match", "AVX-512", "--reason", "x")

    assert "redacted 5 event(s)" in run.stdout and "core_seeded" in run.stdout
    assert (ckpt / "verified_context.json").read_bytes() == context_before
    after = access_lines(ckpt)
    assert len(after) == len(lines_before)
    with Ledger.open_readonly(ckpt) as ledger:
        chosen = {e.id for e in ledger.events() if e.body.keys() == {"sha256"}}
    assert len(chosen) == 5
    changed = [(a, b) for a, b in zip(lines_before, after, strict=True) if a != b]
    writes = [(a, b) for a, b in changed if a.get("entry_id") in chosen]
    quoting = [(a, b) for a, b in changed if a.get("entry_id") not in chosen]
    assert len(writes) == 4  # the core seed's own line carries no text
    for a, b in writes:
        assert b == {**a, "text_preview": MARK, "metadata": {}}
    assert len(quoting) == 2
    for a, b in quoting:
        assert json.loads(json.dumps(a).replace("AVX-512", MARK)) == b
    text = (ckpt / "memory_access.jsonl").read_text()
    assert "AVX-512" not in text and "build_working_[redacted]" not in text and '"tool":"[redacted]"' not in text
    assert all(token in text for token in ("GFlops_per_s", '"root"', "build_working_context", "run_20261128_stencil"))
    assert check_chain(ckpt)[0].ok
    proof = prove(ckpt)
    verdicts = {c.entry_id: c.verdict for c in proof.claims}
    assert [v for i, v in verdicts.items() if i != root_claim] == ["holds", "holds"]
    assert verdicts[root_claim] == "fails"
    root = next(c for c in proof.claims if c.entry_id == root_claim)
    assert all(f.startswith(("evidence:", "values:", "exclusions:", "in usable_for_claims")) for f in root.failures), (
        root.failures
    )
    assert proof.reads["differs"] == 0 and proof.read_failures == []
    # and redact said so itself: that claim, and nothing else, by name
    assert run.returncode == 0, (
        run.stdout + run.stderr
    )  # the root claim's grounds went with the seed: said, not a failure
    assert "check: ok" in run.stdout and "verify: ok" in run.stdout and root_claim not in run.stdout
    assert "1 claim(s) whose numbers were checked against the redacted experiment context" in run.stdout
    assert "prove gives the same verdicts for the 2 claim(s)" in run.stdout


def test_the_demo_redacted_by_a_match_that_spares_the_core_seed_still_proves(demo_run: Path, tmp_path: Path) -> None:
    """The same run, `--match "AVX-512 intrinsics"`: four entries, none a claim's evidence; the
    check passes (exit 0) and prove still says PROVED, 3 of 3, no read differing."""
    ckpt = demo_copy(demo_run, tmp_path)
    run = ari_ledger("redact", ckpt, "--match", "AVX-512 intrinsics", "--reason", "x")
    assert "redacted 4 event(s)" in run.stdout
    proved = ari_ledger("prove", ckpt)
    assert proved.returncode == 0, proved.stdout
    assert "PROVED: 3 of 3 claims hold" in proved.stdout and " 0 differ" in proved.stdout
    assert run.returncode == 0 and "check: ok" in run.stdout, run.stdout + run.stderr


def test_a_react_step_redacted_by_id_leaves_other_records_tool_node_and_metric_alone(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ReAct steps and entries all carry metadata {tool, node, metric}; one step (a token in its
    observation) is redacted by id. Its write line loses its preview and metadata; every other
    line of the access log is unchanged (chain fields aside), tool/node/metric included, and the
    verified context too."""
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "root")
    labels = {"tool": "bash", "node": "root", "metric": "GFlops_per_s"}
    backend = MemoryBackend(ckpt)
    for i in range(4):
        backend.add_memory("root", f"note {i}: bash build of root at GFlops_per_s", dict(labels), current_node="root")
    steps = [backend.react_add(f"step {i}: bash make; GFlops_per_s=1.{i} on root", dict(labels)) for i in range(3)]
    leaked = backend.react_add("bash: env -> API_TOKEN=tok-0123456789abcdef", dict(labels))
    backend.react_search("bash GFlops_per_s", 10)
    backend.search_memory("bash build GFlops_per_s", ["root"], 5)
    backend.add_experiment_result(
        "root", "GFlops_per_s=2.41 on root", artifact_refs=[{"path": "r.csv", "sha256": "1" * 64}]
    )
    backend.write_verified_context([{"id": "root"}])
    backend.close()
    before = access_lines(ckpt)
    context = (ckpt / "verified_context.json").read_bytes()

    done = redact_checkpoint(ckpt, Selector(ids=(leaked["id"],)), reason="token", by="tester")

    assert [e.id for e in done.log.chosen] == [leaked["id"]]
    after = access_lines(ckpt)
    for a, b in zip(before, after, strict=True):
        if a.get("entry_id") == leaked["id"] and a["op"] == "write":
            assert b == {**a, "text_preview": MARK, "metadata": {}}
        else:
            assert a == b
    assert sum(1 for line in after if line.get("metadata") == labels) == 4 + len(steps)
    assert (ckpt / "verified_context.json").read_bytes() == context
    assert b"tok-0123456789abcdef" not in every_file_bytes(ckpt)
    assert check_chain(ckpt)[0].ok
    assert done.check is not None and done.check.ok, done.lines()


@pytest.mark.parametrize("how", ["id", "match"])
def test_a_removed_body_holding_64_zeros_leaves_the_access_logs_genesis_prev_alone(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The access log's first line names the genesis, 64 zeros, as its prev; a removed body that
    holds 64 zeros (as its text, and as an unpinned artifact's placeholder sha256) used to have
    them replaced there, breaking the chain. By id or by the zeros themselves: the chain fields
    stay, the chain checks, and the redaction's own check passes."""
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "root")
    zeros = "0" * 64
    backend = MemoryBackend(ckpt)
    backend.search_memory("anything", ["root"], 5)  # the first line: prev is the genesis
    backend.add_memory("root", "an unrelated note", {}, current_node="root")
    chosen = backend.add_experiment_result("root", zeros, artifact_refs=[{"path": "r.csv", "sha256": zeros}])
    backend.write_verified_context([{"id": "root"}])
    backend.close()
    first = json.loads((ckpt / "memory_access.jsonl").read_bytes().splitlines()[0])
    assert first["prev"] == GENESIS and first["n"] == 1
    selector = Selector(ids=(chosen["id"],)) if how == "id" else Selector(text=zeros)

    done = redact_checkpoint(ckpt, selector, reason="zeros", by="tester")

    assert [e.id for e in done.log.chosen] == [chosen["id"]]
    lines = (ckpt / "memory_access.jsonl").read_bytes().splitlines()
    assert json.loads(lines[0])["prev"] == GENESIS
    assert [json.loads(line)["n"] for line in lines] == list(range(1, len(lines) + 1))
    chain, _ = check_chain(ckpt)
    assert chain.ok, chain.problems
    assert ari_ledger("verify", ckpt).returncode == 0
    assert done.check is not None and done.check.ok, done.lines()


def test_the_backup_and_set_aside_copies_forget_the_text_and_an_interrupted_redaction_is_resumed(
    leaky: Path,
) -> None:
    """ARI's backup in the checkpoint loses the chosen records (import-ari cannot bring them back),
    a rolled-back verified_context.json quoting the secret goes, and an intent left by a killed
    redaction is finished by the next ``redact`` (any selector), which says so."""
    backend = MemoryBackend(leaky)
    try:
        write_ari_backup(backend)
    finally:
        backend.close()
    aside = leaky / "verified_context.json.rolled-back-20261201T000000Z"
    aside.write_bytes((leaky / "verified_context.json").read_bytes())
    assert SECRET.encode() in every_file_bytes(leaky)
    # killed after the log's rename: the log is redacted, nothing else is, the intent says so
    first = redact(leaky, Selector(text=SECRET), reason="leak", by="tester", keep_intent=True)
    assert first.event is not None and intent_path(leaky).exists()
    assert oct(intent_path(leaky).stat().st_mode & 0o777) == "0o600"
    Ledger.open(leaky).close()  # a writable open leaves the intent for the next redaction
    assert pending(leaky) is not None
    done = redact_checkpoint(leaky, Selector(text="no such text anywhere"), reason="again", by="tester")
    assert done.resumed is not None and done.lines()[0].startswith("resumed: ")
    assert not done.log.chosen and not intent_path(leaky).exists()
    assert SECRET.encode() not in every_file_bytes(leaky)
    assert not aside.exists()
    kept = read_ari_file(leaky / BACKUP_NAME)
    texts = [e["text"] for e in kept.entries.get("node_scope", [])]
    assert len(texts) == 27 and all(SECRET not in t for t in texts)


def test_status_names_an_unfinished_repair_or_redaction(tmp_path: Path) -> None:
    from ledger import Ledger
    from projections.tools.checkpoint import status

    ckpt = tmp_path / "ck"
    with Ledger.open(ckpt) as ledger:
        ledger.append("root", "memory_added", {"text": "x"}, current_node="root")
        log = ledger.path
    assert not [n for n in status(ckpt)["notes"] if "unfinished" in n]
    for suffix, command in ((".redact", "ari-ledger repair"), (".repair", "ari-ledger repair")):
        intent = log.with_name(log.name + suffix)
        intent.write_text("{}")
        notes = [n for n in status(ckpt)["notes"] if "unfinished" in n]
        assert len(notes) == 1 and command in notes[0] and suffix in notes[0]
        intent.unlink()
