"""The command line (R26): the demo as the main job, moving logs, and every command's
bad-input path (one-line error, non-zero exit, no traceback). ARI's files: test_ari_files.py."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.layout import store_dir
from ledger.log import LOG_NAME
from projections.api import MemoryBackend
from support.env import subprocess_env


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "projections", *args],
        capture_output=True,
        text=True,
        env=env or subprocess_env(),
        timeout=300,
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    run = cli("demo", str(out / "run"))
    assert run.returncode == 0, run.stderr
    assert "What each node may read" in run.stdout and "node_A22" in run.stdout
    assert "best node: node_A2" in run.stdout
    return out / "run"


def test_demo_writes_the_checkpoint_verified_context_and_report(demo: Path) -> None:
    assert (store_dir(demo / "checkpoint") / LOG_NAME).exists()
    ctx = json.loads((demo / "checkpoint" / "verified_context.json").read_text())
    assert ctx["best_node"] == "node_A2"
    html = (demo / "report.html").read_text()
    assert html.count('<g class="node ') == 9
    again = cli("demo", str(demo))
    assert again.returncode == 2 and again.stderr.startswith("error: dir:")


def test_demo_json_scope_table(tmp_path: Path) -> None:
    run = cli("demo", str(tmp_path / "d"), "--json")
    data = json.loads(run.stdout)
    rows = {r["node"]: r for r in data["scope"]}
    assert rows["node_A12"]["may_read"] == ["root", "node_A", "node_A12"]
    assert all(hit[0] in rows["node_B1"]["may_read"] for hit in rows["node_B1"]["top_hits"])
    assert data["backend"] == "embedded"


def test_read_commands_on_the_demo(demo: Path) -> None:
    ckpt = str(demo / "checkpoint")
    search = json.loads(cli("search", ckpt, "--node", "node_A12", "temporal blocking", "--json").stdout)
    assert search["scope"] == ["root", "node_A", "node_A12"]
    assert {r["node_id"] for r in search["results"]} <= set(search["scope"])
    context = json.loads(cli("context", ckpt, "--node", "node_A21", "--json").stdout)
    assert [s["node_id"] for s in context["ancestor_summaries"]] == ["root", "node_A", "node_A2"]
    verified = json.loads(cli("verified", ckpt, "--json").stdout)
    assert verified["claims"][0]["repro_status"] == "rerun_passed"
    assert "Verified results" in cli("verified", ckpt, "--block").stdout
    audit = cli("audit", ckpt, "--json")  # node_A's report lists a binary the run never kept: missing
    summary = json.loads(audit.stdout)["summary"]
    assert audit.returncode == 1 and summary["mismatch"] == 0 and summary["missing"] == 1 and summary["verified"] > 40
    tree = cli("tree", ckpt).stdout
    assert "node_A2" in tree and "* best lineage" in tree
    status = json.loads(cli("status", ckpt, "--json").stdout)
    assert status["nodes"] >= 9
    report = cli("report", ckpt, "-o", str(demo / "again.html"))
    assert report.returncode == 0 and (demo / "again.html").exists()


def test_audit_exits_1_on_a_modified_artifact(demo: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(demo), str(copy)], check=True)
    target = copy / "experiments" / "run_20261128_stencil" / "node_A2" / "results.csv"
    target.write_text(target.read_text() + "tampered\n")
    audit = cli("audit", str(copy / "checkpoint"))
    assert audit.returncode == 1 and "mismatch  node_A2/results.csv" in audit.stdout


def test_export_import_round_trip(demo: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle.tar"
    assert cli("export", str(demo / "checkpoint"), str(bundle)).returncode == 0
    assert cli("import", str(bundle), str(tmp_path / "restored")).returncode == 0
    original = gzip.decompress((store_dir(demo / "checkpoint") / LOG_NAME).read_bytes())
    assert gzip.decompress((store_dir(tmp_path / "restored") / LOG_NAME).read_bytes()) == original
    again = cli("import", str(bundle), str(tmp_path / "restored"))
    assert again.returncode == 2 and "already has a ledger" in again.stderr
    tampered = tmp_path / "bad.tar"
    tampered.write_bytes(bundle.read_bytes().replace(b'"events"', b'"evenzs"'))
    assert cli("import", str(tampered), str(tmp_path / "other")).returncode == 2


def _corrupt(tmp_path: Path, demo: Path) -> Path:
    ckpt = tmp_path / "corrupt"
    store_dir(ckpt).mkdir(parents=True)
    raw = bytearray((store_dir(demo / "checkpoint") / LOG_NAME).read_bytes())
    raw[len(raw) // 3] ^= 0xFF
    (store_dir(ckpt) / LOG_NAME).write_bytes(bytes(raw))
    return ckpt


COMMANDS = [
    ["status", "{ckpt}"],
    ["verify", "{ckpt}"],
    ["log", "{ckpt}"],
    ["search", "{ckpt}", "--as", "root", "q"],
    ["context", "{ckpt}", "--as", "root"],
    ["verified", "{ckpt}", "--as", "root"],
    ["audit", "{ckpt}", "--experiments", "{tmp}"],
    ["tree", "{ckpt}"],
    ["report", "{ckpt}", "-o", "{tmp}/r.html"],
    ["export", "{ckpt}", "-o", "{tmp}/b.tar"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=[c[0] for c in COMMANDS])
@pytest.mark.parametrize("case", ["missing", "corrupt"])
def test_bad_checkpoint_is_one_line_error(args: list[str], case: str, demo: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "nowhere" if case == "missing" else _corrupt(tmp_path, demo)
    run = cli(*[a.format(ckpt=ckpt, tmp=tmp_path) for a in args])
    assert run.returncode in (1, 2), run
    assert "Traceback" not in run.stderr
    if run.returncode == 2:
        assert len(run.stderr.strip().splitlines()) == 1 and run.stderr.startswith("error: ")
    else:  # verify reports damage as a check result, not an error
        assert args[0] == "verify" and "first bad seq" in run.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["search", "{ckpt}", "--as", "ghost", "q"],
        ["context", "{ckpt}", "--as", "ghost"],
        ["verified", "{ckpt}", "--as", "ghost"],
    ],
)
def test_unknown_node_is_one_line_error(args: list[str], demo: Path) -> None:
    run = cli(*[a.format(ckpt=demo / "checkpoint") for a in args])
    assert run.returncode == 2 and run.stderr.startswith("error: --as: unknown node 'ghost'")
    assert len(run.stderr.strip().splitlines()) == 1


def test_every_command_has_help() -> None:
    from projections.adapters.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in sub.choices:
        run = cli(name, "--help")
        assert run.returncode == 0 and "usage: ari-ledger" in run.stdout, name


def test_restore_without_letta_is_a_clear_error(demo: Path) -> None:
    run = cli("restore", str(demo / "checkpoint"))
    assert run.returncode == 2 and run.stderr.startswith("error: LETTA_BASE_URL: is not set")


def test_audit_and_verified_find_aris_experiments_beside_its_checkpoints(demo: Path, tmp_path: Path) -> None:
    """ARI keeps ``<workspace>/checkpoints/<run_id>`` beside ``<workspace>/experiments/<run_id>``."""
    run_id = "run_20261128_stencil"
    workspace = tmp_path / "workspace"
    shutil.copytree(demo / "checkpoint", workspace / "checkpoints" / run_id)
    shutil.copytree(demo / "experiments", workspace / "experiments")
    ckpt = str(workspace / "checkpoints" / run_id)
    explicit = cli("audit", ckpt, "--experiments", str(workspace / "experiments"), "--json")
    found = cli("audit", ckpt, "--json")
    assert found.returncode == explicit.returncode and json.loads(found.stdout) == json.loads(explicit.stdout)
    assert json.loads(found.stdout)["summary"]["verified"] > 0
    verified = json.loads(cli("verified", ckpt, "--node", "node_A2", "--json").stdout)
    assert any(c["evidence"] in ("verified", "rerun_passed") for c in verified["claims"])


def test_tree_shows_a_nodes_latest_outcome(tmp_path: Path) -> None:
    """A node that failed and then succeeded on ``ari resume`` is a success, and the other way round."""
    ckpt = tmp_path / "ckpt"
    backend = MemoryBackend(ckpt)
    backend.add_failure_case("node_A", "build failed: missing -fopenmp", current_node="node_A")
    backend.add_experiment_result(
        "node_A", "GFlops_per_s=9.87", {"name": "GFlops_per_s", "value": 9.87}, current_node="node_A"
    )
    backend.add_experiment_result(
        "node_B", "GFlops_per_s=3.1", {"name": "GFlops_per_s", "value": 3.1}, current_node="node_B"
    )
    backend.add_failure_case("node_B", "rerun crashed", current_node="node_B")
    backend.close()
    nodes = {n["node_id"]: n["status"] for n in json.loads(cli("tree", str(ckpt), "--json").stdout)["nodes"]}
    assert nodes == {"node_A": "success", "node_B": "failed"}
