"""The weights read a page at a time (issue 30, item 1): every row ``take`` gives is the file's
row, whatever order pages were read in, wherever a row's bytes fall across pages; only the pages
of the tokens read become resident; a short file or a bad id is refused by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import LedgerError
from projections.models import embedder as module
from projections.models.token_rows import TokenRows
from support.env import ROOT, subprocess_env


def _matrix_file(tmp: Path, rows: int, cols: int, dtype: str, offset: int) -> tuple[Path, np.ndarray]:
    """A file holding ``offset`` bytes of noise, then a random matrix, then a tail of noise."""
    rng = np.random.default_rng(rows * 31 + cols * 7 + offset)
    matrix = rng.standard_normal((rows, cols)).astype(dtype)
    path = tmp / f"m-{rows}-{cols}-{dtype}-{offset}.bin"
    path.write_bytes(rng.bytes(offset) + matrix.tobytes() + rng.bytes(37))
    return path, matrix


# Row sizes that divide a page, straddle pages (12 and 1,000 bytes) or are larger than one.
SHAPES = [(3000, 256, "<f2", 4_223), (5000, 3, "<f4", 13), (700, 250, "<f4", 0), (40, 3000, "<f2", 1)]


@pytest.mark.parametrize(("rows", "cols", "dtype", "offset"), SHAPES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_take_gives_the_files_rows_in_any_order_of_reads(
    tmp_path_factory: pytest.TempPathFactory, rows: int, cols: int, dtype: str, offset: int, data: st.DataObject
) -> None:
    path, matrix = _matrix_file(tmp_path_factory.getbasetemp(), rows, cols, dtype, offset)
    weights = TokenRows(path, offset, rows, cols, np.dtype(dtype))
    index = st.integers(0, rows - 1) | st.sampled_from([0, rows - 1])
    for ids in data.draw(st.lists(st.lists(index, min_size=0, max_size=40), min_size=1, max_size=6)):
        got = weights.take(np.array(ids, dtype=np.intp))
        assert got.dtype == matrix.dtype
        np.testing.assert_array_equal(got, matrix[ids])
    batch = data.draw(
        st.lists(st.lists(index, min_size=1, max_size=5), min_size=1, max_size=5).filter(
            lambda b: len({len(r) for r in b}) == 1
        )
    )
    np.testing.assert_array_equal(weights.take(np.array(batch, dtype=np.intp)), matrix[np.array(batch)])


def test_only_the_pages_of_the_rows_read_are_read(tmp_path: Path) -> None:
    path, matrix = _matrix_file(tmp_path, 4000, 256, "<f2", 100)  # 512-byte rows: 8 to a page
    weights = TokenRows(path, 100, 4000, 256, np.dtype("<f2"))
    weights.take(np.array([0, 1, 7, 8, 3999]))
    assert int(weights._present.sum()) == 3  # rows 0-7, 8-15, 3992-3999
    weights.take(np.array([[2, 9], [15, 3998]]))
    assert int(weights._present.sum()) == 3
    np.testing.assert_array_equal(weights.take(np.arange(4000)), matrix)
    assert bool(weights._present.all())


def test_a_short_file_and_a_bad_id_are_refused_by_name(tmp_path: Path) -> None:
    path, _ = _matrix_file(tmp_path, 100, 8, "<f4", 10)
    with pytest.raises(LedgerError, match=str(path)):
        TokenRows(path, 10, 102, 8, np.dtype("<f4"))  # the 37-byte tail holds one more row, not two
    weights = TokenRows(path, 10, 100, 8, np.dtype("<f4"))
    with pytest.raises(IndexError, match=r"\[0, 100\)"):
        weights.take(np.array([3, 100]))
    with pytest.raises(IndexError):
        weights.take(np.array([-1]))


def test_a_forked_child_reads_the_same_rows(tmp_path: Path) -> None:
    path, matrix = _matrix_file(tmp_path, 2000, 64, "<f4", 5)
    weights = TokenRows(path, 5, 2000, 64, np.dtype("<f4"))
    weights.take(np.arange(0, 2000, 97))
    pid = os.fork()
    if pid == 0:  # the child reads pages the parent never read, through the shared descriptor
        ok = np.array_equal(weights.take(np.arange(1, 2000, 13)), matrix[1::13])
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    np.testing.assert_array_equal(weights.take(np.arange(3, 2000, 11)), matrix[3::11])


def test_the_wheels_weights_are_read_at_their_stored_precision() -> None:
    from safetensors import safe_open

    embedder = module.get_embedder()
    embedder.load()
    weights = embedder._model.weights
    with safe_open(str(module._resource(module._WEIGHTS)), framework="np") as tensors:
        stored = tensors.get_tensor(module._TENSOR_KEY)
    assert weights.shape == stored.shape and weights.dtype == stored.dtype
    ids = np.array([[1, 5, len(stored) - 1], [7, 7, 0]], dtype=np.intp)
    np.testing.assert_array_equal(weights.take(ids), stored[ids])
    table, local = embedder._model.widened(ids)
    assert table.dtype == np.float32 and len(table) == len(np.unique(ids)) and local.shape == ids.shape
    np.testing.assert_array_equal(table[local], stored[ids].astype(np.float32))


def test_embedding_short_notes_keeps_few_of_the_weights_resident() -> None:
    """In a fresh process: no mapping of the weights file, and after 200 notes of research words
    the pages read (all that is resident of the matrix) are a small part of it."""
    script = textwrap.dedent(
        """
        import json
        from projections.models import embedder as module

        e = module.get_embedder()
        words = "loss diverged after warmup roofline stencil kernel cache miss rate 3.2 GB/s lr=3e-4".split()
        e.embed([" ".join(words[i % 7 :] + words[: i % 5]) + f" run {i}" for i in range(200)])
        weights = e._model.weights
        mapped = [l for l in open("/proc/self/maps") if "safetensors" in l]
        print(json.dumps({"mapped": mapped, "pages": int(weights._present.sum()),
                          "of": len(weights._present)}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["mapped"] == []
    assert 0 < found["pages"] <= found["of"] // 20, found  # under 5 % of the 16 MB
