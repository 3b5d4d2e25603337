"""ARI's ``MemoryBackend`` contract, stated as facts and run on every engine.

Each fact below is read off ARI's source (kotama7/ARI: ``ari-skill-memory`` 0.6.0 —
``backends/base.py``, ``in_memory.py``, ``letta_backend.py``, ``config.py``, ``writer.py``,
``context_builder.py`` — and ari-core's callers: ``memory_cli._do_backup/_do_restore``,
``cli/run.py`` resume, ``memory/letta_client.py``, ``agent/loop.py``). A test names the ARI
code whose behaviour it pins.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from ledger import ConfigurationError, InvalidInput
from ledger.events import TRUNCATED
from projections.access.log import ACCESS_LOG_NAME
from projections.api import clear_backend_cache, get_backend

SHA = "c" * 64
COW = "node_id does not match current node (CoW violation)"


@pytest.fixture
def backend(engine_backend, ckpt: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "nX")
    return engine_backend(ckpt)


def as_node(monkeypatch: pytest.MonkeyPatch, node: str) -> None:
    """ARI's MCP client sets the current node before every CoW-guarded write."""
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", node)


# ---------------------------------------------------------------------------- the factory (backends/__init__.py, config.py)


def test_get_backend_caches_per_checkpoint_and_reset_makes_a_new_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ARI_CHECKPOINT_DIR", str(tmp_path / "a"))
    try:
        first = get_backend()
        assert get_backend(checkpoint_dir=tmp_path / "a") is first
        assert get_backend(checkpoint_dir=tmp_path / "b") is not first
        fresh = get_backend(checkpoint_dir=tmp_path / "a", reset=True)
        assert fresh is not first and first.closed
        clear_backend_cache()
        assert fresh.closed and get_backend(tmp_path / "a") is not fresh
    finally:
        clear_backend_cache()


def test_no_checkpoint_is_a_runtime_error_as_in_ari(monkeypatch) -> None:
    monkeypatch.delenv("ARI_CHECKPOINT_DIR", raising=False)
    with pytest.raises(RuntimeError, match="ARI_CHECKPOINT_DIR"):
        get_backend()


def test_memory_backend_values_are_aris(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ARI_MEMORY_BACKEND", "redis")
    with pytest.raises(ConfigurationError, match="ARI_MEMORY_BACKEND") as info:
        get_backend(tmp_path)
    assert isinstance(info.value, RuntimeError)
    monkeypatch.setenv("ARI_MEMORY_BACKEND", "in_memory")  # ARI's test setting: never a server
    monkeypatch.setenv("LETTA_BASE_URL", "http://127.0.0.1:9")
    try:
        assert get_backend(tmp_path).health()["backend"] == "embedded"
    finally:
        clear_backend_cache()


# ---------------------------------------------------------------------------- node scope (base.py, in_memory.py, letta_backend.py)


def test_add_memory_returns_ok_and_id_and_refuses_as_ari(backend, monkeypatch) -> None:
    result = backend.add_memory("nX", "tool slurm_submit result=ok", {})
    assert result["ok"] is True and isinstance(result["id"], str)
    assert backend.add_memory("other", "x", {}) == {"ok": False, "error": COW}
    monkeypatch.delenv("ARI_CURRENT_NODE_ID")
    assert backend.add_memory("nX", "x") == {"ok": False, "error": "ARI_CURRENT_NODE_ID not set"}


def test_metadata_none_is_empty_and_a_non_object_is_refused(backend) -> None:
    backend.add_memory("nX", "no metadata")
    assert backend.get_node_memory("nX")["entries"][0]["metadata"] == {}
    for bad in (0, [], "text"):
        with pytest.raises(InvalidInput, match="metadata: must be an object"):
            backend.add_memory("nX", "x", bad)
    assert len(backend.get_node_memory("nX")["entries"]) == 1


def test_search_memory_shape_scope_and_score(backend, monkeypatch) -> None:
    for node, text in (
        ("root", "MFLOPS baseline 12000"),
        ("node_child1", "MFLOPS improved 280000"),
        ("node_sibling", "MFLOPS sibling 100"),
    ):
        as_node(monkeypatch, node)
        backend.add_memory(node, text, {})
    results = backend.search_memory("MFLOPS", ancestor_ids=["root", "node_child1"], limit=10)["results"]
    assert {r["text"] for r in results} == {"MFLOPS baseline 12000", "MFLOPS improved 280000"}
    for r in results:
        assert {"entry_id", "node_id", "text", "metadata", "score"} <= set(r)
        assert isinstance(r["score"], float) and 0.0 <= r["score"] <= 1.0
    assert backend.search_memory("anything", ancestor_ids=[], limit=5) == {"results": []}


def test_get_node_memory_entries_are_text_metadata_and_float_ts_in_order(backend) -> None:
    backend.add_memory("nX", "entry A", {"step": 1})
    backend.add_memory("nX", "entry B", {"step": 2})
    entries = backend.get_node_memory("nX")["entries"]
    assert [(e["text"], e["metadata"]) for e in entries] == [("entry A", {"step": 1}), ("entry B", {"step": 2})]
    assert all(isinstance(e["ts"], float) for e in entries) and entries[0]["ts"] <= entries[1]["ts"]
    assert backend.get_node_memory("nobody") == {"entries": []}


def test_clear_node_memory_counts_and_refuses_as_ari(backend, monkeypatch) -> None:
    backend.add_memory("nX", "to delete", {})
    as_node(monkeypatch, "child")
    assert backend.clear_node_memory("nX") == {"removed": 0, "error": COW}
    as_node(monkeypatch, "nX")
    assert backend.clear_node_memory("nX") == {"removed": 1}
    assert backend.get_node_memory("nX")["entries"] == []


def test_list_all_nodes_and_bulk_get_shapes(backend, monkeypatch) -> None:
    backend.add_memory("nX", "x1", {"type": "result_summary"})
    as_node(monkeypatch, "nY")
    backend.add_memory("nY", "y1", {})
    by_node = backend.list_all_nodes()["by_node"]
    assert set(by_node) == {"nX", "nY"}
    assert {"entry_id", "text", "metadata", "ts"} <= set(by_node["nX"][0])
    bulk = backend.bulk_get_node_memory(["nX", "missing"])["by_node"]
    assert list(bulk) == ["nX", "missing"] and bulk["missing"] == [] and bulk["nX"][0]["text"] == "x1"


# ---------------------------------------------------------------------------- experiment context (seed_core_memory, read_core_context)


def test_experiment_context_is_empty_then_exactly_what_was_seeded(backend) -> None:
    assert backend.get_experiment_context() == {}
    context = {
        "experiment_goal": "fast stencil",
        "primary_metric": "GFlops_per_s",
        "higher_is_better": True,
        "metric_rationale": "memory bound",
        "hardware_spec": "Xeon",
        "selected_idea": "blocking",
    }
    seeded = backend.seed_core_memory("", "", context)
    assert seeded["ok"] is True and isinstance(seeded["seeded_at"], float)
    assert backend.get_experiment_context() == context


# ---------------------------------------------------------------------------- ReAct trace (LettaMemoryClient needs lists)


def test_react_calls_return_lists_like_ari(backend) -> None:
    backend.react_add("kernel A ran", {"node_id": "n1", "step": 1})
    backend.react_add("kernel B failed", {"node_id": "n2", "step": 2})
    backend.react_add("kernel A optimized", {"node_id": "n1", "step": 3})
    found = backend.react_search("kernel A", limit=5)
    assert isinstance(found, list) and {"kernel A ran", "kernel A optimized"} <= {e["content"] for e in found}
    for e in found:
        assert {"content", "metadata", "ts", "id", "score"} <= set(e)
    everything = backend.react_get_all()
    assert isinstance(everything, list) and [e["content"] for e in everything] == [
        "kernel A ran",
        "kernel B failed",
        "kernel A optimized",
    ]
    assert {e["metadata"]["node_id"] for e in backend.react_search("kernel", limit=10)} == {
        "n1",
        "n2",
    }  # flat, not scoped
    assert [e["content"] for e in backend.list_react_entries(limit=2)] == ["kernel B failed", "kernel A optimized"]
    assert [e["content"] for e in backend.list_react_entries()] == [e["content"] for e in everything]


def test_react_steps_are_cut_as_ari_cuts_them(backend, monkeypatch) -> None:
    monkeypatch.setenv("ARI_REACT_MEMORY_MAX_ENTRY_CHARS", "10")
    backend.react_add("a" * 100)
    [step] = backend.react_get_all()
    assert step["content"] == "a" * 10 + TRUNCATED


# ---------------------------------------------------------------------------- purge and bulk import (ari memory backup/restore, ari delete)


def test_purge_hides_everything_and_reports_counts(backend, monkeypatch) -> None:
    backend.add_memory("nX", "alpha", {"k": "v"})
    as_node(monkeypatch, "child")
    backend.add_memory("child", "beta", {"q": 1})
    backend.react_add("ran kernel", {"node_id": "nX"})
    backend.seed_core_memory("", "", {"primary_metric": "GB_per_s"})
    before = backend.session.ledger.last_seq
    assert backend.purge_checkpoint() == {"removed_node": 2, "removed_react": 1}
    assert backend.list_all_nodes() == {"by_node": {}}
    assert backend.react_get_all() == [] and backend.list_react_entries() == []
    assert backend.get_experiment_context() == {}
    assert backend.search_memory("alpha", ["nX", "child"]) == {"results": []}
    assert len(backend.list_all_nodes(as_of=before)["by_node"]) == 2  # the log keeps it all
    assert backend.purge_checkpoint() == {"removed_node": 0, "removed_react": 0}


def test_aris_delete_removes_the_checkpoint_while_the_backend_is_open(tmp_path: Path, monkeypatch) -> None:
    """ari-core's ``viz/checkpoint_lifecycle._api_delete_checkpoint``: ``get_backend(p).purge_checkpoint()``,
    then ``shutil.rmtree(p)`` with the backend still open (cached) and ``LETTA_BASE_URL`` exported
    with no server behind it. No thread of the backend may create a file in the directory meanwhile
    (before: the Letta runner made its lock file on its first round, and 3 of 100 deletes failed
    with "Directory not empty: 'memory_ledger'"): the lock file waits for a server that answers."""
    import shutil
    import time

    from ledger.layout import store_dir
    from projections.engines.letta.lock import LOCK_NAME

    monkeypatch.setenv("LETTA_BASE_URL", "http://127.0.0.1:1")
    failed = []
    for i in range(20):
        ckpt = tmp_path / "checkpoints" / f"run_{i}"
        ckpt.mkdir(parents=True)
        backend = get_backend(ckpt)
        backend.purge_checkpoint()
        runner = backend.session.letta
        deadline = time.monotonic() + 10
        while runner.error is None and time.monotonic() < deadline:  # its first round has run
            time.sleep(0.01)
        assert runner.error is not None and not (store_dir(ckpt) / LOCK_NAME).exists()
        try:
            shutil.rmtree(ckpt)
        except OSError as exc:
            failed.append(f"{ckpt.name}: {exc}")
    clear_backend_cache()
    assert failed == [] and list((tmp_path / "checkpoints").iterdir()) == []


def test_bulk_import_keeps_aris_ts_and_is_idempotent(backend) -> None:
    nodes = [
        {"node_id": "root", "text": "alpha", "metadata": {"k": "v"}, "ts": 1764400000.25},
        {"node_id": "child", "text": "beta", "metadata": {"q": 1}, "ts": 1764400001.5},
    ]
    steps = [{"text": "ran kernel", "metadata": {"node_id": "root", "step": 1}, "ts": 1764400002.0}]
    seed = [{"persona": "", "human": "", "context": {"primary_metric": "GB_per_s"}, "seeded_at": 1764400003.0}]
    assert backend.bulk_import(nodes, kind="node_scope") == {"imported": 2, "kind": "node_scope", "skipped": 0}
    assert backend.bulk_import(steps, kind="react_step")["imported"] == 1
    assert backend.bulk_import(seed, kind="core_seed")["imported"] == 1
    by_node = backend.list_all_nodes()["by_node"]
    assert [(e["text"], e["metadata"], e["ts"]) for e in by_node["root"]] == [("alpha", {"k": "v"}, 1764400000.25)]
    assert [(e["content"], e["metadata"]["node_id"], e["ts"]) for e in backend.list_react_entries()] == [
        ("ran kernel", "root", 1764400002.0)
    ]
    assert backend.get_experiment_context() == {"primary_metric": "GB_per_s"}
    for kind, entries in (("node_scope", nodes), ("react_step", steps), ("core_seed", seed)):
        assert backend.bulk_import(entries, kind=kind)["imported"] == 0
    with pytest.raises(ValueError, match=r"kind: unknown kind .global."):
        backend.bulk_import(nodes, kind="global")
    untimed = [{"node_id": "root", "text": "no time given", "metadata": {}}, {"text": "untimed step", "metadata": {}}]
    assert backend.bulk_import(untimed[:1], kind="node_scope")["imported"] == 1
    assert backend.bulk_import(untimed[1:], kind="react_step")["imported"] == 1
    assert backend.bulk_import(untimed[:1], kind="node_scope")["imported"] == 0  # not again on every run
    assert backend.bulk_import(untimed[1:], kind="react_step")["imported"] == 0


def _backup_lines(b) -> list[dict]:
    """The lines ari-core's ``_do_backup`` writes, built from the same calls it makes."""
    lines = [
        {"kind": "node_scope", "node_id": nid, "text": e["text"], "metadata": e["metadata"], "ts": e["ts"]}
        for nid, entries in b.list_all_nodes()["by_node"].items()
        for e in entries
    ]
    lines += [
        {"kind": "react_step", "text": e["content"], "metadata": e["metadata"], "ts": e["ts"]}
        for e in b.list_react_entries()
    ]
    ctx = b.get_experiment_context()
    if ctx:
        lines.append(
            {"kind": "core_seed", "persona": "", "human": "", "context": ctx, "seeded_at": ctx.get("seeded_at", 0.0)}
        )
    return lines


def _restore(b, lines: list[dict], overwrite: bool) -> int:
    """ari-core's ``_do_restore``: purge on overwrite, skip (ts, text) already present, bulk_import."""
    if overwrite:
        b.purge_checkpoint()
    node = [x for x in lines if x["kind"] == "node_scope"]
    react = [x for x in lines if x["kind"] == "react_step"]
    core = [x for x in lines if x["kind"] == "core_seed"]
    if not overwrite:
        have = {(e["ts"], e["text"]) for es in b.list_all_nodes()["by_node"].values() for e in es}
        node = [x for x in node if (x["ts"], x["text"]) not in have]
        have_react = {(e["ts"], e["content"]) for e in b.list_react_entries()}
        react = [x for x in react if (x["ts"], x["text"]) not in have_react]
    total = 0
    for kind, entries in (("node_scope", node), ("react_step", react), ("core_seed", core)):
        if entries:
            total += b.bulk_import(entries, kind=kind)["imported"]
    return total


def test_backup_purge_restore_round_trip_and_a_second_restore_adds_nothing(
    backend, monkeypatch, tmp_path: Path
) -> None:
    as_node(monkeypatch, "root")
    backend.add_memory("root", "alpha", {"k": "v"})
    as_node(monkeypatch, "child")
    backend.add_memory("child", "beta", {"q": 1})
    backend.react_add("ran kernel", {"node_id": "root"})
    backend.seed_core_memory("", "", {"primary_metric": "GB_per_s"})
    answers = (backend.list_all_nodes(), backend.list_react_entries(), backend.get_experiment_context())
    lines = _backup_lines(backend)
    path = tmp_path / "memory_backup.jsonl.gz"  # as ari-core writes it, read back as it reads it
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    assert _restore(backend, lines, overwrite=True) >= 3

    def strip(entries):
        return [{k: e[k] for k in ("text", "metadata", "ts")} for e in entries]

    assert {n: strip(es) for n, es in backend.list_all_nodes()["by_node"].items()} == {
        n: strip(es) for n, es in answers[0]["by_node"].items()
    }
    assert [(e["content"], e["ts"]) for e in backend.list_react_entries()] == [
        (e["content"], e["ts"]) for e in answers[1]
    ]
    assert backend.get_experiment_context() == answers[2]
    seq = backend.session.ledger.last_seq
    assert _restore(backend, lines, overwrite=False) == 0  # resume's auto-restore twice: nothing duplicated
    assert backend.session.ledger.last_seq == seq


# ---------------------------------------------------------------------------- health, access log


def test_health_has_aris_keys(backend) -> None:
    health = backend.health()
    assert health["ok"] is True and health["backend"] in ("embedded", "letta")
    assert isinstance(health["latency_ms"], float) and health["server_version"].startswith("ari-memory-ledger")
    assert health["namespace"] == hashlib.sha1(str(backend.checkpoint_dir.resolve()).encode()).hexdigest()[:12]


def test_access_log_lines_are_aris_and_inheritance_reads_are_logged(backend, monkeypatch) -> None:
    as_node(monkeypatch, "root")
    written = backend.add_memory("root", "RESULT SUMMARY root", {"type": "result_summary"})
    as_node(monkeypatch, "child")
    backend.get_node_memory("root")
    backend.bulk_get_node_memory(["root"])
    backend.search_memory("root result", ["root"], limit=3)
    backend._access.flush_and_close()  # ARI's tests drain the log this way
    lines = [json.loads(x) for x in (backend.checkpoint_dir / ACCESS_LOG_NAME).read_text().splitlines()]
    write = next(x for x in lines if x["op"] == "write")
    assert {k: write[k] for k in ("node_id", "collection", "entry_id", "text_preview", "metadata")} == {
        "node_id": "root",
        "collection": "node_scope",
        "entry_id": written["id"],
        "text_preview": "RESULT SUMMARY root",
        "metadata": {"type": "result_summary"},
    }
    reads = {x["query"]: x for x in lines if x["op"] == "read"}
    inherit = reads["inherit:get_node_memory"]
    assert inherit["node_id"] == "child" and inherit["ancestor_ids"] == ["root"]
    assert inherit["results"][0]["type"] == "result_summary" and "src_node_id" in inherit["results"][0]
    assert "inherit:bulk_get_node_memory" in reads
    assert all("src_node_id" in r for r in reads["root result"]["results"])


# ---------------------------------------------------------------------------- typed memory as ARI's writer stores it (writer.py, context_builder.py)


def aris_writer(b, node: str, kind: str, text: str, **kw) -> dict:
    """Exactly what ``ari_skill_memory.writer.add_typed_memory`` hands to ``add_memory``."""
    metadata = {
        "type": kind,
        "mem_kind": kind,
        "metric_ptr": kw.get("metric_ptr"),
        "artifact_refs": kw.get("artifact_refs", []),
        "node_report_ref": kw.get("node_report_ref"),
    }
    metadata.update(kw.get("extra") or {})
    return b.add_memory(node, text, metadata)


def test_entries_from_aris_writer_are_typed_and_flagged_not_refused(backend) -> None:
    result = aris_writer(
        backend,
        "nX",
        "experiment_result",
        "tile=32 -> 842 GB/s",
        metric_ptr={"name": "GB/s", "value": 842.1},
        artifact_refs=[{"path": "out/bench.csv", "sha256": "ab", "role": "data_output"}],
    )
    assert result["ok"] and result["findings"][0]["field"] == "metadata.artifact_refs[0].sha256"
    [entry] = backend.get_node_memory("nX")["entries"]
    assert entry["kind"] == "experiment_result"
    assert entry["metadata"]["type"] == entry["metadata"]["mem_kind"] == "experiment_result"
    assert entry["metadata"]["metric_ptr"] == {"name": "GB/s", "value": 842.1}
    # this library's typed writer stores the same representation
    mine = backend.add_experiment_result(
        "nX",
        "mine",
        metric_ptr={"name": "GB/s", "value": 1.0},
        artifact_refs=[{"path": "out/b.csv", "sha256": SHA, "role": "data_output"}],
    )
    second = backend.get_node_memory("nX")["entries"][1]
    assert mine["ok"] and set(second["metadata"]) == set(entry["metadata"])


def test_typed_writer_refuses_only_what_ari_refuses(backend) -> None:
    with pytest.raises(ValueError, match="unknown kind"):
        backend.add_typed_memory("nX", "bogus", "x")
    with pytest.raises(ValueError, match="unknown status"):
        backend.add_reproducibility_event("nX", "mem0", "totally_passed")
    # a target nobody can see is stored and flagged
    event = backend.add_reproducibility_event("nX", "mem0", "rerun_passed")
    assert event["ok"] and event["findings"][0]["field"] == "target_memory_id"


def test_verified_context_follows_aris_rules_and_adds_evidence(backend, monkeypatch) -> None:
    as_node(monkeypatch, "root")
    g = backend.add_experiment_result(
        "root", "result G grounded", artifact_refs=[{"path": "g.csv", "sha256": "g", "role": "data_output"}]
    )
    p = backend.add_experiment_result(
        "root",
        "result P reproduced",
        artifact_refs=[{"path": "p.csv", "sha256": SHA, "role": "data_output"}],
        node_report_ref={"run_id": "r", "node_id": "root"},
    )
    backend.add_experiment_result("root", "ungrounded claim no file")
    backend.add_failure_case("root", "link error")
    as_node(monkeypatch, "sib")
    backend.add_experiment_result("sib", "sibling claim", artifact_refs=[{"path": "s.csv", "sha256": SHA}])
    ctx = backend.get_verified_context(["root"])
    texts = [c["text"] for c in ctx["claims"]]
    assert "sibling claim" not in texts and all("link error" not in t for t in texts)
    assert {c["text"]: c["repro_status"] for c in ctx["claims"]}["result G grounded"] is None  # no event yet
    assert {c["text"] for c in ctx["usable_for_claims"]} == {
        "result G grounded",
        "result P reproduced",
    }  # grounded = cites files
    assert [lim["text"] for lim in ctx["limitations"]] == ["link error"]
    evidence = {c["text"]: c["evidence"] for c in ctx["claims"]}
    assert evidence == {
        "result G grounded": "cited",
        "result P reproduced": "hashed",
        "ungrounded claim no file": "none",
    }
    as_node(monkeypatch, "root")
    backend.add_reproducibility_event("root", p["id"], "rerun_passed")
    backend.add_reproducibility_event("root", g["id"], "rerun_failed")
    ctx = backend.get_verified_context(["root"])
    assert ctx["claims"][0]["text"] == "result P reproduced" and ctx["claims"][0]["repro_status"] == "rerun_passed"
    assert ctx["claims"][0]["evidence"] == "rerun_passed"
    assert [c["text"] for c in ctx["usable_for_claims"]] == ["result P reproduced"]
    assert (
        backend.get_verified_context(["root"], min_evidence="verified")["usable_for_claims"][0]["text"]
        == "result P reproduced"
    )
    with pytest.raises(InvalidInput, match="min_evidence"):
        backend.get_verified_context(["root"], min_evidence="solid")


def test_aris_typed_read_helpers(backend, monkeypatch) -> None:
    as_node(monkeypatch, "root")
    backend.add_experiment_result(
        "root", "root baseline 100 GB/s on partA", artifact_refs=[{"path": "r.csv", "sha256": SHA}]
    )
    as_node(monkeypatch, "p1")
    backend.add_failure_case("p1", "link failed on partA cublasLt missing")
    backend.add_experiment_result("p1", "p1 tiling 140 GB/s on partA")
    r = backend.add_experiment_result("p1", "result A")["id"]
    backend.add_reproducibility_event("p1", r, "rerun_failed")
    backend.add_reproducibility_event("p1", r, "rerun_passed")
    found = backend.search_research_memory("partA", ["root", "p1"], kinds=["failure_case"], limit=5)["results"]
    assert [x["text"] for x in found] == ["link failed on partA cublasLt missing"]
    grounded = backend.search_research_memory(
        "partA", ["root", "p1"], kinds=["experiment_result"], require_artifacts=True
    )["results"]
    assert [x["text"] for x in grounded] == ["root baseline 100 GB/s on partA"]
    handed = backend.ancestor_typed_memory(["root", "p1"], kinds=["experiment_result"])
    assert [x["text"] for x in handed] == ["root baseline 100 GB/s on partA", "p1 tiling 140 GB/s on partA", "result A"]
    assert backend.fold_reproducibility(["p1"])[r] == {"status": "rerun_passed"}
