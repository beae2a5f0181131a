"""Corpus sinks: Parquet, NumPy and an SQLite collection, each written in atomic steps so no work is lost.

Parquet and NumPy outputs grow as numbered part files in `<output>.parts/` (each written to a temporary
name, then renamed) and are joined into the final file at the end; a killed job resumes after the
last whole part. SQLite writes one transaction per batch and skips what it already holds.
"""

from __future__ import annotations

import json
import os
import shutil
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError
from .readers import Record

__all__ = ["Sink", "open_sink", "view_column", "SUPPORTED_OUTPUTS", "PARQUET_META_KEY"]

SUPPORTED_OUTPUTS = (".parquet", ".npy", ".db / .sqlite")
PARQUET_META_KEY = b"bertscope"


class Sink(ABC):
    """Where a corpus job writes; `done` rows are already safe on disk (resume skips them)."""

    path: Path
    done: int = 0
    # Part-file sinks resume by skipping the records already written; SQLite skips them by id instead.
    resumes_by_position: bool = True
    reused: int = 0
    already: int = 0

    def pending(self, records: list[Record]) -> list[Record]:
        """The records of a batch that still need embedding (all of them, unless the sink deduplicates)."""
        return records

    @abstractmethod
    def write(
        self, records: list[Record], vectors: np.ndarray, n_tokens: np.ndarray, truncated: np.ndarray
    ) -> None:
        """Store one batch atomically."""

    @abstractmethod
    def finish(self) -> list[Path]:
        """Make the output whole and return the files it consists of."""

    @abstractmethod
    def abandon(self) -> None:
        """Leave nothing behind for a job that stored nothing."""


def open_sink(
    path: str | Path,
    *,
    settings: dict[str, Any],
    collection: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    keep_text: bool = True,
) -> Sink:
    """The sink for an output path, by its suffix, checked against resume/overwrite."""
    path = Path(path)
    if not path.parent.exists():
        raise CorpusError(f"cannot write {path}: the folder {path.parent} does not exist")
    suffix = path.suffix.lower()
    if suffix in (".db", ".sqlite", ".sqlite3"):
        from .sqlite_store import SqliteSink

        return SqliteSink(
            path,
            settings=settings,
            collection=collection or "default",
            overwrite=overwrite,
            keep_text=keep_text,
        )
    if suffix not in (".parquet", ".npy"):
        raise CorpusError(
            f"{path}: unknown output type {suffix or '(none)'}; supported: {', '.join(SUPPORTED_OUTPUTS)}"
        )
    sink_type = ParquetSink if suffix == ".parquet" else NpySink
    return sink_type(path, settings=settings, resume=resume, overwrite=overwrite, keep_text=keep_text)


class _PartsSink(Sink):
    """Numbered part files in `<output>.parts/`, joined into the output by `finish`."""

    suffix = ""

    def __init__(
        self, path: Path, *, settings: dict[str, Any], resume: bool, overwrite: bool, keep_text: bool
    ) -> None:
        self.path = path
        self.parts = path.with_name(path.name + ".parts")
        self.settings = settings
        self.keep_text = keep_text
        state = self.parts / "settings.json"
        if overwrite:
            shutil.rmtree(self.parts, ignore_errors=True)
            for old in self.outputs():
                old.unlink(missing_ok=True)
        elif resume and state.exists():
            stored = json.loads(state.read_text())
            if stored != settings:
                raise CorpusError(
                    f"{path}: the unfinished job was started with other settings "
                    f"({settings_diff(stored, settings)}); "
                    "resume with the same options, or start again with --overwrite"
                )
        elif resume and path.exists():
            raise CorpusError(f"{path} is already complete: nothing to resume (use --overwrite to redo it)")
        elif path.exists() or self.parts.exists():
            raise CorpusError(
                f"{path} exists{' (an unfinished job)' if self.parts.exists() else ''}; "
                "pass --resume to continue it or --overwrite to replace it"
            )
        self.parts.mkdir(exist_ok=True)
        _atomic_write_text(state, json.dumps(settings, sort_keys=True))
        self.files = sorted(self.parts.glob(f"part-*{self.suffix}"))
        self.done = sum(self._rows(f) for f in self.files)
        self.dimension: int | None = None

    def outputs(self) -> list[Path]:
        """The files a finished job consists of."""
        return [self.path]

    def _next_part(self) -> Path:
        return self.parts / f"part-{len(self.files):06d}{self.suffix}"

    @abstractmethod
    def _rows(self, part: Path) -> int: ...

    def _committed(self, part: Path, rows: int) -> None:
        self.files.append(part)
        self.done += rows

    def _cleanup(self) -> None:
        shutil.rmtree(self.parts, ignore_errors=True)

    def abandon(self) -> None:
        """Remove the part folder of a job that stored nothing."""
        self._cleanup()


class ParquetSink(_PartsSink):
    """id, text (optional), embedding (fixed-size float32 list), n_tokens, truncated; settings in metadata."""

    suffix = ".parquet"

    def _schema(self, dimension: int | dict[str, int]) -> Any:
        return parquet_schema(self.settings, dimension, keep_text=self.keep_text)

    def _rows(self, part: Path) -> int:
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(part).metadata.num_rows)

    def write(
        self,
        records: list[Record],
        vectors: np.ndarray | dict[str, np.ndarray],
        n_tokens: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        """Write one part file (temporary name, then rename); several views are {name: (rows, d)}."""
        import pyarrow.parquet as pq

        dimension = (
            {name: v.shape[1] for name, v in vectors.items()}
            if isinstance(vectors, dict)
            else vectors.shape[1]
        )
        table = arrow_table(self._schema(dimension), records, vectors, n_tokens, truncated, self.keep_text)
        part = self._next_part()
        tmp = part.with_suffix(".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, part)
        self._committed(part, len(records))

    def finish(self) -> list[Path]:
        """Join the parts into one Parquet file, streaming part by part."""
        import pyarrow.parquet as pq

        tmp = self.path.with_name(self.path.name + ".tmp")
        writer = None
        for part in self.files:
            table = pq.read_table(part)
            if writer is None:
                writer = pq.ParquetWriter(tmp, table.schema)
            writer.write_table(table)
        if writer is None:
            self._cleanup()
            raise CorpusError(f"{self.path}: no texts were embedded, so there is nothing to write")
        writer.close()
        os.replace(tmp, self.path)
        self._cleanup()
        return [self.path]


class NpySink(_PartsSink):
    """A float32 .npy matrix (memory-mappable) with `<stem>.ids.txt` and `<stem>.settings.json` beside it."""

    suffix = ".npy"

    def outputs(self) -> list[Path]:
        """The matrix, its ids and its settings."""
        return [self.path, self.path.with_suffix(".ids.txt"), self.path.with_suffix(".settings.json")]

    def _rows(self, part: Path) -> int:
        return int(np.load(part, mmap_mode="r").shape[0])

    def write(
        self, records: list[Record], vectors: np.ndarray, n_tokens: np.ndarray, truncated: np.ndarray
    ) -> None:
        """Write one part (vectors and ids), each to a temporary name then renamed; ids land last."""
        broken = next((r for r in records if "\n" in r.id or "\r" in r.id), None)
        if broken is not None:
            raise CorpusError(
                f"id {broken.id!r} (line {broken.line}) holds a line break, which the .ids.txt beside a .npy "
                "cannot keep; write to .parquet or .db, or use other ids"
            )
        part = self._next_part()
        tmp = part.with_name(part.name + ".tmp")
        with tmp.open("wb") as handle:
            np.save(handle, vectors.astype(np.float32, copy=False))
        _atomic_write_text(part.with_suffix(".ids.txt"), "".join(r.id + "\n" for r in records))
        os.replace(tmp, part)
        self._committed(part, len(records))

    def finish(self) -> list[Path]:
        """Join the parts into one .npy (streamed through a memory map) and write ids and settings."""
        dims = {int(np.load(p, mmap_mode="r").shape[1]) for p in self.files}
        dimension = dims.pop() if dims else 0
        tmp = self.path.with_name(self.path.name + ".tmp")
        matrix = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(self.done, dimension))
        row = 0
        with self.path.with_suffix(".ids.txt.tmp").open("w") as ids_out:
            for part in self.files:
                block = np.load(part, mmap_mode="r")
                matrix[row : row + len(block)] = block
                row += len(block)
                ids_out.write(part.with_suffix(".ids.txt").read_text())
        matrix.flush()
        del matrix
        os.replace(tmp, self.path)
        os.replace(self.path.with_suffix(".ids.txt.tmp"), self.path.with_suffix(".ids.txt"))
        _atomic_write_text(
            self.path.with_suffix(".settings.json"),
            json.dumps({**self.settings, "dimension": dimension}, indent=2),
        )
        self._cleanup()
        return self.outputs()


def view_column(view: str) -> str:
    """The Parquet column that holds one named view's vectors."""
    return f"embedding_{view}"


def parquet_schema(settings: dict[str, Any], dimension: int | dict[str, int], *, keep_text: bool) -> Any:
    """The Parquet output's schema (id, text?, embedding, n_tokens, truncated), settings in metadata.

    With several views (`dimension` is {view: d}) there is one `embedding_<view>` column per view.
    """
    import pyarrow as pa

    fields = [pa.field("id", pa.string())]
    if keep_text:
        fields.append(pa.field("text", pa.string()))
    if isinstance(dimension, dict):
        fields += [pa.field(view_column(name), pa.list_(pa.float32(), d)) for name, d in dimension.items()]
    else:
        fields.append(pa.field("embedding", pa.list_(pa.float32(), dimension)))
    fields += [pa.field("n_tokens", pa.int32()), pa.field("truncated", pa.int32())]
    meta = {PARQUET_META_KEY: json.dumps({**settings, "dimension": dimension}).encode()}
    return pa.schema(fields, metadata=meta)


def arrow_table(
    schema: Any,
    records: list[Record],
    vectors: np.ndarray | dict[str, np.ndarray],
    n_tokens: np.ndarray,
    truncated: np.ndarray,
    keep_text: bool,
) -> Any:
    import pyarrow as pa

    columns = [pa.array([r.id for r in records], pa.string())]
    if keep_text:
        columns.append(pa.array([r.text for r in records], pa.string()))
    for matrix in vectors.values() if isinstance(vectors, dict) else [vectors]:
        flat = pa.array(np.ascontiguousarray(matrix, dtype=np.float32).reshape(-1), pa.float32())
        columns.append(pa.FixedSizeListArray.from_arrays(flat, matrix.shape[1]))
    columns += [
        pa.array(n_tokens.astype(np.int32)),
        pa.array(truncated.astype(np.int32)),
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def settings_diff(stored: dict[str, Any], asked: dict[str, Any]) -> str:
    """Each setting that differs, as `key: stored then, asked now`."""
    keys = sorted(k for k in set(stored) | set(asked) if stored.get(k) != asked.get(k))
    return "; ".join(f"{k}: {stored.get(k)!r} then, {asked.get(k)!r} now" for k in keys)
