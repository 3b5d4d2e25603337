"""``ari-ledger rebuild`` (issue 28 item 1): the snapshot a reading command never saves, and the
verified context ``repair`` / ``--accept-rollback`` set aside, are rebuilt from the log."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.layout import SNAPSHOT_NAME, store_dir
from support.env import subprocess_env

SCRATCH = "from scratch"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "projections", *args],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=300,
    )


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rebuild") / "run"
    run = cli("demo", str(out))
    assert run.returncode == 0, run.stderr
    return out


@pytest.fixture
def demo(demo_run: Path, tmp_path: Path) -> Path:
    """A fresh copy of the demo per test (checkpoint and experiments, side by side)."""
    copy = tmp_path / "run"
    shutil.copytree(demo_run, copy)
    return copy


def _snapshot(ckpt: Path) -> Path:
    return store_dir(ckpt) / SNAPSHOT_NAME


def test_rebuild_saves_the_snapshot_so_a_search_no_longer_folds_from_scratch(demo: Path) -> None:
    ckpt = demo / "checkpoint"
    _snapshot(ckpt).unlink()
    before = cli("search", str(ckpt), "accuracy", "--node", "node_A2")
    assert before.returncode == 0, before.stderr
    # the demo's 39 events fold in a blink: no note (from 5,000 events one says so: test_progress.py)
    assert SCRATCH not in before.stderr
    assert not _snapshot(ckpt).exists()  # a reading command saves nothing

    done = cli("rebuild", str(ckpt))
    assert done.returncode == 0, done.stdout + done.stderr
    assert _snapshot(ckpt).exists()
    assert "snapshot: saved" in done.stdout and "from scratch (no snapshot)" in done.stdout
    assert SCRATCH not in done.stderr  # rebuilding from scratch is what was asked for

    after = cli("search", str(ckpt), "accuracy", "--node", "node_A2")
    assert after.returncode == 0 and after.stdout == before.stdout
    assert SCRATCH not in after.stderr


def test_rebuild_rewrites_a_verified_context_set_aside_and_prove_proves_it(demo: Path) -> None:
    ckpt = demo / "checkpoint"
    original = json.loads((ckpt / "verified_context.json").read_text())
    aside = ckpt / "verified_context.json.rolled-back-20250101T000000000000Z"
    (ckpt / "verified_context.json").rename(aside)
    assert cli("prove", str(ckpt)).returncode != 0  # no verified context to prove

    done = cli("rebuild", str(ckpt), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["context_source"] == "recorded" and data["recorded_in"] == aside.name
    assert data["best_node"] == original["best_node"] and data["lineage"] == original["lineage"]
    ctx = json.loads((ckpt / "verified_context.json").read_text())
    assert ctx["purpose"] == "paper" and ctx["lineage"] == original["lineage"]
    assert [c["entry_id"] for c in ctx["claims"]] == [c["entry_id"] for c in original["claims"]]

    proved = cli("prove", str(ckpt))
    assert proved.returncode == 0, proved.stdout + proved.stderr
    assert "PROVED" in proved.stdout


def test_rebuild_without_any_recorded_context_derives_the_best_node_from_the_log(demo: Path) -> None:
    ckpt = demo / "checkpoint"
    (ckpt / "verified_context.json").unlink()
    done = cli("rebuild", str(ckpt))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "best node node_A2" in done.stdout and "chosen among 9 nodes" in done.stdout
    assert cli("prove", str(ckpt)).returncode == 0


def test_rebuild_says_why_it_wrote_no_context_and_exits_1(demo: Path) -> None:
    ckpt = demo / "checkpoint"
    env = {**subprocess_env(), "ARI_MEMORY_CONSOLIDATE": "0"}
    run = subprocess.run(
        [sys.executable, "-m", "projections", "rebuild", str(ckpt), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    data = json.loads(run.stdout)
    assert data["snapshot"] and data["context"] is None and "ARI_MEMORY_CONSOLIDATE" in data["why_not"]


def test_status_names_rebuild_when_the_snapshot_is_missing(demo: Path) -> None:
    ckpt = demo / "checkpoint"
    assert "ari-ledger rebuild" not in cli("status", str(ckpt)).stdout
    _snapshot(ckpt).unlink()
    run = cli("status", str(ckpt), "--json")
    assert run.returncode == 0
    notes = json.loads(run.stdout)["notes"]
    assert any("no projection snapshot" in n and "ari-ledger rebuild" in n for n in notes)


def test_import_names_rebuild(demo: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b.tar"
    assert cli("export", str(demo / "checkpoint"), str(bundle)).returncode == 0
    run = cli("import", str(bundle), str(tmp_path / "new"))
    assert run.returncode == 0, run.stderr
    assert "ari-ledger rebuild" in run.stdout


@pytest.mark.parametrize("case", ["missing", "empty", "ledger folder"])
def test_rebuild_of_a_path_that_is_no_checkpoint_exits_2_with_one_line(case: str, demo: Path, tmp_path: Path) -> None:
    path = {
        "missing": tmp_path / "nowhere",
        "empty": tmp_path,
        "ledger folder": store_dir(demo / "checkpoint"),
    }[case]
    run = cli("rebuild", str(path))
    assert run.returncode == 2
    assert run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1 and run.stderr.startswith("error:")
    assert not (tmp_path / "nowhere").exists()
