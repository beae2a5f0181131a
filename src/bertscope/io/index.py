"""An approximate-nearest-neighbour index beside a store, for stores too big to scan.

`build_index("out.parquet")` writes `out.parquet.index` (a faiss IVF index with 8-bit scalar-quantised
unit vectors), `out.parquet.index.json` (what it was built from: rows, dimension, vector column, a
hash of the store's settings and of its rows, the CRC-32 of each 64 KiB block of the copy) and
`out.parquet.index.npy` (a copy of the stored float32 vectors, memory-mapped: Parquet can only decode
whole row groups, too slow for a hundred scattered rows; a .npy store is used as it is). The copy's
blocks that a search reads are checked first (`index_copy.py`); an index built before the copy kept
checksums is stale. The faiss file keeps a checksum too (`index_checksum`: its size and the CRC-32 of
its bytes, taken as they are written): a search checks it before faiss reads the file, once per version
of it, so a damaged, truncated or swapped index is refused in one line, never read (faiss raises its own
error on some, and proposes another store's rows from others); an index built before it kept one is stale.
`search` uses the index when it is there and
fresh: it proposes `max(candidates, 4k + 1)` rows from the `nprobe` nearest cells (more cells while
those hold fewer rows, so a large k costs cells, not hits), their stored vectors are ranked by exact
cosine, so every cosine returned is the exact cosine. A stale index (the store was rewritten) is not
used: the search runs exactly and says why.

Why faiss IVF (measured against usearch's HNSW, bench/bench_index.py, bench/BENCHMARKS.md): the same
recall@10 after re-ranking (1.000 on 50k and on 1M synthetic 384-d vectors), 8x faster to build on
two cores (13.8 s against 111 s at 50k), built by streaming (train the cells on a sample, then add
the store chunk by chunk), and `nprobe` trades query time for recall without rebuilding.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import time
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..core.fingerprint_facts import file_identity, file_sha256
from ..core.similarity import Hit, TopK, row_cosines, unit
from ..core.spec import whole_number
from ..errors import BackendUnavailable, CorpusError, InvalidInput
from .checksums import ALGORITHM, file_checksum
from .formats import suffixes_where
from .index_copy import KEY as COPY_KEY
from .index_copy import CheckedCopy, CopyChecks, copy_checksums, read_copy_checks
from .level_table import level_of
from .parts_sink import atomic_write_text
from .stores import Store, open_store, with_view
from .vector_files import check_npy_rows, npy_store_files, open_matrix, stored_checksums

__all__ = [
    "IndexState",
    "IndexStaleWarning",
    "IndexTrainingWarning",
    "build_index",
    "check_nprobe",
    "index_state",
    "index_paths",
    "index_copies",
    "ann_search",
]

# 2: the store's rows are proven by its checksums' SHA-256 (1 hashed sampled bytes of the file).
FORMAT = 2
# The description's key for the faiss file's checksum: {"algorithm", "bytes", "crc32"} of the file as
# written (`_write_index`), checked before faiss reads it (`_check_index_file`).
INDEX_KEY = "index_checksum"
# Measured on 1M vectors (bench/bench_index.py): recall@10 >= 0.95 after exact re-ranking.
NPROBE = 32
CANDIDATES = 100
_TRAIN_PER_CELL = 40


class IndexStaleWarning(UserWarning):
    """The store changed after its index was built; the search ran exactly instead."""


class IndexTrainingWarning(UserWarning):
    """The index's cells were trained on fewer rows each than faiss asks for (a tiny store, or cells= high):
    bertscope says so in its own words, with what to do, where faiss would print its own line."""


_FAISS_MIN_PER_CELL = 39  # faiss's ClusteringParameters.min_points_per_centroid


@dataclass(frozen=True)
class IndexState:
    """Whether a store has a usable index: `fresh`, `missing` or `stale` (with the reason)."""

    status: str
    reason: str
    index: Path
    # The description as built, less the CRCs of the copy's blocks (kept in `copy`, not shown).
    meta: dict[str, Any] | None = None
    copy: CopyChecks | None = field(default=None, compare=False, repr=False)

    @property
    def fresh(self) -> bool:
        """True when the index matches the store as it is now."""
        return self.status == "fresh"


def check_nprobe(nprobe: object) -> int:
    """`nprobe` (index cells to visit) as an int; a one-line CorpusError unless a whole number >= 1."""
    return whole_number(nprobe, "nprobe", meaning="index cells to visit", error=CorpusError)


def index_paths(store_path: str | Path, column: str = "embedding") -> tuple[Path, Path, Path]:
    """(index, its JSON description, the vectors' copy for re-ranking) beside a store, per column."""
    path = Path(store_path)
    stem = path.name if column == "embedding" else f"{path.name}.{column}"
    return tuple(path.with_name(stem + end) for end in (".index", ".index.json", ".index.npy"))  # type: ignore[return-value]


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:
        raise BackendUnavailable(
            "the ANN index needs faiss: pip install 'bertscope[ann]' (or search exactly with --exact)"
        ) from exc
    return faiss


def cells_for(rows: int) -> int:
    """IVF cells for a store: about 2 sqrt(rows), with enough rows to train each one."""
    return max(1, min(int(2 * math.sqrt(rows)), rows // _TRAIN_PER_CELL))


def _describe(store: Store, built: dict[str, Any] | None = None) -> dict[str, Any]:
    """What an index must match: the store's settings, size, dimension and rows (`_rows_digest`; `built`:
    the index's description, whose digest is taken as it is while the store's file is the one it saw)."""
    settings = json.dumps(store.settings, sort_keys=True).encode()
    return {
        "column": store.column,
        "settings_sha256": hashlib.sha256(settings).hexdigest(),
        "store_bytes": store.path.stat().st_size,
        "rows_sha256": _rows_digest(store.path, built),
    }


# (resolved path, *file_identity) -> SHA-256 of a whole store written before checksums: hashed once per
# process per version of the file (a service answers many queries; a rewritten file has another key).
_FILE_DIGESTS: dict[tuple[Any, ...], str] = {}


def _rows_digest(path: Path, built: dict[str, Any] | None = None) -> str:
    """SHA-256 of what proves a store's rows: its checksums as recorded (each batch's CRC-32 of its vectors
    and labels, so bertscope rewriting a row changes them; read from the footer or .settings.json, not the
    rows), or, for a store written before checksums, of the whole file: read once per version of the file
    (`file_identity`), remembered in this process and in the index's description (`built`)."""
    found = stored_checksums(path)
    if found is not None:
        return hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()
    identity = file_identity(path.stat())  # before reading: a write while hashing gives another identity
    if built is not None and built.get("store_identity") == list(identity) and built.get("rows_sha256"):
        return str(built["rows_sha256"])
    key = (str(path.resolve()), *identity)
    if key not in _FILE_DIGESTS:
        _FILE_DIGESTS[key] = file_sha256(path)
    return _FILE_DIGESTS[key]


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
    faiss = _faiss()
    opened = _opened(store, view, column)
    if not opened.rules.by_row:
        where = suffixes_where(lambda r: r.by_row)
        raise CorpusError(f"{opened.path}: an index is built for {where} stores only")
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
        **_describe(opened),
        "store_identity": identity,
        **({COPY_KEY: checks} if checks is not None else {}),
        INDEX_KEY: index_checksum,
        "cells": int(nlist),
        "nprobe": int(nprobe),
        "build_seconds": round(time.perf_counter() - start, 3),
    }
    atomic_write_text(meta_file, json.dumps(meta, indent=2))
    copied = read_copy_checks(checks, added, dimension) if checks is not None else None
    return IndexState("fresh", "built", index_file, _shown(meta), copied)


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


def _opened(store: str | Path | Store, view: str | None, column: str | None) -> Store:
    opened = store if isinstance(store, Store) else with_view(open_store(store), view)
    opened = replace(opened, column=column) if column else opened
    if opened.rules.columns:
        have = opened.rules.reader.columns(opened.path)
        if opened.column not in have:
            # A stacked token store keeps one column per layer and no `embedding` column.
            first = have[0] if have else "layer_N"
            raise CorpusError(
                f"{opened.path} has no vector column {opened.column!r}; its vector columns are "
                f"{', '.join(have) or 'none'}: name one with column={first!r} (--column {first})"
            )
    return opened


def _tmp(path: Path) -> Path:
    return path.with_name(path.name + ".tmp")


def index_state(
    store: str | Path | Store,
    *,
    view: str | None = None,
    column: str | None = None,
    check_index: bool = False,
) -> IndexState:
    """Whether the store (one of its views, or a vector column) has an index that still matches it.

    `check_index` also reads the whole faiss file and refuses it (CorpusError) where it does not match
    the checksum its build recorded (`index info`); a search checks it where it reads it (`ann_search`),
    and occurrence search, which reads only the index's copy, never pays for it.
    """
    opened = _opened(store, view, column)
    index_file, meta_file, copy_file = index_paths(opened.path, opened.column)
    copied = not opened.rules.mapped
    if not index_file.exists() or not meta_file.exists() or (copied and not copy_file.exists()):
        return IndexState("missing", f"no index beside {opened.path}", index_file)
    meta = _read_meta(meta_file)
    if meta is None:
        reason = f"{meta_file} is not an index's description (rows, dimension, nprobe as whole numbers)"
        return IndexState("stale", reason, index_file, None)
    made = meta.get("format")
    if made != FORMAT:
        by = "an older" if isinstance(made, int) and made < FORMAT else "another"
        reason = f"{index_file} was built by {by} bertscope (index format {made}, this one reads {FORMAT})"
        return IndexState("stale", reason, index_file, meta)
    now = _describe(opened, meta)
    changed = [key for key in now if meta.get(key) != now[key]]
    if changed:
        reason = f"{opened.path} changed since its index was built ({', '.join(changed)} differ)"
        return IndexState("stale", reason, index_file, meta)
    checks = read_copy_checks(meta.get(COPY_KEY), meta["rows"], meta["dimension"]) if copied else None
    if copied and checks is None:
        reason = (
            f"{index_file} was built before bertscope kept the checksums of its vector copy "
            f"({copy_file.name}), so the rows it re-ranks from could not be proven"
            if COPY_KEY not in meta
            else f"{meta_file} does not record the checksums of its vector copy as bertscope writes them"
        )
        return IndexState("stale", reason, index_file, _shown(meta))
    recorded = _index_checksum(meta.get(INDEX_KEY))
    if recorded is None:
        # As an index whose copy records no checksums (above): stale, so a search warns, runs exactly and
        # names the rebuild, rather than refusing a store that answers, or reading a file nothing proves.
        reason = (
            f"{index_file} was built before bertscope kept a checksum of its index file, so the file "
            "faiss reads could not be proven"
            if INDEX_KEY not in meta
            else f"{meta_file} does not record the checksum of its index file as bertscope writes it"
        )
        return IndexState("stale", reason, index_file, _shown(meta))
    if check_index:
        identity = file_identity(index_file.stat())
        _check_index_file(index_file, identity, recorded, rebuild_index(opened))
    return IndexState("fresh", f"index of {meta['rows']} rows", index_file, _shown(meta), checks)


def _index_checksum(entry: object) -> tuple[int, int] | None:
    """(bytes, CRC-32) an index's description records for its faiss file, or None where the entry is not
    one this bertscope writes."""
    if not isinstance(entry, dict) or entry.get("algorithm") != ALGORITHM:
        return None
    size, crc = entry.get("bytes"), entry.get("crc32")
    if not isinstance(size, int) or not _whole(size) or not isinstance(crc, int) or isinstance(crc, bool):
        return None
    return (size, crc) if 0 <= crc < 1 << 32 else None


# (resolved path, *file_identity) -> the CRC-32 of an index file: read once per process per version of it.
_INDEX_SUMS: dict[tuple[Any, ...], int] = {}


def _check_index_file(path: Path, identity: tuple[int, ...], recorded: tuple[int, int], rebuild: str) -> None:
    """Refuse, in one line, a faiss file that is not the one `build_index` wrote: another size (refused
    unread), or other bytes (summed once per version of the file: `identity`, taken before it is read)."""
    size, crc = recorded
    if identity[0] != size:  # `file_identity` starts with the size
        raise CorpusError(
            f"{path} is {identity[0]} bytes where its index was written as {size}: the file is truncated or "
            f"was replaced; {rebuild}"
        )
    key = (str(path.resolve()), *identity)
    if key not in _INDEX_SUMS:
        _INDEX_SUMS[key] = file_checksum(path)
    if _INDEX_SUMS[key] != crc:
        raise CorpusError(
            f"{path} does not match its checksum: the file is corrupt or was replaced; {rebuild}"
        )


def _shown(meta: dict[str, Any]) -> dict[str, Any]:
    """An index's description as `index info` shows it: the copy's checksums by their count, not listed."""
    sums = meta.get(COPY_KEY)
    if not isinstance(sums, dict):
        return meta
    return {**meta, COPY_KEY: {k: v for k, v in sums.items() if k != "crc32"}}


def rebuild_index(store: Store) -> str:
    """The fix for an index that cannot be used: its `bertscope index build` command."""
    named = f" --view {store.view}" if store.view else ""
    named = named or (f" --column {store.column}" if store.column != "embedding" else "")
    return f"rebuild the index with `bertscope index build {store.path}{named} --overwrite`"


def _read_meta(path: Path) -> dict[str, Any] | None:
    """An index's description, or None where it is not JSON or its counts are not whole numbers >= 1."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    counts = ("rows", "dimension", "nprobe")
    if not isinstance(meta, dict) or not all(_whole(meta.get(key)) for key in counts):
        return None
    return meta


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def index_copies(store: Store) -> list[CheckedCopy] | None:
    """The float32 copies of each vector column of a .parquet store, in the store's column order, from
    their fresh indexes, memory-mapped and read by row numbers (the blocks read checked first); None when
    a column has no index, or a stale one (warned)."""
    import warnings

    if not store.rules.columns or store.rules.mapped:
        return None
    copies = []
    for name in store.rules.reader.columns(store.path):
        state = index_state(replace(store, column=name))
        if state.status == "stale":
            warnings.warn(
                f"{state.reason}: reading every row instead; rebuild it with `bertscope index build "
                f"{store.path} --overwrite`",
                IndexStaleWarning,
                stacklevel=3,
            )
        if not state.fresh or state.copy is None:
            return None
        column = replace(store, column=name)
        copies.append(CheckedCopy(index_paths(store.path, name)[2], state.copy, rebuild_index(column)))
    return copies or None


@functools.lru_cache(maxsize=4)
def _load(path: str, identity: tuple[int, ...], recorded: tuple[int, int], rebuild: str) -> Any:
    """The index, read once per file version (a service answers many queries from one load), after its
    bytes match the checksum recorded at build: faiss reads a damaged file as it is (a truncated one or a
    bad header raises faiss's own error, flipped ids crash the search, a swapped index proposes another
    store's rows), so nothing reaches it unproven. A refused file is not cached: each search refuses it."""
    _check_index_file(Path(path), identity, recorded, rebuild)
    return _faiss().read_index(path)


Labels = Callable[[np.ndarray], tuple[list[str], list[str | None]]]


def ann_search(
    store: Store,
    vector: np.ndarray,
    *,
    k: int,
    state: IndexState,
    exclude: str | None = None,
    candidates: int = CANDIDATES,
    nprobe: int | None = None,
    labels: Labels | None = None,
) -> list[Hit]:
    """Top-k by exact cosine among the `max(candidates, 4k + 1)` rows the index proposes for (d,) `vector`.

    The index visits the `nprobe` cells nearest the query, and twice as many again while the cells
    visited hold fewer rows than that: a large k visits more cells instead of returning fewer hits, and
    k hits come back whenever the store holds k rows (k + 1 with `exclude`). `labels(rows)` gives the
    (ids, texts) of row numbers; the default reads the store's own (`Store.take`).
    """
    assert state.meta is not None
    if vector.shape[-1] != state.meta["dimension"]:
        raise InvalidInput(
            f"the query has {vector.shape[-1]} dimensions but {state.index} indexes "
            f"{state.meta['dimension']}; search with the model and settings the store was made with"
        )
    probe = int(state.meta["nprobe"]) if nprobe is None else check_nprobe(nprobe)
    recorded = _index_checksum(state.meta.get(INDEX_KEY))
    if recorded is None:  # not from `index_state`: an index file that cannot be proven
        raise CorpusError(f"{state.index} records no checksum of its index file; {rebuild_index(store)}")
    identity = file_identity(state.index.stat())  # before it is summed: a write after it is another version
    index = _load(str(state.index), identity, recorded, rebuild_index(store))
    count = min(max(candidates, 4 * k + 1), int(state.meta["rows"]))
    rows = _candidates(index, unit(vector.reshape(1, -1)), count, probe)
    if store.rules.mapped:  # the rows read are the store's own: checked as a full read checks them
        _check_rows(store.path, rows)
        vectors = np.asarray(open_matrix(store.path)[rows], dtype=np.float32)
    elif state.copy is None:  # not from `index_state`: an index whose copy's blocks cannot be checked
        raise CorpusError(f"{state.index} records no checksums of its vector copy; {rebuild_index(store)}")
    else:  # the index's copy, its candidates' blocks checked against their CRCs
        copy = index_paths(store.path, store.column)[2]
        vectors = CheckedCopy(copy, state.copy, rebuild_index(store))[rows]
    # The best k + 1 by exact cosine, ties in row order (one more in case the excluded id is among
    # them), then their labels, ranked as a full read ranks them (`TopK`, row numbers given).
    best = np.sort(np.lexsort((rows, -row_cosines(vectors, unit(vector.reshape(-1)))))[: k + 1])
    if labels is None:
        ids, texts, _ = store.take(rows[best], vectors=False)
    else:
        ids, texts = labels(rows[best])
    top = TopK(vector, k, exclude=exclude)
    top.add(ids, texts, vectors[best], rows=rows[best])
    return top.hits


# A .npy store's path -> (the identity of its files, which of its rows were proven by `check_npy_rows`):
# a service checks each row's batch once per version of the store, not on every query.
_PROVEN: dict[str, tuple[tuple[int, ...], np.ndarray]] = {}


def _check_rows(path: Path, rows: np.ndarray) -> None:
    """`check_npy_rows` for those of `rows` not proven before in this process while the store's matrix,
    settings and labels are the files they were (`file_identity`: a write through a memory map, or an
    edit, moves their times)."""
    identity = tuple(n for f in npy_store_files(path) if f.exists() for n in file_identity(f.stat()))
    key = str(path.resolve())
    known, proven = _PROVEN.get(key, ((), np.zeros(0, dtype=bool)))
    if known != identity:
        proven = np.zeros(len(open_matrix(path)), dtype=bool)
    todo = rows[~proven[rows]]
    if len(todo):
        check_npy_rows(path, todo)
        proven[todo] = True
    _PROVEN[key] = (identity, proven)


def _candidates(index: Any, query: np.ndarray, count: int, nprobe: int) -> np.ndarray:
    """Sorted row numbers of the index's `count` nearest rows to (1, d) `query`, from `nprobe` cells or
    more: faiss returns only what the cells visited hold, so they are doubled until that is `count`
    rows (every cell holds them all)."""
    faiss = _faiss()
    nprobe = min(nprobe, index.nlist)
    while True:
        _, found = index.search(query, count, params=faiss.SearchParametersIVF(nprobe=nprobe))
        rows = found[0][found[0] >= 0]
        if len(rows) >= count or nprobe >= index.nlist:
            return np.sort(rows)
        nprobe = min(index.nlist, 2 * nprobe)
