"""Reading an SQLite collection whose row checksums were stripped (set to NULL by another tool) refuses it
in one line, as reading a Parquet or .npy store whose checksums were stripped does: search (with and
without the index path, which .db stores do not take), `similar --store`, the store's readers and a
resumed job, not only `verify --store`. A collection written before checksums, and an untouched one, read
as before."""

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
from bertscope.io.checksums import SETTINGS_KEY
from bertscope.io.search import search
from bertscope.io.sqlite_reader import SqliteReader
from bertscope.io.sqlite_rows import iter_vectors
from bertscope.io.sqlite_schema import connect_read
from bertscope.io.stores import open_store
from bertscope.model import Model
from console import run_main
from store_checks import refused_line as _refused

TEXTS = ["the cat sat on the mat", "dogs bark loudly", "a bird sings", "rain falls in spring", "stocks fell"]
QUERY = "stocks fell"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> Path:
    store = tmp_path_factory.mktemp("stripped_read") / "s.db"
    bertscope.embed_corpus(TEXTS, store, model=bundled, progress=False, batch_size=2)
    return store


@pytest.fixture
def store(made: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "s.db"
    shutil.copyfile(made, copy)
    return copy


@contextmanager
def edited(path: Path) -> Iterator[sqlite3.Connection]:
    """The store opened by plain sqlite3, committed and closed after the edit."""
    with closing(sqlite3.connect(path)) as db, db:
        yield db


def _strip_and_swap(path: Path, item_id: str = "3") -> None:
    """Row `item_id`'s vector replaced by the last row's, its checksums NULLed to pass as unchecked."""
    with edited(path) as db:
        db.execute(
            "UPDATE embeddings SET checksum = NULL, labels_checksum = NULL, embedding = "
            "(SELECT embedding FROM embeddings WHERE id = ?) WHERE id = ?",
            (str(len(TEXTS)), item_id),
        )


def _read_all(path: Path, collection: str | None = None) -> list[str]:
    return [i for ids, _, _ in open_store(path, collection=collection).chunks(2) for i in ids]


def _ids(hits: list[Any]) -> list[str]:
    return [hit.id for hit in hits]


STRIPPED = ("collection 'default' in", "1 row(s) (id '3')", "keep no checksum (NULL)", "stripped by an edit")


def test_search_of_a_collection_with_a_row_stripped_is_refused(
    made: Path, store: Path, bundled: Model
) -> None:
    clean = search(QUERY, made, top_k=3, model=bundled)
    assert clean[0].id == str(len(TEXTS)) and clean[1].id != "3"  # untouched: the row itself comes first
    _strip_and_swap(store)
    # the default (the index path: a .db keeps none, so every row is read), exact, and by a stored id
    _refused(lambda: search(QUERY, store, top_k=3, model=bundled), *STRIPPED)
    _refused(lambda: search(QUERY, store, top_k=3, model=bundled, exact=True), *STRIPPED)
    _refused(lambda: search(None, store, item_id="1", top_k=3), *STRIPPED)
    assert _ids(search(QUERY, made, top_k=3, model=bundled)) == _ids(clean)  # the original reads as before


def test_the_store_readers_refuse_it(store: Path) -> None:
    before = _read_all(store)
    assert before == [str(n) for n in range(1, len(TEXTS) + 1)]
    _strip_and_swap(store)
    _refused(lambda: _read_all(store), *STRIPPED)
    _refused(lambda: open_store(store).vector_of("1"), *STRIPPED)
    _refused(lambda: list(SqliteReader().chunks(store, "default", "embedding", 100)), *STRIPPED)
    with closing(connect_read(store)) as db:
        _refused(lambda: list(iter_vectors(db, "default", 100)), *STRIPPED)


def test_similar_store_refuses_it_in_one_line(store: Path, bundled_path: Path) -> None:
    _strip_and_swap(store)
    ran = run_main("similar", "--store", str(store), QUERY)
    assert ran.code != 0 and ran.stderr.startswith("error:") and "Traceback" not in ran.stderr, ran
    assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert "keep no checksum (NULL)" in ran.stderr and not ran.stdout.strip()


def test_a_resumed_job_refuses_it(store: Path, bundled: Model) -> None:
    _strip_and_swap(store)
    _refused(
        lambda: bertscope.embed_corpus(TEXTS, store, model=bundled, progress=False, resume=True), *STRIPPED
    )


def test_adding_to_it_refuses_it_rather_than_copy_a_row_nothing_proves(
    store: Path, tmp_path: Path, bundled: Model
) -> None:
    """A text already stored is copied, not embedded again: from a stripped row it would take the edited
    vector under a new id, with checksums of its own."""
    corpus = tmp_path / "more.jsonl"
    corpus.write_text(json.dumps({"id": "new", "text": TEXTS[2]}) + "\n", encoding="utf-8")
    _strip_and_swap(store)
    _refused(
        lambda: bertscope.embed_corpus(corpus, store, model=bundled, progress=False, id_field="id"),
        *STRIPPED,
    )
    assert "new" not in _ids_stored(store)


def _ids_stored(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as db:
        return [row[0] for row in db.execute("SELECT id FROM embeddings")]


@pytest.mark.parametrize(
    ("edit", "missing"),
    [
        ("UPDATE embeddings SET checksum = NULL, labels_checksum = NULL", "its rows' checksums are missing"),
        (  # the first row: no row before it keeps its checksums
            "UPDATE embeddings SET checksum = NULL, labels_checksum = NULL WHERE id = '1'",
            "its rows' checksums are missing",
        ),
        ("UPDATE embeddings SET labels_checksum = NULL", "checksums of its rows' ids and texts are missing"),
        (
            "UPDATE collections SET row_count = NULL, row_count_checksum = NULL",
            "record of its rows is missing",
        ),
        ("PRAGMA user_version = 1", "its rows' checksums are missing"),  # read as a store before checksums
    ],
)
def test_a_sealed_collection_missing_what_its_settings_say_is_refused(
    store: Path, edit: str, missing: str
) -> None:
    with edited(store) as db:
        db.execute(edit)
    line = _refused(lambda: _read_all(store), "collection 'default' in", missing, "stripped by an edit")
    assert f"bertscope embed -i CORPUS -o {store} --collection default --overwrite" in line


def _unseal(db: sqlite3.Connection) -> None:
    """The collection's settings as a bertscope before stores carried their checksum wrote them."""
    settings = json.loads(db.execute("SELECT settings FROM collections").fetchone()[0])
    settings.pop(SETTINGS_KEY)
    db.execute("UPDATE collections SET settings = ?", (json.dumps(settings),))


def test_a_collection_written_before_checksums_reads_as_before(store: Path, made: Path) -> None:
    """Rows that keep no checksum at all (and settings without theirs) read; sealed settings say the
    same rows were stripped."""
    with edited(store) as db:
        db.execute("UPDATE embeddings SET checksum = NULL, labels_checksum = NULL")
    _refused(lambda: _read_all(store), "its rows' checksums are missing")
    with edited(store) as db:
        _unseal(db)
    with closing(connect_read(made)) as db:
        want = np.concatenate([v for _, _, v in iter_vectors(db, "default", 100)])
    with closing(connect_read(store)) as db:
        got = np.concatenate([v for _, _, v in iter_vectors(db, "default", 100)])
    np.testing.assert_array_equal(got, want)
    with edited(store) as db:  # a row stripped after rows that keep theirs is refused, sealed or not
        db.execute("UPDATE embeddings SET checksum = 7 WHERE id = '1'")
    _refused(lambda: _read_all(store), "keep no checksum (NULL)")


def test_one_collection_stripped_leaves_another_readable(tmp_path: Path, bundled: Model) -> None:
    path = tmp_path / "two.db"
    for name in ("a", "b"):
        bertscope.embed_corpus(TEXTS, path, model=bundled, progress=False, collection=name)
    with edited(path) as db:
        db.execute(
            "UPDATE embeddings SET checksum = NULL, labels_checksum = NULL "
            "WHERE collection = 'a' AND id = '4'"
        )
    assert len(_read_all(path, "b")) == len(TEXTS)
    _refused(lambda: _read_all(path, "a"), "collection 'a' in", "1 row(s) (id '4')")
    _refused(lambda: search(None, path, collection="a", item_id="1"), "keep no checksum (NULL)")
