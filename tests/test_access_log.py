"""ARI's access log rotates at its size limit and keeps a bounded number of old files."""
from __future__ import annotations

import json
from pathlib import Path

from projections.access_log import ACCESS_LOG_NAME, KEEP_ROTATED, AccessLog


def test_rotation_at_the_size_limit(tmp_path: Path) -> None:
    log = AccessLog(tmp_path, max_bytes=2000)
    for i in range(200):
        log.record("search_memory", [f"id-{i}"], scope=["root"])
    current = tmp_path / ACCESS_LOG_NAME
    rotated = sorted(tmp_path.glob(ACCESS_LOG_NAME + ".*"))
    assert current.stat().st_size < 2000 + 200
    assert [p.name for p in rotated] == [f"{ACCESS_LOG_NAME}.{i}" for i in range(1, KEEP_ROTATED + 1)]
    last = json.loads(current.read_text().splitlines()[-1])
    assert last["ids"] == ["id-199"] and last["tool"] == "search_memory"
    newest_rotated = [json.loads(x)["ids"][0] for x in (tmp_path / f"{ACCESS_LOG_NAME}.1").read_text().splitlines()]
    first_current = json.loads(current.read_text().splitlines()[0])["ids"][0]
    assert int(newest_rotated[-1].split("-")[1]) + 1 == int(first_current.split("-")[1])  # nothing lost between files
