"""The SQLite store's rows checked: their CRC-32s, their blobs, the rows read back in order and counted.

Each row keeps the CRC-32 of its blob (`checksum`, migration 2; rows stored before it have none and are
checked to be finite) and of its labels, its id, text and content hash (`labels_checksum`, migration 3; rows
stored before it have their vectors checked alone), both checked whenever the row is read or copied
(`io.checksums`): a checksum that fails names the row itself, so no row digests are kept. In a collection
whose sealed settings say row checks 2 on, the labels checksum covers the blob's checksum too, so that a
vector moved to another row with its checksum fails there, 4 on the row's n_tokens and truncated, so that an
edit to its counts fails too, and 5 on the collection's name, so that a row moved whole into another
collection fails there (a collection keeps the generation it was made with, so all its rows are read by one
rule, and rows copied into it by content hash are written by it). Rows are stored in rowid order, and a
bertscope writes each column from its migration on, so a row without a checksum after one with it was
stripped, not written so (`row_coverage`, which `sqlite_store.row_checksums` and `verify --store` read too). A
collection of row checks 3 on keeps its row count and the count's CRC-32 (migration 4). A collection whose
checksums were stripped is not read (`refuse_unproven`), as a Parquet or .npy store's are not: proven by SQL
aggregates over its checksum columns before its first row is handed on, no row loaded for it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError
from .checksums import (
    MISMATCH,
    NOT_FINITE,
    checksum,
    corrupt,
    labels_checksum,
    non_finite,
    proven_settings,
    rebuild_hint,
    row_checks,
)
from .parquet_checked import checks_missing, unproven
from .sqlite_schema import connect_read, schema_version

__all__ = [
    "changed_rows", "check_row_count", "content_hash", "count_crc", "from_blob", "iter_vectors", "labels_crc",
    "recorded_count", "refuse_unproven", "row_coverage", "to_blob",
]  # fmt: skip


def _row_checks(db: sqlite3.Connection) -> str:
    """The columns a row is checked by, as selected: its checksum and labels checksum (NULL where the
    store's schema has no such column)."""
    version = schema_version(db)
    return f"{'checksum' if version >= 2 else 'NULL'}, {'labels_checksum' if version >= 3 else 'NULL'}"


def labels_crc(
    item_id: Any,
    text: Any,
    digest: Any,
    vector_sum: Any,
    counts: tuple[Any, Any],
    *,
    generation: int,
    collection: str,
) -> int:
    """The CRC-32 of a row's labels as its collection's generation (`checksums.row_checks`) binds them:
    its id, text (None where not kept) and content hash; row checks 2 on, its blob's checksum
    (`vector_sum`, where it keeps one), so that a vector moved to another row with its checksum fails
    there; 4 on, its counts (n_tokens and truncated); 5 on, the collection's name, so that a row moved
    whole into another collection of the file fails there."""
    values = [item_id, text, digest]
    if generation >= 2 and vector_sum is not None:
        values.append(vector_sum)
    if generation >= 4:
        values.extend(counts)
    if generation >= 5:
        values.append(collection)
    return labels_checksum(values)


def count_crc(collection: str, count: int) -> int:
    """The CRC-32 of a collection's row count, as its `row_count_checksum` keeps it."""
    return labels_checksum([collection, count])


def _stored_settings(db: sqlite3.Connection, collection: str) -> dict[str, Any]:
    """A collection's settings as stored, sealed ({} where it is not listed or they cannot be read: the
    error for that is the settings' own, `sqlite_reader`)."""
    found = db.execute("SELECT settings FROM collections WHERE name = ?", (collection,)).fetchone()
    try:
        settings = json.loads(found[0]) if found else {}
    except (TypeError, ValueError):
        return {}
    return settings if isinstance(settings, dict) else {}


def _generation(db: sqlite3.Connection, collection: str) -> int:
    """The row checks a collection's settings say its rows keep (`checksums.row_checks`; 0 where they say
    none or cannot be read)."""
    return row_checks(_stored_settings(db, collection))


def content_hash(text: str) -> str:
    """A stable hash of a text's content (same text, same hash)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def to_blob(vector: np.ndarray) -> bytes:
    """Little-endian float32 bytes of one vector."""
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    """One vector from its float32 blob."""
    return np.frombuffer(blob, dtype="<f4")


# A collection's rows in rowid order. NOT INDEXED: walk the rowid order; the planner would otherwise pick the
# (collection, hash) index and sort the whole collection for every chunk.
_ROWS = (
    "SELECT rowid, id, text, embedding, {checks}, content_hash, n_tokens, truncated FROM embeddings "
    "NOT INDEXED WHERE collection = ? "
)


def iter_vectors(
    db: sqlite3.Connection, collection: str, chunk: int, *, path: str | Path | None = None
) -> Iterator[tuple[list[str], list[str | None], np.ndarray]]:
    """(ids, texts, vectors) of a collection, `chunk` rows at a time, in rowid order, each row checked
    against its checksums (rows stored before checksums: checked to be finite) before it is handed on;
    a collection whose checksums were stripped is refused before its first row (`refuse_unproven`).

    `path` names the file in errors (default: the connection's main database file).
    """
    path = path if path is not None else db.execute("PRAGMA database_list").fetchone()[2]
    refuse_unproven(db, collection, path)
    width, generation = _width(db, collection, path), _generation(db, collection)
    select = _ROWS.format(checks=_row_checks(db)) + "AND rowid > ? ORDER BY rowid LIMIT ?"
    last, offset = -1, 0
    while True:
        rows = db.execute(select, (collection, last, chunk)).fetchall()
        if not rows:
            return
        last = rows[-1][0]
        _refuse_edited_width(rows, width, collection, path)
        bad = _mismatched(rows, width, generation, collection)
        if bad:
            _refuse(rows, bad, offset, MISMATCH, collection, path)
        vectors = np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").reshape(len(rows), -1)
        unchecked = [i for i, r in enumerate(rows) if r[4] is None]
        bad = [unchecked[i] for i in non_finite(vectors[unchecked])] if unchecked else []
        if bad:
            _refuse(rows, bad, offset, NOT_FINITE, collection, path)
        offset += len(rows)
        yield [r[1] for r in rows], [r[2] for r in rows], vectors


def _width(db: sqlite3.Connection, collection: str, path: str | Path) -> int | None:
    """The bytes of one of the collection's blobs (None where the collection is not listed); CorpusError
    where its recorded dimension is not a whole number above 0 (edited)."""
    found = db.execute("SELECT dimension FROM collections WHERE name = ?", (collection,)).fetchone()
    if not found:
        return None
    if isinstance(found[0], bool) or not isinstance(found[0], int) or found[0] < 1:
        raise CorpusError(
            f"collection {collection!r} in {path} records a dimension of {found[0]!r}, not a whole number "
            f"of dimensions: the store is damaged; {rebuild_hint(path, collection)}"
        )
    return 4 * found[0]


def _refuse_edited_width(rows: list[Any], width: int | None, collection: str, path: str | Path) -> None:
    """CorpusError where a collection's recorded dimension (`width` bytes) fits none of `rows` while
    their blobs are all one width and match their own checksums: the dimension was edited, not the rows
    (each row would otherwise be named as changed)."""
    widths = {len(r[3]) for r in rows}
    if width is None or len(widths) != 1 or width in widths:
        return
    if any(r[4] is not None and checksum(r[3]) != r[4] for r in rows):
        return  # rows changed too: named as changed rows
    found = widths.pop()
    each = f"{found // 4} dimensions" if found % 4 == 0 else f"{found} bytes"
    raise CorpusError(
        f"collection {collection!r} in {path} records a dimension of {width // 4}, which does not match its "
        f"vectors ({each} each, as their checksums say): the dimension was edited after it was written; "
        f"the store is damaged; {rebuild_hint(path, collection)}"
    )


def _mismatched(rows: list[Any], width: int | None, generation: int, collection: str) -> list[int]:
    """The rows (numbers within `rows`, as `_ROWS` selects them) whose blob is not `width` bytes (None:
    the first row's) or that fail a checksum they keep: of their blob, or of their labels as the
    collection's generation binds them (`labels_crc`: id, text and hash, 2 on their blob's checksum, 4 on
    their counts, 5 on the collection)."""
    width = width or len(rows[0][3])
    return [
        i for i, r in enumerate(rows)
        if len(r[3]) != width
        or (r[4] is not None and checksum(r[3]) != r[4])
        or (
            r[5] is not None
            and labels_crc(r[1], r[2], r[6], r[4], r[7:9], generation=generation, collection=collection)
            != r[5]
        )
    ]  # fmt: skip


def _refuse(
    rows: list[Any], bad: list[int], offset: int, problem: str, collection: str, path: str | Path
) -> None:
    """Raise the one-line error for the rows of a chunk (`bad`, numbers within it) that fail their check."""
    where = f"collection {collection!r} in {path}"
    span = (offset + bad[0], offset + bad[-1])
    ids = [rows[i][1] for i in bad]
    raise corrupt(where, span, problem, rebuild_hint(path, collection), ids=ids)


def changed_rows(
    path: str | Path, collection: str, rows: tuple[int, int]
) -> tuple[list[int], list[str]] | None:
    """(row numbers, their ids) of the rows `rows` (first, last: 0-based in rowid order, as a
    `ChecksumMismatch` says them) of a collection that fail their checksums, each named by its own; None
    where none does (the file changed since)."""
    first, last = rows
    db = connect_read(path)
    try:
        width, generation = _width(db, collection, path), _generation(db, collection)
        select = _ROWS.format(checks=_row_checks(db)) + "ORDER BY rowid LIMIT ? OFFSET ?"
        found = db.execute(select, (collection, last - first + 1, first)).fetchall()
    finally:
        db.close()
    bad = _mismatched(found, width, generation, collection) if found else []
    return ([first + i for i in bad], [found[i][1] for i in bad]) if bad else None


def recorded_count(
    db: sqlite3.Connection, collection: str, version: int
) -> tuple[int | None, int | None, int] | None:
    """(row count recorded, its checksum, rows found) of a collection whose settings say row checks 3
    on (the recorded ones None where they were stripped), or None for one made before."""
    if _generation(db, collection) < 3:
        return None
    counted = "SELECT COUNT(*) FROM embeddings WHERE collection = ?"
    if version < 4:
        (found,) = db.execute(counted, (collection,)).fetchone()
        return None, None, int(found)
    found, count, crc = db.execute(  # one statement: the rows and their recorded count read at one time
        f"SELECT ({counted}), row_count, row_count_checksum FROM collections WHERE name = ?",
        (collection, collection),
    ).fetchone()
    return count, crc, int(found)


def check_row_count(
    path: str | Path, collection: str, count: int | None, crc: int | None, found: int
) -> None:
    """CorpusError where a collection holds other rows than its writer counted (rows deleted or added),
    or where its count does not match its checksum; a count stripped is the caller's to say."""
    if count is None:
        return
    where = f"collection {collection!r} in {path}"
    if crc != count_crc(collection, count):
        raise CorpusError(
            f"{where}: its row count does not match its checksum: it was changed after it was written; the "
            f"store is damaged; {rebuild_hint(path, collection)}"
        )
    if count != found:
        raise CorpusError(
            f"{where} holds {found} rows where the bertscope that wrote it stored {count}: rows were "
            f"{'deleted' if found < count else 'added'} after they were written; the store is damaged; "
            f"{rebuild_hint(path, collection)}"
        )


@contextmanager
def _snapshot(db: sqlite3.Connection) -> Iterator[None]:
    """One read transaction for the statements inside (the caller's, where it has one open): a job adding
    rows meanwhile (WAL) commits its rows and their recorded count together, which separate reads would
    see half of."""
    if db.in_transaction:
        yield
        return
    db.execute("BEGIN")
    try:
        yield
    finally:
        db.rollback()  # nothing was written: it only ends the snapshot


# The rows of a collection that keep no checksum (or labels checksum) after a row that keeps it, in rowid
# order (parameters: the collection, the first rowid with a checksum, then with a labels checksum, twice).
# NOT INDEXED, as `_ROWS`: one pass over the table, where the (collection, hash) index would look up each
# row by its rowid (4x slower, measured on 500,000 rows).
_STRIPPED = (
    "FROM embeddings NOT INDEXED WHERE collection = ? AND "
    "((checksum IS NULL AND (rowid > ? OR rowid >= ?)) OR ({labels} IS NULL AND rowid > ?))"
)


def row_coverage(db: sqlite3.Connection, path: str | Path, collection: str) -> dict[str, Any] | None:
    """What a collection's row checksums cover, read on `db` in one snapshot by SQL aggregates (no row
    loaded; `sqlite_store.row_checksums` opens the file for it): None where rows keep none (stored
    before checksums), else {"labels_checked": whether every row's cover its id and text,
    "rows_recorded": whether its row count is kept where its settings say it is}. CorpusError where a row
    keeps no checksum after one that keeps it (rowid order: a bertscope writes each from its migration
    on, so they were stripped, not written so), or where its rows are not the count recorded."""
    with _snapshot(db):
        version = schema_version(db)
        if version < 2:
            return None
        labels = "labels_checksum" if version >= 3 else "NULL"
        bare, summed, unlabelled, labelled = db.execute(
            "SELECT SUM(checksum IS NULL), MIN(CASE WHEN checksum IS NOT NULL THEN rowid END), "
            f"SUM({labels} IS NULL), MIN(CASE WHEN {labels} IS NOT NULL THEN rowid END) "
            "FROM embeddings NOT INDEXED WHERE collection = ?",
            (collection,),
        ).fetchone()
        stripped, shown = 0, []
        if bare or unlabelled:  # a row keeps no checksum: is it after one that keeps its own?
            where, given = _STRIPPED.format(labels=labels), (collection, summed, labelled, labelled)
            (stripped,) = db.execute(f"SELECT COUNT(*) {where}", given).fetchone()
            if stripped:
                found = db.execute(f"SELECT id {where} ORDER BY rowid LIMIT 3", given)
                shown = [row[0] for row in found]
        counted = recorded_count(db, collection, version)
    if stripped:
        named = ", ".join(repr(i) for i in shown) + (f" and {stripped - 3} more" if stripped > 3 else "")
        raise CorpusError(
            f"collection {collection!r} in {path}: {stripped} row(s) (id {named}) keep no checksum (NULL) "
            "though rows stored before them keep theirs, which no bertscope writes: they were stripped by "
            f"an edit, so those rows cannot be proven; use the file as bertscope wrote it, or "
            f"{rebuild_hint(path, collection)}"
        )
    if bare:
        return None
    if counted is not None:
        check_row_count(path, collection, *counted)
    return {"labels_checked": not unlabelled, "rows_recorded": counted is None or counted[0] is not None}


def refuse_unproven(db: sqlite3.Connection, collection: str, path: str | Path) -> None:
    """Refuse, in one line, to read the rows of a collection whose checksums were stripped: rows without
    theirs after rows with them, or less than its sealed settings say its writer kept (`checks_missing`,
    the test Parquet and .npy stores are read by), or whose settings were edited since they were written
    (`proven_settings`); a collection written before checksums reads as before."""
    hint = rebuild_hint(path, collection)
    settings = proven_settings(_stored_settings(db, collection), f"collection {collection!r} in {path}", hint)
    found = row_coverage(db, path, collection)
    missing = checks_missing(settings, found)
    if missing is not None:
        where = f"collection {collection!r} in {path}"
        raise unproven(where, missing, Path(path), hint, how="copied")
