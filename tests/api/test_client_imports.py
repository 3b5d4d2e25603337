"""What a memory client loads (issue 30, item 1): the modules a node's writes and searches
never use stay out of its process.

pydantic (the node_report models) and ``importlib.metadata`` cost ~10 MB of a client's peak
RSS, ~14 % of it. They load with the first node report consolidated, the retired
``ledger.get_backend`` door, or a ``status`` asking for the version, never with
``add_memory`` and ``search_memory``. The Rust ``tokenizers`` library (~25 MB) loads only
once the Python tokenizer has merged many new pieces (``projections.models.embedder._Model``).
The value grammar (its word tables and patterns, ~8 MB) loads with the first claim whose numbers
are checked (a verified context, an audit), never with a write or a search. Each case runs in a
fresh interpreter, the way ARI starts one.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.imports import loaded_after as loaded_in_fresh

HEAVY = (
    "pydantic",
    "pydantic_core",
    "importlib.metadata",
    "ledger.ari.node_report",
    "tokenizers",
    "projections.evidence.grammar.values",
    "projections.evidence.grammar.roles",
)


def loaded_after(script: str, ckpt: Path) -> dict[str, bool]:
    """Which of HEAVY a fresh interpreter holds after running ``script`` (``backend`` is open on ``ckpt``)."""
    return loaded_in_fresh(
        """
        from projections.api import clear_backend_cache, get_backend
        backend = get_backend(sys.argv[1])
        """,
        script,
        HEAVY,
        str(ckpt),
        epilogue="clear_backend_cache()",
    )


def test_writes_and_searches_load_neither_pydantic_nor_package_metadata(tmp_path: Path) -> None:
    loaded = loaded_after(
        """
        for i in range(30):
            node = f"node_{i % 3}"
            backend.add_memory(node, f"entry {i}: {i * 0.37:.2f} GFlops/s", current_node=node)
        assert backend.search_memory("GFlops", ["node_1"], 5)
        """,
        tmp_path / "ckpt",
    )
    assert loaded == dict.fromkeys(HEAVY, False)


def test_consolidating_a_report_loads_the_models_it_needs(tmp_path: Path) -> None:
    """The other side: the lazy import is there when a report is checked against ARI's schema."""
    work = tmp_path / "run" / "node_1"
    work.mkdir(parents=True)
    report = {"schema_version": 1, "node_id": "node_1", "status": "success", "metrics": {"GFlops": 1.5}}
    (work / "node_report.json").write_text(json.dumps(report))
    loaded = loaded_after(
        f"""
        backend.consolidate_node_memory("node_1", {str(work / "node_report.json")!r}, {str(work)!r}, current_node="node_1")
        """,
        tmp_path / "ckpt",
    )
    assert loaded["pydantic"] and loaded["ledger.ari.node_report"]


def test_a_verified_context_loads_the_value_grammar(tmp_path: Path) -> None:
    """The other side: the grammar is there when a claim's numbers are checked."""
    work = tmp_path / "experiments" / "run_1" / "node_1"
    work.mkdir(parents=True)
    (work / "node_report.json").write_text(
        json.dumps({"node_id": "node_1", "status": "success", "metrics": {"GFlops": 1.5}})
    )
    loaded = loaded_after(
        f"""
        backend.add_experiment_result(
            "node_1", "The kernel reaches 1.5 GFlops.", metric_ptr={{"name": "GFlops", "value": 1.5}},
            artifact_refs=[{{"path": "node_report.json"}}], node_report_ref={{"run_id": "run_1", "node_id": "node_1"}},
            current_node="node_1",
        )
        ctx = backend.get_verified_context(["node_1"], "paper", None, experiments_root={str(tmp_path / "experiments")!r})
        assert ctx["claims"] and ctx["claims"][0]["values"]["verdict"] == "checked", ctx["claims"]
        """,
        tmp_path / "ckpt",
    )
    assert loaded["projections.evidence.grammar.values"] and loaded["projections.evidence.grammar.roles"]
