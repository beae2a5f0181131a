"""The ANN index's vector copy (`X.parquet.index.npy`) is checked, block by block, before its rows re-rank
candidates: an edited copy is refused in one line, an untouched one answers as exact search does, and an
index built before the copy kept checksums is stale (searched without, with the rebuild command). The
faiss file is proven too: its size and CRC-32, recorded at build, are checked before faiss reads it."""

from __future__ import annotations

import json
import os
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest

from bertscope.errors import CorpusError
from bertscope.io import index as index_module
from bertscope.io import index_copy
from bertscope.io.index import IndexStaleWarning, index_copies, index_paths, index_state
from bertscope.io.index_build import build_index
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


# The faiss file itself: its SHA-256 is recorded at build and checked before faiss reads it.


def _damaged(index_file: Path, how: str, tmp_path: Path) -> None:
    """The index file with one byte flipped in its middle (the cells' codes), cut to half its length, or
    replaced by the index of another store of as many rows of as many dimensions."""
    data = bytearray(index_file.read_bytes())
    if how == "flipped":
        data[len(data) // 2] ^= 0x01
        index_file.write_bytes(bytes(data))
    elif how == "truncated":
        index_file.write_bytes(bytes(data[: len(data) // 2]))
    else:
        other = write_store(tmp_path / "other.parquet", clustered(3000, 7))
        build_index(other)
        index_file.write_bytes(index_paths(other)[0].read_bytes())


def _and_npy(indexed: tuple[Path, np.ndarray], tmp_path: Path) -> tuple[Path, Path]:
    """The indexed Parquet store and an indexed .npy store of its first 2,000 vectors (an index without
    a copy: the file's checksum is all it has)."""
    path, vectors = indexed
    npy = write_store(tmp_path / "store.npy", vectors[:2000])
    build_index(npy)
    return path, npy


def test_the_index_file_checksum_recorded_at_build_is_the_files(
    indexed: tuple[Path, np.ndarray], tmp_path: Path
) -> None:
    path, npy = _and_npy(indexed, tmp_path)
    for store in (path, npy):
        index_file, meta_file, _ = index_paths(store)
        written = index_file.read_bytes()
        recorded = json.loads(meta_file.read_text())["index_checksum"]
        assert recorded == {"algorithm": "crc32", "bytes": len(written), "crc32": zlib.crc32(written)}
        assert index_state(store, check_index=True).fresh
    ran = run_main("index", "info", str(path), "--json")
    assert ran.code == 0 and json.loads(ran.stdout)["status"] == "fresh"


@pytest.mark.parametrize("how", ["flipped", "truncated", "swapped"])
def test_a_damaged_index_file_is_refused_in_one_line_before_faiss_reads_it(
    indexed: tuple[Path, np.ndarray], tmp_path: Path, how: str
) -> None:
    path, vectors = indexed
    size = index_paths(path)[0].stat().st_size
    _damaged(index_paths(path)[0], how, tmp_path)
    wrong = (  # a cut file is refused by its size, unread; a swapped one is as long as the original
        f"is {size // 2} bytes where its index was written as {size}: the file is truncated"
        if how == "truncated"
        else "does not match its checksum: the file is corrupt"
    )
    fix = f"rebuild the index with `bertscope index build {path} --overwrite`"
    said = f"{path}.index {wrong} or was replaced; {fix}"
    assert index_state(path).fresh  # its description and the store are untouched: the file is checked
    with pytest.raises(CorpusError) as refused:
        search(vectors[186], path, k=3)
    assert str(refused.value) == said
    assert search(vectors[186], path, k=1, exact=True)[0].id == "r186"  # exact search reads the store
    for args in (("similar", "--id", "r186", "--store", str(path), "-k", "3"), ("index", "info", str(path))):
        ran = run_main(*args)
        assert ran.code == 1 and ran.stdout == ""
        assert ran.stderr.strip().splitlines() == [f"error: {said}"]
        assert "Traceback" not in ran.stderr and "faiss" not in ran.stderr


def test_the_index_file_is_summed_once_per_version_of_it(
    indexed: tuple[Path, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, vectors = indexed
    summed: list[Path] = []
    real = index_module.file_checksum
    monkeypatch.setattr(index_module, "file_checksum", lambda file: summed.append(file) or real(file))
    index_file = index_paths(path)[0]
    search(vectors[186], path, k=3)
    search(vectors[61], path, k=3)
    assert summed.count(index_file) == 1  # a service proves the file once, not on every query
    _damaged(index_file, "flipped", path.parent)
    for _ in range(2):  # a refused file is refused again, from the sum of this version
        with pytest.raises(CorpusError, match="does not match its checksum"):
            search(vectors[186], path, k=3)
    assert summed.count(index_file) == 2


def test_an_index_built_before_it_kept_its_files_checksum_is_stale_and_never_read(
    indexed: tuple[Path, np.ndarray], tmp_path: Path
) -> None:
    path, npy = _and_npy(indexed, tmp_path)
    vectors = indexed[1]
    for store in (path, npy):
        index_file, meta_file, _ = index_paths(store)
        meta = json.loads(meta_file.read_text())
        meta.pop("index_checksum", None)  # None: as written before this bertscope
        meta_file.write_text(json.dumps(meta))
        _damaged(index_file, "truncated", tmp_path)  # never read: faiss would raise its own error
        state = index_state(store)
        assert state.status == "stale"
        assert "before bertscope kept a checksum of its index file" in state.reason
        info = run_main("index", "info", str(store), "--json")  # said by `index info`, not an error
        assert info.code == 0 and json.loads(info.stdout)["reason"] == state.reason
        with pytest.warns(IndexStaleWarning, match=rf"index build {store} --overwrite"):
            hits = search(vectors[186], store, k=3)
        assert hits[0].id == "r186" and hits[0].score == pytest.approx(1.0)  # exact
        build_index(store, overwrite=True)
        assert index_state(store, check_index=True).fresh
