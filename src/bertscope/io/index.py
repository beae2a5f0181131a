"""An approximate-nearest-neighbour index beside a store, for stores too big to scan.

`build_index("out.parquet")` (io/index_build.py) writes `out.parquet.index` (a faiss IVF index with 8-bit
scalar-quantised unit vectors), `out.parquet.index.json` (what it was built from: rows, dimension, vector
column, a hash of the store's settings and of its rows, the CRC-32 of each 64 KiB block of the copy) and
`out.parquet.index.npy` (a copy of the stored float32 vectors, memory-mapped: Parquet can only decode
whole row groups, too slow for a hundred scattered rows; a .npy store is used as it is). The copy's blocks
that a search reads are checked first (`index_copy.py`); an index built before the copy kept checksums is
stale. The faiss file keeps a checksum too (`index_checksum`: its size and the CRC-32 of its bytes, taken
as they are written): a search checks it before faiss reads the file, once per version of it, so a
damaged, truncated or swapped index is refused in one line, never read (faiss raises its own error on
some, and proposes another store's rows from others); an index built before it kept one is stale. `search`
uses the index when it is there and fresh: it proposes `max(candidates, 4k + 1)` rows from the `nprobe`
nearest cells (more cells while those hold fewer rows, so a large k costs cells, not hits), their stored
vectors are ranked by exact cosine, so every cosine returned is the exact cosine. A stale index (the store
was rewritten) is not used: the search runs exactly and says why.

Why faiss IVF (measured against usearch's HNSW, bench/bench_index.py, bench/BENCHMARKS.md): the same
recall@10 after re-ranking (1.000 on 50k and on 1M synthetic 384-d vectors), 8x faster to build on
two cores (13.8 s against 111 s at 50k), built by streaming (train the cells on a sample, then add
the store chunk by chunk), and `nprobe` trades query time for recall without rebuilding.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..core.fingerprint_facts import file_identity, file_sha256
from ..core.similarity import Hit, TopK, row_cosines, unit
from ..core.spec import whole_number
from ..errors import BackendUnavailable, CorpusError, InvalidInput
from .checksums import ALGORITHM, file_checksum
from .formats import rules_of, suffixes_where
from .index_copy import KEY as COPY_KEY
from .index_copy import CheckedCopy, CopyChecks, read_copy_checks
from .stores import Store, open_store, with_view
from .vector_files import check_npy_rows, npy_store_files, open_matrix, stored_checksums

__all__ = [
    "IndexState",
    "IndexStaleWarning",
    "check_nprobe",
    "describe_store",
    "faiss_module",
    "opened_store",
    "shown_index",
    "index_build_command",
    "rebuild_index",
    "index_state",
    "index_paths",
    "indexable",
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


class IndexStaleWarning(UserWarning):
    """The store changed after its index was built; the search ran exactly instead."""


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


def faiss_module() -> Any:
    """faiss, imported on first use (an optional extra), or the one-line refusal naming how to install it."""
    try:
        import faiss
    except ImportError as exc:
        raise BackendUnavailable(
            "the ANN index needs faiss: pip install 'bertscope[ann]' (or search exactly with --exact)"
        ) from exc
    return faiss


def describe_store(store: Store, built: dict[str, Any] | None = None) -> dict[str, Any]:
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


def opened_store(store: str | Path | Store, view: str | None, column: str | None) -> Store:
    """The store an index is built on or searched, with its view and vector column; CorpusError where its
    format takes no index (checked before it is opened) or the column is not one of its vector columns."""
    indexable(store.path if isinstance(store, Store) else store)
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


def indexable(path: str | Path) -> None:
    """Refuse, before the store is opened, a format that takes no index (SQLite: a search reads every row
    of the collection; opening one of several collections would ask for a collection no index command
    takes)."""
    rules = rules_of(path)  # a path of no known kind (a Ray job's folder) is left to open_store to name
    if rules is not None and not rules.by_row:
        where = suffixes_where(lambda rules: rules.by_row)
        raise CorpusError(
            f"{path}: a {Path(path).suffix} store takes no index (an index is built for {where} stores "
            "only); similar reads every row of it"
        )


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
    opened = opened_store(store, view, column)
    index_file, meta_file, copy_file = index_paths(opened.path, opened.column)
    copied = not opened.rules.mapped
    files = (index_file, meta_file, copy_file) if copied else (index_file, meta_file)
    gone = [path for path in files if not path.exists()]
    if len(gone) == len(files):
        return IndexState("missing", f"no index beside {opened.path}", index_file)
    if gone:
        # Some of its files are there: a damaged index, not none (a build would refuse to overwrite it).
        lost = " and ".join(str(path) for path in gone)
        reason = (
            f"the index of {opened.path} is incomplete: {lost} {'is' if len(gone) == 1 else 'are'} missing "
            "(deleted, or a build that did not finish)"
        )
        return IndexState("stale", reason, index_file)
    meta = _read_meta(meta_file)
    if meta is None:
        reason = f"{meta_file} is not an index's description (rows, dimension, nprobe as whole numbers)"
        return IndexState("stale", reason, index_file, None)
    made = meta.get("format")
    if made != FORMAT:
        by = "an older" if isinstance(made, int) and made < FORMAT else "another"
        reason = f"{index_file} was built by {by} bertscope (index format {made}, this one reads {FORMAT})"
        return IndexState("stale", reason, index_file, meta)
    now = describe_store(opened, meta)
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
        return IndexState("stale", reason, index_file, shown_index(meta))
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
        return IndexState("stale", reason, index_file, shown_index(meta))
    if check_index:
        identity = file_identity(index_file.stat())
        _check_index_file(index_file, identity, recorded, rebuild_index(opened))
    return IndexState("fresh", f"index of {meta['rows']} rows", index_file, shown_index(meta), checks)


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


def shown_index(meta: dict[str, Any]) -> dict[str, Any]:
    """An index's description as `index info` shows it: the copy's checksums by their count, not listed."""
    sums = meta.get(COPY_KEY)
    if not isinstance(sums, dict):
        return meta
    return {**meta, COPY_KEY: {k: v for k, v in sums.items() if k != "crc32"}}


def rebuild_index(store: Store) -> str:
    """The fix for an index that cannot be used: its `bertscope index build` command."""
    return f"rebuild the index with `{index_build_command(store)} --overwrite`"


def index_build_command(store: Store) -> str:
    """The `bertscope index build` command for the column `store` searches, its view or column named."""
    named = f" --view {store.view}" if store.view else ""
    named = named or (f" --column {store.column}" if store.column != "embedding" else "")
    return f"bertscope index build {store.path}{named}"


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
    return faiss_module().read_index(path)


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
    faiss = faiss_module()
    nprobe = min(nprobe, index.nlist)
    while True:
        _, found = index.search(query, count, params=faiss.SearchParametersIVF(nprobe=nprobe))
        rows = found[0][found[0] >= 0]
        if len(rows) >= count or nprobe >= index.nlist:
            return np.sort(rows)
        nprobe = min(index.nlist, 2 * nprobe)
