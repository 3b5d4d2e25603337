"""Provable memory (issue 18): values checked against the bytes they came from, reads that
replay, and ``ari-ledger prove`` over a copied checkpoint, with a planted-fault fixture."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from ledger.layout import store_dir
from projections.access.chain import rechain
from projections.access.log import ReadTool
from projections.access.reader import check_chain, read_records
from projections.adapters.demo import FIXTURE_RUN, copy_run, replay_run
from projections.adapters.planted import FAULTS, detection, plant_faults, plant_reports
from projections.api import MemoryBackend
from projections.tools.prove import prove
from projections.tools.reads import replay_all
from support.env import ari_ledger


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("planted")
    experiments = copy_run(FIXTURE_RUN, out)
    plant_reports(experiments)
    backend = MemoryBackend(out / "checkpoint")
    replay = replay_run(backend, FIXTURE_RUN, experiments)
    key = plant_faults(backend, replay)
    context = backend.export_verified_context(list(replay.tree), out / "planted_context.json")
    backend.close()
    return out, key, context


def copy_of(src: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "copy"
    shutil.copytree(src, dest, symlinks=True)
    return dest


def test_prove_opens_the_log_once_and_hashes_each_cited_file_once(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prove`` in one process, alone and with ``-o FILE.html``: the log opened once (verified,
    then read on the same open log) and each cited file hashed once, its bytes searched for
    numbers at most once (the proof's file states are the lineage report's)."""
    import projections.evidence.grounding as grounding
    from ledger import Ledger
    from projections.adapters.cli import main

    copy = copy_of(demo, tmp_path) / "checkpoint"
    opened: list[str] = []
    hashed: Counter[str] = Counter()
    searched: Counter[str] = Counter()
    for name in ("open", "open_readonly"):
        real = getattr(Ledger, name).__func__

        def counting(cls, checkpoint_dir, *args, _real=real, **kwargs):
            opened.append(str(checkpoint_dir))
            return _real(cls, checkpoint_dir, *args, **kwargs)

        monkeypatch.setattr(Ledger, name, classmethod(counting))
    real_hash, real_read = grounding.sha256_file, grounding.read_file
    monkeypatch.setattr(grounding, "sha256_file", lambda path: (hashed.update([str(path)]), real_hash(path))[1])
    monkeypatch.setattr(
        grounding, "read_file", lambda path, *a, **k: (searched.update([str(path)]), real_read(path, *a, **k))[1]
    )

    assert main(["prove", str(copy)]) == 0
    assert opened == [str(copy)]
    assert hashed and set(hashed.values()) == {1}, hashed.most_common(3)
    assert max(searched.values(), default=1) == 1
    alone = set(hashed)

    opened.clear()
    hashed.clear()
    searched.clear()
    report = tmp_path / "proof.html"
    assert main(["prove", str(copy), "-o", str(report)]) == 0
    assert opened == [str(copy)]  # was 3: verify, prove's backend, the report's backend
    assert set(hashed.values()) == {1}, hashed.most_common(3)  # was up to 3 per file
    assert alone <= set(hashed) and len(hashed) > len(alone)  # the report audits every entry's files
    assert max(searched.values(), default=1) == 1
    assert "ARI memory lineage" in report.read_text(encoding="utf-8")


def test_prove_on_the_unmodified_demo_run_holds_from_a_copy(demo: Path, tmp_path: Path) -> None:
    copy = copy_of(demo, tmp_path)  # cp -r: the reviewer's copy, experiments beside the checkpoint
    run = ari_ledger("prove", copy / "checkpoint", "--json", "--html", tmp_path / "proof.html")
    assert run.returncode == 0, run.stdout + run.stderr
    proof = json.loads(run.stdout)
    assert proof["ok"] and proof["failures"] == [] and proof["read_failures"] == []
    assert [c["verdict"] for c in proof["claims"]] == ["holds"] * 3
    assert all(c["values"]["verdict"] == "checked" and c["event"]["hash"] for c in proof["claims"])
    assert proof["reads"]["same"] >= 10 and proof["reads"]["differs"] == proof["reads"]["not_replayable"] == 0
    assert proof["access"]["ok"] and proof["access"]["chained"] == proof["access"]["lines"]
    # what it could not check is said, not hidden: no anchor outside, one unpinned binary absent
    assert any("no anchor kept outside" in u for u in proof["unchecked"])
    assert any("stencil_bench" in u for c in proof["claims"] for u in c["notes"])
    html = (tmp_path / "proof.html").read_text()
    assert html.count('"proof":"holds"') == 3 and " proof-failed" not in html
    assert ari_ledger("prove", copy / "checkpoint", "--strict").returncode == 1  # unchecked fails when strict


def test_the_planted_faults_are_all_caught_and_no_clean_claim_fails(planted) -> None:
    out, key, context = planted
    assert len(key) >= 60 and {p.fault for p in key} == {*FAULTS, None}
    proof = prove(out / "checkpoint", context)
    table = detection(key, {c.entry_id: (c.verdict, c.failures) for c in proof.claims})
    for fault in FAULTS:
        assert table[fault]["planted"] >= 8 and table[fault]["detected"] == table[fault]["planted"], (fault, table)
    assert table["clean"]["planted"] >= 30 and table["clean"]["false_positives"] == 0, table
    clean = {p.entry_id for p in key if p.fault is None}
    assert all(c.values and c.values["verdict"] == "checked" for c in proof.claims if c.entry_id in clean)
    assert not proof.ok
    html = out / "proof.html"
    run = ari_ledger("prove", out / "checkpoint", "--context", context, "--html", html)
    assert (
        run.returncode == 1 and f"NOT PROVED: {len(proof.claims) - 32} of {len(proof.claims)} claims hold" in run.stdout
    )
    marked = html.read_text()
    assert marked.count(" proof-failed") == 8 and marked.count('"proof":"fails"') == 32  # every node, every fault
    # the audit reports the same value mismatches beside its hash mismatches
    backend = MemoryBackend(out / "checkpoint", readonly=True)
    audit = backend.audit_memory(out / "experiments")
    backend.close()
    mismatched = {v["entry_id"] for v in audit["values"] if v["verdict"] == "mismatch"}
    value_faults = {p.entry_id for p in key if p.fault in ("fabricated_number", "metric_ptr_disagrees", "out_of_range")}
    assert mismatched == value_faults
    assert audit["summary"]["mismatch"] == table["artifact_edited"]["planted"] and not audit["ok"]


def test_the_grounded_block_leaves_value_mismatches_out(planted) -> None:
    out, key, _context = planted
    backend = MemoryBackend(out / "checkpoint", readonly=True)
    nodes = sorted({p.node_id for p in key})
    claims = backend.get_verified_context(nodes)["claims"]
    usable = {c["entry_id"] for c in backend.get_verified_context(nodes)["usable_for_claims"]}
    kept = {c["entry_id"] for c in backend.get_verified_context(nodes, keep_mismatches=True)["usable_for_claims"]}
    checked = backend.get_verified_context(nodes, min_evidence="values_checked")["usable_for_claims"]
    backend.close()
    value_faults = {p.entry_id for p in key if p.fault in ("fabricated_number", "metric_ptr_disagrees", "out_of_range")}
    excluded = {c["entry_id"] for c in claims if c.get("exclusions")}  # node_A12 judged itself failed: never usable
    assert not usable & value_faults and value_faults - excluded <= kept and not kept & excluded
    assert all(c["values"]["verdict"] == "checked" for c in checked)


@pytest.mark.parametrize("damage", ["edit", "delete", "swap", "cut"])
def test_a_tampered_or_cut_access_log_fails_prove(demo: Path, tmp_path: Path, damage: str) -> None:
    copy = copy_of(demo, tmp_path)
    path = copy / "checkpoint" / "memory_access.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    if damage == "edit":
        lines[5] = lines[5].replace(b'"node_id":"', b'"node_id":"x', 1)
    elif damage == "delete":
        del lines[5]
    elif damage == "swap":
        lines[5], lines[6] = lines[6], lines[5]
    else:
        lines = lines[:-2]
    path.write_bytes(b"".join(lines))
    chain, _ = check_chain(copy / "checkpoint")
    assert not chain.ok
    run = ari_ledger("prove", copy / "checkpoint")
    assert run.returncode == 1 and "FAIL: access log" in run.stdout


def test_a_forged_but_consistent_access_log_fails_its_replay(demo: Path, tmp_path: Path) -> None:
    """Someone rewrites what a node was shown and chains the lines again, head file too: the
    chain holds, but the read no longer replays to what the line says."""
    copy = copy_of(demo, tmp_path) / "checkpoint"
    path = copy / "memory_access.jsonl"
    raw = path.read_bytes().splitlines()
    i = next(i for i, line in enumerate(raw) if len(json.loads(line).get("ids") or []) >= 2)
    value = json.loads(raw[i])
    value["ids"] = list(reversed(value["ids"]))
    for key in ("n", "prev", "hash"):
        value.pop(key)
    forged = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    n = json.loads(raw[i])["n"]
    raw[i] = forged[:-1] + b',"n":%d,"prev":"%s","hash":"%s"}' % (n, b"0" * 64, b"0" * 64)
    lines, _ = rechain(raw, None)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    (store_dir(copy) / "memory_access.jsonl.head").unlink()  # a forger cannot keep it, so drops it
    chain, decoded = check_chain(copy)
    assert chain.ok, chain.problems
    backend = MemoryBackend(copy, readonly=True)
    verdicts = {r.record.where: r.verdict for r in replay_all(backend, read_records(decoded))}
    backend.close()
    assert verdicts[f"memory_access.jsonl:{i + 1}"] == "differs"
    assert ari_ledger("prove", copy).returncode == 1


def test_a_context_that_disagrees_with_the_log_fails(demo: Path, tmp_path: Path) -> None:
    context = json.loads((demo / "checkpoint" / "verified_context.json").read_text())
    assert all(len(c["event_hash"]) == 64 for c in context["claims"])  # what each claim is traced by
    context["claims"][1]["text"] = context["claims"][1]["text"].replace("2.41", "3.41")
    context["claims"][2]["event_hash"] = "0" * 64
    kept = tmp_path / "kept_context.json"  # a reviewer's copy, kept outside the checkpoint
    kept.write_text(json.dumps(context))
    proof = prove(demo / "checkpoint", kept)
    assert [c.verdict for c in proof.claims] == ["holds", "fails", "fails"]
    assert "the context's text differs from the text the log holds" in proof.claims[1].failures
    assert proof.claims[2].failures == [
        f"the context names event 000000000000…, the log holds {proof.claims[2].event['hash'][:12]}…"
    ]
    assert not any("no anchor kept outside" in u for u in proof.unchecked)


def test_reads_lists_a_nodes_reads_and_replays_them(demo: Path) -> None:
    run = ari_ledger("reads", demo / "checkpoint", "--node", "node_A2", "--replay", "--json")
    assert run.returncode == 0, run.stderr
    reads = json.loads(run.stdout)["reads"]
    tools = {r["tool"] for r in reads}
    assert {"build_working_context", "get_verified_context"} <= tools
    assert all(r["verdict"] == "same" and r["at"] is not None for r in reads)
    assert all(r["node_id"] == "node_A2" or r["scope"][-1] == "node_A2" for r in reads)


def test_an_unknown_head_fails_prove(demo: Path) -> None:
    run = ari_ledger("prove", demo / "checkpoint", "--head", "ab" * 32)
    assert run.returncode == 1


def test_a_node_report_edited_after_consolidation_fails_its_claims(demo: Path, tmp_path: Path) -> None:
    """Someone "fixes" a report so that a fabricated number matches it: the report is not the
    one consolidation hashed, so the claims built on it fail."""
    copy = copy_of(demo, tmp_path)
    report_path = copy / "experiments" / "run_20261128_stencil" / "root" / "node_report.json"
    report = json.loads(report_path.read_text())
    report["metrics"]["GFlops_per_s"] = 3.41
    report_path.write_text(json.dumps(report, indent=2))
    proof = prove(copy / "checkpoint")
    verdicts = {c.node_id: c for c in proof.claims}
    assert verdicts["root"].verdict == "fails"
    assert "node_report.json is not the report its node consolidated (edited since)" in verdicts["root"].failures
    # node_A's own report is the one consolidated; its "4.1x the baseline" is checked against
    # root's number, which now reads 3.41, so that value is what fails there
    assert not any("node_report.json" in f for f in verdicts["node_A"].failures)
    assert any(f.startswith("value 4.1x") and "3.41" in f for f in verdicts["node_A"].failures)


def test_a_context_without_an_anchor_as_aris_pipeline_writes_it_is_traced_not_failed(
    demo: Path, tmp_path: Path
) -> None:
    copy = copy_of(demo, tmp_path) / "checkpoint"
    path = copy / "verified_context.json"
    context = json.loads(path.read_text())
    for key in ("anchor", "as_of_seq"):
        context.pop(key)
    for claim in context["claims"]:
        claim.pop("event_hash")  # ARI's build_verified_context writes neither
    path.write_text(json.dumps(context))
    proof = prove(copy)
    assert proof.ok and [c.verdict for c in proof.claims] == ["holds"] * 3
    assert any("carries no anchor (ARI's pipeline writes none)" in u for u in proof.unchecked)


def test_every_read_of_the_replay_table_is_recorded_with_it_and_replays_the_same(demo: Path, tmp_path: Path) -> None:
    """The replayable reads are one closed table (``ReadTool``): each service records its read
    under the table's name, the replayer has a replay for each, and a read outside the table
    (``bulk_get_node_memory``) is recorded and said not to be replayable."""
    copy = copy_of(demo, tmp_path) / "checkpoint"
    scope = ["root", "node_A", "node_A2"]
    backend = MemoryBackend(copy)
    try:
        backend.search_memory("cache blocking", scope, 3)
        backend.search_research_memory("cache blocking", scope)
        backend.build_working_context("node_A2", scope[:-1], "tiling")
        backend.get_verified_context(scope)
        backend.get_node_memory("node_A")
        backend.react_search("stencil", 3)
        backend.bulk_get_node_memory(["root", "node_A"])
    finally:
        backend.close()
    check, decoded = check_chain(copy)
    assert check.ok, check.problems
    records = read_records(decoded)
    assert {ReadTool(t) for t in {r.tool for r in records} & {t.value for t in ReadTool}} == set(ReadTool)
    backend = MemoryBackend(copy, readonly=True)
    try:
        replayed = replay_all(backend, records)
    finally:
        backend.close()
    verdicts = {(r.record.tool, r.verdict) for r in replayed}
    assert {tool for tool, verdict in verdicts if verdict == "same"} == {t.value for t in ReadTool}
    assert ("bulk_get_node_memory", "not_replayable") in verdicts
