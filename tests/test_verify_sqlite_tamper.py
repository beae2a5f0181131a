"""`verify --store` on SQLite collections tampered with through the sqlite3 module, where a small sample
does not look: checksums set to NULL, a vector or a text edited outside the sample, ids swapped. A
sealed collection is damaged without its row checksums (exit 2); one written before checksums, or
before they covered ids and texts (schema 2), verifies with a note; a row that fails its checksums is
named with its id (each row keeps its own)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.errors import CorpusError
from bertscope.io import checksums
from bertscope.io.checksums import ROW_CHECKS_KEY, SETTINGS_KEY
from bertscope.io.sqlite_store import MIGRATIONS, row_checksums
from bertscope.model import Model
from bertscope.verify.store import NO_IDS_CHECKSUM, NO_ROW_CHECKSUMS, sample_rows, verify_store
from console import run_main
from test_verify_tamper import _one_line_error

TEXTS = [f"sentence number {n} about a cat on a mat" for n in range(12)]
SEED = 3
(SAMPLED,) = sample_rows(len(TEXTS), 1, seed=SEED).tolist()  # the one row a 1-row sample reads
OUTSIDE = [r for r in range(1, len(TEXTS)) if r != SAMPLED]  # rows it does not (nor the first)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sqlite_tamper")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    store = folder / "s.db"
    bertscope.embed_corpus(corpus, store, model=bundled, progress=False, batch_size=4)
    return {"corpus": corpus, "s.db": store}


@pytest.fixture
def store(made: dict[str, Path], tmp_path: Path) -> Path:
    copy = tmp_path / "s.db"
    shutil.copyfile(made["s.db"], copy)
    return copy


@contextmanager
def edited(path: Path) -> Iterator[sqlite3.Connection]:
    """The store opened by plain sqlite3, committed and closed after the edit."""
    with closing(sqlite3.connect(path)) as db, db:
        yield db


def _id(row: int) -> str:
    return str(row + 1)  # a text file's ids are its line numbers


def _verify(store: Path, *more: str) -> Any:
    return run_main("verify", "--store", str(store), "--rows", "1", "--seed", str(SEED), *more)


def _ok_with_notes(store: Path) -> list[str]:
    ran = _verify(store, "--json")
    assert ran.code == 0 and json.loads(ran.stdout)["ok"], ran
    return list(json.loads(ran.stdout)["notes"])


def _unseal(db: sqlite3.Connection) -> None:
    """The collection's settings as a bertscope before stores carried their checksum wrote them."""
    settings = json.loads(db.execute("SELECT settings FROM collections").fetchone()[0])
    settings.pop(SETTINGS_KEY)
    db.execute("UPDATE collections SET settings = ?", (json.dumps(settings),))


def _swap_ids(db: sqlite3.Connection, a: int, b: int) -> None:
    db.execute("UPDATE embeddings SET id = 'swap' WHERE id = ?", (_id(a),))
    db.execute("UPDATE embeddings SET id = ? WHERE id = ?", (_id(a), _id(b)))
    db.execute("UPDATE embeddings SET id = ? WHERE id = 'swap'", (_id(b),))


def _to_schema_2(db: sqlite3.Connection) -> None:
    """The store as a bertscope whose row checksums covered vectors only wrote it (no labels column, and
    settings that do not say which row checksums were kept)."""
    db.execute("ALTER TABLE embeddings DROP COLUMN labels_checksum")
    db.execute("ALTER TABLE collections DROP COLUMN row_count")
    db.execute("ALTER TABLE collections DROP COLUMN row_count_checksum")
    db.execute("PRAGMA user_version = 2")
    _unsay_row_checks(db)


def _unsay_row_checks(db: sqlite3.Connection) -> None:
    """The collection's settings sealed as a bertscope before settings said which row checksums its
    writer kept sealed them (no `row_checks`, their digest computed without it)."""
    (raw,) = db.execute("SELECT settings FROM collections").fetchone()
    settings = {k: v for k, v in json.loads(raw).items() if k not in (SETTINGS_KEY, ROW_CHECKS_KEY)}
    db.execute("UPDATE collections SET settings = ?", (json.dumps(checksums.sealed(settings)),))


# Row checksums NULLed in a sealed collection: damaged, never "ok" ------------------------------------


def test_a_sealed_collection_whose_checksums_are_null_is_damaged(store: Path) -> None:
    with edited(store) as db:
        db.execute("UPDATE embeddings SET checksum = NULL, labels_checksum = NULL")
    line = _one_line_error(_verify(store), "collection 'default' in", "s.db", "checksums are missing")
    assert "NULL in its rows' `checksum` column" in line and "copied by another tool" in line
    assert line.endswith(
        f"rebuild it with `bertscope embed -i CORPUS -o {store} --collection default --overwrite` and the "
        "options it was made with"
    )
    with pytest.raises(CorpusError, match="checksums are missing"):
        verify_store(store, rows=1, seed=SEED)


def test_one_row_whose_checksum_is_null_is_damage_too(store: Path) -> None:
    """A vector edited outside the sample, its checksum NULLed to pass as a row stored before checksums."""
    edited_row = OUTSIDE[0]
    with edited(store) as db:
        blob = bytearray(
            db.execute("SELECT embedding FROM embeddings WHERE id = ?", (_id(edited_row),)).fetchone()[0]
        )
        blob[0] ^= 1
        db.execute(
            "UPDATE embeddings SET embedding = ?, checksum = NULL WHERE id = ?",
            (bytes(blob), _id(edited_row)),
        )
    for sealed in (True, False):  # refused whether or not the settings carry a checksum of their own
        if not sealed:
            with edited(store) as db:
                _unseal(db)
        line = _one_line_error(_verify(store), "collection 'default' in", "keep no checksum (NULL)")
        assert f"1 row(s) (id '{_id(edited_row)}')" in line and "stripped by an edit" in line


# Collections written before: they verify as before, with a note ----------------------------------------


def test_a_collection_written_before_checksums_verifies_with_a_note(store: Path) -> None:
    with edited(store) as db:
        db.execute("UPDATE embeddings SET checksum = NULL, labels_checksum = NULL")
        _unseal(db)
    notes = _ok_with_notes(store)
    assert NO_ROW_CHECKSUMS in notes and NO_IDS_CHECKSUM not in notes
    assert "only the sampled rows were checked" in " ".join(_verify(store).stderr.split())


def test_a_collection_written_before_ids_were_covered_verifies_with_a_note(
    made: dict[str, Path], store: Path
) -> None:
    assert _ok_with_notes(made["s.db"]) == []  # a collection written now: nothing left unsaid
    with edited(store) as db:
        _to_schema_2(db)
    assert _ok_with_notes(store) == [NO_IDS_CHECKSUM]
    assert row_checksums(store, "default") == {"labels_checked": False, "rows_recorded": True}
    with closing(sqlite3.connect(store)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2  # read, not migrated


def test_an_old_collection_added_to_keeps_its_note_and_its_new_rows_are_covered(store: Path) -> None:
    """Rows written before the labels checksum come first in rowid order: no sign of an edit."""
    with edited(store) as db:
        _to_schema_2(db)
    more = store.with_name("more.jsonl")
    more.write_text(
        json.dumps({"id": "new", "text": "another sentence about a dog"}) + "\n", encoding="utf-8"
    )
    ran = run_main("embed", "-i", str(more), "-o", str(store), "--id-field", "id", "-q")
    assert ran.code == 0, ran
    with closing(sqlite3.connect(store)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)  # migrated by the writer
        labels = db.execute("SELECT labels_checksum FROM embeddings ORDER BY rowid").fetchall()
    assert [v is None for (v,) in labels] == [True] * len(TEXTS) + [False]
    assert row_checksums(store, "default") == {"labels_checked": False, "rows_recorded": True}
    assert _ok_with_notes(store) == [NO_IDS_CHECKSUM]


# A row that fails its checksums is named with its id ---------------------------------------------------


def test_a_vector_edited_outside_the_sample_is_named_with_its_id(store: Path) -> None:
    edited_row = OUTSIDE[0]
    with edited(store) as db:
        (blob,) = db.execute("SELECT embedding FROM embeddings WHERE id = ?", (_id(edited_row),)).fetchone()
        vector = np.frombuffer(blob, dtype="<f4").copy()
        vector[0] += 1e-3
        db.execute("UPDATE embeddings SET embedding = ? WHERE id = ?", (vector.tobytes(), _id(edited_row)))
    line = _one_line_error(_verify(store), "s.db")
    assert line == (
        f"error: the row of collection 'default' in {store} (id '{_id(edited_row)}') changed after "
        "it was written: it does not match its checksum; the file is corrupt; rebuild it with `bertscope "
        f"embed -i CORPUS -o {store} --collection default --overwrite` and the options it was made with"
    )


def test_ids_swapped_outside_the_sample_name_both_rows(store: Path) -> None:
    a, b = OUTSIDE[1], OUTSIDE[4]  # not next to each other: both named, not the rows between
    with edited(store) as db:
        _swap_ids(db, a, b)
    line = _one_line_error(_verify(store), "the file is corrupt")
    assert (
        f"the rows of collection 'default' in {store} (id '{_id(b)}', '{_id(a)}') changed after they "
        "were written" in line
    )


def test_ids_swapped_with_their_checksums_nulled_are_found_stripped(store: Path) -> None:
    a, b = OUTSIDE[1], OUTSIDE[2]
    with edited(store) as db:
        _swap_ids(db, a, b)
        db.execute("UPDATE embeddings SET labels_checksum = NULL WHERE id IN (?, ?)", (_id(a), _id(b)))
    line = _one_line_error(_verify(store), "keep no checksum (NULL)", "stripped by an edit")
    assert f"2 row(s) (id '{_id(b)}', '{_id(a)}')" in line or f"2 row(s) (id '{_id(a)}', '{_id(b)}')" in line


def test_a_text_edited_outside_the_sample_is_named_and_not_copied(made: dict[str, Path], store: Path) -> None:
    edited_row = OUTSIDE[2]
    with edited(store) as db:
        db.execute("UPDATE embeddings SET text = 'a dog on a log' WHERE id = ?", (_id(edited_row),))
    line = _one_line_error(_verify(store))
    assert f"the row of collection 'default' in {store} (id '{_id(edited_row)}') changed" in line
    # A known text under a new id copies the stored row's vector: not from a row that fails its checksums.
    again = store.with_name("again.jsonl")
    again.write_text(json.dumps({"id": "new", "text": TEXTS[edited_row]}) + "\n", encoding="utf-8")
    ran = run_main("embed", "-i", str(again), "-o", str(store), "--id-field", "id", "-q")
    assert ran.code == 1 and f"(id '{_id(edited_row)}') does not match its checksum" in ran.stderr, ran
