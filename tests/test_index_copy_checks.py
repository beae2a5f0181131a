"""The ANN index's vector copy (`X.parquet.index.npy`) is checked, block by block, before its rows re-rank
candidates: an edited copy is refused in one line, an untouched one answers as exact search does, and an
index built before the copy kept checksums is stale (searched without, with the rebuild command)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from bertscope.errors import CorpusError
from bertscope.io import index_copy
from bertscope.io.index import IndexStaleWarning, build_index, index_copies, index_paths, index_state
from bertscope.io.search import search
from bertscope.io.stores import open_store
from console import run_main
from test_index import DIM, clustered, write_store


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[Path, np.ndarray]:
    vectors = clustered(3000, 0)
    path = write_store(tmp_path / "store.parquet", vectors)
    build_index(path)
    return path, vectors


def _swap_top_hit(copy: Path) -> None:
    """The auditor's edit, through a memory map: row 61 takes row 186's vector, row 186 its negation."""
    matrix = np.load(copy, mmap_mode="r+")
    matrix[61] = matrix[186]
    matrix[186] = -matrix[186]
    matrix.flush()
    del matrix


def _rewritten(copy: Path, edit: int) -> None:
    """The copy written again (a new file renamed over it) with row `edit` negated."""
    matrix = np.load(copy)
    matrix[edit] = -matrix[edit]
    tmp = copy.with_name("edited.npy")
    np.save(tmp, matrix)
    os.replace(tmp, copy)


def test_an_untouched_copy_answers_as_exact_search_and_its_blocks_are_recorded(
    indexed: tuple[Path, np.ndarray],
) -> None:
    path, vectors = indexed
    meta = json.loads(index_paths(path)[1].read_text())
    sums = meta["copy_checksums"]
    assert sums["algorithm"] == "crc32" and sums["blocks"] == -(-3000 // sums["block_rows"])
    state = index_state(path)
    assert state.fresh and "crc32" not in state.meta["copy_checksums"]  # the list is not shown by `info`
    for query in (vectors[186], clustered(5, 1)[3]):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            hits = search(query, path, k=5)
        exact = search(query, path, k=5, exact=True)
        assert [(h.id, h.score) for h in hits] == [(h.id, h.score) for h in exact]
    assert search(vectors[186], path, k=1)[0].id == "r186"


def test_an_edited_copy_is_refused_in_one_line_naming_the_rebuild(indexed: tuple[Path, np.ndarray]) -> None:
    path, vectors = indexed
    _swap_top_hit(index_paths(path)[2])  # rows 61 and 186: the first block (256 rows of 64 float32)
    assert index_state(path).fresh  # the store itself is untouched
    fix = rf"bertscope index build {path} --overwrite"
    with pytest.raises(CorpusError, match=rf"of {path}\.index\.npy do not match their checksum: .*{fix}"):
        search(vectors[186], path, k=3)
    assert search(vectors[186], path, k=1, exact=True)[0].id == "r186"  # exact search reads the store
    ran = run_main("similar", "--id", "r186", "--store", str(path), "-k", "3")
    assert ran.code == 1 and ran.stdout == ""
    assert ran.stderr.strip().splitlines() == [
        f"error: rows 0-255 of {path}.index.npy do not match their checksum: the file is corrupt; "
        f"rebuild the index with `bertscope index build {path} --overwrite`"
    ]


def test_checked_blocks_are_remembered_only_while_the_copy_is_the_same_file(
    indexed: tuple[Path, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, vectors = indexed
    monkeypatch.setattr(index_copy, "BLOCK_BYTES", 8 * 4 * DIM)  # 8 rows a block: 375 blocks
    build_index(path, overwrite=True)
    read: list[int] = []
    real = index_copy.checksum
    monkeypatch.setattr(index_copy, "checksum", lambda block: read.append(len(block)) or real(block))
    search(vectors[186], path, k=3)
    first = sum(read)
    rows = json.loads(index_paths(path)[1].read_text())["copy_checksums"]["block_rows"]
    assert rows == 8 and 0 < first <= 101 * rows  # the candidates' blocks, not the whole copy
    search(vectors[186], path, k=3)
    assert sum(read) == first  # the same blocks of the same file: checked once in this process
    _rewritten(index_paths(path)[2], 186)
    with pytest.raises(CorpusError, match=r"rows? [0-9-]+ of .*store\.parquet\.index\.npy do"):
        search(vectors[186], path, k=3)


def test_occurrence_reads_of_the_copy_are_checked_too(indexed: tuple[Path, np.ndarray]) -> None:
    path, _ = indexed
    copies = index_copies(open_store(path))
    assert copies is not None
    untouched = np.asarray(copies[0][[5, 61, 2999]])
    np.testing.assert_array_equal(untouched, np.load(index_paths(path)[2])[[5, 61, 2999]])
    _rewritten(index_paths(path)[2], 61)
    copies = index_copies(open_store(path))
    assert copies is not None
    with pytest.raises(CorpusError, match=r"index\.npy do(es)? not match (its|their) checksum"):
        copies[0][[5, 61]]


def test_an_index_built_before_copy_checksums_is_stale_and_never_used(
    indexed: tuple[Path, np.ndarray], tmp_path: Path
) -> None:
    path, vectors = indexed
    meta_file = index_paths(path)[1]
    meta = json.loads(meta_file.read_text())
    del meta["copy_checksums"]
    meta_file.write_text(json.dumps(meta))
    _swap_top_hit(index_paths(path)[2])
    state = index_state(path)
    assert state.status == "stale" and "checksums of its vector copy" in state.reason
    with pytest.warns(IndexStaleWarning, match=rf"index build {path} --overwrite"):
        hits = search(vectors[186], path, k=3)
    assert hits[0].id == "r186" and hits[0].score == pytest.approx(1.0)  # exact: the copy was not read
    build_index(path, overwrite=True)
    assert index_state(path).fresh
    # A .npy store's index keeps no copy (the store's own rows are read and checked): fresh as before.
    npy = write_store(tmp_path / "store.npy", vectors[:2000])
    build_index(npy)
    assert "copy_checksums" not in json.loads(index_paths(npy)[1].read_text())
    assert index_state(npy).fresh
