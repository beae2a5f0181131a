"""Parquet files whose vector columns carry a checksum per row group (see `io.checksums`).

`write_checked` writes tables as row groups and records each group's checksums (its vectors and every
other column: ids, texts, counts, a token row's position, token, offsets ...: `checksums.covered_columns`,
listed under `checksums.DIGEST_COLUMNS_KEY`; a file written before covered `checksums.CHECKED_COLUMNS`
only and is read so) and row digests (the file's first groups only:
`checksums.ROW_DIGEST_ROWS`) in the file's metadata; `CheckedParquet` reads groups back and refuses one
whose vectors, labels or counts do not match (or, in a file written before checksums, whose vectors are
not finite), and names the rows of a failed group that changed (`changed_rows`); `checked_tables` streams
a file's rows in chunks, every row checked before it is handed on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError
from .checksums import (
    CHECKSUMS_DIGEST_KEY,
    COUNT_COLUMNS,
    DIGEST_COLUMNS_KEY,
    LABEL_COLUMNS,
    LAYOUT,
    MISMATCH,
    NOT_FINITE,
    PARQUET_KEY,
    PARQUET_ROWS_KEY,
    SETTINGS_KEY,
    changed_rows,
    checksum,
    checksums_block,
    column_checksum,
    column_values,
    corrupt,
    count_differs,
    covered_columns,
    keeps_digests,
    non_finite,
    proven_settings,
    rebuild_hint,
    rechunk,
    recorded,
    row_checks,
    row_digests,
    row_labels,
    table_checksums,
    vector_names,
)

__all__ = [
    "CHECKSUMS_MISSING",
    "GROUP_ROWS",
    "COUNTS_MISSING",
    "LABELS_MISSING",
    "RECORD_MISSING",
    "CheckedParquet",
    "checked_tables",
    "checks_missing",
    "readable_parquet",
    "unproven",
    "with_coverage",
    "write_checked",
]

# The most rows one row group holds: a bigger batch is split, each piece with its own checksums.
GROUP_ROWS = 1 << 20
# The key of a Parquet store's settings (as `parquet_sink.PARQUET_META_KEY`, which imports this module).
_SETTINGS_META_KEY = b"bertscope"


# What `checks_missing` finds a stripped store's checksums lack, each as its refusals name it.
CHECKSUMS_MISSING = "its rows' checksums are missing"
LABELS_MISSING = "the checksums of its rows' ids and texts are missing"
RECORD_MISSING = "the record of its rows is missing"
COUNTS_MISSING = "the checksums of its rows' n_tokens and truncated are missing"


def checks_missing(settings: dict[str, Any], found: dict[str, Any] | None) -> str | None:
    """What a store's checksums lack that its settings say its writer kept, or None: the one test, applied
    on reading rows and by `verify`. `found`: the checksums as recorded, with `labels_checked` and
    `rows_recorded` (`with_coverage`; None where none are recorded). A store whose settings are sealed
    (`SETTINGS_KEY`) was written with checksums, generation 1 on (`row_checks`) with its labels', 3 on
    with their digest, so one missing was stripped (re-saved by another tool, edited). A store written
    before them is read as before."""
    if found is None:
        return CHECKSUMS_MISSING if SETTINGS_KEY in settings else None
    generation = row_checks(settings)
    if generation >= 1 and not found["labels_checked"]:
        return LABELS_MISSING
    if generation >= 3 and not found["rows_recorded"]:
        return RECORD_MISSING
    if generation >= 4 and not found.get("counts_checked", True):
        return COUNTS_MISSING
    return None


def with_coverage(
    found: dict[str, Any] | None, labels: str, counts: Iterable[str] = ()
) -> dict[str, Any] | None:
    """Checksums as recorded (None: none), with what `checks_missing` asks: `labels_checked` (each batch
    keeps its labels' under `labels`), `rows_recorded` (they carry their digest) and `counts_checked`
    (each batch keeps one for each of `counts`, the count columns the store holds)."""
    if found is None:
        return None
    listed = found.get("row_groups", found.get("batches")) or []
    counts = tuple(counts)
    return {
        **found,
        "labels_checked": all(labels in batch for batch in listed),
        "rows_recorded": CHECKSUMS_DIGEST_KEY in found,
        "counts_checked": all(name in batch for batch in listed for name in counts),
    }


def unproven(
    where: str, missing: str, path: Path | None, rebuild: str, *, how: str = "re-saved (pandas, pyarrow)"
) -> CorpusError:
    """The one-line refusal to read the rows of a store whose checksums were stripped (`checks_missing`),
    on reading rows and from `verify`; `path`: the store `bertscope verify --store` checks (None for a
    job's part, or from `verify` itself); `how`: what another tool did to the file."""
    verify = f"`bertscope verify --store {path}` says more; " if path is not None else ""
    return CorpusError(
        f"{where}: {missing}, though its settings say the bertscope that wrote it kept them: they were "
        f"stripped by an edit, or the file was {how} by another tool, so its rows cannot be proven and are "
        f"not read; {verify}use the file as bertscope wrote it, or {rebuild}"
    )


def write_checked(path: Path, tables: Iterable[Any], schema: Any = None) -> int:
    """Write the tables to `path` as row groups (one per table, split past GROUP_ROWS rows), each
    group's vector checksums in the file's metadata, and the row digests of the groups within the file's
    first ROW_DIGEST_ROWS rows (`checksums.keeps_digests`: a list as long as those groups, so the footer
    stays bounded); returns the rows written (0: no file was made)."""
    import pyarrow.parquet as pq

    writer = None
    groups: list[dict[str, int]] = []
    digests: list[str] = []
    written = 0
    covered: list[str] = []
    try:
        for table in tables:
            if writer is None:
                writer = _writer(path, schema if schema is not None else table.schema)
                # Row digests leave the counts out, as before: a row group whose counts fail names its rows.
                covered = [n for n in covered_columns(table.schema) if n not in COUNT_COLUMNS]
            for start in range(0, table.num_rows, GROUP_ROWS):
                piece = table.slice(start, GROUP_ROWS)
                writer.write_table(piece, row_group_size=piece.num_rows)
                groups.append({"rows": piece.num_rows, **table_checksums(piece)})
                written += piece.num_rows
                if keeps_digests(written):  # rows only grow: the groups that keep them come first
                    digests.append(_row_digests(piece, covered))
        if writer is not None:
            sums = checksums_block("row_groups", groups, {DIGEST_COLUMNS_KEY: covered})
            writer.add_key_value_metadata(
                {PARQUET_KEY: json.dumps(sums), PARQUET_ROWS_KEY: json.dumps(digests)}
            )
    finally:
        if writer is not None:
            writer.close()
    if writer is not None and pq.ParquetFile(path).metadata.num_row_groups != len(groups):
        raise RuntimeError(f"{path}: pyarrow split a row group, so its checksums would not line up")
    return sum(g["rows"] for g in groups)


def _writer(path: Path, schema: Any) -> Any:
    """A ParquetWriter that keeps no min/max statistics and no dictionary of the `text` column: nothing
    reads the statistics, texts seldom repeat, and pyarrow builds both from copies of the values (a 50 MB
    line cost ~330 MB more to write; ~75 MB without them). A vector column's statistics and dictionary
    are its leaves', which no name here matches: it keeps none, as a dictionary of floats saves nothing."""
    import pyarrow.parquet as pq

    flat = [f.name for f in schema if f.name != "text"]
    return pq.ParquetWriter(path, schema, write_statistics=flat, use_dictionary=flat)


def readable_parquet(path: Path, where: str | None = None, rebuild: str | None = None) -> Any:
    """`path` opened as a `pyarrow.parquet.ParquetFile`, or a CorpusError naming the file corrupt (a broken
    footer: a file cut short) and how to make it again (`rebuild`, default `rebuild_hint`)."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise CorpusError(
            f"{where or path} is not a readable Parquet file ({_first_line(exc)}): the file is corrupt; "
            f"{rebuild or rebuild_hint(path)}"
        ) from None


class CheckedParquet:
    """A Parquet file read row group by row group, each group's vectors checked before use.

    `where` names the file in errors and `rebuild` says how to make it again.
    """

    def __init__(self, path: Path, *, where: str | None = None, rebuild: str | None = None) -> None:

        self.path = path
        self.where = where or str(path)
        self.rebuild = rebuild or rebuild_hint(path)
        self._store = rebuild is None  # a store (`verify` checks it), not a job's part
        self.file = readable_parquet(path, self.where, self.rebuild)
        meta = self.file.metadata
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        self.starts = np.cumsum([0, *sizes])
        found = recorded((meta.metadata or {}).get(PARQUET_KEY), self.where, self.rebuild)
        self.sums = found  # the checksums as recorded (None: written before them)
        # The columns the row digests cover (a file written before they were listed: ids and texts).
        listed = (found or {}).get(DIGEST_COLUMNS_KEY)
        self.digest_columns: tuple[str, ...] = (
            tuple(str(n) for n in listed) if isinstance(listed, list) else LABEL_COLUMNS
        )
        self.groups: list[dict[str, int]] | None = None if found is None else found["row_groups"]
        if self.groups is not None and [g["rows"] for g in self.groups] != sizes:
            written = sum(int(g["rows"]) for g in self.groups)
            if written != int(self.starts[-1]):  # rows removed or added: said as a count, as SQLite's
                raise count_differs(self.where, int(self.starts[-1]), written, self.rebuild)
            raise self._error(0, max(0, int(self.starts[-1]) - 1), LAYOUT)
        # What the checksums lack that the settings say were written (stripped): refused on reading rows
        # (`verify`, which reads only the checksums first, names it its own way), as settings edited since
        # they were written are (`proven_settings`: their generation is what says what was kept).
        self.counts = tuple(name for name in COUNT_COLUMNS if name in self.file.schema_arrow.names)
        self.coverage = with_coverage(found, "id", self.counts)
        settings = proven_settings(_stored_settings(self.file), self.where, self.rebuild)
        self.missing = checks_missing(settings, self.coverage)
        self.columns_changed = _columns_changed(self.file.schema_arrow.names, self.groups, settings)

    def _refuse_unproven(self) -> None:
        if self.missing is not None:
            raise unproven(self.where, self.missing, self.path if self._store else None, self.rebuild)
        if self.columns_changed is not None:
            raise CorpusError(
                f"{self.where} {self.columns_changed}, so its rows cannot be read as they were written; use "
                f"the file as bertscope wrote it, or {self.rebuild}"
            )

    def group(self, number: int, columns: list[str] | None) -> Any:
        """Row group `number` (its `columns`, None for all) as an Arrow table, its vectors checked."""
        self._refuse_unproven()
        first, end = int(self.starts[number]), int(self.starts[number + 1])
        try:
            table = self.file.read_row_group(number, columns=columns)
        except (OSError, ValueError) as exc:  # a broken page: pyarrow's ArrowInvalid is a ValueError
            raise self._error(first, end - 1, f"cannot be decoded ({_first_line(exc)})") from None
        self.check(table, first, None if self.groups is None else self.groups[number])
        return table

    def changed_rows(self, first: int) -> tuple[list[int], list[str]] | None:
        """(file row numbers, their ids) of the rows of the group starting at row `first` whose digest
        differs from the one written, or None where none can be named (no digests, none differs)."""
        number = int(np.searchsorted(self.starts, first, side="right")) - 1
        try:
            digests = json.loads((self.file.metadata.metadata or {})[PARQUET_ROWS_KEY])
            recorded = digests[number] if isinstance(digests, list) and len(digests) > number else None
            table = self.file.read_row_group(number)
        except (KeyError, OSError, ValueError):
            return None
        rows = changed_rows(recorded, _vectors(table), row_labels(table, self.digest_columns))
        if not rows:
            return None
        ids = table.column("id").to_pylist() if "id" in table.schema.names else [str(r) for r in rows]
        start = int(self.starts[number])
        return [start + r for r in rows], [str(ids[r]) for r in rows]

    def check(self, table: Any, first: int, expected: dict[str, int] | None) -> None:
        """Refuse a table of rows `first`.. whose vectors or other columns miss their checksums (each
        column the group keeps one for: a file written before every column was covered keeps none for
        some), or whose vectors are not finite."""
        for name in covered_columns(table.schema):
            wanted = None if expected is None else expected.get(name)
            if wanted is not None:
                if column_checksum(name, table.column(name)) != wanted:
                    raise self._error(first, first + table.num_rows - 1, MISMATCH)
        for name in vector_names(table.schema):
            values = column_values(table.column(name))
            wanted = None if expected is None else expected.get(name)
            if wanted is not None:
                if checksum(values) != wanted:
                    raise self._error(first, first + table.num_rows - 1, MISMATCH)
                continue
            bad = non_finite(values)
            if len(bad):
                rows = (first + int(bad[0]), first + int(bad[-1]))
                raise self._error(*rows, NOT_FINITE)

    def tables(self, columns: list[str] | None, size: int) -> Iterator[Any]:
        """The file's rows (`columns`, None for all), `size` rows at a time, every one checked."""
        import pyarrow as pa

        self._refuse_unproven()
        if self.groups is None:
            yield from self._unrecorded(columns, size)
            return
        pieces = (self.group(g, columns) for g in range(self.file.metadata.num_row_groups))
        yield from rechunk(
            pieces, size, lambda t: t.num_rows, pa.concat_tables, lambda t, start, n: t.slice(start, n)
        )

    def _unrecorded(self, columns: list[str] | None, size: int) -> Iterator[Any]:
        """A file written before checksums: streamed in batches, its vectors checked to be finite."""
        import pyarrow as pa

        first = 0
        batches = self.file.iter_batches(batch_size=size, columns=columns)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except (OSError, ValueError) as exc:
                end = int(self.starts[-1]) - 1
                raise self._error(first, end, f"cannot be decoded ({_first_line(exc)})") from None
            table = pa.Table.from_batches([batch])
            self.check(table, first, None)
            first += table.num_rows
            yield table

    def _error(self, first: int, last: int, problem: str) -> Exception:
        return corrupt(self.where, (first, last), problem, self.rebuild)


def _columns_changed(
    names: list[str], groups: list[dict[str, Any]] | None, settings: dict[str, Any]
) -> str | None:
    """What was done to a Parquet store's columns since it was written, said for a refusal, or None: a
    column its checksums keep an entry for (every row group's: vectors, ids, texts, counts), or its
    settings say it keeps (`keep_text`: a `text` column), dropped; a `text` column added where its
    checksums, which cover its labels (an `id` entry), or its settings say it keeps none (`--no-text`).
    Whatever was written, a reader takes only the columns it asks for, so a column gone passes no
    check of its own."""
    written = dict.fromkeys(key for group in groups or [] for key in group if key != "rows")
    if settings.get("keep_text") is True:
        written["text"] = None
    dropped = [name for name in written if name not in names]
    if dropped:
        shown = " or ".join(f"`{name}`" for name in dropped)
        return (
            f"has no {shown} column, though its checksums or settings say bertscope wrote "
            f"{'it' if len(dropped) == 1 else 'them'}: dropped after it was written"
        )
    listed = groups or []
    labelled = bool(listed) and all("id" in group for group in listed)
    untexted = labelled and not all("text" in group for group in listed)
    unwritten = untexted or settings.get("keep_text") is False
    if "text" in names and unwritten:
        return (
            "holds a `text` column, though its checksums and settings say it was written without texts "
            "(--no-text): added after it was written"
        )
    return None


def _stored_settings(file: Any) -> dict[str, Any]:
    """A Parquet file's bertscope settings as stored ({} where none can be read: its reader says so)."""
    raw = (file.schema_arrow.metadata or {}).get(_SETTINGS_META_KEY)
    try:
        settings = json.loads(raw) if raw is not None else {}
    except ValueError:
        return {}
    return settings if isinstance(settings, dict) else {}


def _vectors(table: Any) -> list[np.ndarray]:
    return [column_values(table.column(name)) for name in vector_names(table.schema)]


def _row_digests(table: Any, columns: list[str]) -> str:
    """The row digests of a row group (its vectors and `columns`): `checksums.row_digests`."""
    return row_digests(_vectors(table), row_labels(table, columns))


def checked_tables(path: Path, columns: list[str] | None, size: int) -> Iterator[Any]:
    """A stored Parquet file's rows (`columns`), `size` rows at a time, each vector checked first."""
    yield from CheckedParquet(path).tables(columns, size)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
