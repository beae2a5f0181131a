"""Reading stored vectors back (Parquet, NumPy, SQLite) in chunks; `io.search` searches them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError
from .sinks import PARQUET_META_KEY, view_column

__all__ = ["Store", "open_store", "with_view", "view_settings"]

Chunk = tuple[list[str], list[str | None], np.ndarray]


@dataclass
class Store:
    """A finished output: its settings and a way to read (ids, texts, vectors) in chunks."""

    path: Path
    collection: str | None
    settings: dict[str, Any]
    # Which vector column is read: "embedding", or one view's column of a store with several views.
    column: str = "embedding"
    view: str | None = None

    def chunks(self, size: int = 65536) -> Iterator[Chunk]:
        """(ids, texts, vectors (rows, d)) of every stored row, `size` rows at a time."""
        suffix = self.path.suffix.lower()
        if suffix == ".parquet":
            yield from _parquet_chunks(self.path, size, self.column)
        elif suffix == ".npy":
            yield from _npy_chunks(self.path, size)
        else:
            from .sqlite_store import connect, iter_vectors

            db = connect(self.path)
            try:
                yield from iter_vectors(db, str(self.collection), size)
            finally:
                db.close()

    def count(self) -> int:
        """How many rows the store holds (from metadata for .parquet and .npy)."""
        suffix = self.path.suffix.lower()
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(self.path).metadata.num_rows)
        if suffix == ".npy":
            return int(np.load(self.path, mmap_mode="r").shape[0])
        return sum(len(ids) for ids, _, _ in self.chunks())

    def take(self, rows: np.ndarray, *, vectors: bool = True) -> Chunk:
        """(ids, texts, vectors (len(rows), d)) of the given 0-based row numbers, in that order.

        `vectors=False` reads ids and texts only (vectors come back as an empty (0, 0) array).
        """
        rows = np.asarray(rows, dtype=np.int64)
        suffix = self.path.suffix.lower()
        if suffix == ".parquet":
            return _parquet_take(self.path, rows, self.column if vectors else None)
        if suffix == ".npy":
            return _npy_take(self.path, rows, vectors)
        raise CorpusError(f"{self.path}: reading rows by number works on .parquet and .npy stores only")

    def vector_of(self, item_id: str) -> np.ndarray:
        """The stored vector of one id, or CorpusError if there is none."""
        for ids, _, vectors in self.chunks():
            if item_id in ids:
                return np.array(vectors[ids.index(item_id)])
        raise CorpusError(
            f"no id {item_id!r} in {self.path}"
            + (f" (collection {self.collection!r})" if self.collection else "")
        )


def open_store(path: str | Path, *, collection: str | None = None) -> Store:
    """Open a bertscope output for reading; SQLite needs the collection (or has exactly one)."""
    path = Path(path)
    if not path.is_file():
        what = "a folder, not a file" if path.is_dir() else "no such file"
        raise CorpusError(f"cannot read {path}: {what}")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            meta = pq.ParquetFile(path).schema_arrow.metadata or {}
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise CorpusError(f"{path} is not a readable Parquet file ({exc}); is it whole?") from None
        if PARQUET_META_KEY not in meta:
            raise CorpusError(f"{path} was not written by bertscope (no settings in its metadata)")
        return Store(path, None, json.loads(meta[PARQUET_META_KEY]))
    if suffix == ".npy":
        settings_path = path.with_suffix(".settings.json")
        labels = [path.with_suffix(".ids.txt"), path.with_suffix(".rows.jsonl")]
        if not settings_path.exists() or not any(p.exists() for p in labels):
            raise CorpusError(
                f"{path} has no {settings_path.name} / ids file beside it; was it written by bertscope?"
            )
        return Store(path, None, json.loads(settings_path.read_text()))
    if suffix in (".db", ".sqlite", ".sqlite3"):
        from .sqlite_store import list_collections

        available = {c["name"]: c for c in list_collections(path)}
        if collection is None and len(available) == 1:
            collection = next(iter(available))
        if collection not in available:
            names = ", ".join(available) or "none"
            raise CorpusError(f"{path} has no collection {collection!r}; its collections: {names}")
        return Store(path, collection, available[collection]["settings"])
    raise CorpusError(f"{path}: not a bertscope output (.parquet, .npy or .db)")


def with_view(store: Store, view: str | None) -> Store:
    """The store reading one view's column; a store with several views needs one named."""
    views = store.settings.get("views")
    if not views:
        if view is not None:
            raise CorpusError(f"{store.path} holds one vector per text and no views; leave --view out")
        return store
    if view is None and len(views) == 1:
        view = next(iter(views))
    if view is None or view not in views:
        asked = "no view was named" if view is None else f"it has no view {view!r}"
        raise CorpusError(f"{store.path} holds the views {', '.join(views)}; {asked}: pick one with --view")
    return replace(store, column=view_column(view), view=view)


def view_settings(store: Store) -> dict[str, Any]:
    """The settings one column was made with: the store's, with its view's spec in place."""
    settings = {k: v for k, v in store.settings.items() if k != "views"}
    if store.view is not None:
        settings.update(store.settings["views"][store.view])
    return settings


def _parquet_chunks(path: Path, size: int, column: str = "embedding") -> Iterator[Chunk]:
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    columns = [c for c in ("id", "text", column) if c in file.schema_arrow.names]
    for batch in file.iter_batches(batch_size=size, columns=columns):
        yield _parquet_rows(batch, column)


def _parquet_rows(batch: Any, column: str | None) -> Chunk:
    """(ids, texts, vectors) of an Arrow batch or table (no vector column: an empty (0, 0) array)."""
    ids = batch.column("id").to_pylist()
    texts = batch.column("text").to_pylist() if "text" in batch.schema.names else [None] * len(ids)
    if column is None:
        return ids, texts, np.empty((0, 0), np.float32)
    embedding = batch.column(column)
    if hasattr(embedding, "combine_chunks"):
        embedding = embedding.combine_chunks()
    vectors = embedding.flatten().to_numpy(zero_copy_only=False).reshape(-1, embedding.type.list_size)
    return ids, texts, vectors


def _parquet_take(path: Path, rows: np.ndarray, column: str | None) -> Chunk:
    """Read only the row groups that hold the rows asked for (a few per query, not the whole file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    meta = file.metadata
    starts = np.cumsum([0] + [meta.row_group(g).num_rows for g in range(meta.num_row_groups)])
    groups = np.searchsorted(starts, rows, side="right") - 1
    columns = [c for c in ("id", "text", column) if c in file.schema_arrow.names]
    pieces = []
    for group in np.unique(groups):
        local = rows[groups == group] - starts[group]
        pieces.append(file.read_row_group(int(group), columns=columns).take(pa.array(local)))
    table = pa.concat_tables(pieces) if pieces else file.schema_arrow.empty_table().select(columns)
    # concat_tables gathered the rows group by group; put them back in the order asked for.
    order = np.concatenate([np.flatnonzero(groups == g) for g in np.unique(groups)]) if pieces else rows
    ids, texts, vectors = _parquet_rows(table, column)
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    return [ids[i] for i in back], [texts[i] for i in back], vectors[back] if column else vectors


def _npy_take(path: Path, rows: np.ndarray, vectors: bool = True) -> Chunk:
    matrix = np.load(path, mmap_mode="r")
    wanted = {int(r) for r in rows}
    found: dict[int, str] = {}
    with path.with_suffix(".ids.txt").open(newline="\n") as ids_file:
        for number, line in enumerate(ids_file):
            if number in wanted:
                found[number] = line.rstrip("\n")
                if len(found) == len(wanted):
                    break
    ids = [found[int(r)] for r in rows]
    return ids, [None] * len(ids), np.asarray(matrix[rows] if vectors else matrix[:0, :0], dtype=np.float32)


def _npy_chunks(path: Path, size: int) -> Iterator[Chunk]:
    matrix = np.load(path, mmap_mode="r")
    with path.with_suffix(".ids.txt").open(newline="\n") as ids_file:
        for start in range(0, matrix.shape[0], size):
            ids = [ids_file.readline().rstrip("\n") for _ in range(min(size, matrix.shape[0] - start))]
            yield ids, [None] * len(ids), np.asarray(matrix[start : start + size])
