"""Building the ANN index beside a store (`build_index`): cells trained on a sample drawn from the whole
store in one streaming pass, then the store added chunk by chunk, with the float32 copy for re-ranking and
the faiss file's checksum taken as it is written. What the files are, how a search reads and checks
them, and why faiss IVF: io/index.py.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..core.fingerprint_facts import file_identity
from ..core.similarity import unit
from ..core.spec import whole_number
from ..errors import CorpusError
from .checksums import ALGORITHM
from .formats import suffixes_where
from .index import (
    FORMAT,
    INDEX_KEY,
    NPROBE,
    IndexState,
    check_nprobe,
    describe_store,
    faiss_module,
    index_paths,
    opened_store,
    shown_index,
)
from .index_copy import KEY as COPY_KEY
from .index_copy import copy_checksums, read_copy_checks
from .level_table import level_of
from .parts_sink import atomic_write_text
from .stores import Store
from .vector_files import check_npy_rows, open_matrix

__all__ = ["IndexTrainingWarning", "build_index", "cells_for"]


_TRAIN_PER_CELL = 40


class IndexTrainingWarning(UserWarning):
    """The index's cells were trained on fewer rows each than faiss asks for (a tiny store, or cells= high):
    bertscope says so in its own words, with what to do, where faiss would print its own line."""


_FAISS_MIN_PER_CELL = 39  # faiss's ClusteringParameters.min_points_per_centroid


def cells_for(rows: int) -> int:
    """IVF cells for a store: about 2 sqrt(rows), with enough rows to train each one."""
    return max(1, min(int(2 * math.sqrt(rows)), rows // _TRAIN_PER_CELL))


def build_index(
    store: str | Path | Store,
    *,
    view: str | None = None,
    column: str | None = None,
    overwrite: bool = False,
    cells: int | None = None,
    nprobe: int = NPROBE,
    on_chunk: Callable[[int], None] | None = None,
    chunk_size: int = 65536,
    seed: int = 0,
) -> IndexState:
    """Build the ANN index of a .parquet or .npy store's vector column: two streaming passes (train, add).

    The column is `embedding`, a view's (`view`), or any vector column named by `column` (say
    `layer_6` of a token store); the index's keys are row numbers. A store of texts or chunks is
    searched through it (`search`), a .parquet store of token or word rows by occurrence
    (`search_occurrences`); a .npy store of token or word rows is searched by neither, and refused.
    """
    check_nprobe(nprobe)
    if cells is not None:
        whole_number(cells, "cells", meaning="index cells to build", error=CorpusError)
    opened = opened_store(store, view, column)  # a format that takes no index is refused unopened
    faiss = faiss_module()
    level = level_of(opened.settings.get("level", "sentence"))
    if not level.searchable and not opened.rules.columns:
        where = suffixes_where(lambda r: r.columns and r.by_row)
        raise CorpusError(
            f"{opened.path}: {level.name.value} rows are searched by occurrence, which reads {where} "
            f"stores only, so an index of this {opened.path.suffix} store would never be used: write it "
            f"as {where}"
        )
    if opened.rules.mapped:
        check_npy_rows(opened.path)  # once: the passes below read the matrix as it is
    index_file, meta_file, copy_file = index_paths(opened.path, opened.column)
    if index_file.exists() and not overwrite:
        raise CorpusError(f"{index_file} exists; pass overwrite=True (--overwrite) to build it again")
    rows = opened.count()
    if rows == 0:
        raise CorpusError(f"{opened.path} holds no vectors to index")
    if cells is not None and cells > rows:  # each cell is trained on one row or more
        raise CorpusError(
            f"cells={cells} is more than the {rows} rows of {opened.path}: give at most {rows} "
            f"(or leave it out: {cells_for(rows)} for this store)"
        )
    start = time.perf_counter()
    identity = list(file_identity(opened.path.stat()))  # before the store is read: the version described
    nlist = cells or cells_for(rows)
    sample = _training_sample(opened, rows, min(rows, nlist * _TRAIN_PER_CELL), chunk_size, seed)
    dimension = sample.shape[1]
    index = faiss.IndexIVFScalarQuantizer(
        faiss.IndexFlatIP(dimension),
        dimension,
        nlist,
        faiss.ScalarQuantizer.QT_8bit,
        faiss.METRIC_INNER_PRODUCT,
    )
    if len(sample) < nlist * _FAISS_MIN_PER_CELL:
        fix = (
            "a store this small is searched as fast exactly (every row), without an index"
            if nlist == 1
            else f"fewer cells train better ones (leave cells= out: {cells_for(rows)} for this store)"
        )
        warnings.warn(
            f"{len(sample)} rows train {nlist} index cell(s), {len(sample) // nlist} a cell where faiss asks "
            f"for {_FAISS_MIN_PER_CELL}: {fix}",
            IndexTrainingWarning,
            stacklevel=2,
        )
    index.cp.min_points_per_centroid = 1  # faiss's own line on too few rows is said above, once
    index.train(sample)
    # Parquet decodes whole row groups, so candidates are re-ranked from a memory-mapped copy of the
    # stored vectors (the same floats); a .npy store is memory-mapped already and needs none.
    copy = None
    if not opened.rules.mapped:
        copy = np.lib.format.open_memmap(
            _tmp(copy_file), mode="w+", dtype=np.float32, shape=(rows, dimension)
        )
    added = 0
    for vectors in _vectors(opened, chunk_size):
        index.add(unit(vectors))  # ids are 0.. in the order added: the store's row numbers
        if copy is not None:
            copy[added : added + len(vectors)] = vectors
        added += len(vectors)
        if on_chunk is not None:
            on_chunk(added)
    checks = None
    if copy is not None:
        copy.flush()
        checks = copy_checksums(copy)
        del copy
        os.replace(_tmp(copy_file), copy_file)
    index_checksum = _write_index(faiss, index, _tmp(index_file))
    os.replace(_tmp(index_file), index_file)
    meta = {
        "format": FORMAT,
        "library": f"faiss {faiss.__version__}",
        "kind": "IVF, 8-bit scalar quantiser, inner product of unit vectors",
        "rows": added,
        "dimension": dimension,
        **describe_store(opened),
        "store_identity": identity,
        **({COPY_KEY: checks} if checks is not None else {}),
        INDEX_KEY: index_checksum,
        "cells": int(nlist),
        "nprobe": int(nprobe),
        "build_seconds": round(time.perf_counter() - start, 3),
    }
    atomic_write_text(meta_file, json.dumps(meta, indent=2))
    copied = read_copy_checks(checks, added, dimension) if checks is not None else None
    return IndexState("fresh", "built", index_file, shown_index(meta), copied)


def _write_index(faiss: Any, index: Any, path: Path) -> dict[str, Any]:
    """Write the faiss `index` to `path`; the `index_checksum` entry of its description (size, CRC-32),
    summed as faiss hands the bytes over, so a multi-GB index is never read back to be summed."""
    crc, size = 0, 0
    with path.open("wb") as stream:

        def write(block: bytes) -> int:
            nonlocal crc, size
            crc, size = zlib.crc32(block, crc), size + len(block)
            return stream.write(block)

        writer = faiss.PyCallbackIOWriter(write)
        faiss.write_index(index, writer)
        del writer  # faiss's writer goes before the file it writes to is closed
    return {"algorithm": ALGORITHM, "bytes": size, "crc32": crc}


def _training_sample(store: Store, rows: int, size: int, chunk_size: int, seed: int) -> np.ndarray:
    """(size, d) unit vectors at rows drawn uniformly from the whole store, read in one streaming pass."""
    wanted = np.sort(np.random.default_rng(seed).choice(rows, size=size, replace=False))
    parts, offset = [], 0
    for vectors in _vectors(store, chunk_size):
        local = wanted[(wanted >= offset) & (wanted < offset + len(vectors))] - offset
        parts.append(unit(vectors[local]))
        offset += len(vectors)
    return np.ascontiguousarray(np.concatenate(parts))


def _vectors(store: Store, size: int) -> Iterator[np.ndarray]:
    """The store's (rows, d) vectors, `size` rows at a time; a .npy matrix is read as it is (checked once
    by `build_index`), without its labels: a chunk store keeps them in `.rows.jsonl`, not `.ids.txt`."""
    if not store.rules.mapped:
        for _, _, vectors in store.chunks(size):
            yield vectors
        return
    matrix = open_matrix(store.path)
    for start in range(0, len(matrix), size):
        yield np.asarray(matrix[start : start + size], dtype=np.float32)


def _tmp(path: Path) -> Path:
    return path.with_name(path.name + ".tmp")
