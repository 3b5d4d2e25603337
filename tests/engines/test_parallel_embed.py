"""A large fold embeds on several threads and reads ahead, with the state and the vectors of
a fold on one thread, bit for bit; Ctrl-C and errors leave no thread and a state as settled as
a fold on one thread leaves it. It saves the snapshot as it goes, so its memory is bounded,
and ends with the state of a fold that never saved; a kill on the way leaves a snapshot the
next open checks and goes on from."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ledger import Ledger
from ledger.events import Event
from projections.engines import local
from projections.engines.local import Projector, check_snapshot
from projections.engines.parallel_embed import ParallelEmbedder
from projections.engines.snapshot import SnapshotPreamble
from projections.models.embedder import get_embedder

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _texts() -> list[str]:
    """The retrieval set's texts and random ones of every length (long ones past the batch's
    character budget, repeats, blanks), shuffled."""
    quality = list(dict.fromkeys(_strings(json.loads((FIXTURES / "retrieval_quality.json").read_text()))))
    words = " ".join(quality).split()
    rng = random.Random(11)
    rand = [" ".join(rng.choices(words, k=rng.choice([1, 3, 20, 60, 400, 1500]))) for _ in range(1500)]
    texts = [*quality, *rand, *quality[:50], "", " ", "\n", "x"]
    rng.shuffle(texts)
    return texts


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith(("fold", "embed-"))}


@pytest.mark.parametrize("workers", [2, 3])
def test_split_embedding_is_bit_identical_to_one_thread(workers: int) -> None:
    embedder, texts = get_embedder(), _texts()
    parallel = ParallelEmbedder(embedder, workers=workers)
    parts = parallel.split(texts)
    assert len(parts) == workers  # the call was really shared
    blank = {i for i, t in enumerate(texts) if not t or t.isspace()}
    assert sorted(i for p in parts for i in p) == sorted(set(range(len(texts))) - blank)
    assert np.array_equal(parallel.embed(texts), embedder.embed(texts))
    assert not _threads()


def test_a_small_call_or_an_unknown_embedder_is_not_shared() -> None:
    embedder = get_embedder()
    assert ParallelEmbedder(embedder, workers=2).split(["a", "b"] * 10) == []
    assert ParallelEmbedder(embedder, workers=1).split(_texts()) == []

    class Other:
        name, dim = embedder.name, embedder.dim

        def embed(self, texts):
            return embedder.embed(texts)

    other = ParallelEmbedder(Other(), workers=2)
    assert other.split(_texts()) == []
    assert np.array_equal(other.embed(["one", "two"]), embedder.embed(["one", "two"]))


def test_an_error_on_a_thread_is_raised_by_the_call() -> None:
    class Failing:
        name, dim = get_embedder().name, get_embedder().dim

        def embed(self, texts):
            raise RuntimeError("model gone")

    parallel = ParallelEmbedder(get_embedder(), workers=2)
    parallel.inner = Failing()  # split as the real model's batches, then fail in every part
    with pytest.raises(RuntimeError, match="model gone"):
        parallel.embed(_texts())
    assert not _threads()


def _write_log(ckpt: Path, entries: int) -> None:
    rng = random.Random(5)
    words = [
        "stencil",
        "tiling",
        "cache",
        "openmp",
        "threads",
        "avx2",
        "roofline",
        "halo",
        "numa",
        "prefetch",
        "kernel",
    ]
    with Ledger.open(ckpt) as ledger, ledger.batch() as batch:
        for n in range(6):
            batch.append(
                f"n{n}", "node_started", {"parent_id": None, "ancestor_ids": [], "depth": 0}, current_node=f"n{n}"
            )
        for i in range(entries):
            node = f"n{i % 6}"
            if i == entries // 2:
                batch.append("n2", "node_cleared", {}, current_node="n2")
            text = " ".join(rng.choices(words, k=rng.choice([2, 12, 40, 150])))
            batch.append(node, "memory_added", {"text": f"{text} #{i}"}, current_node=node)


def _state(p: Projector) -> tuple:
    names = p.catalog.collections()
    return (
        p.cursor,
        p.cursor_hash,
        p.catalog.state(),
        [(n, p.index.ids(n), p.index.vectors(n).tobytes()) for n in names],
    )


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    """Chunks of 400 events, and every fold of 2+ chunks a large one."""
    monkeypatch.setattr(local, "FOLD_CHUNK", 400)
    monkeypatch.setattr(local, "PARALLEL_FOLD", 800)
    return 400


def test_a_large_fold_is_the_fold_on_one_thread(ckpt: Path, small_chunks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_log(ckpt, 2500)
    calls: list[tuple[int, int]] = []
    with Ledger.open(ckpt) as ledger:
        ahead = Projector(ledger, get_embedder(), use_snapshot=False)
        ahead.progress = lambda done, total: calls.append((done, total))
        shared: list[int] = []
        split = ParallelEmbedder.split
        monkeypatch.setattr(ParallelEmbedder, "split", lambda self, texts: shared.append(1) or split(self, texts))
        assert ahead.catch_up() == ledger.last_seq
        assert shared and not _threads()  # embedded on several threads, none left
        assert ahead.index.embedder is ahead.embedder  # a search's query stays on the caller's thread
        monkeypatch.setattr(local, "PARALLEL_FOLD", 10**9)
        in_turn = Projector(ledger, get_embedder(), use_snapshot=False)
        in_turn.catch_up()
        incremental = Projector(ledger, get_embedder(), use_snapshot=False)
        for event in ledger.events():
            incremental.apply([event])
    assert _state(ahead) == _state(in_turn)  # the fold on one thread's vectors, bit for bit
    # event by event, each text is embedded alone (not in the chunk's batches): the same state, bit for bit
    assert _state(ahead) == _state(incremental)
    assert calls[0] == (0, ledger.last_seq) and calls[-1] == (ledger.last_seq, ledger.last_seq)
    assert [d for d, _ in calls[1:-1]] == list(range(small_chunks, ledger.last_seq, small_chunks))


def test_a_restore_folds_ahead_too(ckpt: Path, small_chunks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_log(ckpt, 1200)
    with Ledger.open(ckpt) as ledger:
        p = Projector(ledger, get_embedder())
        p.catch_up()
        before = _state(p)
        ahead, folds = Projector._fold_ahead, []
        monkeypatch.setattr(Projector, "_fold_ahead", lambda self, *a: folds.append(1) or ahead(self, *a))
        told: list[tuple[int, int]] = []
        p.restore(lambda done, total: told.append((done, total)))
        assert folds and _state(p) == before and told[-1] == (ledger.last_seq, ledger.last_seq)
        assert not _threads()


def test_ctrl_c_from_progress_leaves_the_fold_settled_between_chunks(ckpt: Path, small_chunks: int) -> None:
    _write_log(ckpt, 2500)
    with Ledger.open(ckpt) as ledger:
        p = Projector(ledger, get_embedder(), use_snapshot=False)

        def stop(done: int, total: int) -> None:
            if done >= 2 * small_chunks:
                raise KeyboardInterrupt  # as the CLI's bar raises a Ctrl-C under safe_points

        p.progress = stop
        with pytest.raises(KeyboardInterrupt):
            p.catch_up()
        assert not _threads()
        assert p.settled and p.cursor == 2 * small_chunks  # the next chunk was read, not folded
        assert sum(len(p.index.ids(n)) for n in p.catalog.collections()) == len(p.catalog.entries)
        p.progress = None
        p.catch_up()  # goes on from there
        whole = Projector(ledger, get_embedder(), use_snapshot=False)
        whole.catch_up()
        assert _state(p) == _state(whole)


def _ctrl_c_while_reading(
    p: Projector, ledger: Ledger, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> Callable[[], None]:
    """A Ctrl-C lands while chunk 3 folds on the thread; returns the undo."""
    read = ledger.events

    def events(*args: object, **kwargs: object) -> Iterator[Event]:
        for event in read(*args, **kwargs):  # type: ignore[arg-type]
            if event.seq == 3 * chunk + 7:
                raise KeyboardInterrupt
            yield event

    monkeypatch.setattr(ledger, "events", events)
    return lambda: monkeypatch.setattr(ledger, "events", read)


def _error_on_the_fold_thread(
    p: Projector, ledger: Ledger, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> Callable[[], None]:
    """The third chunk's index fold runs out of memory; returns the undo."""
    apply_batch, seen = p.index.apply_batch, []

    def failing(events: list[Event]) -> None:
        seen.append(len(events))
        if len(seen) == 3:
            raise MemoryError("out of memory")
        apply_batch(events)

    monkeypatch.setattr(p.index, "apply_batch", failing)
    return lambda: monkeypatch.setattr(p.index, "apply_batch", apply_batch)


@pytest.mark.parametrize(
    ("stop", "raised", "settled_at"),
    [
        (_ctrl_c_while_reading, KeyboardInterrupt, 3),  # chunk 3 finished, nothing half-folded
        (_error_on_the_fold_thread, MemoryError, None),  # stopped inside a chunk: not saved, not built on
    ],
)
def test_a_fold_stopped_on_its_thread_is_settled_or_starts_again(
    ckpt: Path,
    small_chunks: int,
    monkeypatch: pytest.MonkeyPatch,
    stop: Callable[..., Callable[[], None]],
    raised: type[BaseException],
    settled_at: int | None,
) -> None:
    _write_log(ckpt, 2500)
    with Ledger.open(ckpt) as ledger:
        p = Projector(ledger, get_embedder(), use_snapshot=False)
        undo = stop(p, ledger, monkeypatch, small_chunks)
        with pytest.raises(raised):
            p.catch_up()
        assert not _threads()
        if settled_at is None:
            assert not p.settled and p.save() is None
        else:
            assert p.settled and p.cursor == settled_at * small_chunks
        undo()
        p.catch_up()  # from where it settled, or again from the snapshot (none: from seq 0)
        whole = Projector(ledger, get_embedder(), use_snapshot=False)
        whole.catch_up()
        assert _state(p) == _state(whole)


# -- a large fold saves as it goes (issue 30): bounded memory, the same state ------------------

SAVE_EVERY = 1000  # with chunks of 400: a save after the chunks ending at 1200 and 2400


def _fresh_rows(p: Projector) -> int:
    """Rows the projector holds in memory (folded since its last save), in the catalog and the index."""
    names = p.catalog.collections()
    in_catalog = sum(len(f.ids) for n in names if (f := p.catalog.fresh(n)) is not None)
    in_index = sum(block.n for block in p.index.blocks.values())
    assert in_catalog == in_index
    return in_catalog


def _recorded_saves(monkeypatch: pytest.MonkeyPatch, fail_first: bool = False) -> list[int]:
    """The cursor of every snapshot the projector writes (``fail_first``: the first finds the disk full)."""
    cursors: list[int] = []
    write = local.write_snapshot

    def recording(path: Path, preamble: SnapshotPreamble, *rest: Any) -> None:
        cursors.append(preamble.cursor)
        if fail_first and len(cursors) == 1:
            raise OSError(28, "No space left on device")
        write(path, preamble, *rest)

    monkeypatch.setattr(local, "write_snapshot", recording)
    return cursors


def _one_shot(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Projector:
    """The fold from scratch with no save on the way (today's fold before issue 30)."""
    with monkeypatch.context() as m:
        m.setattr(local, "FOLD_SAVE_EVERY", 10**9)
        m.setattr(local, "write_snapshot", lambda *a: pytest.fail("a one-shot fold saved"))
        whole = Projector(ledger, get_embedder(), use_snapshot=False)
        whole.catch_up()
    return whole


def _answers(p: Projector) -> list[list[tuple[str, float]]]:
    names = p.catalog.collections()
    queries = ["stencil tiling", "roofline of the kernel", "numa prefetch halo"]
    return [p.index.search(get_embedder().embed_one(q), names, 7) for q in queries]


def test_a_large_fold_saves_as_it_goes_and_ends_as_a_one_shot_fold(
    ckpt: Path, small_chunks: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_log(ckpt, 2500)
    monkeypatch.setattr(local, "FOLD_SAVE_EVERY", SAVE_EVERY)
    held: list[int] = []
    with Ledger.open(ckpt) as ledger:
        whole = _one_shot(ledger, monkeypatch)
        saves = _recorded_saves(monkeypatch)
        p = Projector(ledger, get_embedder(), use_snapshot=False)
        p.progress = lambda done, total: held.append(_fresh_rows(p))
        assert p.catch_up() == ledger.last_seq
        assert saves == [3 * small_chunks, 6 * small_chunks]  # between chunks, once 1000 were folded since
        assert max(held) < SAVE_EVERY and _fresh_rows(p) == ledger.last_seq - saves[-1]  # the bound
        assert _state(p) == _state(whole) and _answers(p) == _answers(whole)
        assert not _threads() and p.index.embedder is p.embedder
        reopened = Projector(ledger, get_embedder())  # from the last snapshot saved on the way
        assert reopened.loaded_from_snapshot and reopened.cursor == saves[-1]
        reopened.catch_up()
        assert _state(reopened) == _state(whole) and _answers(reopened) == _answers(whole)


def test_a_save_that_fails_on_the_way_is_tried_again_later(
    ckpt: Path, small_chunks: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _write_log(ckpt, 2500)
    monkeypatch.setattr(local, "FOLD_SAVE_EVERY", SAVE_EVERY)
    with Ledger.open(ckpt) as ledger:
        whole = _one_shot(ledger, monkeypatch)
        saves = _recorded_saves(monkeypatch, fail_first=True)
        p = Projector(ledger, get_embedder(), use_snapshot=False)
        p.catch_up()
        assert saves == [3 * small_chunks, 6 * small_chunks]  # not at every chunk after the failure
        assert "could not save the projection snapshot" in caplog.text
        assert not list(p.snapshot_path.parent.glob("*.tmp"))
        assert _state(p) == _state(whole)
    with Ledger.open(ckpt, readonly=True) as ledger:  # a read-only ledger's fold never saves
        saves.clear()
        p = Projector(ledger, get_embedder(), use_snapshot=False)
        p.catch_up()
        assert not saves and _state(p) == _state(whole)


KILLED_FOLD = """
import os, signal, sys
from pathlib import Path
import projections.engines.local as local
from ledger import Ledger
from projections.models.embedder import get_embedder
local.FOLD_CHUNK, local.PARALLEL_FOLD, local.FOLD_SAVE_EVERY = 400, 800, 1000
ckpt, where = sys.argv[1], sys.argv[2]
replace, saved = os.replace, []
def replacing(src, dst):
    if Path(dst).name == local.SNAPSHOT_NAME:
        if where == "while saving" and saved:
            os.kill(os.getpid(), signal.SIGKILL)  # the second snapshot written whole, not renamed
        saved.append(dst)
    replace(src, dst)
os.replace = replacing
with Ledger.open(ckpt) as ledger:
    p = local.Projector(ledger, get_embedder(), use_snapshot=False)
    def progress(done, total):
        if where == "between saves" and p.cursor >= 2000:
            os.kill(os.getpid(), signal.SIGKILL)
    p.progress = progress
    p.catch_up()
"""


@pytest.mark.parametrize("where", ["between saves", "while saving"])
def test_a_fold_killed_on_the_way_leaves_a_snapshot_the_next_open_goes_on_from(
    ckpt: Path, small_chunks: int, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    _write_log(ckpt, 2500)
    killed = subprocess.run([sys.executable, "-c", KILLED_FOLD, str(ckpt), where], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    monkeypatch.setattr(local, "FOLD_SAVE_EVERY", SAVE_EVERY)
    with Ledger.open(ckpt) as ledger:
        whole = _one_shot(ledger, monkeypatch)
        p = Projector(ledger, get_embedder())  # checked against the log, as every snapshot is
        assert p.loaded_from_snapshot and p.rebuilt is None and p.cursor == 3 * small_chunks
        assert not list(p.snapshot_path.parent.glob("*.tmp"))  # the killed save's file is gone
        saves = _recorded_saves(monkeypatch)
        p.catch_up()  # the tail, onto the snapshot: it saves on the way too
        assert saves == [6 * small_chunks]
        assert _state(p) == _state(whole) and _answers(p) == _answers(whole)
        assert check_snapshot(ledger, get_embedder()).problem is None
