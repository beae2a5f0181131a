"""The SQLite store is a file of bertscope's own: another program's database is refused, untouched.

A writer sets the file's schema number and WAL journal mode, both properties of the whole file, so
`-o their.db` naming a database with tables of its own must leave it exactly as it was; a new or
empty file, and bertscope's own stores with several collections, are written as before.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import bertscope
from bertscope.errors import CorpusError
from bertscope.io.formats import open_sink
from bertscope.io.levels import Rows
from bertscope.io.readers import Record
from bertscope.io.sqlite_store import MIGRATIONS, connect_read, list_collections
from bertscope.io.stores import open_store
from console import run_main

DIM = 8
SETTINGS = {"model": "synthetic", "layers": [6], "pooling": "mean"}
FOREIGN = (
    r"^.*their\.db is an SQLite database bertscope did not make \((?P<what>.*)\); .* name a new \.db file$"
)


def batch(n: int, prefix: str = "r") -> tuple[list[Record], Rows]:
    """`n` records and their rows (id, text, embedding, n_tokens, truncated)."""
    records = [Record(f"{prefix}{i}", f"text {prefix}{i}", i + 1) for i in range(n)]
    block = np.random.default_rng(len(prefix)).standard_normal((n, DIM)).astype(np.float32)
    table = pa.table(
        {
            "id": [r.id for r in records],
            "text": [r.text for r in records],
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), DIM),
            "n_tokens": pa.array(np.full(n, 3, np.int32)),
            "truncated": pa.array(np.zeros(n, np.int32)),
        }
    )
    return records, Rows(table, n, 3 * n, 0)


def write(path: Path, collection: str, n: int = 5) -> None:
    sink = open_sink(path, settings=SETTINGS, collection=collection)
    sink.write(*batch(n, prefix=collection))
    sink.finish()


def their_database(path: Path, script: str, *, user_version: int = 0) -> Path:
    """Another program's database: its own tables and rows, the default journal mode (delete)."""
    with sqlite3.connect(path) as db:
        db.executescript(script)
        db.execute(f"PRAGMA user_version = {user_version}")
    db.close()
    return path


def state(path: Path) -> tuple[str, str, int, list[str]]:
    """What must not change: the file's bytes, its journal mode and schema number, the files beside it."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)  # read-only: changes nothing
    mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    db.close()
    return digest, mode, version, sorted(p.name for p in path.parent.iterdir())


NOTES = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('keep me');"


@pytest.mark.parametrize(
    ("script", "user_version", "what"),
    [
        (NOTES, 0, "tables of its own: notes"),
        # an application that counts its own migrations in user_version, as bertscope does
        (NOTES, 2, "tables of its own: notes"),
        # tables of its own under bertscope's names: CREATE TABLE failed with a traceback
        (
            "CREATE TABLE collections (name TEXT); CREATE TABLE embeddings (v BLOB);"
            "INSERT INTO collections VALUES ('mine');",
            0,
            "schema number 0, tables collections, embeddings",
        ),
        ("CREATE VIEW answer AS SELECT 42;", 0, "tables of its own: answer"),
        ("", 5, "schema number 5, no tables"),  # no tables yet, a schema number of its own
    ],
    ids=["own-table", "own-schema-number", "own-tables-under-our-names", "a-view", "only-a-schema-number"],
)
def test_another_programs_database_is_refused_and_left_as_it_was(
    tmp_path: Path, script: str, user_version: int, what: str
) -> None:
    """Writing into it added bertscope's tables and switched the file to WAL for good."""
    path = their_database(tmp_path / "their.db", script, user_version=user_version)
    before = state(path)
    for overwrite in (False, True):  # --overwrite replaces a collection, never someone's database
        with pytest.raises(CorpusError, match=FOREIGN) as refused:
            open_sink(path, settings=SETTINGS, collection="c", overwrite=overwrite)
        assert re.match(FOREIGN, str(refused.value))["what"] == what  # type: ignore[index]
    assert state(path) == before
    assert before[1] == "delete"


def test_the_command_line_refuses_it_in_one_line(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    path = their_database(tmp_path / "their.db", NOTES)
    before = state(path)
    ran = run_main("embed", "a text", "-o", str(path), "--model", str(tiny_dirs["bert"]), "--device", "cpu")
    assert ran.code == 1
    assert ran.stderr.strip() == (
        f"error: {path} is an SQLite database bertscope did not make (tables of its own: notes); "
        "bertscope writes to stores of its own, as it sets a file's schema number and journal mode (WAL): "
        "name a new .db file"
    )
    assert state(path) == before  # no -wal, -shm or lock file left beside it
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT body FROM notes").fetchall() == [("keep me",)]
    db.close()


@pytest.mark.parametrize("start", ["none", "empty file", "empty database"])
def test_new_and_empty_files_become_stores_of_several_collections(tmp_path: Path, start: str) -> None:
    path = tmp_path / "store.db"
    if start == "empty file":
        path.touch()
    elif start == "empty database":  # SQLite's own file, with no table and no schema number
        sqlite3.connect(path).execute("VACUUM").connection.close()
    write(path, "news")
    write(path, "blogs", 3)
    sink = open_sink(path, settings=SETTINGS, collection="news", resume=True)  # opened again: its own store
    assert sink.done == 0 and sink.pending(batch(5, prefix="news")[0]) == []
    sink.finish()
    assert {c["name"]: c["count"] for c in list_collections(path)} == {"blogs": 3, "news": 5}
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # bertscope's files keep WAL
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    db.close()


def test_a_store_given_tables_of_someone_elses_is_read_but_not_written(tmp_path: Path) -> None:
    """A store bertscope wrote into another database before it refused them: read as it is, not grown."""
    path = tmp_path / "their.db"
    write(path, "news")
    with sqlite3.connect(path) as db:
        db.executescript(NOTES)
    db.close()
    assert [c["name"] for c in list_collections(path)] == ["news"]
    assert sum(len(ids) for ids, _, _ in open_store(path).chunks(100)) == 5
    with pytest.raises(CorpusError, match=FOREIGN):
        write(path, "more")


def test_a_newer_bertscope_store_is_named_as_such_and_a_foreign_schema_number_is_not(tmp_path: Path) -> None:
    newer = tmp_path / "newer.db"
    write(newer, "news")
    with sqlite3.connect(newer) as db:  # a later schema may add a table of bertscope's own
        db.executescript(f"CREATE TABLE views (name TEXT); PRAGMA user_version = {len(MIGRATIONS) + 1};")
    db.close()
    for opened in (
        lambda: open_sink(newer, settings=SETTINGS, collection="news"),
        lambda: connect_read(newer),
    ):
        with pytest.raises(
            CorpusError,
            match=rf"written by a newer bertscope \(schema {len(MIGRATIONS) + 1}\); upgrade bertscope",
        ):
            opened()
    theirs = their_database(tmp_path / "their.db", NOTES, user_version=9)
    # not "written by a newer bertscope (schema 9)": the number is the other program's
    with pytest.raises(
        CorpusError, match=r"not a bertscope store \(an SQLite file without bertscope's tables\)"
    ):
        connect_read(theirs)
    with pytest.raises(CorpusError, match=r"not a bertscope store"):
        bertscope.list_collections(theirs)


def test_a_migration_is_one_transaction_with_its_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each statement was committed alone: a job stopped mid-migration left tables at schema number 0,
    a file no later job could open (now refused as another program's database)."""
    from bertscope.io import sqlite_store

    path = tmp_path / "store.db"
    failing = MIGRATIONS[0] + "CREATE TABLE collections (name TEXT);"  # stops after the first tables
    monkeypatch.setattr(sqlite_store, "MIGRATIONS", (failing, *MIGRATIONS[1:]))
    with pytest.raises(sqlite3.OperationalError, match="already exists"):
        open_sink(path, settings=SETTINGS, collection="c")
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 0  # the schema before it: none
    assert db.execute("SELECT name FROM sqlite_master").fetchall() == []
    db.close()
    monkeypatch.undo()
    write(path, "c")  # the next job makes the store whole
    assert [c["count"] for c in list_collections(path)] == [5]


def test_a_file_of_several_collections_asks_which_one(tmp_path: Path, bundled: object) -> None:
    """With no collection named, a file holding two said "has no collection None"; it names them now."""
    source = tmp_path / "t.txt"
    source.write_text("a storm hits the coast\nbread is cheap\n", encoding="utf-8")
    for name in ("news", "other"):
        ran = run_main(
            "embed", "-i", str(source), "-o", str(tmp_path / "s.db"), "--collection", name, "--quiet"
        )
        assert ran.code == 0, ran
    with pytest.raises(
        CorpusError,
        match=r"holds 2 collections \(news, other\): name one with collection='news' \(--collection news\)",
    ):
        open_store(tmp_path / "s.db")
    ran = run_main("similar", "storm", "--in", str(tmp_path / "s.db"))
    assert ran.code != 0 and "name one with --collection" in ran.stderr and "None" not in ran.stderr, ran


def test_collections_shows_a_fingerprint_by_its_id_and_json_keeps_it_whole(
    tmp_path: Path, bundled: object
) -> None:
    """The table printed every file's digest of the model's fingerprint (20 wrapped lines per collection)."""
    source = tmp_path / "t.txt"
    source.write_text("a storm hits the coast\nbread is cheap\n", encoding="utf-8")
    store = tmp_path / "s.db"
    assert run_main("embed", "-i", str(source), "-o", str(store), "--collection", "news", "--quiet").code == 0
    whole = json.loads(run_main("collections", str(store), "--json").stdout)[0]["settings"]["fingerprint"]
    assert isinstance(whole, dict) and whole["files"] and whole["id"]
    shown = run_main("collections", str(store))
    assert shown.code == 0 and f"fingerprint={whole['id']}" in shown.stdout.replace("\n", "")
    assert "model.safetensors" not in shown.stdout and "'files'" not in shown.stdout
