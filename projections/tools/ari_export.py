"""A checkpoint's memory as ARI's ``memory_backup.jsonl.gz``, so ARI can restore it anywhere.

The lines, keys, key order and line order are those of ARI's ``_do_backup``
(``ari/memory_cli.py``) run over this backend: every node's entries (``list_all_nodes``), then
the ReAct trace (``list_react_entries``), then the core seed — written with
``json.dumps(..., ensure_ascii=False)``. ARI's ``_do_restore`` reads it into any of ARI's
backends with the same answers, and ``import-ari`` reads it back here.

One difference keeps what ARI's own backup drops: ARI's backend API cannot read the seed's
persona, human and time back, so ARI writes ``""``, ``""`` and ``context.get("seeded_at",
0.0)``; here the core seed line carries the seeded persona, human and time (ARI's own hooks
seed ``""`` for both, so for ARI's runs only ``seeded_at`` can differ).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ledger import InvalidInput
from ledger.ari.importer import ARI_KINDS, BACKUP_NAME, plan_entries, read_ari_file
from ledger.output import write_output
from projections.api import MemoryBackend


def backup_lines(backend: MemoryBackend) -> Iterator[dict[str, Any]]:
    """The backup's lines, from one consistent moment of the log (the seq on disk now)."""
    seq = backend.seq_on_disk()
    for node_id, entries in backend.list_all_nodes(as_of=seq)["by_node"].items():
        for e in entries:
            yield {
                "kind": "node_scope",
                "node_id": node_id,
                "text": e["text"],
                "metadata": e["metadata"],
                "ts": e["ts"],
            }
    for step in backend.list_react_entries(as_of=seq):
        yield {"kind": "react_step", "text": step["content"], "metadata": step["metadata"], "ts": step["ts"]}
    context = backend.get_experiment_context(as_of=seq)
    seed = backend.fresh_catalog().context(seq)
    if seed is not None:
        yield {
            "kind": "core_seed",
            "persona": seed.persona,
            "human": seed.human,
            "context": context,
            "seeded_at": context.get("seeded_at", seed.ts),
        }


def write_ari_backup(
    backend: MemoryBackend, path: str | Path | None = None, *, replace: bool = False
) -> dict[str, Any]:
    """Write ``backup_lines`` as gzip JSON Lines to ``path`` (default
    ``{checkpoint}/memory_backup.jsonl.gz``), atomically: a reader sees the old file or the
    whole new one, never a torn backup. Returns the path and the lines written per kind.

    An existing file there is replaced only when this checkpoint already shows everything in
    it (or ``replace=True``): a backup ARI wrote before the switch may hold memory the ledger
    has not imported yet, and overwriting it would lose that. A target that exists but is not
    a regular file (``/dev/null``, ``/dev/stdout``, a pipe) is written to, never renamed over:
    renaming onto ``/dev/null`` as root would replace the device with a file.
    """
    path = Path(path) if path is not None else backend.checkpoint_dir / BACKUP_NAME
    lines = list(backup_lines(backend))
    if path.is_file() and not replace:
        _refuse_to_lose(path, lines)
    counts = dict.fromkeys(ARI_KINDS, 0)
    write_output(path, lambda raw: _write_gzip(raw, path.name, lines, counts))
    return {"path": str(path), "lines": counts}


def _write_gzip(raw: BinaryIO, name: str, lines: list[dict[str, Any]], counts: dict[str, int]) -> None:
    with gzip.GzipFile(filename=name, mode="wb", fileobj=raw) as out:  # the header names the real file, as ARI's
        for line in lines:
            out.write((json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8"))
            counts[line["kind"]] += 1


def _refuse_to_lose(path: Path, lines: list[dict[str, Any]]) -> None:
    """InvalidInput unless every node entry and ReAct step of the file at ``path`` is among
    ``lines`` (by content key), and its core seed, if any, has a successor (a checkpoint's seed
    replaces the earlier one, in ARI as here)."""
    try:
        old = read_ari_file(path)
    except InvalidInput as exc:
        raise InvalidInput(
            path.name,
            f"exists and cannot be read as an ARI memory file ({exc.reason}); replace it on purpose (--force)",
        ) from None
    lost = 0
    for kind in ("node_scope", "react_step"):
        kept = {p.key for p in plan_entries([x for x in lines if x["kind"] == kind], kind)}
        lost += sum(p.key not in kept for p in plan_entries(old.entries.get(kind, []), kind))
    if old.entries.get("core_seed") and not any(x["kind"] == "core_seed" for x in lines):
        lost += 1
    if lost:
        raise InvalidInput(
            path.name,
            f"holds {lost} entries this checkpoint does not show; writing would lose them "
            "(import them first with import-ari, or replace the file on purpose with --force)",
        )
