"""The Parquet sink: a level's columns in part files joined into one Parquet file, settings in metadata."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CorpusError
from .checksums import ROW_CHECKS, ROW_CHECKS_KEY, sealed
from .parquet_checked import CheckedParquet, write_checked
from .parts_sink import REDO_ADVICE, PartsSink, is_vector_type, removed_on_failure
from .readers import Record

if TYPE_CHECKING:
    from .levels import Rows

__all__ = ["PARQUET_META_KEY", "ParquetSink", "view_column", "with_settings"]

PARQUET_META_KEY = b"bertscope"


def view_column(view: str) -> str:
    """The Parquet column that holds one named sentence view's vectors."""
    return f"embedding_{view}"


class ParquetSink(PartsSink):
    """The level's columns (sentence: id, text, embedding, n_tokens, truncated); settings in metadata."""

    suffix = ".parquet"
    _columns_checked = False  # whether a resumed job's first new part was compared with the saved ones

    def write(self, records: list[Record], rows: Rows) -> None:
        """Write one part file (temporary name, then rename, then its marker)."""

        part = self._next_part()
        tmp = part.with_suffix(".tmp")
        self._refuse_non_finite(rows.table)
        with removed_on_failure(tmp):
            write_checked(tmp, [with_settings(rows.table, self.settings)])
        self._refuse_other_columns(tmp)
        os.replace(tmp, part)
        self._committed(part, records)

    def _refuse_other_columns(self, tmp: Path) -> None:
        """A resumed job's first new part must hold the columns of the saved parts (they are joined as one
        table): a store whose parts predate `keep_text` in the settings could differ in its text column."""
        import pyarrow.parquet as pq

        if self.files and not self._columns_checked:
            with removed_on_failure(tmp):
                _same_columns(
                    self.path, pq.read_schema(self.files[0]), pq.read_schema(tmp), "this run's part"
                )
            self._columns_checked = True

    def _check_part(self, part: Path) -> None:
        checked = CheckedParquet(part, rebuild=REDO_ADVICE)
        names = [f.name for f in checked.file.schema_arrow if is_vector_type(f.type)]
        for group in range(checked.file.metadata.num_row_groups):
            checked.group(group, names)

    def finish(self) -> list[Path]:
        """Join the parts into one Parquet file, streaming row group by row group, each one checked."""
        import pyarrow.parquet as pq

        if not self.files:
            self._cleanup()
            raise CorpusError(f"{self.path}: no texts were embedded, so there is nothing to write")
        tmp = self.path.with_name(self.path.name + ".tmp")
        with removed_on_failure(tmp):
            write_checked(tmp, self._groups(), pq.read_schema(self.files[0]))
        os.replace(tmp, self.path)
        self._cleanup()
        return [self.path]

    def _groups(self) -> Iterator[Any]:
        import pyarrow.parquet as pq

        first = pq.read_schema(self.files[0])
        for part in self.files:
            checked = CheckedParquet(part, rebuild=REDO_ADVICE)
            _same_columns(self.path, first, checked.file.schema_arrow, f"the saved {part.name}", redo=True)
            for group in range(checked.file.metadata.num_row_groups):
                yield checked.group(group, None)


def with_settings(table: Any, settings: dict[str, Any]) -> Any:
    """The table with the job's settings (its vector width and the row checksums kept beside them) in the
    schema metadata, with their digest (`checksums.sealed`)."""
    widths = [f.type.list_size for f in table.schema if is_vector_type(f.type)]
    stored = sealed({**settings, "dimension": widths[0] if widths else 0, ROW_CHECKS_KEY: ROW_CHECKS})
    meta = {PARQUET_META_KEY: json.dumps(stored).encode()}
    return table.replace_schema_metadata(meta)


def _same_columns(path: Path, first: Any, other: Any, what: str, *, redo: bool = False) -> None:
    """Refuse a part whose columns differ from the job's first part's: they cannot be joined as one table."""
    if first.equals(other, check_metadata=False):
        return
    names = [f.name for f in first] != [f.name for f in other]
    before, after = (", ".join(f.name if names else f"{f.name} {f.type}" for f in s) for s in (first, other))
    fix = "start again with overwrite=True (--overwrite)"
    if not redo:
        fix = f"resume with the options it was started with (--no-text leaves the text out), or {fix}"
    raise CorpusError(
        f"{path}: {what} holds the columns {after} where the job's first part holds {before}; {fix}"
    )
