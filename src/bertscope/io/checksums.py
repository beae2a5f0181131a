"""Checksums of stored vectors: every stored batch carries a CRC-32 of its vectors' bytes, checked on reading.

A flipped byte in a store must be an error, never a silently wrong cosine. Each batch a sink writes
gets a CRC-32 (zlib) of its vectors' little-endian bytes in their stored precision:

    Parquet  one row group per batch; the file's key-value metadata `bertscope.checksums` holds
             {"algorithm": "crc32", "row_groups": [{"rows": 1024, "embedding": 2062123640, "id": ..,
             "text": .., "n_tokens": .., "truncated": ..}, ...]} (one entry per vector column: a view's
             `embedding_<name>`, a stacked store's `layer_N`; `id` and `text` over the column's values,
             `labels_checksum`; the counts `n_tokens` and `truncated`, row checks 4 on, over the
             column's values as int64, `counts_checksum`; and since `digest_columns` was recorded, an
             entry for every other column too: a token, word or chunk row's `position`, `word`, `token`,
             `start`, `end` ..., `column_checksum`), and `bertscope.row_digests` a JSON list, one
             `row_digests` string per row group (the first ones)
    NumPy    `<stem>.settings.json` holds {"algorithm": "crc32", "batches": [{"rows": .., "embedding": ..,
             "labels": .., "row_digests": ..}]} under "checksums" (`labels`: the CRC-32 of the batch's
             lines in the `.ids.txt` or `.rows.jsonl` beside it, as stored: a token, word or chunk row's
             counts are in its line; a sentence store keeps none); each unfinished part's `.done`
             marker holds its own
    SQLite   a `checksum` column per row (schema migration 2) and a `labels_checksum` of its id, text
             and content hash (migration 3; and of its `checksum`, row checks 2 on, binding the vector to
             its row; of its `n_tokens` and `truncated`, row checks 4 on; and of its collection's name,
             row checks 5 on, binding the row to its collection), so a row that fails its check is named
             by itself

A batch's checksums say that it changed, not which row: each batch also keeps one byte per row
(`row_digests`: the low byte of a CRC-32 over the row's labels and vectors, base64), read only once a
batch fails, so the error names the rows that changed and their ids ("row 5 (id '6') of s.npy changed
..."), one batch in memory. A changed row keeps its byte by chance 1 time in 256; where no row can be
named (that, or a store written before row digests), the error names the batch's rows. Only a store's
first `ROW_DIGEST_ROWS` rows keep digests (whole batches; `keeps_digests`), so the footer and settings
that hold them stay a few MB whatever the store's size; a failed batch past them names its rows too.
Stores written before ids and texts were covered (no `id`/`labels` key), or before counts were (no
`n_tokens`/`truncated` key; an SQLite collection of row checks 3 or less), are read as before. A Parquet
store's row digests cover the columns its checksums list under `digest_columns` (every column but the
vectors and the counts) and its vectors; one written before that list covers ids and texts only (its
other columns, but the counts, by nothing) and is read as before. Row digests cover no counts: a row
group whose counts alone changed names its rows.

Reading checks each batch it decodes before handing its rows on, so memory stays bounded; vectors that
are not finite are refused when written and, in stores written before checksums, when read. The
error is one line naming the file, the rows and how to rebuild it (`corrupt`).

The settings a store keeps (model, precision, pooling ...: how its vectors were made, what `verify`
re-embeds with and bounds drift by) carry a SHA-256 of their own under `SETTINGS_KEY`, inside the
settings object itself: the Parquet `bertscope` metadata, the `.settings.json` beside a .npy (its row
checksums left out: they are checked on their own), an SQLite collection's `settings`. `sealed` adds
it when a store is written; `unsealed` takes it off when one is read and says whether it matches (None
for a store written before stores carried one). An edit that does not compute it again is found; it is
a checksum, not a signature. Whatever reads a store's rows or settings to answer from them or to add to
it reads them through `proven_settings`, which refuses settings that no longer match (and a `row_checks`
that is not a whole number), so an edited generation never makes stripped checksums pass; only `verify`
opens such a store, to say so.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..errors import CorpusError

__all__ = [
    "ALGORITHM",
    "CHECKED_COLUMNS",
    "CHECKSUMS_DIGEST_KEY",
    "DIGEST_COLUMNS_KEY",
    "COUNT_COLUMNS",
    "ChecksumMismatch",
    "MISMATCH",
    "NOT_FINITE",
    "LAYOUT",
    "LABEL_COLUMNS",
    "PARQUET_KEY",
    "PARQUET_ROWS_KEY",
    "ROW_CHECKS",
    "ROW_CHECKS_KEY",
    "ROW_DIGEST_ROWS",
    "VIEW_BYTES",
    "SETTINGS_KEY",
    "changed",
    "changed_rows",
    "checksum",
    "checksums_block",
    "counts_checksum",
    "column_checksum",
    "column_labels_checksum",
    "column_values",
    "covered_columns",
    "keeps_digests",
    "labels_checksum",
    "row_checks",
    "row_digests",
    "row_labels",
    "vector_names",
    "recorded",
    "table_checksums",
    "non_finite",
    "corrupt",
    "count_differs",
    "file_checksum",
    "proven_settings",
    "rebuild_hint",
    "refuse_non_finite",
    "rechunk",
    "sealed",
    "settings_digest",
    "settings_edited",
    "unsealed",
]

ALGORITHM = "crc32"
# What is wrong with rows that fail their check, as the error says it.
MISMATCH = "do not match their checksum"
NOT_FINITE = "hold values that are not finite (NaN or infinity)"
LAYOUT = "are not laid out as the file's checksums say"
_SINGULAR = {
    MISMATCH: "does not match its checksum",
    NOT_FINITE: "holds values that are not finite (NaN or infinity)",
}
PARQUET_KEY = b"bertscope.checksums"
PARQUET_ROWS_KEY = b"bertscope.row_digests"
# The most rows of a store that keep row digests (its first ones, in whole batches). The digests sit with
# the checksums, in the Parquet footer or the .settings.json, which every open reads whole, though they
# are read only after a batch fails: at about 1.33 bytes a row they would pass pyarrow's 100 MB limit on
# a footer string near 75M rows (the file could no longer be opened) and slow every open long before.
# 2^21 rows keep them under 3 MB; a batch past them that fails is named by its rows, as in a store
# written before row digests.
ROW_DIGEST_ROWS = 1 << 21
# The Parquet columns of labels a row group's checksums cover beside its vectors (and its row digests) in a
# store written before every column was covered (no `DIGEST_COLUMNS_KEY`); read as text.
LABEL_COLUMNS = ("id", "text")
# The Parquet columns of a row's counts (tokens pooled, tokens cut off) a row group's checksums cover too,
# row checks 4 on: an entry each, as `LABEL_COLUMNS`' (not in row digests: a row group whose counts fail
# is named by its rows). A store written before them keeps none, and is read as before.
COUNT_COLUMNS = ("n_tokens", "truncated")
CHECKED_COLUMNS = LABEL_COLUMNS + COUNT_COLUMNS
# The key of a Parquet store's checksums listing the columns its row digests cover (every column but the
# vectors and counts, in the file's order; the row groups keep a checksum of each, and of the counts). A
# store written before it has none: its digests cover `LABEL_COLUMNS`, its row groups' checksums
# `CHECKED_COLUMNS`, and it is read so.
# A token, word or chunk row's `position`, `word`, `token`, `start` ... were covered by nothing before:
# an edit to one passed every check.
DIGEST_COLUMNS_KEY = "digest_columns"
# The key of a store's settings that holds their SHA-256 (hex), beside the settings it covers.
SETTINGS_KEY = "settings_sha256"
# The key of a store's sealed settings that says which row checksums its writer kept (a generation; a
# store sealed before it says none and is read as before):
#   1  every batch (SQLite: every row) keeps the checksums of its vectors and of its labels (ids, texts)
#   2  an SQLite row's labels checksum covers its vector's checksum too, so a vector moved to another row
#      with its checksum fails there (a Parquet or .npy batch's checksums cover its rows in order already)
#   3  the store records its rows: a Parquet or .npy store's checksums carry their total `rows` and a
#      SHA-256 of themselves (`CHECKSUMS_DIGEST_KEY`: the batch list in order), an SQLite collection its
#      `row_count` (with a CRC-32 of it), updated in the transaction that stores its rows
#   4  a row's counts are covered too: a Parquet row group keeps the checksums of its `n_tokens` and
#      `truncated` columns (`COUNT_COLUMNS`), an SQLite row's labels checksum covers its n_tokens and
#      truncated (a .npy keeps them, where it does, in the labels its batches' checksums cover from 1 on)
#   5  an SQLite row's labels checksum covers its collection's name too, so a row moved whole into another
#      collection fails there (one from a collection of the same name in another file still passes: nothing
#      binds a row to its file); a Parquet or .npy store, one collection, keeps what 4 keeps
ROW_CHECKS_KEY = "row_checks"
ROW_CHECKS = 5  # the generation this bertscope writes
# The key of a store's checksums (Parquet `bertscope.checksums`, a .npy's "checksums") holding their
# SHA-256: batches removed, added or moved with their checksum entries change it.
CHECKSUMS_DIGEST_KEY = "sha256"

T = TypeVar("T")


def checksum(values: np.ndarray | bytes) -> int:
    """CRC-32 of an array's little-endian bytes in its own dtype (float32 or float16), or of raw bytes."""
    if isinstance(values, np.ndarray):
        return zlib.crc32(_little(values).data)
    return zlib.crc32(values)


def file_checksum(path: Path) -> int:
    """CRC-32 of a whole file's bytes, read 1 MiB at a time (memory stays bounded on a multi-GB file)."""
    crc = 0
    with path.open("rb") as stream:
        while block := stream.read(1 << 20):
            crc = zlib.crc32(block, crc)
    return crc


def labels_checksum(values: Iterable[Any]) -> int:
    """CRC-32 of a column of labels (ids, texts; None where missing), each value told from the next."""
    return zlib.crc32(_joined(values).encode("utf-8", "surrogatepass"))


def _joined(values: Iterable[Any]) -> str:
    return "\x00".join("\x01" if v is None else str(v) for v in values)


# Label columns (of a batch, a row group) bigger than this are read as views of their Arrow buffers, not
# copied into a list, a joined string and its encoding (three copies of a 50 MB line); smaller ones, the
# usual, are read the faster way.
VIEW_BYTES = 16 << 20


def column_labels_checksum(column: Any) -> int:
    """`labels_checksum` of an Arrow column's values (a big column read from its buffers: `VIEW_BYTES`)."""
    if column.nbytes <= VIEW_BYTES:
        return labels_checksum(column.to_pylist())
    return _joined_crc(_label_pieces(column))


# A null count (a token or word row past its text's first) as `counts_checksum` reads it: none is negative.
_NULL_COUNT = -(1 << 63)


def counts_checksum(column: Any) -> int:
    """CRC-32 of an Arrow integer column's values (an Arrow array or chunked array: `COUNT_COLUMNS`) as
    little-endian int64, a null as the least int64: a count column read as numbers, not as text (two
    1M-row columns took 0.04 s, 0.24 s as `column_labels_checksum`, which a column of another type falls
    back to)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_integer(column.type):
        return column_labels_checksum(column)
    wide = pc.fill_null(column.cast(pa.int64()), pa.scalar(_NULL_COUNT, pa.int64()))
    if hasattr(wide, "combine_chunks"):
        wide = wide.combine_chunks()
    return checksum(np.asarray(wide.to_numpy(zero_copy_only=False), dtype="<i8"))


def column_checksum(name: str, column: Any) -> int:
    """The checksum of a Parquet row group's column `name` (not a vector), as its entry in
    `bertscope.checksums` keeps it: ids and texts (`LABEL_COLUMNS`) as text, any other column (counts,
    positions, offsets ...) as `counts_checksum` reads it (an integer column as numbers, any other as
    text)."""
    return column_labels_checksum(column) if name in LABEL_COLUMNS else counts_checksum(column)


def _joined_crc(pieces: Iterable[bytes | memoryview], crc: int = 0) -> int:
    """The CRC-32 of the pieces joined with NUL between them, as `_joined` joins values."""
    for number, piece in enumerate(pieces):
        if number:
            crc = zlib.crc32(b"\x00", crc)
        crc = zlib.crc32(piece, crc)
    return crc


def _label_pieces(column: Any) -> Iterator[bytes | memoryview]:
    """Each value of an Arrow column (or chunked column) as `_joined` encodes it (byte 1 where null): a
    string column's values are views of its UTF-8 data, not copies."""
    import pyarrow as pa

    for chunk in getattr(column, "chunks", [column]):
        large = pa.types.is_large_string(chunk.type)
        if not len(chunk):
            continue
        if not (large or pa.types.is_string(chunk.type)):
            for value in chunk.to_pylist():
                yield b"\x01" if value is None else str(value).encode("utf-8", "surrogatepass")
            continue
        _, offsets, data = chunk.buffers()
        width = 8 if large else 4
        starts = np.frombuffer(
            offsets, dtype=f"<i{width}", count=len(chunk) + 1, offset=chunk.offset * width
        ).tolist()
        values = memoryview(data if data is not None else b"")
        valid = chunk.is_valid().to_pylist() if chunk.null_count else None
        for row in range(len(chunk)):
            yield values[starts[row] : starts[row + 1]] if valid is None or valid[row] else b"\x01"


def row_labels(table: Any, columns: Sequence[str] = LABEL_COLUMNS) -> list[bytes]:
    """Each row's labels (the `columns` it has: `covered_columns` in a store written with
    `DIGEST_COLUMNS_KEY`) as bytes, for `row_digests` of a Parquet table (big columns joined from views of
    their values: one copy of a long text, not three; `VIEW_BYTES`)."""
    names = [n for n in columns if n in table.schema.names]
    if not names:
        return [b""] * table.num_rows
    if sum(table.column(n).nbytes for n in names) <= VIEW_BYTES:
        columns = [table.column(n).to_pylist() for n in names]
        return [_joined(values).encode("utf-8", "surrogatepass") for values in zip(*columns, strict=True)]
    pieces = [list(_label_pieces(table.column(n))) for n in names]
    return [b"\x00".join(values) for values in zip(*pieces, strict=True)]


def row_digests(vectors: Sequence[np.ndarray], labels: Sequence[bytes]) -> str:
    """One byte per row (base64): the low byte of a CRC-32 over the row's `labels` and its rows of each
    (rows, ...) array in `vectors`, in their stored bytes."""
    flat = [_little(v).reshape(len(v), -1) for v in vectors]
    digests = bytearray(len(labels))
    for row, label in enumerate(labels):
        crc = zlib.crc32(label)
        for matrix in flat:
            crc = zlib.crc32(matrix[row].data, crc)
        digests[row] = crc & 0xFF
    return base64.b64encode(bytes(digests)).decode("ascii")


def keeps_digests(end: int) -> bool:
    """Whether the batch that ends at row `end` (exclusive) of its store keeps row digests: all of its
    rows within the store's first `ROW_DIGEST_ROWS` (read when called, so a test can lower it)."""
    return end <= ROW_DIGEST_ROWS


def changed_rows(recorded: str | None, vectors: Sequence[np.ndarray], labels: Sequence[bytes]) -> list[int]:
    """The rows (0-based in the batch) whose digest differs from the `recorded` ones; [] where none is
    recorded or none can be told (a changed row keeps its byte 1 time in 256)."""
    try:
        wanted = base64.b64decode(recorded or "", validate=True)
    except ValueError:
        return []
    if len(wanted) != len(labels):
        return []
    found = base64.b64decode(row_digests(vectors, labels))
    return [row for row, (a, b) in enumerate(zip(wanted, found, strict=True)) if a != b]


def changed(
    where: str, rows: list[int], ids: list[str], rebuild: str, *, numbered: bool = True
) -> CorpusError:
    """The one-line error for stored rows that changed after they were written, named with their ids
    ("row 5 of s.npy (id '6') changed after it was written: it does not match its checksum; ..."), or by
    their ids alone where the store has no row numbers (`numbered=False`: an SQLite collection, "the row
    of collection 'default' in s.db (id '6') changed ...")."""
    one = len(rows) == 1
    shown = ", ".join(str(r) for r in rows[:3]) + (f" and {len(rows) - 3} more" if len(rows) > 3 else "")
    after = "it was" if one else "they were"
    said = f"{'it' if one else 'they'} {_SINGULAR[MISMATCH] if one else MISMATCH}"
    named = (
        _by_id(where, ids)
        if not numbered
        else f"{'row' if one else 'rows'} {shown} of {where} (id {_ids(ids)})"
    )
    return CorpusError(f"{named} changed after {after} written: {said}; the file is corrupt; {rebuild}")


def _by_id(where: str, ids: list[str]) -> str:
    """Rows named by their ids alone ("the row of collection 'default' in s.db (id '6')"): an SQLite
    collection has no row numbers (its rowid order is not the order its texts were read in)."""
    one = len(dict.fromkeys(ids)) == 1
    return f"the {'row' if one else 'rows'} of {where} (id {_ids(ids)})"


def _little(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))


def column_values(column: Any) -> np.ndarray:
    """(rows, d) stored values of a fixed-size list column (an Arrow array or chunked array)."""
    if hasattr(column, "combine_chunks"):
        column = column.combine_chunks()
    flat = np.asarray(column.flatten().to_numpy(zero_copy_only=False))
    return flat.reshape(len(column), column.type.list_size)


def vector_names(schema: Any) -> list[str]:
    """The fixed-size list (vector) columns of an Arrow schema."""
    import pyarrow as pa

    return [f.name for f in schema if pa.types.is_fixed_size_list(f.type)]


def covered_columns(schema: Any) -> list[str]:
    """The columns of an Arrow schema that a row group's label checksums and row digests cover, as this
    bertscope writes them: every column but the vectors, in order (`DIGEST_COLUMNS_KEY`)."""
    vectors = set(vector_names(schema))
    return [name for name in schema.names if name not in vectors]


def table_checksums(table: Any) -> dict[str, int]:
    """{column: its checksum} for every column of an Arrow table: its vectors and `covered_columns`."""
    sums = {name: checksum(column_values(table.column(name))) for name in vector_names(table.schema)}
    for name in covered_columns(table.schema):
        sums[name] = column_checksum(name, table.column(name))
    return sums


def non_finite(matrix: np.ndarray) -> np.ndarray:
    """Row numbers of a (rows, ...) array holding a NaN or an infinity."""
    flat = matrix.reshape(len(matrix), -1) if matrix.size else matrix.reshape(len(matrix), 0)
    return np.flatnonzero(~np.isfinite(flat).all(axis=1))


def rebuild_hint(path: str | Path, collection: str | None = None) -> str:
    """How to make a corrupt store again."""
    named = f" --collection {collection}" if collection else ""
    command = f"bertscope embed -i CORPUS -o {path}{named} --overwrite"
    return f"rebuild it with `{command}` and the options it was made with"


class ChecksumMismatch(CorpusError):
    """Stored rows `rows` (first, last: a batch) that do not match their checksum; `verify` names the
    rows of the batch that changed (`changed_rows`)."""

    def __init__(self, message: str, rows: tuple[int, int]) -> None:
        super().__init__(message)
        self.rows = rows


def corrupt(
    where: str, rows: tuple[int, int] | None, problem: str, rebuild: str, *, ids: list[str] | None = None
) -> CorpusError:
    """The one-line error for stored rows that fail their check: which rows of what, and what to do
    (a `ChecksumMismatch` for rows that do not match their checksum).

    `rows` is the first and last row number (0-based, in stored order), or None for one row named by id.
    """
    one = rows is None or rows[0] == rows[1]
    span = "a row" if rows is None else f"row {rows[0]}" if one else f"rows {rows[0]}-{rows[1]}"
    named = f" (id {_ids(ids)})" if ids else ""
    said = _SINGULAR.get(problem, problem) if one else problem
    message = f"{span} of {where}{named} {said}: the file is corrupt; {rebuild}"
    if problem == MISMATCH and rows is not None:
        return ChecksumMismatch(message, rows)
    return CorpusError(message)


def count_differs(where: str, found: int, written: int, rebuild: str) -> CorpusError:
    """The one-line error for a store holding another number of rows than its checksums say were written
    ("s.npy holds 299 rows where 300 were written: rows were removed from it after it was written; ..."),
    as an SQLite collection's recorded count says it."""
    what = "removed from" if found < written else "added to"
    return CorpusError(
        f"{where} holds {found} rows where {written} were written: rows were {what} it after it was "
        f"written; the file is corrupt; {rebuild}"
    )


def _ids(ids: list[str]) -> str:
    ids = list(dict.fromkeys(ids))  # token and word rows repeat their text's id
    shown = ", ".join(repr(i) for i in ids[:3])
    return shown + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")


def refuse_non_finite(path: Path, ids: list[str], matrices: Iterable[np.ndarray], *, done: int) -> None:
    """Refuse a batch to be stored whose vectors hold NaN or infinity (a float16 overflow, a broken model).

    `ids` name each row; `done` is how many texts were stored before this batch (they are kept).
    """
    bad = sorted({int(row) for matrix in matrices for row in non_finite(matrix)})
    if not bad:
        return
    kept = f"the {done} texts stored before it are kept" if done else "nothing was stored"
    named = _ids([ids[r] for r in bad])
    raise CorpusError(
        f"{path}: {len(bad)} vector(s) of this batch are not finite (NaN or infinity; id {named}), "
        f"so the batch was not stored and {kept}; embed with --dtype float32 and --precision float32 "
        "(lower precisions can overflow), or leave those texts out"
    )


def rechunk(
    pieces: Iterable[T],
    size: int,
    length: Callable[[T], int],
    join: Callable[[list[T]], T],
    cut: Callable[[T, int, int], T],
) -> Iterator[T]:
    """Pieces (checked batches) regrouped into chunks of exactly `size` rows (the last may be shorter);
    `join` concatenates pieces and `cut(piece, start, rows)` slices one."""
    held: list[T] = []
    rows = 0
    for piece in pieces:
        held.append(piece)
        rows += length(piece)
        while rows >= size:
            whole = held[0] if len(held) == 1 else join(held)
            yield cut(whole, 0, size)
            rest = cut(whole, size, rows - size)
            held, rows = ([rest] if rows > size else []), rows - size
    if rows:
        yield held[0] if len(held) == 1 else join(held)


def recorded(
    raw: bytes | str | dict[str, Any] | None, where: str, rebuild: str | None = None
) -> dict[str, Any] | None:
    """Checksums as stored (JSON, or its dict), or None for a store written before them."""
    if raw is None:
        return None
    try:
        found = raw if isinstance(raw, dict) else json.loads(raw)
        listed = found.get("row_groups", found.get("batches"))
        whole = isinstance(listed, list) and all(isinstance(g.get("rows"), int) for g in listed)
    except (ValueError, AttributeError):
        whole = False
    if not whole:
        hint = rebuild or rebuild_hint(where)
        raise CorpusError(f"{where}: its checksums cannot be read: the file is corrupt; {hint}")
    if found.get("algorithm") != ALGORITHM:
        raise CorpusError(
            f"{where}: its checksums are {found.get('algorithm')!r}, which this bertscope does not know; "
            "upgrade bertscope to read it"
        )
    if CHECKSUMS_DIGEST_KEY in found and found[CHECKSUMS_DIGEST_KEY] != _block_digest(found):
        hint, broken = rebuild or rebuild_hint(where), _digest_broken(found, listed or [])
        raise CorpusError(
            f"{where}: its checksums do not match their digest: {broken} after it was written; the file is "
            f"corrupt; {hint}"
        )
    return found  # type: ignore[no-any-return]


def _digest_broken(found: Mapping[str, Any], listed: list[Any]) -> str:
    """What broke a store's checksums' digest, as far as they tell it: batches removed or added with their
    entries (the rows the entries count are not the total recorded beside them), else entries changed
    (a value edited, or batches moved with their entries: the digest binds their order too)."""
    if found.get("rows") != sum(int(entry["rows"]) for entry in listed):
        return "batches (row groups) were removed or added with their checksums"
    return "their entries were changed (a value edited, or batches (row groups) moved with their checksums)"


def checksums_block(
    key: str, entries: list[dict[str, Any]], extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A store's checksums as written: each batch's `entries` under `key` ("row_groups", "batches"), their
    total rows, any `extra` keys (a Parquet store's `DIGEST_COLUMNS_KEY`) and the SHA-256 of it all
    (`CHECKSUMS_DIGEST_KEY`), which binds the batch list in order."""
    block = {
        "algorithm": ALGORITHM,
        key: entries,
        "rows": sum(int(e["rows"]) for e in entries),
        **(extra or {}),
    }
    return {**block, CHECKSUMS_DIGEST_KEY: _block_digest(block)}


def _block_digest(block: Mapping[str, Any]) -> str:
    return _json_digest(block, CHECKSUMS_DIGEST_KEY)


def settings_digest(settings: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a store's settings (`SETTINGS_KEY` left out) as JSON with sorted keys: the same
    for the settings as written and as read back, whatever spacing or key order a format keeps."""
    return _json_digest(settings, SETTINGS_KEY)


def _json_digest(mapping: Mapping[str, Any], own_key: str) -> str:
    """SHA-256 (hex) of `mapping` without the key its digest is kept under, as compact JSON with sorted
    keys (read back through JSON first: a tuple written is the list read)."""
    plain = json.loads(json.dumps({k: v for k, v in mapping.items() if k != own_key}))
    text = json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def row_checks(settings: Mapping[str, Any]) -> int:
    """The generation of row checksums a store's settings say its writer kept (`ROW_CHECKS_KEY`; 0 where
    they say none: written before stores said it)."""
    found = settings.get(ROW_CHECKS_KEY)
    return found if isinstance(found, int) and not isinstance(found, bool) else 0


def sealed(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings with their digest under `SETTINGS_KEY`, as a store keeps them."""
    return {**settings, SETTINGS_KEY: settings_digest(settings)}


def unsealed(stored: Mapping[str, Any]) -> tuple[dict[str, Any], bool | None]:
    """(the settings without their digest, whether they match it): None where none is recorded (a store
    written before stores carried one), False where the settings were changed since they were written."""
    settings = {k: v for k, v in stored.items() if k != SETTINGS_KEY}
    if SETTINGS_KEY not in stored:
        return settings, None
    return settings, stored[SETTINGS_KEY] == settings_digest(settings)


def proven_settings(stored: Mapping[str, Any], where: str, rebuild: str) -> dict[str, Any]:
    """The settings a store keeps (`stored`: as read, their digest included), as stored, once proven as
    written: CorpusError in one line where they do not match their digest (edited since: `settings_edited`) or
    where their `ROW_CHECKS_KEY` is not a whole number (malformed, never read as generation 0). Settings
    written before stores sealed them (no digest) read as before. `where` names the store's settings."""
    settings, match = unsealed(stored)
    if match is False:
        raise settings_edited(where, rebuild)
    found = settings.get(ROW_CHECKS_KEY)
    if found is not None and (isinstance(found, bool) or not isinstance(found, int) or found < 0):
        raise CorpusError(
            f"the settings of {where} are malformed: their {ROW_CHECKS_KEY} is {found!r}, not a whole "
            f"number, so they do not say which checksums its rows keep; use the file as bertscope wrote "
            f"it, or {rebuild}"
        )
    return dict(stored)


def settings_edited(where: str, rebuild: str) -> CorpusError:
    """The one-line error for stored settings that do not match their digest (`where`: the store)."""
    return CorpusError(
        f"the settings of {where} do not match their checksum: they were changed after it was written, so "
        "they no longer say how its vectors were made (model, precision, pooling ...); restore the settings "
        f"it was written with, or {rebuild}"
    )
