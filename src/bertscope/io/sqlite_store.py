"""The embedded store: SQLite (WAL), several collections per file, float32 blobs, content-hash dedup.

A writer opens the file with `connect` (migrated, WAL) and stores a collection's batches (`SqliteSink`).
The store's schema, its migrations and the reader's connection are in `sqlite_schema.py`; its rows'
checksums, blobs and row counts in `sqlite_rows.py`; its collections read back in `sqlite_reader.py`.
`row_checksums` says what a collection's row checksums cover. `connect` and `row_checksums` stay here
because they read `MIGRATIONS` and `connect_read` by this module's names, which tests replace.

A collection whose first job has not finished says so in its settings (`JOB_KEY`, sealed with them): the
transaction that creates it with the job's first rows sets it, and `SqliteSink.finish` clears it, so that
readers (`stores.open_store`) refuse a collection a failed or killed job left part-written, as they refuse
a Parquet or .npy job's parts, until `--resume` finishes it. Adding to a finished collection sets nothing:
its rows stay searchable while a job adds more (WAL lets readers read beside the writer), and an add that
stops leaves whole rows, the finished ones and those it added, that `--resume` goes on from. A collection
without the key is finished (one written before it was kept is read as before); an older bertscope reads
a marked collection's rows, but its `--resume` finds other settings (the key): finish it with this one.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
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
    non_finite,
    proven_settings,
    rebuild_hint,
    refuse_non_finite,
    row_checks,
    sealed,
    unsealed,
)
from .npy_sink import npy_parts
from .readers import Record
from .sink_base import Sink
from .sink_settings import going_on, settings_diff, settings_differ
from .sqlite_reader import REPLACING, list_collections, replacement_of
from .sqlite_rows import (
    changed_rows,
    content_hash,
    count_crc,
    from_blob,
    iter_vectors,
    labels_crc,
    refuse_unproven,
    row_coverage,
    to_blob,
)
from .sqlite_schema import (
    MIGRATIONS,
    connect_read,
    disk_fault,
    refuse_foreign,
    refuse_newer,
    schema_tables,
    schema_version,
    unopened,
)

if TYPE_CHECKING:
    from .levels import Rows

__all__ = [
    "JOB_KEY",
    "SqliteSink",
    "changed_rows",
    "connect",
    "connect_read",
    "content_hash",
    "list_collections",
    "row_checksums",
]

_COLUMNS = (
    "collection, id, content_hash, text, metadata, embedding, n_tokens, truncated, checksum, labels_checksum"
)
_INSERT = f"INSERT INTO embeddings ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
# The key of a collection's settings that says its job has not finished, and its value: shown as it is by
# `bertscope collections` (and by an older bertscope, to which it is one more setting).
JOB_KEY = "job"
UNFINISHED = "unfinished: run it again with --resume to finish it"


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (and migrate) a bertscope SQLite store in WAL mode; a new or empty file becomes one.

    A database bertscope did not make is refused before anything is written to it (`refuse_foreign`).
    """
    db = sqlite3.connect(str(path))
    version, tables = schema_tables(db, path)
    refuse_foreign(db, path, version, tables)
    refuse_newer(db, path, version)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA foreign_keys=ON")
    except sqlite3.DatabaseError as exc:
        db.close()
        raise unopened(path, exc) from None
    for number, script in enumerate(MIGRATIONS[version:], version + 1):
        try:
            # One transaction with its number (executescript would commit each statement): a job killed
            # mid-migration leaves the schema before it, not tables at a number that does not match them.
            db.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")
        except sqlite3.OperationalError as exc:
            if db.in_transaction:
                db.rollback()
            if disk_fault(exc):
                db.close()
                raise unopened(path, exc) from None
            if "readonly" not in str(exc):
                db.close()
                raise
            break  # a store on read-only media is read at its own schema (a write says it cannot)
    return db


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
        self.name = collection  # the collection this job makes (or adds to); messages name it
        # Where its rows go: the collection itself, or its replacement (`replacement_of`) while an
        # --overwrite job writes one, put in its place by `finish` once whole.
        self.collection = collection
        self.settings = settings
        self.keep_text = keep_text
        # What the file was before this job made a store of it ("absent" or "empty"; None: a store, or
        # anything else), so that a job that stores nothing leaves it as it was (`abandon`).
        self.before = (
            None if path.exists() and path.stat().st_size else "empty" if path.exists() else "absent"
        )
        self.db = connect(path)
        # left at an older schema: the file could not be migrated
        if schema_version(self.db) < len(MIGRATIONS):
            self.db.close()
            raise CorpusError(f"cannot write {path}: the file is read-only")
        self.collection = self._target(collection, overwrite=overwrite, resume=resume)
        row = self.db.execute(
            "SELECT model, settings FROM collections WHERE name = ?", (self.collection,)
        ).fetchone()
        # The row checksums this collection's rows keep (`checksums.ROW_CHECKS_KEY`): a collection goes on
        # with its own generation, so that every row of it is read by one rule.
        self.generation = ROW_CHECKS
        # Whether the collection's settings say its job has not finished (`JOB_KEY`).
        self.marked = False
        if row is not None:
            where, hint = f"collection {collection!r} in {path}", rebuild_hint(path, collection)
            stored = unsealed(proven_settings(json.loads(row[1]), where, hint))[0]
            self.generation = row_checks(stored)
            stored.pop(ROW_CHECKS_KEY, None)
            # a job stopped before it finished: this one goes on with it (and clears the mark)
            self.marked = stored.pop(JOB_KEY, None) is not None
            if settings_differ(stored, settings):
                raise CorpusError(
                    f"collection {collection!r} in {path} was made with other settings "
                    f"({settings_diff(stored, settings)}); "
                    + going_on(
                        stored,
                        settings,
                        "use another collection= (--collection), the same options, or overwrite=True "
                        "(--overwrite) to replace it",
                    )
                )
        if row is not None:  # its rows are copied by content (`pending`): only from rows they prove
            refuse_unproven(self.db, self.collection, path)
        self.created = row is not None
        self.done = 0
        self.reused = 0
        self.already = 0
        if resume and self.created:  # go on only from a collection whose rows are whole
            for _ in iter_vectors(self.db, self.collection, 65536, path=path):
                pass

    def _target(self, collection: str, *, overwrite: bool, resume: bool) -> str:
        """Where the job's rows go: an --overwrite of a collection that exists writes its replacement
        (an unfinished one before it discarded), which --resume goes on with; the collection itself stays
        whole and searchable until `finish` puts the replacement in its place."""
        replacement = replacement_of(collection)
        if collection.startswith(REPLACING):
            self.db.close()
            raise CorpusError(
                f"collection={collection!r}: a name starting with {REPLACING!r} is the one an --overwrite "
                "job writes a replacement under; choose another name"
            )
        listed = "SELECT 1 FROM collections WHERE name = ?"
        if overwrite:
            with self.db:
                self.db.execute("DELETE FROM embeddings WHERE collection = ?", (replacement,))
                self.db.execute("DELETE FROM collections WHERE name = ?", (replacement,))
            return replacement if self.db.execute(listed, (collection,)).fetchone() else collection
        if self.db.execute(listed, (replacement,)).fetchone() is None:
            return collection
        if not resume:
            self.db.close()
            raise CorpusError(
                f"collection {collection!r} in {self.path} has an unfinished replacement (a job started "
                "with overwrite=True (--overwrite) stopped before it finished); pass resume=True (--resume) "
                "to finish it, or overwrite=True (--overwrite) to start again"
            )
        return replacement

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
                        f"id {record.id!r} (line {record.line}) is already in collection {self.name!r} "
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
        counts = (int(n_tokens), int(truncated))
        labels = labels_crc(
            record.id,
            text,
            digest,
            vector_sum,
            counts,
            generation=self.generation,
            collection=self.collection,
        )
        return (*row, vector_sum, labels)

    def _check_copy(self, known: tuple[Any, ...]) -> None:
        """Refuse to copy a stored vector (same text, another id, this collection's row) that fails its
        checksums (its labels as this collection's generation binds them: `labels_crc`)."""
        blob, stored, labels = known[0], known[3], known[7]
        item_id, text, digest = known[4:7]
        wanted = labels_crc(
            item_id, text, digest, stored, known[1:3], generation=self.generation, collection=self.collection
        )
        if (stored is not None and checksum(blob) != stored) or (labels is not None and wanted != labels):
            problem = MISMATCH
        elif stored is None and len(non_finite(from_blob(blob)[None])):
            problem = NOT_FINITE
        else:
            return
        where = f"collection {self.name!r} in {self.path}"
        raise corrupt(where, None, problem, rebuild_hint(self.path, self.name), ids=[known[4]])

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
                                sealed(
                                    {**self.settings, ROW_CHECKS_KEY: self.generation, JOB_KEY: UNFINISHED}
                                ),
                                sort_keys=True,
                            ),
                            int(vectors.shape[1]),
                            datetime.now(timezone.utc).isoformat(timespec="seconds"),
                        ),
                    )
                    self.marked = True
                self.db.executemany(
                    _INSERT,
                    [
                        self._row(r, content_hash(r.text), to_blob(v), n, t)
                        for r, v, n, t in zip(records, vectors, n_tokens, truncated, strict=True)
                    ],
                )
                self._counted(len(records))
        except (sqlite3.OperationalError, sqlite3.IntegrityError) as exc:
            raise self._batch_failed(exc) from None
        self.created = True
        self.done += len(records)

    def _batch_failed(self, exc: sqlite3.OperationalError | sqlite3.IntegrityError) -> CorpusError:
        """The line for a batch the file did not take: two jobs on one collection, a file this user cannot
        write, or the disk."""
        # Two jobs on one collection show as a lock or a clash of keys, a file or folder this user may not
        # write as SQLITE_READONLY*; anything else is the disk's. The collection comes with its first
        # batch: before it, none of this job's is in the file (`abandon`).
        kept = "the batches written before it are kept; " if self.created else "nothing was written to it: "
        again = "resume=True (--resume)" if self.created else "run the same job again"
        if isinstance(exc, sqlite3.IntegrityError) or "locked" in str(exc):
            advice = (
                "is another job writing it? Run one job per collection at a time, then resume=True (--resume)"
            )
        elif getattr(exc, "sqlite_errorname", "").startswith("SQLITE_READONLY"):
            # a file this user may read but not write (chmod 0444, another's), or its folder
            advice = (
                f"{kept}this user cannot write the file, or its folder, where SQLite makes its -wal and -shm "
                f"files: make them writable (chmod u+w), or name another file, then {again}"
            )
        else:
            advice = f"{kept}free the disk or lift the limit, then {again}"
        return CorpusError(
            f"{self.path}: collection {self.name!r} could not take this batch ({exc}); {advice}"
        )

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
            (count, count_crc(self.collection, count), self.collection),
        )

    def _job_mark(self, value: str | None) -> None:
        """Set (or with None, take off) the collection's `JOB_KEY` and seal its settings again; settings
        that no longer match their digest are left as they are, never sealed again as if proven."""
        row = self.db.execute(
            "SELECT settings FROM collections WHERE name = ?", (self.collection,)
        ).fetchone()
        if row is None:
            return
        settings, match = unsealed(json.loads(row[0]))
        if match is False or settings.get(JOB_KEY) == value:
            return
        settings.pop(JOB_KEY, None)
        if value is not None:
            settings[JOB_KEY] = value
        # settings written before stores sealed them stay unsealed: a digest now would prove nothing
        stored = sealed(settings) if match else settings
        self.db.execute(
            "UPDATE collections SET settings = ? WHERE name = ?",
            (json.dumps(stored, sort_keys=True), self.collection),
        )

    def finish(self) -> list[Path]:
        """Say the collection's job finished (its `JOB_KEY` taken off) and close the connection (every
        batch is already committed)."""
        try:
            if self.collection != self.name:
                with self.db:  # one transaction: the old collection goes as its replacement takes its place
                    self._replace()
                    self._job_mark(None)
                self.marked = False
            elif self.marked:
                with self.db:
                    self._job_mark(None)
                self.marked = False
        except sqlite3.Error as exc:
            raise CorpusError(
                f"{self.path}: collection {self.name!r} holds every text ({self.done}), but could not "
                f"be marked finished ({exc}); fix that, then run again with resume=True (--resume)"
            ) from None
        finally:
            self.db.close()
        return [self.path]

    def _replace(self) -> None:
        """Put the replacement an --overwrite job wrote in the collection's place (inside the caller's
        transaction): the old rows go, the new take the collection's name, and the checksums that bind the
        name (each row's labels from row checks 5 on, the row count's) are proven under the replacement's
        name, then bound to the collection's."""
        old, new, generation = self.collection, self.name, self.generation
        failed: list[str] = []

        def rebound(*row: Any) -> Any:
            item_id, text, digest, vector_sum, n_tokens, truncated, labels = row
            counts = (n_tokens, truncated)
            was = labels_crc(item_id, text, digest, vector_sum, counts, generation=generation, collection=old)
            if labels is not None and was != labels:
                failed.append(str(item_id))
                return labels
            return labels_crc(
                item_id, text, digest, vector_sum, counts, generation=generation, collection=new
            )

        self.db.create_function("bertscope_rebound", 7, rebound, deterministic=True)
        (count, count_sum) = self.db.execute(
            "SELECT row_count, row_count_checksum FROM collections WHERE name = ?", (old,)
        ).fetchone()
        where, hint = f"collection {new!r} in {self.path}", rebuild_hint(self.path, new)
        if count_sum is not None and count_sum != count_crc(old, count):
            raise CorpusError(f"the row count of {where}'s replacement does not match its checksum; {hint}")
        self.db.execute("DELETE FROM embeddings WHERE collection = ?", (new,))
        self.db.execute("DELETE FROM collections WHERE name = ?", (new,))
        self.db.execute(
            "INSERT INTO collections "
            "(name, model, settings, dimension, created, row_count, row_count_checksum) "
            "SELECT ?, model, settings, dimension, created, row_count, ? FROM collections WHERE name = ?",
            (new, None if count_sum is None else count_crc(new, count), old),
        )
        self.db.execute(
            "UPDATE embeddings SET collection = ?, labels_checksum = "
            "bertscope_rebound(id, text, content_hash, checksum, n_tokens, truncated, labels_checksum) "
            "WHERE collection = ?",
            (new, old),
        )
        if failed:
            raise corrupt(where, None, MISMATCH, hint, ids=failed[:5])
        self.db.execute("DELETE FROM collections WHERE name = ?", (old,))
        self.collection = new

    def abandon(self) -> None:
        """Close the connection (a collection is only created with its first batch); a file this job made
        a store of and left without a collection is removed again (emptied where it was an empty file)."""
        unused = self.before is not None and self.db.execute("SELECT 1 FROM collections").fetchone() is None
        alone = unused and self._alone()
        self.db.close()
        if not alone:
            return
        # the -wal and -shm a close could not checkpoint away (a full disk leaves hundreds of KiB of them
        # on the disk that is full) go with the file
        for end in ("-wal", "-shm", "-journal"):
            self.path.with_name(self.path.name + end).unlink(missing_ok=True)
        if self.before == "empty":
            self.path.write_bytes(b"")
        else:
            self.path.unlink(missing_ok=True)

    def _alone(self) -> bool:
        """Whether no other connection has the file open (another job, a collection of its own on its way,
        whose file stays): leaving WAL needs every other connection gone, and says SQLITE_BUSY at once
        where one is not; failing otherwise (a full disk, which cannot checkpoint) it was alone."""
        try:
            self.db.execute("PRAGMA busy_timeout = 0")
            mode = self.db.execute("PRAGMA journal_mode = DELETE").fetchone()
        except sqlite3.OperationalError as exc:
            name = getattr(exc, "sqlite_errorname", "")
            return not (name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc))
        # inside a transaction the pragma answers the mode it keeps ('wal') without raising: not proof
        return mode is not None and str(mode[0]).lower() == "delete"


def row_checksums(path: str | Path, collection: str) -> dict[str, Any] | None:
    """What a collection's row checksums cover, as `vector_files.stored_checksums` says it of a file:
    None where rows keep none (stored before checksums), else {"labels_checked": whether every row's
    cover its id and text}. CorpusError where a row keeps no checksum after one that keeps it (rowid
    order): a bertscope writes each from its migration on, so they were stripped, not written so
    (`sqlite_rows.row_coverage`, which reading the rows applies too)."""
    db = connect_read(path)
    try:
        return row_coverage(db, path, collection)
    finally:
        db.close()
