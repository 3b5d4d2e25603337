"""ARI's own memory files (R34), through the real CLI: ``import-ari`` reads every file ARI
writes with the answers ARI's backends give, importing twice adds nothing, ``export-ari``
writes ARI's ``memory_backup.jsonl.gz``, and bad input is one error line that writes nothing.

The expected entries are stated as facts about ``fixtures/ari_files`` (see its README)."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.ari.importer import BACKUP_NAME, read_ari_file
from ledger.layout import store_dir
from ledger.log import LOG_NAME
from projections.api import MemoryBackend
from support.env import FIXTURES, subprocess_env

FILES = FIXTURES / "ari_files"
MIGRATED = "memory_store.jsonl.migrated-1764400000"

MM_ROOT, MM_A = "node_20251014_matmul_root", "node_5c0ffee1"
ROOT, A, B, C, V = "node_20251129_stencil_root", "node_3fa2c1d0", "node_9b41e2aa", "node_e4a91f07", "node_c7d1e0b2"
TARGET = "passage-6a1f0c2e-3b7d-4c19-9e2f-0d5b8a7c4e11"


def typed(
    kind: str, metric: tuple[str, float | None] | None, refs: list[dict], report_node: str | None, **extra: object
) -> dict:
    """Metadata as ARI's writer (``add_typed_memory``) stamps it."""
    return {
        "type": kind,
        "mem_kind": kind,
        "metric_ptr": {"name": metric[0], "value": metric[1]} if metric else None,
        "artifact_refs": refs,
        "node_report_ref": {"run_id": "20251129_stencil", "node_id": report_node} if report_node else None,
        **extra,
    }


def ref(path: str, role: str, sha256: str) -> dict:
    return {"path": path, "sha256": sha256, "role": role}


# (text, metadata, ts, kind) per node, in ARI's order; NaN comes back as null (with a finding)
MIGRATED_NODES = {
    ROOT: [
        (
            "SURVEY RESULTS:\n- [Roofline: an insightful visual performance model]: a 7-point stencil sits at 0.3 flop/byte",
            {"type": "survey_papers"},
            1764399000.125,
            None,
        ),
        (
            "RESULT SUMMARY node=node_20251129_stencil_root label=draft: metrics=[GFlops_per_s=2.41] summary=naive 7-point stencil, 256³ grid",
            {"type": "result_summary", "metrics": {"GFlops_per_s": 2.41}},
            1764399060.5,
            None,
        ),
    ]
}
BACKUP_NODES = {
    ROOT: [
        *MIGRATED_NODES[ROOT],
        (
            "naive 7-point stencil: 2.41 GFlops/s on a 256³ grid",
            typed(
                "experiment_result",
                ("GFlops_per_s", 2.41),
                [
                    ref(
                        "results.csv", "data_output", "a947e1eb75bef1cd9c58addd70eeaa826486933ee97de7a57affef0f410431b0"
                    ),
                    ref("stencil.c", "source", "60f69e824ac147adec3307df9703da79e0ae0aad4da3a8fae6b0c858304612da"),
                ],
                ROOT,
            ),
            1764400130.75,
            "experiment_result",
        ),
    ],
    A: [
        (
            "RESULT SUMMARY node=node_3fa2c1d0 label=improve: metrics=[GFlops_per_s=9.87] summary=OpenMP over k and j",
            {"type": "result_summary", "metrics": {"GFlops_per_s": 9.87}},
            1764400900.0,
            None,
        ),
        (
            "OpenMP over k and j: 9.87 GFlops/s (4.1× the baseline)",
            typed(
                "experiment_result",
                ("GFlops_per_s", 9.87),
                [
                    ref(
                        "results.csv", "data_output", "f70c9885ccb1f2c99c9686931e69ea876ec828e66fd5ec55fe12040420ba46dd"
                    ),
                    ref("run.log", "log", "7892af575d4cea55f06db2a1027235b307c81ffa6bf8aaf676555ded67e01d16"),
                ],
                A,
            ),
            1764400900.5,
            "experiment_result",
        ),
        (
            "try j/k cache blocking next; the k loop still streams from DRAM",
            typed("reflection", None, [], A, confidence=0.4),
            1764400900.625,
            "reflection",
        ),
    ],
    B: [
        (
            "RESULT SUMMARY node=node_9b41e2aa label=improve: metrics=[GFlops_per_s=nan] summary=AVX-512 intrinsics",
            {"type": "result_summary", "metrics": {"GFlops_per_s": None}},
            1764401500.25,
            None,
        ),
        (
            "AVX-512 intrinsics: the benchmark printed nan GFlops/s",
            typed(
                "experiment_result",
                ("GFlops_per_s", None),
                [ref("results.csv", "data_output", "e4238260195859fd14b2b9c520c40759b8d2df96c8fcdbac813b0689c1867eea")],
                B,
            ),
            1764401500.5,
            "experiment_result",
        ),
    ],
    C: [
        (
            "halo exchange read uninitialised cells; the run aborted",
            typed(
                "failure_case",
                None,
                [ref("run.log", "log", "750089a87440d56a91d04fc072ee8f38c7314939b851beb2d10e45e3ab3e1e5d")],
                C,
            ),
            1764402000.0,
            "failure_case",
        )
    ],
    V: [
        (
            f"reproducibility: {TARGET} -> rerun_passed",
            typed(
                "reproducibility_event",
                None,
                [ref("results.csv", "data_output", "98b51811c9cf44b8576c89642455fdf5995c7be852073975656a0243b88362d2")],
                None,
                repro_target_id=TARGET,
                repro_status="rerun_passed",
            ),
            1764402600.0,
            "reproducibility_event",
        )
    ],
}
# (content, metadata, ts, node)
BACKUP_STEPS = [
    ("Thought: parallelise the k and j loops with OpenMP", {"node_id": A, "step": 1}, 1764400450.25, A),
    ("Tool run_bash: make stencil && ./stencil 256 → 9.87 GFlops/s", {"node_id": A, "step": 2}, 1764400500.5, A),
    ("Tool run_bash: ./stencil 256 → nan GFlops/s", {"node_id": B, "step": 1}, 1764401400.125, B),
]
BACKUP_CONTEXT = {
    "experiment_goal": "Maximise the throughput of a double-precision 3-D 7-point stencil on one node.",
    "primary_metric": "GFlops_per_s",
    "higher_is_better": True,
    "metric_rationale": "GFlops/s at a fixed 256³ grid is comparable across variants.",
    "hardware_spec": "1× AMD EPYC 7763 (64 cores), 256 GiB DDR4",
    "selected_idea": "Cache-aware stencil: OpenMP, then j/k blocking | Plan: §1 baseline; §2 OpenMP; §3 blocking",
}
V05_NODES = {
    MM_ROOT: [
        (
            "SURVEY RESULTS:\n- [Anatomy of High-Performance Matrix Multiplication]: pack panels of A and B into contiguous buffers sized for L2",
            {"type": "survey_papers"},
            1760428800.5,
            None,
        ),
        (
            "RESULT SUMMARY node=node_20251014_matmul_root label=draft: metrics=[GFLOPS=11.2] summary=naive i-j-k loop, 1024×1024 doubles",
            {"type": "result_summary", "metrics": {"GFLOPS": 11.2}},
            1760429400.25,
            None,
        ),
    ],
    MM_A: [
        (
            "Tool run_bash: make && ./mm 1024 → 48.7 GFLOPS (blocked 64×64)",
            {"step": 3, "tool": "run_bash"},
            1760430000.75,
            None,
        )
    ],
}
V05_STEPS = [  # memory.json's ISO times (UTC) as float seconds
    (
        "Thought: the naive loop is memory bound; tile i and k for L2",
        {"node_id": MM_A, "step": 1},
        1760430600.123456,
        MM_A,
    ),
    ("Tool run_bash: gcc -O3 -march=native mm.c -o mm", {"node_id": MM_A, "step": 2}, 1760430670.000001, MM_A),
]


def cli(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "projections", *map(str, args)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=300,
    )


def ok(*args: str | Path) -> str:
    run = cli(*args)
    assert run.returncode == 0, run.stderr
    return run.stdout


def answers(ckpt: Path) -> tuple[dict, list, dict]:
    """What ARI reads back: entries per node, the ReAct trace and the experiment context."""
    backend = MemoryBackend(ckpt)
    try:
        nodes = {
            nid: [(e["text"], e["metadata"], e["ts"], e["kind"]) for e in entries]
            for nid, entries in backend.list_all_nodes()["by_node"].items()
        }
        steps = [(s["content"], s["metadata"], s["ts"], s["node_id"]) for s in backend.list_react_entries()]
        return nodes, steps, backend.get_experiment_context()
    finally:
        backend.close()


def files_of(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (the ledger's live in its ``memory_ledger/``), by relative path."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint holding every fixture file, imported once with ARI's default discovery."""
    ckpt = tmp_path_factory.mktemp("full") / "ckpt"
    shutil.copytree(FILES, ckpt)
    out = ok("import-ari", ckpt).splitlines()
    assert [line.split(" (")[0] for line in out] == [
        str(ckpt / n) for n in (MIGRATED, "memory_store.jsonl", "memory.json", BACKUP_NAME)
    ]
    assert out[0].endswith("(v0.5 memory_store.jsonl): node_scope 2 imported, 0 already there")
    assert out[3].endswith(
        "(v0.6 memory_backup.jsonl.gz): node_scope 8 imported, 2 already there; "
        "react_step 3 imported, 0 already there; core_seed 1 imported, 0 already there"
    )
    return ckpt


# ---------------------------------------------------------------------------- each file


def test_v06_backup_gives_aris_answers_typed_and_with_aris_ts(tmp_path: Path) -> None:
    out = ok("import-ari", tmp_path / "ckpt", "--source", FILES / BACKUP_NAME)
    assert "node_scope 10 imported, 0 already there; react_step 3 imported" in out
    assert answers(tmp_path / "ckpt") == (BACKUP_NODES, BACKUP_STEPS, BACKUP_CONTEXT)
    backend = MemoryBackend(tmp_path / "ckpt")
    nan_findings = [f for e in backend.list_all_nodes()["by_node"][B] for f in e["findings"]]
    backend.close()
    assert [f["field"] for f in nan_findings] == ["metadata.metrics.GFlops_per_s", "metadata.metric_ptr.value"]
    assert all("stored as null" in f["reason"] for f in nan_findings)


def test_v05_store_and_react_trace(tmp_path: Path) -> None:
    out = ok(
        "import-ari", tmp_path / "ckpt", "--source", FILES / "memory_store.jsonl", "--source", FILES / "memory.json"
    )
    assert (
        "(v0.5 memory_store.jsonl): node_scope 3 imported" in out and "(v0.5 memory.json): react_step 2 imported" in out
    )
    assert answers(tmp_path / "ckpt") == (V05_NODES, V05_STEPS, {})
    events = [json.loads(line) for line in ok("log", tmp_path / "ckpt").splitlines()]
    assert [e["body"]["origin"] for e in events if e["type"] == "react_step"] == [  # ARI's text of the time is kept too
        {"source": "memory.json", "ts": 1760430600.123456, "ts_text": "2025-10-14T08:30:00.123456+00:00"},
        {"source": "memory.json", "ts": 1760430670.000001, "ts_text": "2025-10-14T08:31:10.000001+00:00"},
    ]


def test_migrated_name_is_read_by_its_content(tmp_path: Path) -> None:
    out = ok("import-ari", tmp_path / "ckpt", "--source", FILES / MIGRATED)
    assert out.strip().endswith(f"{MIGRATED} (v0.5 memory_store.jsonl): node_scope 2 imported, 0 already there")
    assert answers(tmp_path / "ckpt") == (MIGRATED_NODES, [], {})


def test_a_checkpoint_imports_in_aris_order_and_twice_adds_nothing(full: Path) -> None:
    nodes, steps, context = answers(full)
    assert nodes == {**BACKUP_NODES, **V05_NODES} and list(nodes)[:3] == [ROOT, MM_ROOT, MM_A]
    assert steps == V05_STEPS + BACKUP_STEPS and context == BACKUP_CONTEXT
    log = (store_dir(full) / LOG_NAME).read_bytes()
    again = json.loads(ok("import-ari", full, "--json"))
    assert [Path(item["path"]).name for item in again] == [MIGRATED, "memory_store.jsonl", "memory.json", BACKUP_NAME]
    assert all(r["imported"] == 0 and r["skipped"] > 0 for item in again for r in item["kinds"].values())
    assert (store_dir(full) / LOG_NAME).read_bytes() == log


# ---------------------------------------------------------------------------- export-ari


def test_export_writes_aris_backup_and_round_trips(full: Path, tmp_path: Path) -> None:
    backup = tmp_path / "out" / "backup.jsonl.gz"
    backup.parent.mkdir()
    assert ok("export-ari", full, "-o", backup).startswith(f"wrote {backup}: 13 node_scope, 5 react_step, 1 core_seed")
    text = gzip.decompress(backup.read_bytes()).decode("utf-8")
    lines = [json.loads(line) for line in text.splitlines()]  # ARI's _do_restore reads it this way
    assert text == "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)  # as ARI's json.dumps writes
    kinds = [line["kind"] for line in lines]
    assert kinds == ["node_scope"] * 13 + ["react_step"] * 5 + ["core_seed"]
    shapes = {kind: [list(line) for line in lines if line["kind"] == kind] for kind in set(kinds)}
    assert shapes["node_scope"] == [["kind", "node_id", "text", "metadata", "ts"]] * 13
    assert shapes["react_step"] == [["kind", "text", "metadata", "ts"]] * 5
    assert shapes["core_seed"] == [["kind", "persona", "human", "context", "seeded_at"]]
    assert [line["node_id"] for line in lines[:13]] == [ROOT] * 3 + [MM_ROOT] * 2 + [MM_A] + [A] * 3 + [B] * 2 + [C, V]
    assert lines[-1] == {"kind": "core_seed", "persona": "", "human": "", "context": BACKUP_CONTEXT, "seeded_at": 0.0}
    assert sorted(p.name for p in backup.parent.iterdir()) == ["backup.jsonl.gz"]  # no temp file left

    ok("import-ari", tmp_path / "fresh", "--source", backup)
    assert answers(tmp_path / "fresh") == answers(full)


def test_a_backup_of_a_checkpoint_imported_into_itself_adds_nothing(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    backend = MemoryBackend(ckpt)
    backend.seed_core_memory(
        "You are ARI.", "An HPC researcher.", {"primary_metric": "GFlops_per_s", "higher_is_better": True}
    )
    backend.add_memory(
        "root", "RESULT SUMMARY metrics=[GFlops_per_s=2.41]", {"type": "result_summary"}, current_node="root"
    )
    backend.add_experiment_result(
        "root", "2.41 GFlops/s", metric_ptr={"name": "GFlops_per_s", "value": 2.41}, current_node="root"
    )
    backend.react_add("Thought: start with the naive loop", {"node_id": "root", "step": 1})
    backend.close()
    assert ok("export-ari", ckpt) == f"wrote {ckpt / BACKUP_NAME}: 2 node_scope, 1 react_step, 1 core_seed\n"
    seed = [json.loads(x) for x in gzip.decompress((ckpt / BACKUP_NAME).read_bytes()).splitlines()][-1]
    assert (seed["persona"], seed["human"]) == ("You are ARI.", "An HPC researcher.")  # what ARI's own backup drops
    before, log = answers(ckpt), (store_dir(ckpt) / LOG_NAME).read_bytes()
    out = ok("import-ari", ckpt)
    assert out.strip().endswith(
        "node_scope 0 imported, 2 already there; react_step 0 imported, 1 already there; "
        "core_seed 0 imported, 1 already there"
    )
    assert (store_dir(ckpt) / LOG_NAME).read_bytes() == log and answers(ckpt) == before
    assert answers(ckpt)[0]["root"][1][3] == "experiment_result"


def test_export_never_overwrites_a_backup_holding_memory_the_checkpoint_lacks(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ok(
        "import-ari", ckpt, "--source", FILES / MIGRATED
    )  # 2 of the backup's 10 node entries; none of its 3 steps, no seed
    shutil.copy(FILES / BACKUP_NAME, ckpt)
    before = files_of(ckpt)
    run = cli("export-ari", ckpt)
    assert run.returncode == 2 and run.stderr == (
        f"error: {BACKUP_NAME}: holds 12 entries this checkpoint does not show; writing would lose them "
        "(import them first with import-ari, or replace the file on purpose with --force)\n"
    )
    assert files_of(ckpt)[BACKUP_NAME] == before[BACKUP_NAME]
    ok("import-ari", ckpt)
    assert ok("export-ari", ckpt).startswith(f"wrote {ckpt / BACKUP_NAME}: 10 node_scope, 3 react_step, 1 core_seed")

    other = tmp_path / "notes.txt"
    other.write_text("not ARI's\n")
    run = cli("export-ari", ckpt, "-o", other)
    assert run.returncode == 2 and run.stderr.startswith(
        "error: notes.txt: exists and cannot be read as an ARI memory file"
    )
    assert other.read_text() == "not ARI's\n"
    ok("export-ari", ckpt, "-o", other, "--force")
    assert len(gzip.decompress(other.read_bytes()).splitlines()) == 14


def test_export_into_a_pipe_or_device_writes_through_it(full: Path, tmp_path: Path) -> None:
    """``-o /dev/stdout`` or a named pipe: the stream is written, the special file stays what
    it was (renaming a file onto ``/dev/null`` as root would replace the device)."""
    import os
    import stat
    import threading

    fifo = tmp_path / "backup.pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    ok("export-ari", full, "-o", fifo)
    reader.join(timeout=30)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    ok("export-ari", full, "-o", tmp_path / "regular.jsonl.gz")
    assert gzip.decompress(received[0]) == gzip.decompress((tmp_path / "regular.jsonl.gz").read_bytes())
    ok("export-ari", full, "-o", "/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)

    # a bundle too: streamed into the pipe, it imports like one written to a file
    received.clear()
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    ok("export", full, fifo)
    reader.join(timeout=30)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    (tmp_path / "bundle.tar").write_bytes(received[0])
    assert ok("import", tmp_path / "bundle.tar", tmp_path / "copy").startswith("imported")
    ok("export", full, "/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_purge_then_import_restores_as_aris_overwrite_restore(tmp_path: Path) -> None:
    """ARI's ``_do_restore(on_conflict="overwrite")``: purge_checkpoint, then bulk_import per kind."""
    ckpt = tmp_path / "ckpt"
    ok("import-ari", ckpt, "--source", FILES / BACKUP_NAME)
    ok("export-ari", ckpt)
    before = answers(ckpt)
    backend = MemoryBackend(ckpt)
    assert backend.purge_checkpoint() == {"removed_node": 10, "removed_react": 3}
    assert (backend.list_all_nodes(), backend.list_react_entries(), backend.get_experiment_context()) == (
        {"by_node": {}},
        [],
        {},
    )
    backup = read_ari_file(ckpt / BACKUP_NAME)
    restored = [
        backend.bulk_import(backup.entries[kind], kind)["imported"]
        for kind in ("node_scope", "react_step", "core_seed")
    ]
    backend.close()
    assert restored == [10, 3, 1]
    assert answers(ckpt) == before


# ---------------------------------------------------------------------------- bad input


def _gz(text: str) -> bytes:
    return gzip.compress(text.encode("utf-8"))


GOOD = '{"node_id": "root", "text": "ok", "metadata": {}, "ts": 1.0}\n'
BAD_FILES = {
    "bad node id": (
        "memory_store.jsonl",
        (GOOD + '{"node_id": "a/b", "text": "bad"}\n').encode(),
        "memory_store.jsonl:2.node_id: contains a forbidden character '/'",
    ),
    "not JSON": ("memory_store.jsonl", (GOOD + "{not json\n").encode(), "memory_store.jsonl:2: is not JSON"),
    "backup metadata": (
        BACKUP_NAME,
        _gz('{"kind": "core_seed", "context": {}}\n\n{"kind": "react_step", "text": "t", "metadata": [1]}\n'),
        f"{BACKUP_NAME}:3.metadata: must be an object, got an array",
    ),
    "backup kind": (
        BACKUP_NAME,
        _gz('{"kind": "node_scope", "node_id": "root", "text": "x"}\n{"kind": "global", "text": "y"}\n'),
        f"{BACKUP_NAME}:2.kind: unknown kind 'global'",
    ),
    "backup line without kind": (
        BACKUP_NAME,
        _gz('{"kind": "node_scope", "node_id": "root", "text": "x"}\n{"node_id": "root", "text": "y"}\n'),
        f"{BACKUP_NAME}:2.kind: is missing",
    ),
    "lone surrogate": (
        BACKUP_NAME,
        _gz('{"kind": "react_step", "text": "\\ud800", "metadata": {}}\n'),
        f"{BACKUP_NAME}:1.text: is not valid UTF-8",
    ),
    "react content": (
        "memory.json",
        b'[\n  {\n    "content": "ok"\n  },\n  {\n    "content": 5\n  }\n]',
        "memory.json:5.content: must be a string, got a number",
    ),
    "non-UTF-8": (
        "memory_store.jsonl",
        GOOD.encode() + b'{"node_id": "root", "text": "caf\xe9"}\n',
        "memory_store.jsonl:2: is not UTF-8 (byte 0xe9)",
    ),
    "truncated gzip": (
        BACKUP_NAME,
        (FILES / BACKUP_NAME).read_bytes()[:-40],
        f"{BACKUP_NAME}: is not a complete gzip file",
    ),
    "empty file": ("memory.json", b"", "memory.json: is empty (0 bytes)"),
    "nested 100,000 levels": (  # Python's JSON reader raises RecursionError here
        BACKUP_NAME,
        _gz(
            '{"kind": "node_scope", "node_id": "root", "text": "x"}\n{"kind": "node_scope", "node_id": "root", '
            '"text": "y", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
        ),
        f"{BACKUP_NAME}:2.metadata: is nested too deeply for a JSON reader",
    ),
    "array nested 100,000 levels": (
        "memory.json",
        (
            '[\n  {"content": "ok"},\n  {"content": "x", "metadata": '
            + '{"a": ' * 100_000
            + "1"
            + "}" * 100_000
            + "}\n]"
        ).encode(),
        "memory.json:3.metadata: is nested too deeply for a JSON reader",
    ),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_file_is_one_error_line_and_writes_nothing(case: str, tmp_path: Path) -> None:
    name, data, expected = BAD_FILES[case]
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    shutil.copy(FILES / MIGRATED, ckpt)  # a good file, read first: nothing of it is written either
    (ckpt / name).write_bytes(data)
    before = files_of(ckpt)
    run = cli("import-ari", ckpt)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith(f"error: {expected}") and len(run.stderr.splitlines()) == 1, run.stderr
    assert files_of(ckpt) == before


def test_a_bad_source_leaves_an_existing_checkpoint_untouched(full: Path, tmp_path: Path) -> None:
    bad = tmp_path / "memory_store.jsonl"
    bad.write_text(GOOD + '{"node_id": "", "text": "bad"}\n')
    before = files_of(full)
    run = cli("import-ari", full, "--source", FILES / "memory_store.jsonl", "--source", bad)
    assert run.returncode == 2 and run.stderr == "error: memory_store.jsonl:2.node_id: must not be empty\n"
    assert files_of(full) == before


def test_nothing_to_import_or_export_is_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    runs = {
        "no ARI file": (cli("import-ari", tmp_path / "empty"), "error: --source: no ARI memory file"),
        "missing source": (
            cli("import-ari", tmp_path / "c", "--source", tmp_path / "nope.jsonl"),
            "error: nope.jsonl: cannot read",
        ),
        "no ledger": (cli("export-ari", tmp_path / "empty"), "error: no ledger at"),
    }
    for what, (run, expected) in runs.items():
        assert run.returncode == 2 and run.stderr.startswith(expected) and len(run.stderr.splitlines()) == 1, (
            what,
            run.stderr,
        )
    assert files_of(tmp_path / "empty") == {} and not (tmp_path / "c").exists()


def test_export_to_an_unwritable_place_is_one_error_line(full: Path, tmp_path: Path) -> None:
    run = cli("export-ari", full, "-o", tmp_path / "no" / "such" / "dir" / BACKUP_NAME)
    assert (
        run.returncode == 2
        and run.stderr.startswith("error: --output: ")
        and "is not an existing directory (create it first)" in run.stderr
        and len(run.stderr.splitlines()) == 1
    )
