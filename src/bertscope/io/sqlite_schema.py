"""The SQLite store's schema and its reader's connection: numbered migrations, foreign files refused.

Schema changes are numbered migrations recorded in `PRAGMA user_version` (`MIGRATIONS`; `sqlite_store.connect`
runs them). A reader opens the file with `connect_read`: read-only, at the file's own schema, never changed by
being read.

A store is a file of bertscope's own: a writer refuses another program's database (tables of its own,
or a schema number bertscope did not set) before writing anything, since the schema number and WAL
are properties of the whole file; to keep vectors beside other tables, `ATTACH` the store.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from sqlite3 import connect as _sqlite_connect

from ..errors import CorpusError

__all__ = [
    "MIGRATIONS", "connect_read", "disk_fault", "refuse_foreign", "refuse_newer", "schema_tables",
    "schema_version", "unopened",
]  # fmt: skip

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


def schema_tables(db: sqlite3.Connection, path: str | Path, *, writing: bool = True) -> tuple[int, set[str]]:
    """The file's schema number and the names of its tables and views (not SQLite's own `sqlite_*`),
    read without writing; CorpusError, the connection closed, when the file is not SQLite or cannot be
    read (`unopened`: a job `writing` to it is told to resume)."""
    try:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        rows = db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
    except sqlite3.DatabaseError as exc:
        db.close()
        raise unopened(path, exc, writing=writing) from None
    return version, {row[0] for row in rows if not row[0].startswith("sqlite_")}


# SQLite's codes for a file that is no database, or a broken one: anything else met opening a store (a full
# disk, an I/O error, a lock) is the machine's, not the file's
_NOT_A_STORE = frozenset({"SQLITE_NOTADB", "SQLITE_CORRUPT"})


def disk_fault(exc: sqlite3.Error) -> bool:
    """Whether SQLite failed for want of disk (SQLITE_FULL) or on an I/O error, not for the file's sake."""
    name = getattr(exc, "sqlite_errorname", "")
    return bool(name.startswith(("SQLITE_FULL", "SQLITE_IOERR")) or (not name and "disk" in str(exc)))


def unopened(path: str | Path, exc: sqlite3.DatabaseError, *, writing: bool = True) -> CorpusError:
    """The one line for a store that could not be opened: a file that is not SQLite, or (a full disk, an
    I/O error) what stopped it, with the fix a failed batch gives where a job was `writing` to it."""
    name = getattr(exc, "sqlite_errorname", "")
    if name == "SQLITE_CORRUPT":  # an SQLite file whose pages are broken (cut short, overwritten)
        return CorpusError(f"{path} is damaged ({exc}): rebuild the store from its corpus, or restore a copy")
    if not isinstance(exc, sqlite3.OperationalError) or name in _NOT_A_STORE:
        return CorpusError(f"{path} is not an SQLite store ({exc}); name a .db file bertscope wrote")
    written = "; nothing was written to it" if writing else ""
    if disk_fault(exc):
        # nothing of this run is in it: the same call again, whether it was starting or resuming
        fix = f"free the disk or lift the limit, then run the same {'job' if writing else 'command'} again"
    elif name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        fix = "is another program writing it? Close it, then run again"
    elif name.startswith("SQLITE_READONLY") and not writing:  # a -wal or -shm file it may not write
        fix = (
            "a WAL store's reader writes its -wal and -shm files beside it: read it as their owner, or copy "
            "the store to a folder you can write, then run again"
        )
    else:  # permissions, a folder or file SQLite cannot open
        fix = "check the file and its folder, then run again"
    return CorpusError(f"{path}: could not open the store ({exc}){written}: {fix}")


def refuse_foreign(db: sqlite3.Connection, path: str | Path, version: int, tables: set[str]) -> None:
    """CorpusError, the connection closed, when the file is a database bertscope did not make.

    A writer sets the file's schema number (`PRAGMA user_version`, which an application's database
    often keeps for its own migrations) and its journal mode (WAL persists: other programs then meet
    -wal and -shm files beside it), so it writes only to a new or empty file or to its own store:
    bertscope's two tables at a schema number, or a newer bertscope's (more tables, said by
    `refuse_newer`).
    """
    if not tables and version == 0:
        return  # new, or empty: nothing of anyone's to keep
    ours = tables == _TABLES and version >= 1
    newer = _TABLES <= tables and version > len(MIGRATIONS)  # a newer bertscope may keep more tables
    if ours or newer:
        return
    lost = _lost_schema(db, path, version, tables)
    if lost:
        db.close()
        raise CorpusError(lost)
    others = sorted(tables - _TABLES)
    shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    listed = f"tables {', '.join(sorted(tables))}" if tables else "no tables"
    what = f"tables of its own: {shown}" if others else f"schema number {version}, {listed}"
    db.close()
    raise CorpusError(
        f"{path} is an SQLite database bertscope did not make ({what}); bertscope writes to stores of "
        "its own, as it sets a file's schema number and journal mode (WAL): name a new .db file"
    )


# The columns of the first migration's tables, and the column each migration after it adds
# (`MIGRATIONS`): (table, column), in order.
_FIRST = {
    "collections": {"name", "model", "settings", "dimension", "created"},
    "embeddings": {
        "collection",
        "id",
        "content_hash",
        "text",
        "metadata",
        "embedding",
        "n_tokens",
        "truncated",
    },
}
_ADDED = (("embeddings", "checksum"), ("embeddings", "labels_checksum"), ("collections", "row_count"))


def _lost_schema(db: sqlite3.Connection, path: str | Path, version: int, tables: set[str]) -> str | None:
    """The refusal of a store whose tables are bertscope's but whose schema number is gone (0: a copy
    made with `.dump` or `iterdump`, which keeps tables and rows, not `PRAGMA user_version`), naming
    the number its tables are at (the columns `MIGRATIONS` added); None for any other file."""
    if version != 0 or tables != _TABLES:
        return None
    columns = {t: {row[1] for row in db.execute(f"PRAGMA table_info({t})")} for t in sorted(_TABLES)}
    if any(not wanted <= columns[table] for table, wanted in _FIRST.items()):
        return None  # tables of another program's under bertscope's names
    number = 1
    for table, column in _ADDED:
        if column not in columns[table]:
            break
        number += 1
    return (
        f"{path} holds bertscope's tables at schema {number} but its schema number (PRAGMA user_version) "
        f"is 0: it was copied by a tool that does not keep it (`.dump`, iterdump); set it back with "
        f"`sqlite3 {path} 'PRAGMA user_version = {number}'`, or name the store bertscope wrote"
    )


def refuse_newer(db: sqlite3.Connection, path: str | Path, version: int) -> None:
    """CorpusError, the connection closed, when a newer bertscope wrote the store (a schema it lacks)."""
    if version > len(MIGRATIONS):
        db.close()
        raise CorpusError(f"{path} was written by a newer bertscope (schema {version}); upgrade bertscope")


def connect_read(path: str | Path) -> sqlite3.Connection:
    """Open a bertscope SQLite store to read it: read-only (no table, journal mode or schema number is
    written, nor a missing file made), never migrated; CorpusError when it is not a bertscope store.

    Opened for writing where the file may be written (`mode=rw`, which SQLite opens read-only where it may
    not) with `PRAGMA query_only`, so that it writes nothing but is a full connection: the last connection
    to a WAL store to close checkpoints it and removes the -wal and -shm files reading made beside it, which
    a read-only connection cannot do (it left them after every search). In a folder that cannot be written
    (read-only media, or a folder this user may not write), where a WAL store cannot have them made, a
    finished store is opened immutable (`_immutable`)."""
    file = Path(path).resolve()
    db = _query_only(file, path, "mode=rw")
    try:
        db.execute("PRAGMA user_version").fetchone()  # the first read: where a WAL store makes its -shm
    except sqlite3.Error as exc:
        # anything else (a damaged file included) is the file's or the machine's: said by `schema_tables`
        # below (`unopened`), which reads the same pragma
        # a folder files cannot be made in (a read-only mount says no even to root)
        if _no_shm(exc) and not os.access(file.parent, os.W_OK):
            db.close()
            db = _immutable(file, path)
    version, tables = schema_tables(db, path, writing=False)
    # tables first: another program's database may keep a schema number of its own, of any size
    if version < 1 or not _TABLES <= tables:
        lost = _lost_schema(db, path, version, tables)
        db.close()
        if lost:
            raise CorpusError(lost)
        what = "an empty file" if not tables else "an SQLite file without bertscope's tables"
        raise CorpusError(
            f"{path} is not a bertscope store ({what}); name a .db file `bertscope embed -o` wrote"
        )
    refuse_newer(db, path, version)
    return db


def _no_shm(exc: sqlite3.Error) -> bool:
    """Whether SQLite's first read failed as it does where a WAL store's -shm file cannot be made: a folder
    the user cannot write says SQLITE_READONLY_DIRECTORY (or another SQLITE_READONLY_*), a read-only mount
    SQLITE_CANTOPEN."""
    name = getattr(exc, "sqlite_errorname", "")
    return name == "SQLITE_CANTOPEN" or name.startswith("SQLITE_READONLY")


def _query_only(file: Path, path: str | Path, mode: str) -> sqlite3.Connection:
    """A query-only connection to the store `file` (named `path`) opened by URI with `mode`; CorpusError
    where SQLite cannot open it."""
    try:
        # bound at import: a reader always opens its own connection by URI
        db = _sqlite_connect(f"{file.as_uri()}?{mode}", uri=True)
        db.execute("PRAGMA query_only = ON")
    except sqlite3.Error as exc:
        raise CorpusError(f"cannot read {path} ({exc}); name a .db file bertscope wrote") from None
    return db


def _immutable(file: Path, path: str | Path) -> sqlite3.Connection:
    """A store in a folder that cannot be written, opened read-only and immutable (`connect_read` could not
    make the -shm file a WAL store's reader needs beside it); CorpusError naming the cause where a -wal file
    beside it holds writes not yet in the store, which an immutable connection would not read.

    Immutable tells SQLite the file cannot change, so it takes no locks and would not see another
    connection's writes: safe where no writer can make the -wal or journal file that any change to the
    store needs in its folder (read-only media); in a folder only another user may write, that user's job
    writing the store meanwhile could be read half-done, a risk taken as this user could read nothing
    otherwise."""
    wal = file.with_name(file.name + "-wal")
    if wal.exists() and wal.stat().st_size:  # an empty -wal (a checkpointed store's) holds no writes
        raise CorpusError(
            f"{path}: could not read the store: its folder cannot be written here, and its -wal file holds "
            "writes not yet in the store, which a reader reads through a -shm file made beside it: copy the "
            "store with its -wal file to a folder you can write, then run again"
        ) from None
    return _query_only(file, path, "mode=ro&immutable=1")


def schema_version(db: sqlite3.Connection) -> int:
    """The store's schema number (2: rows keep a checksum of their blob; 3: of their labels too)."""
    return int(db.execute("PRAGMA user_version").fetchone()[0])
