"""The embedded store: SQLite (WAL), several collections per file, float32 blobs, content-hash dedup.

Schema changes are numbered migrations recorded in `PRAGMA user_version`. Each row keeps the CRC-32 of
its blob (`checksum`, migration 2; rows stored before it have none and are checked to be finite) and of
its labels, its id, text and content hash (`labels_checksum`, migration 3; rows stored before it have
their vectors checked alone), both checked whenever the row is read or copied (`io.checksums`): a
checksum that fails names the row itself, so no row digests are kept. In a collection whose sealed
settings say row checks 2 on, the labels checksum covers the blob's checksum too, so that a vector moved
to another row with its checksum fails there (a collection keeps the generation it was made with, so
all its rows are read by one rule). Rows are stored in rowid order, and a bertscope writes each column
from its migration on, so a row without a checksum after one with it was stripped, not written so
(`row_checksums`). A writer opens the file with `connect` (migrated, WAL); a reader with
`connect_read`: read-only, at the file's own schema, never changed by being read.

A store is a file of bertscope's own: a writer refuses another program's database (tables of its own,
or a schema number bertscope did not set) before writing anything, since the schema number and WAL
are properties of the whole file; to keep vectors beside other tables, `ATTACH` the store.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from sqlite3 import connect as _sqlite_connect
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CorpusError
from .checksums import (
    MISMATCH,
    NOT_FINITE,
    ROW_CHECKS,
    ROW_CHECKS_KEY,
    checksum,
    corrupt,
    labels_checksum,
    non_finite,
    rebuild_hint,
    refuse_non_finite,
    row_checks,
    sealed,
    unsealed,
)
from .readers import Record
from .sinks import Sink, npy_parts, settings_diff, settings_differ

if TYPE_CHECKING:
    from .levels import Rows

__all__ = [
    "SqliteSink",
    "changed_rows",
    "connect",
    "connect_read",
    "content_hash",
    "list_collections",
    "row_checksums",
]

MIGRATIONS = (
    """
    CREATE TABLE collections (
        name TEXT PRIMARY KEY,
        model TEXT NOT NULL,
        settings TEXT NOT NULL,
        dimension INTEGER NOT NULL,
        created TEXT NOT NULL
    );
    CREATE TABLE embeddings (
        collection TEXT NOT NULL REFERENCES collections(name) ON DELETE CASCADE,
        id TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        text TEXT,
        metadata TEXT,
        embedding BLOB NOT NULL,
        n_tokens INTEGER,
        truncated INTEGER,
        PRIMARY KEY (collection, id)
    );
    CREATE INDEX embeddings_hash ON embeddings (collection, content_hash);
    """,
    # 2: the CRC-32 of each row's embedding blob (NULL in rows stored before it)
    """
    ALTER TABLE embeddings ADD COLUMN checksum INTEGER;
    """,
    # 3: the CRC-32 of each row's labels: id, text, content hash (NULL in rows stored before it)
    """
    ALTER TABLE embeddings ADD COLUMN labels_checksum INTEGER;
    """,
    # 4: each collection's rows, counted in the transaction that stores them, and the CRC-32 of the count
    # (NULL in collections made before it: only those whose settings say row checks 3 keep them)
    """
    ALTER TABLE collections ADD COLUMN row_count INTEGER;
    ALTER TABLE collections ADD COLUMN row_count_checksum INTEGER;
    """,
)
_TABLES = frozenset({"collections", "embeddings"})  # a store's own; SQLite keeps its own as sqlite_*
_COLUMNS = (
    "collection, id, content_hash, text, metadata, embedding, n_tokens, truncated, checksum, labels_checksum"
)
_INSERT = f"INSERT INTO embeddings ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (and migrate) a bertscope SQLite store in WAL mode; a new or empty file becomes one.

    A database bertscope did not make is refused before anything is written to it (`_refuse_foreign`).
    """
    db = sqlite3.connect(str(path))
    version, tables = _schema(db, path)
    _refuse_foreign(db, path, version, tables)
    _refuse_newer(db, path, version)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA foreign_keys=ON")
    except sqlite3.DatabaseError as exc:
        db.close()
        raise CorpusError(f"{path} is not an SQLite store ({exc}); name a .db file bertscope wrote") from None
    for number, script in enumerate(MIGRATIONS[version:], version + 1):
        try:
            # One transaction with its number (executescript would commit each statement): a job killed
            # mid-migration leaves the schema before it, not tables at a number that does not match them.
            db.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")
        except sqlite3.OperationalError as exc:
            if db.in_transaction:
                db.rollback()
            if "readonly" not in str(exc):
                db.close()
                raise
            break  # a store on read-only media is read at its own schema (a write says it cannot)
    return db


def _schema(db: sqlite3.Connection, path: str | Path) -> tuple[int, set[str]]:
    """The file's schema number and the names of its tables and views (not SQLite's own `sqlite_*`),
    read without writing; CorpusError, the connection closed, when the file is not SQLite."""
    try:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        rows = db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
    except sqlite3.DatabaseError as exc:
        db.close()
        raise CorpusError(f"{path} is not an SQLite store ({exc}); name a .db file bertscope wrote") from None
    return version, {row[0] for row in rows if not row[0].startswith("sqlite_")}


def _refuse_foreign(db: sqlite3.Connection, path: str | Path, version: int, tables: set[str]) -> None:
    """CorpusError, the connection closed, when the file is a database bertscope did not make.

    A writer sets the file's schema number (`PRAGMA user_version`, which an application's database
    often keeps for its own migrations) and its journal mode (WAL persists: other programs then meet
    -wal and -shm files beside it), so it writes only to a new or empty file or to its own store:
    bertscope's two tables at a schema number, or a newer bertscope's (more tables, said by
    `_refuse_newer`).
    """
    if not tables and version == 0:
        return  # new, or empty: nothing of anyone's to keep
    ours = tables == _TABLES and version >= 1
    newer = _TABLES <= tables and version > len(MIGRATIONS)  # a newer bertscope may keep more tables
    if ours or newer:
        return
    others = sorted(tables - _TABLES)
    shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    listed = f"tables {', '.join(sorted(tables))}" if tables else "no tables"
    what = f"tables of its own: {shown}" if others else f"schema number {version}, {listed}"
    db.close()
    raise CorpusError(
        f"{path} is an SQLite database bertscope did not make ({what}); bertscope writes to stores of "
        "its own, as it sets a file's schema number and journal mode (WAL): name a new .db file"
    )


def _refuse_newer(db: sqlite3.Connection, path: str | Path, version: int) -> None:
    """CorpusError, the connection closed, when a newer bertscope wrote the store (a schema it lacks)."""
    if version > len(MIGRATIONS):
        db.close()
        raise CorpusError(f"{path} was written by a newer bertscope (schema {version}); upgrade bertscope")


def connect_read(path: str | Path) -> sqlite3.Connection:
    """Open a bertscope SQLite store to read it: read-only (no table, journal mode or schema number is
    written, nor a missing file made), never migrated; CorpusError when it is not a bertscope store.

    Opened for writing where the file may be written (`mode=rw`: read-only where it may not) with
    `PRAGMA query_only`, so that it writes nothing but is a full connection: the last connection to a WAL
    store to close checkpoints it and removes the -wal and -shm files reading made beside it, which a
    read-only connection cannot do (it left them after every search)."""
    uri = f"{Path(path).resolve().as_uri()}?mode=rw"
    try:
        # bound at import: a reader always opens its own connection by URI
        db = _sqlite_connect(uri, uri=True)
        db.execute("PRAGMA query_only = ON")
    except sqlite3.Error as exc:
        raise CorpusError(f"cannot read {path} ({exc}); name a .db file bertscope wrote") from None
    version, tables = _schema(db, path)
    # tables first: another program's database may keep a schema number of its own, of any size
    if version < 1 or not _TABLES <= tables:
        db.close()
        what = "an empty file" if not tables else "an SQLite file without bertscope's tables"
        raise CorpusError(
            f"{path} is not a bertscope store ({what}); name a .db file `bertscope embed -o` wrote"
        )
    _refuse_newer(db, path, version)
    return db


def _version(db: sqlite3.Connection) -> int:
    """The store's schema number (2: rows keep a checksum of their blob; 3: of their labels too)."""
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def _row_checks(db: sqlite3.Connection) -> str:
    """The columns a row is checked by, as selected: its checksum and labels checksum (NULL where the
    store's schema has no such column)."""
    version = _version(db)
    return f"{'checksum' if version >= 2 else 'NULL'}, {'labels_checksum' if version >= 3 else 'NULL'}"


def _labels(item_id: Any, text: Any, digest: Any, vector_sum: Any = None) -> int:
    """The CRC-32 of a row's labels as stored: its id, text (None where not kept) and content hash, and,
    in a collection of row checks 2 on (`vector_sum`: its blob's checksum), the checksum of its vector, so
    that a vector moved to another row with its checksum fails there."""
    values = [item_id, text, digest] if vector_sum is None else [item_id, text, digest, vector_sum]
    return labels_checksum(values)


def _count_checksum(collection: str, count: int) -> int:
    """The CRC-32 of a collection's row count, as its `row_count_checksum` keeps it."""
    return labels_checksum([collection, count])


def _generation(db: sqlite3.Connection, collection: str) -> int:
    """The row checks a collection's settings say its rows keep (`checksums.row_checks`; 0 where they say
    none or cannot be read: the error for that is the settings' own)."""
    found = db.execute("SELECT settings FROM collections WHERE name = ?", (collection,)).fetchone()
    try:
        settings = json.loads(found[0]) if found else {}
    except (TypeError, ValueError):
        return 0
    return row_checks(settings) if isinstance(settings, dict) else 0


def content_hash(text: str) -> str:
    """A stable hash of a text's content (same text, same hash)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def to_blob(vector: np.ndarray) -> bytes:
    """Little-endian float32 bytes of one vector."""
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    """One vector from its float32 blob."""
    return np.frombuffer(blob, dtype="<f4")


def list_collections(path: str | Path) -> list[dict[str, Any]]:
    """Each collection's name, model, settings, dimension, created time and row count."""
    found = _collections(path)
    for listed in found:  # the settings as they were made; their digest is the store's own business
        listed["settings"] = unsealed(listed["settings"])[0]
    return found


def _collections(path: str | Path) -> list[dict[str, Any]]:
    """`list_collections` with each collection's settings as stored (their digest included)."""
    if not Path(path).is_file():
        raise CorpusError(f"cannot read {path}: no such file")
    db = connect_read(path)
    try:
        rows = db.execute(
            "SELECT c.name, c.model, c.settings, c.dimension, c.created, "
            "(SELECT COUNT(*) FROM embeddings e WHERE e.collection = c.name) "
            "FROM collections c ORDER BY c.name"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise CorpusError(
            f"{path} cannot be read ({exc}): the file is corrupt; {rebuild_hint(path)}"
        ) from None
    finally:
        db.close()
    keys = ("name", "model", "settings", "dimension", "created", "count")
    return [dict(zip(keys, (*r[:2], _settings(r[2], r[0], path), *r[3:]), strict=True)) for r in rows]


def _settings(raw: Any, collection: str, path: str | Path) -> dict[str, Any]:
    """A collection's stored settings: a JSON object, or CorpusError naming the collection."""
    try:
        settings = json.loads(raw)
    except (TypeError, ValueError):
        settings = None
    if not isinstance(settings, dict):
        raise CorpusError(
            f"collection {collection!r} in {path} keeps settings that are not a JSON object: the store is "
            f"damaged; {rebuild_hint(path, collection)}"
        )
    return settings


class SqliteSink(Sink):
    """One collection in an SQLite file; a batch is one transaction; same id and text are not redone."""

    resumes_by_position = False

    def __init__(
        self,
        path: Path,
        *,
        settings: dict[str, Any],
        collection: str,
        overwrite: bool,
        keep_text: bool,
        resume: bool = False,
    ) -> None:
        self.path = path
        self.collection = collection
        self.settings = settings
        self.keep_text = keep_text
        # What the file was before this job made a store of it ("absent" or "empty"; None: a store, or
        # anything else), so that a job that stores nothing leaves it as it was (`abandon`).
        self.before = (
            None if path.exists() and path.stat().st_size else "empty" if path.exists() else "absent"
        )
        self.db = connect(path)
        if _version(self.db) < len(MIGRATIONS):  # left at an older schema: the file could not be migrated
            self.db.close()
            raise CorpusError(f"cannot write {path}: the file is read-only")
        if overwrite:
            with self.db:
                self.db.execute("DELETE FROM embeddings WHERE collection = ?", (collection,))
                self.db.execute("DELETE FROM collections WHERE name = ?", (collection,))
        row = self.db.execute(
            "SELECT model, settings FROM collections WHERE name = ?", (collection,)
        ).fetchone()
        # The row checksums this collection's rows keep (`checksums.ROW_CHECKS_KEY`): a collection goes on
        # with its own generation, so that every row of it is read by one rule.
        self.generation = ROW_CHECKS
        if row is not None:
            stored = unsealed(json.loads(row[1]))[0]
            self.generation = row_checks(stored)
            stored.pop(ROW_CHECKS_KEY, None)
            if settings_differ(stored, settings):
                raise CorpusError(
                    f"collection {collection!r} in {path} was made with other settings "
                    f"({settings_diff(stored, settings)}); "
                    "use another collection= (--collection), the same options, or overwrite=True "
                    "(--overwrite) to replace it"
                )
        self.created = row is not None
        self.done = 0
        self.reused = 0
        self.already = 0
        if resume and self.created:  # go on only from a collection whose rows are whole
            for _ in iter_vectors(self.db, collection, 65536, path=path):
                pass

    def pending(self, records: list[Record]) -> list[Record]:
        """Records not yet stored; an id stored with other text is an error, a known text is copied."""
        if not self.created:
            return records
        todo = []
        copies = []
        for record in records:
            digest = content_hash(record.text)
            row = self.db.execute(
                "SELECT content_hash FROM embeddings WHERE collection = ? AND id = ?",
                (self.collection, record.id),
            ).fetchone()
            if row is not None:
                if row[0] != digest:
                    raise CorpusError(
                        f"id {record.id!r} (line {record.line}) is already in collection {self.collection!r} "
                        "with "
                        "another text; give new ids, or overwrite=True (--overwrite) to rebuild the "
                        "collection"
                    )
                self.done += 1
                self.already += 1
                continue
            known = self.db.execute(
                "SELECT embedding, n_tokens, truncated, checksum, id, text, content_hash, labels_checksum "
                "FROM embeddings "
                "WHERE collection = ? AND content_hash = ?",
                (self.collection, digest),
            ).fetchone()
            if known is not None:
                self._check_copy(known)
                copies.append((record, digest, known))
            else:
                todo.append(record)
        if copies:
            with self.db:
                self.db.executemany(_INSERT, [self._row(r, d, k[0], k[1], k[2]) for r, d, k in copies])
                self._counted(len(copies))
            self.done += len(copies)
            self.reused += len(copies)
        return todo

    def _row(
        self, record: Record, digest: str, blob: bytes, n_tokens: int, truncated: int
    ) -> tuple[Any, ...]:
        meta = json.dumps(record.meta, default=str) if record.meta else None
        text = record.text if self.keep_text else None
        row = (self.collection, record.id, digest, text, meta, blob, int(n_tokens), int(truncated))
        vector_sum = checksum(blob)
        bound = vector_sum if self.generation >= 2 else None
        return (*row, vector_sum, _labels(record.id, text, digest, bound))

    def _check_copy(self, known: tuple[Any, ...]) -> None:
        """Refuse to copy a stored vector (same text, another id) that fails its checksums."""
        blob, stored, labels = known[0], known[3], known[7]
        item_id, text, digest = known[4:7]
        bound = stored if self.generation >= 2 else None
        if (stored is not None and checksum(blob) != stored) or (
            labels is not None and _labels(item_id, text, digest, bound) != labels
        ):
            problem = MISMATCH
        elif stored is None and len(non_finite(from_blob(blob)[None])):
            problem = NOT_FINITE
        else:
            return
        where = f"collection {self.collection!r} in {self.path}"
        raise corrupt(where, None, problem, rebuild_hint(self.path, self.collection), ids=[known[4]])

    def write(self, records: list[Record], rows: Rows) -> None:
        """Insert one batch in one transaction (the collection row comes with the first)."""
        vectors = npy_parts(rows.table)[0].astype(np.float32, copy=False)
        refuse_non_finite(self.path, [r.id for r in records], [vectors], done=self.done)
        n_tokens = rows.table.column("n_tokens").to_numpy()
        truncated = rows.table.column("truncated").to_numpy()
        try:
            with self.db:
                if not self.created:
                    self.db.execute(
                        "INSERT INTO collections (name, model, settings, dimension, created) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (
                            self.collection,
                            str(self.settings.get("model")),
                            json.dumps(
                                sealed({**self.settings, ROW_CHECKS_KEY: self.generation}), sort_keys=True
                            ),
                            int(vectors.shape[1]),
                            datetime.now(timezone.utc).isoformat(timespec="seconds"),
                        ),
                    )
                self.db.executemany(
                    _INSERT,
                    [
                        self._row(r, content_hash(r.text), to_blob(v), n, t)
                        for r, v, n, t in zip(records, vectors, n_tokens, truncated, strict=True)
                    ],
                )
                self._counted(len(records))
        except (sqlite3.OperationalError, sqlite3.IntegrityError) as exc:
            # Two jobs on one collection show as a lock or a clash of keys; anything else is the disk's.
            clash = isinstance(exc, sqlite3.IntegrityError) or "locked" in str(exc)
            advice = (
                "is another job writing it? Run one job per collection at a time, then resume=True (--resume)"
                if clash
                else "the batches written before it are kept; free the disk or lift the limit, then "
                "resume=True (--resume)"
            )
            raise CorpusError(
                f"{self.path}: collection {self.collection!r} could not take this batch ({exc}); {advice}"
            ) from None
        self.created = True
        self.done += len(records)

    def _counted(self, added: int) -> None:
        """Add `added` rows to the collection's count (row checks 3 on), in the transaction storing them."""
        if self.generation < 3:
            return
        (count,) = self.db.execute(
            "SELECT row_count FROM collections WHERE name = ?", (self.collection,)
        ).fetchone()
        count = (count or 0) + added
        self.db.execute(
            "UPDATE collections SET row_count = ?, row_count_checksum = ? WHERE name = ?",
            (count, _count_checksum(self.collection, count), self.collection),
        )

    def finish(self) -> list[Path]:
        """Close the connection (every batch is already committed)."""
        self.db.close()
        return [self.path]

    def abandon(self) -> None:
        """Close the connection (a collection is only created with its first batch); a file this job made
        a store of and left without a collection is removed again (emptied where it was an empty file)."""
        unused = self.before is not None and self.db.execute("SELECT 1 FROM collections").fetchone() is None
        self.db.close()
        # SQLite removes the -wal and -shm files as the last connection closes: where they remain, another
        # job has the file open (a collection of its own on its way), and the file stays.
        shared = any(self.path.with_name(self.path.name + end).exists() for end in ("-wal", "-shm"))
        if not unused or shared:
            return
        if self.before == "empty":
            self.path.write_bytes(b"")
        else:
            self.path.unlink(missing_ok=True)


# A collection's rows in rowid order. NOT INDEXED: walk the rowid order; the planner would otherwise pick the
# (collection, hash) index and sort the whole collection for every chunk.
_ROWS = (
    "SELECT rowid, id, text, embedding, {checks}, content_hash FROM embeddings NOT INDEXED "
    "WHERE collection = ? "
)


def iter_vectors(
    db: sqlite3.Connection, collection: str, chunk: int, *, path: str | Path | None = None
) -> Iterator[tuple[list[str], list[str | None], np.ndarray]]:
    """(ids, texts, vectors) of a collection, `chunk` rows at a time, in rowid order, each row checked
    against its checksums (rows stored before checksums: checked to be finite) before it is handed on.

    `path` names the file in errors (default: the connection's main database file).
    """
    path = path if path is not None else db.execute("PRAGMA database_list").fetchone()[2]
    width, generation = _width(db, collection), _generation(db, collection)
    select = _ROWS.format(checks=_row_checks(db)) + "AND rowid > ? ORDER BY rowid LIMIT ?"
    last, offset = -1, 0
    while True:
        rows = db.execute(select, (collection, last, chunk)).fetchall()
        if not rows:
            return
        last = rows[-1][0]
        bad = _mismatched(rows, width, generation)
        if bad:
            _refuse(rows, bad, offset, MISMATCH, collection, path)
        vectors = np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").reshape(len(rows), -1)
        unchecked = [i for i, r in enumerate(rows) if r[4] is None]
        bad = [unchecked[i] for i in non_finite(vectors[unchecked])] if unchecked else []
        if bad:
            _refuse(rows, bad, offset, NOT_FINITE, collection, path)
        offset += len(rows)
        yield [r[1] for r in rows], [r[2] for r in rows], vectors


def _width(db: sqlite3.Connection, collection: str) -> int | None:
    """The bytes of one of the collection's blobs (None where the collection is not listed)."""
    found = db.execute("SELECT dimension FROM collections WHERE name = ?", (collection,)).fetchone()
    return 4 * int(found[0]) if found else None


def _mismatched(rows: list[Any], width: int | None, generation: int) -> list[int]:
    """The rows (numbers within `rows`, as `_ROWS` selects them) whose blob is not `width` bytes (None:
    the first row's) or that fail a checksum they keep: of their blob, or of their id, text and hash (and,
    in a collection of row checks 2 on, their blob's checksum: `_labels`)."""
    width = width or len(rows[0][3])
    bound = generation >= 2
    return [
        i for i, r in enumerate(rows)
        if len(r[3]) != width
        or (r[4] is not None and checksum(r[3]) != r[4])
        or (r[5] is not None and _labels(r[1], r[2], r[6], r[4] if bound else None) != r[5])
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
        width, generation = _width(db, collection), _generation(db, collection)
        select = _ROWS.format(checks=_row_checks(db)) + "ORDER BY rowid LIMIT ? OFFSET ?"
        found = db.execute(select, (collection, last - first + 1, first)).fetchall()
    finally:
        db.close()
    bad = _mismatched(found, width, generation) if found else []
    return ([first + i for i in bad], [found[i][1] for i in bad]) if bad else None


def row_checksums(path: str | Path, collection: str) -> dict[str, Any] | None:
    """What a collection's row checksums cover, as `vector_files.stored_checksums` says it of a file:
    None where rows keep none (stored before checksums), else {"labels_checked": whether every row's
    cover its id and text}. CorpusError where a row keeps no checksum after one that keeps it (rowid
    order): a bertscope writes each from its migration on, so they were stripped, not written so."""
    db = connect_read(path)
    try:
        # one snapshot for every count read below: a job adding rows meanwhile (WAL) commits its rows and
        # their recorded count together, which separate reads would see half of
        db.execute("BEGIN")
        version = _version(db)
        if version < 2:
            return None
        labels = "labels_checksum" if version >= 3 else "NULL"
        bare, summed, unlabelled, labelled = db.execute(
            "SELECT SUM(checksum IS NULL), MIN(CASE WHEN checksum IS NOT NULL THEN rowid END), "
            f"SUM({labels} IS NULL), MIN(CASE WHEN {labels} IS NOT NULL THEN rowid END) "
            "FROM embeddings WHERE collection = ?",
            (collection,),
        ).fetchone()
        stripped = [
            row[0]
            for row in db.execute(
                "SELECT id FROM embeddings WHERE collection = ? AND ((checksum IS NULL AND (rowid > ? OR "
                f"rowid >= ?)) OR ({labels} IS NULL AND rowid > ?)) ORDER BY rowid",
                (collection, summed, labelled, labelled),
            )
        ]
        counted = _recorded_count(db, collection, version)
    finally:
        db.close()
    if stripped:
        shown = ", ".join(repr(i) for i in stripped[:3])
        more = f" and {len(stripped) - 3} more" if len(stripped) > 3 else ""
        raise CorpusError(
            f"collection {collection!r} in {path}: {len(stripped)} row(s) (id {shown}{more}) keep no "
            "checksum (NULL) though rows stored before them keep theirs, which no bertscope writes: they "
            "were stripped by an edit, so those rows cannot be proven; use the file as bertscope wrote it, "
            f"or {rebuild_hint(path, collection)}"
        )
    if bare:
        return None
    if counted is not None:
        _check_count(path, collection, *counted)
    return {"labels_checked": not unlabelled, "rows_recorded": counted is None or counted[0] is not None}


def _recorded_count(
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


def _check_count(path: str | Path, collection: str, count: int | None, crc: int | None, found: int) -> None:
    """CorpusError where a collection holds other rows than its writer counted (rows deleted or added),
    or where its count does not match its checksum; a count stripped is the caller's to say."""
    if count is None:
        return
    where = f"collection {collection!r} in {path}"
    if crc != _count_checksum(collection, count):
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


class SqliteReader:
    """An SQLite store read back: one collection's settings and (ids, texts, vectors) in rowid order."""

    def open(self, path: Path, collection: str | None) -> tuple[str | None, dict[str, Any]]:
        """(collection, its settings as stored); the collection may be left out when the file holds
        exactly one."""
        available = {c["name"]: c for c in _collections(path)}
        if collection is None and len(available) == 1:
            collection = next(iter(available))
        if collection is None and len(available) > 1:
            raise CorpusError(
                f"{path} holds {len(available)} collections ({', '.join(available)}): name one with "
                "--collection (collection= in Python)"
            )
        if collection not in available:
            names = ", ".join(available) or "none"
            raise CorpusError(f"{path} has no collection {collection!r}; its collections: {names}")
        return collection, available[collection]["settings"]

    def chunks(
        self, path: Path, collection: str | None, column: str, size: int
    ) -> Iterator[tuple[list[str], list[str | None], np.ndarray]]:
        """(ids, texts, vectors) of the collection, `size` rows at a time."""
        db = connect_read(path)
        try:
            yield from iter_vectors(db, str(collection), size, path=path)
        finally:
            db.close()

    def count(self, path: Path, collection: str | None) -> int:
        """The collection's rows, counted by SQLite (reading them decoded every vector: hundreds of MB)."""
        db = connect_read(path)
        try:
            found = db.execute("SELECT COUNT(*) FROM embeddings WHERE collection = ?", (str(collection),))
            return int(found.fetchone()[0])
        finally:
            db.close()

    def take(
        self, path: Path, rows: np.ndarray, column: str | None
    ) -> tuple[list[str], list[str | None], np.ndarray]:
        """Not offered: rows have no fixed numbers in a collection (the format table says so)."""
        raise CorpusError(f"{path}: an SQLite collection is not read by row number")

    def columns(self, path: Path) -> list[str]:
        """One vector per text, in one column."""
        return ["embedding"]
