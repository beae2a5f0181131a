"""Audit 6, the rest: an SQLite row's labels checksum binds its collection (row checks 5), so a row moved
whole into another collection of the file fails there, while a collection of an earlier generation reads
and verifies as before (D5); a token .npy store read through `open_store` (R3); a Parquet column that
the checksums or settings say was written, dropped, and a `text` column added to a store written without
texts, are refused, not read (R4); and the wording of three refusals (an edited checksum entry, an
SQLite copy that lost its schema number, a file with no collections)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.io.checksums import (
    PARQUET_KEY,
    ROW_CHECKS_KEY,
    labels_checksum,
    sealed,
    unsealed,
)
from bertscope.io.stores import open_store
from bertscope.model import Model
from console import run_main
from store_checks import refused_line as _refused

TEXTS = [f"sentence {n} about {topic}" for n, topic in enumerate(["rain", "bread", "banks"] * 4, 1)]
SHUFFLED = TEXTS[5:] + TEXTS[:5]


def _sql(store: Path, statement: str, values: tuple[Any, ...] = ()) -> list[Any]:
    with closing(sqlite3.connect(store)) as db, db:
        return db.execute(statement, values).fetchall()


def _read_all(path: Path, collection: str | None = None) -> list[str]:
    return [i for ids, _, _ in open_store(path, collection=collection).chunks(5) for i in ids]


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> Path:
    """One SQLite file with two collections of the same ids: `a` the texts, `b` them shuffled."""
    path = tmp_path_factory.mktemp("two") / "two.db"
    bertscope.embed_corpus(TEXTS, path, model=bundled, progress=False, batch_size=4, collection="a")
    bertscope.embed_corpus(SHUFFLED, path, model=bundled, progress=False, batch_size=4, collection="b")
    return path


def _swap(store: Path, item_id: str) -> None:
    """Row `item_id` of collections a and b swapped whole (three UPDATEs, nothing computed again)."""
    _sql(store, "UPDATE embeddings SET collection = 'x' WHERE collection = 'a' AND id = ?", (item_id,))
    _sql(store, "UPDATE embeddings SET collection = 'a' WHERE collection = 'b' AND id = ?", (item_id,))
    _sql(store, "UPDATE embeddings SET collection = 'b' WHERE collection = 'x' AND id = ?", (item_id,))


# D5: a row's labels checksum binds its collection ---------------------------------------------------------


@pytest.mark.parametrize("collection", ["a", "b"])
def test_a_row_swapped_between_collections_is_refused(two: Path, tmp_path: Path, collection: str) -> None:
    store = tmp_path / "swapped.db"
    shutil.copyfile(two, store)
    _swap(store, "5")
    where = f"collection {collection!r} in {store}"
    _refused(lambda: _read_all(store, collection), where, "(id '5')", "does not match its checksum")
    ran = run_main("verify", "--store", str(store), "-c", collection, "--rows", "12")
    assert ran.code == 2 and "(id '5')" in ran.stderr and "corrupt" in ran.stderr, ran
    ran = run_main("similar", "--id", "5", "--store", str(store), "-c", collection, "-k", "2")
    assert ran.code != 0 and "Traceback" not in ran.stderr and not ran.stdout.strip(), ran


def test_a_row_copied_by_content_hash_gets_its_collections_checksum(tmp_path: Path, bundled: Model) -> None:
    """A text already stored under another id is copied (no forward); the copy's labels checksum binds
    the collection it is stored in, as a row embedded there does, and it reads and verifies."""
    store = tmp_path / "c.db"
    bertscope.embed_corpus(TEXTS[:4], store, model=bundled, progress=False, collection="mine")
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"id": "copy", "text": TEXTS[0]}) + "\n", encoding="utf-8")
    summary = bertscope.embed_corpus(
        more, store, model=bundled, progress=False, collection="mine", id_field="id"
    )
    assert summary.reused == 1
    rows = _sql(
        store,
        "SELECT collection, id, text, content_hash, checksum, n_tokens, truncated, labels_checksum "
        "FROM embeddings",
    )
    assert len(rows) == 5
    for collection, item_id, text, digest, vector_sum, n, cut, labels in rows:
        assert labels == labels_checksum([item_id, text, digest, vector_sum, n, cut, collection])
    assert _read_all(store) == ["1", "2", "3", "4", "copy"]
    ran = run_main("verify", "--store", str(store), "--rows", "5")
    assert ran.code == 0 and ran.stdout.startswith("ok"), ran


def _as_row_checks_4(store: Path, collection: str) -> None:
    """The collection as bertscope wrote it at row checks 4: its settings say 4 (sealed again) and its
    rows' labels checksums bind id, text, content hash, vector checksum and counts, not the collection."""
    ((raw,),) = _sql(store, "SELECT settings FROM collections WHERE name = ?", (collection,))
    settings = {**unsealed(json.loads(raw))[0], ROW_CHECKS_KEY: 4}
    _sql(
        store,
        "UPDATE collections SET settings = ? WHERE name = ?",
        (json.dumps(sealed(settings), sort_keys=True), collection),
    )
    for rowid, *values in _sql(
        store,
        "SELECT rowid, id, text, content_hash, checksum, n_tokens, truncated FROM embeddings "
        "WHERE collection = ?",
        (collection,),
    ):
        _sql(
            store,
            "UPDATE embeddings SET labels_checksum = ? WHERE rowid = ?",
            (labels_checksum(values), rowid),
        )


def test_a_collection_of_row_checks_4_reads_verifies_and_grows_as_before(
    two: Path, tmp_path: Path, bundled: Model
) -> None:
    """A collection keeps the generation it was made with: one written at row checks 4 reads, verifies,
    takes rows (embedded or copied by content) by its own rule, and a swap into it is, as before, not
    found there; a collection made now in the same file binds its rows' collection and finds it."""
    store = tmp_path / "old.db"
    shutil.copyfile(two, store)
    _as_row_checks_4(store, "a")
    assert _read_all(store, "a") == [str(n) for n in range(1, 13)]
    ran = run_main("verify", "--store", str(store), "-c", "a", "--rows", "12")
    assert ran.code == 0 and ran.stdout.startswith("ok"), ran
    more = tmp_path / "more.jsonl"
    more.write_text(
        json.dumps({"id": "new", "text": "a text never stored"}) + "\n"
        + json.dumps({"id": "copy", "text": TEXTS[0]}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    summary = bertscope.embed_corpus(
        more, store, model=bundled, progress=False, collection="a", id_field="id"
    )
    assert summary.reused == 1
    for values in _sql(
        store,
        "SELECT id, text, content_hash, checksum, n_tokens, truncated, labels_checksum FROM embeddings "
        "WHERE collection = 'a' AND id IN ('new', 'copy')",
    ):
        assert values[-1] == labels_checksum(values[:-1])  # row checks 4: no collection
    ((raw,),) = _sql(store, "SELECT settings FROM collections WHERE name = 'a'")
    assert json.loads(raw)[ROW_CHECKS_KEY] == 4
    assert len(_read_all(store, "a")) == 14
    ran = run_main("verify", "--store", str(store), "-c", "a", "--rows", "14")
    assert ran.code == 0 and ran.stdout.startswith("ok"), ran
    # b, a collection of this bertscope's generation, finds the row moved into it
    _swap(store, "5")
    _refused(lambda: _read_all(store, "b"), "collection 'b'", "(id '5')")


# R3: a token .npy store read through open_store ----------------------------------------------------------


def test_a_token_npy_store_reads_through_open_store(tmp_path: Path, bundled: Model) -> None:
    """`open_store` on a token .npy store (ids and texts in its .rows.jsonl) reads its rows, by chunk,
    by number and by id, as the Parquet token store of the same texts gives them."""
    texts = TEXTS[:3]
    npy, parquet = tmp_path / "tok.npy", tmp_path / "tok.parquet"
    for path in (npy, parquet):
        bertscope.embed_corpus(texts, path, model=bundled, progress=False, level="tokens", batch_size=2)
    assert not npy.with_suffix(".ids.txt").exists()
    wanted = [
        (i, t, v)
        for ids, ts, vs in open_store(parquet).chunks(7)
        for i, t, v in zip(ids, ts, vs, strict=True)
    ]
    found = [
        (i, t, v) for ids, ts, vs in open_store(npy).chunks(7) for i, t, v in zip(ids, ts, vs, strict=True)
    ]
    assert [(i, t) for i, t, _ in found] == [(i, t) for i, t, _ in wanted]
    assert found[0][1] == texts[0] and found[1][1] is None
    np.testing.assert_allclose(np.stack([v for *_, v in found]), np.stack([v for *_, v in wanted]), atol=1e-5)
    rows = np.array([4, 0, len(found) - 1])
    ids, got_texts, vectors = open_store(npy).take(rows)
    assert ids == [found[r][0] for r in rows] and got_texts == [found[r][1] for r in rows]
    np.testing.assert_array_equal(vectors, np.stack([found[r][2] for r in rows]))
    np.testing.assert_array_equal(open_store(npy).vector_of("2"), found[[i for i, *_ in found].index("2")][2])


# R4: columns the checksums or settings say were written, and columns they say were not -----------------


@pytest.fixture(scope="module")
def parquets(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("r4")
    made = {"text": folder / "text.parquet", "none": folder / "none.parquet"}
    bertscope.embed_corpus(TEXTS, made["text"], model=bundled, progress=False, batch_size=4)
    bertscope.embed_corpus(TEXTS, made["none"], model=bundled, progress=False, batch_size=4, keep_text=False)
    return made


def _rewrite(source: Path, to: Path, edit: Callable[[Any], Any]) -> Path:
    """The Parquet store rewritten row group by row group with `edit` applied to each, its settings,
    checksums and row digests kept as they are."""
    file = pq.ParquetFile(source)
    groups = [edit(file.read_row_group(g)) for g in range(file.metadata.num_row_groups)]
    schema = groups[0].schema.with_metadata(file.schema_arrow.metadata)
    kept = {k: v for k, v in file.metadata.metadata.items() if k.startswith(b"bertscope.")}
    with pq.ParquetWriter(to, schema) as writer:
        for group in groups:
            writer.write_table(group.cast(schema), row_group_size=group.num_rows)
        writer.add_key_value_metadata(kept)
    return to


def _verify_refuses(store: Path, *named: str) -> None:
    ran = run_main("verify", "--store", str(store), "--rows", "12")
    assert ran.code == 2 and "Traceback" not in ran.stderr, ran
    assert len(ran.stderr.strip().splitlines()) == 1, ran
    for name in named:
        assert name in ran.stderr, (name, ran.stderr)


@pytest.mark.parametrize("dropped", [("text",), ("n_tokens", "truncated"), ("n_tokens",)])
def test_a_column_written_and_dropped_is_refused(
    parquets: dict[str, Path], tmp_path: Path, dropped: tuple[str, ...]
) -> None:
    store = _rewrite(parquets["text"], tmp_path / "dropped.parquet", lambda t: t.drop_columns(list(dropped)))
    named = [f"`{c}`" for c in dropped]
    _refused(lambda: _read_all(store), str(store), *named, "dropped")
    _refused(lambda: open_store(store).take(np.array([3])), *named)
    _verify_refuses(store, *named)
    ran = run_main("similar", "--id", "2", "--store", str(store), "-k", "2")
    assert ran.code != 0 and "Traceback" not in ran.stderr and not ran.stdout.strip(), ran


def test_a_text_column_added_to_a_store_without_texts_is_refused(
    parquets: dict[str, Path], tmp_path: Path
) -> None:
    def inject(table: Any) -> Any:
        return table.append_column("text", pa.array([f"INJECTED {n}" for n in range(table.num_rows)]))

    store = _rewrite(parquets["none"], tmp_path / "injected.parquet", inject)
    _refused(lambda: _read_all(store), str(store), "`text`", "without")
    _verify_refuses(store, "`text`")  # damage (2), not DRIFT (1)
    ran = run_main("similar", "--id", "10", "--store", str(store), "-k", "2")
    assert ran.code != 0 and "INJECTED" not in ran.stdout, ran


# Wording --------------------------------------------------------------------------------------------------


def test_an_edited_checksum_entry_is_said_changed(
    parquets: dict[str, Path], tmp_path: Path, bundled: Model
) -> None:
    npy = tmp_path / "s.npy"
    bertscope.embed_corpus(TEXTS, npy, model=bundled, progress=False, batch_size=4)
    settings_file = npy.with_suffix(".settings.json")
    original = settings_file.read_text()
    settings = json.loads(original)
    settings["checksums"]["batches"][0]["labels"] += 1
    settings_file.write_text(json.dumps(settings))
    line = _refused(lambda: _read_all(npy), str(npy), "changed")
    assert "removed, added or moved" not in line, line
    # a batch removed with its entry (the total kept) is said so
    settings = json.loads(original)
    settings["checksums"]["batches"].pop()
    settings_file.write_text(json.dumps(settings))
    np.save(npy, np.load(npy)[:8])
    ids = npy.with_suffix(".ids.txt")
    ids.write_text("".join(line + "\n" for line in ids.read_text().splitlines()[:8]))
    line = _refused(lambda: _read_all(npy), "removed")
    # a Parquet row group's entry edited
    store = tmp_path / "e.parquet"
    shutil.copyfile(parquets["text"], store)
    file = pq.ParquetFile(store)
    sums = json.loads(file.metadata.metadata[PARQUET_KEY])
    sums["row_groups"][0]["embedding"] = "x"
    table = pq.read_table(store)
    with pq.ParquetWriter(store.with_suffix(".tmp"), table.schema) as writer:
        for g in range(file.metadata.num_row_groups):
            group = file.read_row_group(g)
            writer.write_table(group, row_group_size=group.num_rows)
        writer.add_key_value_metadata({PARQUET_KEY: json.dumps(sums)})
    store.with_suffix(".tmp").replace(store)
    line = _refused(lambda: _read_all(store), str(store), "changed")
    assert "removed, added or moved" not in line, line


def test_an_sqlite_copy_without_its_schema_number_names_it(two: Path, tmp_path: Path) -> None:
    dumped = tmp_path / "dumped.db"
    with closing(sqlite3.connect(two)) as source, closing(sqlite3.connect(dumped)) as copy:
        copy.executescript("\n".join(source.iterdump()))
    assert _sql(dumped, "PRAGMA user_version") == [(0,)]
    line = _refused(lambda: open_store(dumped, collection="a"), str(dumped), "user_version", "schema 4")
    assert "without bertscope's tables" not in line, line
    corpus = tmp_path / "in.txt"
    corpus.write_text("one more text\n", encoding="utf-8")
    ran = run_main("embed", "-i", str(corpus), "-o", str(dumped), "-c", "a")
    assert ran.code != 0 and "schema 4" in ran.stderr, ran


def test_a_file_whose_collections_were_emptied_says_so(two: Path, tmp_path: Path) -> None:
    store = tmp_path / "nocoll.db"
    shutil.copyfile(two, store)
    _sql(store, "DELETE FROM collections")
    line = _refused(lambda: open_store(store), str(store), "no collections")
    assert "None" not in line, line
    ran = run_main("similar", "--id", "1", "--store", str(store), "-k", "2")
    assert ran.code != 0 and "no collections" in ran.stderr and "None" not in ran.stderr, ran


def test_a_store_of_views_opened_with_none_named_says_so_and_one_view_is_read(
    tmp_path: Path, bundled: Model
) -> None:
    """Not the damage line of a dropped `embedding` column: an untouched store of views names them; a
    store of one view reads it, as `with_view` picks it."""
    texts = ["a cat sat", "the stock market fell", "rain again"]
    several = tmp_path / "views.parquet"
    bertscope.embed_corpus(texts, several, model=bundled, views=["a=-1/mean", "b=1/cls"], progress=False)
    store = open_store(several)
    for read in (lambda: next(iter(store.chunks())), lambda: store.take(np.array([0]))):
        line = _refused(read, "holds the views a, b", "view=")
        assert "renamed or dropped" not in line, line
    one = tmp_path / "one.parquet"
    bertscope.embed_corpus(texts, one, model=bundled, views=["a=-1/mean"], progress=False)
    ids, _, vectors = next(iter(open_store(one).chunks()))
    expected = bundled.embed(texts, layers="-1", pooling="mean", normalize=False).vectors
    assert ids == ["1", "2", "3"]
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
