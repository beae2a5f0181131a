"""Reading .parquet and .npy stores back: settings, rows in chunks, rows by number, vector columns.

Each reader answers the questions of `formats.StoreReader` for its format; `stores.Store` asks them
through the format table (formats.py), never by testing a suffix.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError
from .sinks import PARQUET_META_KEY

__all__ = ["Chunk", "NpyReader", "ParquetReader"]

# (ids, texts (None where not kept), vectors (rows, d))
Chunk = tuple[list[str], list[str | None], np.ndarray]


class ParquetReader:
    """A Parquet store: settings in the file's metadata, one or more fixed-size-list vector columns."""

    def open(self, path: Path, collection: str | None) -> tuple[str | None, dict[str, Any]]:
        """(None, settings) of the store, or CorpusError when it is not a whole bertscope file."""
        import pyarrow.parquet as pq

        try:
            meta = pq.ParquetFile(path).schema_arrow.metadata or {}
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise CorpusError(f"{path} is not a readable Parquet file ({exc}); is it whole?") from None
        if PARQUET_META_KEY not in meta:
            raise CorpusError(f"{path} was not written by bertscope (no settings in its metadata)")
        return None, json.loads(meta[PARQUET_META_KEY])

    def chunks(self, path: Path, collection: str | None, column: str, size: int) -> Iterator[Chunk]:
        """(ids, texts, vectors) of every row, `size` rows at a time, from the vector column `column`."""
        import pyarrow.parquet as pq

        file = pq.ParquetFile(path)
        columns = [c for c in ("id", "text", column) if c in file.schema_arrow.names]
        for batch in file.iter_batches(batch_size=size, columns=columns):
            yield _parquet_rows(batch, column)

    def count(self, path: Path, collection: str | None) -> int:
        """The rows, from the file's metadata."""
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)

    def take(self, path: Path, rows: np.ndarray, column: str | None) -> Chunk:
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

    def columns(self, path: Path) -> list[str]:
        """The vector columns: `embedding`, a view's, or one per layer of a stacked token store."""
        import pyarrow.parquet as pq

        from .levels import vector_columns

        return vector_columns(pq.read_schema(path))


class NpyReader:
    """A .npy matrix (rows, d) with its settings and ids in files beside it."""

    def open(self, path: Path, collection: str | None) -> tuple[str | None, dict[str, Any]]:
        """(None, settings) from `<stem>.settings.json`; CorpusError when the files beside it are missing."""
        settings_path = path.with_suffix(".settings.json")
        labels = [path.with_suffix(".ids.txt"), path.with_suffix(".rows.jsonl")]
        if not settings_path.exists() or not any(p.exists() for p in labels):
            raise CorpusError(
                f"{path} has no {settings_path.name} / ids file beside it; was it written by bertscope?"
            )
        return None, json.loads(settings_path.read_text())

    def chunks(self, path: Path, collection: str | None, column: str, size: int) -> Iterator[Chunk]:
        """(ids, no texts, vectors) of every row, `size` rows at a time (the matrix memory-mapped)."""
        matrix = np.load(path, mmap_mode="r")
        with path.with_suffix(".ids.txt").open(newline="\n") as ids_file:
            for start in range(0, matrix.shape[0], size):
                ids = [ids_file.readline().rstrip("\n") for _ in range(min(size, matrix.shape[0] - start))]
                yield ids, [None] * len(ids), np.asarray(matrix[start : start + size])

    def count(self, path: Path, collection: str | None) -> int:
        """The matrix's rows."""
        return int(np.load(path, mmap_mode="r").shape[0])

    def take(self, path: Path, rows: np.ndarray, column: str | None) -> Chunk:
        """The rows asked for, in that order (no vectors with column=None)."""
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
        picked = matrix[rows] if column is not None else matrix[:0, :0]
        return ids, [None] * len(ids), np.asarray(picked, dtype=np.float32)

    def columns(self, path: Path) -> list[str]:
        """One vector column, the matrix itself."""
        return ["embedding"]


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
