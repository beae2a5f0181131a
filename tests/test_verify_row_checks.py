"""`verify --store` on stores whose sealed settings say which row checksums their writer kept
(`row_checks`): checksums stripped from such a store are damage (exit 2, naming what was stripped), not
an older store with a note; rows moved with their checksums, and rows deleted or duplicated with their
checksum entries, are found too. Stores sealed before settings said it keep their notes
(tests/test_verify_tamper.py, tests/test_verify_sqlite_tamper.py)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bertscope.io.checksums import (
    CHECKSUMS_DIGEST_KEY,
    PARQUET_KEY,
    PARQUET_ROWS_KEY,
    ROW_CHECKS,
    ROW_CHECKS_KEY,
    SETTINGS_KEY,
    labels_checksum,
    row_checks,
    sealed,
)
from bertscope.io.stores import open_store
from bertscope.io.vector_files import stored_checksums
from bertscope.model import Model
from bertscope.verify.store import sample_rows
from console import run_main
from store_checks import copied_store
from test_verify_damage import npy_in_place
from test_verify_tamper import (
    BATCH,
    TEXTS,
    _one_line_error,
    _rewrite_parquet,
    _settings,
    _verify,
    embed_stores,
)

SEED = 3
(SAMPLED,) = sample_rows(len(TEXTS), 1, seed=SEED).tolist()  # the one row a 1-row sample reads
OUTSIDE = [r for r in range(len(TEXTS)) if r // BATCH != SAMPLED // BATCH]  # rows of the other batches


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> dict[str, Path]:
    return embed_stores(tmp_path_factory.mktemp("row_checks"), bundled, ("s.npy", "s.parquet", "s.db"))


def _sql(store: Path, *statements: tuple[str, tuple[Any, ...]]) -> None:
    with closing(sqlite3.connect(store)) as db, db:
        for statement, values in statements:
            db.execute(statement, values)


@pytest.mark.parametrize("name", ["s.npy", "s.parquet", "s.db"])
def test_every_store_says_which_row_checksums_it_keeps(made: dict[str, Path], name: str) -> None:
    opened = open_store(made[name])
    assert (
        opened.settings_match and row_checks(opened.settings) == ROW_CHECKS == opened.settings[ROW_CHECKS_KEY]
    )
    ran = _verify(made[name], made, "--json")
    assert ran.code == 0 and json.loads(ran.stdout)["notes"] == [], ran


# Label checksums stripped from a store whose settings say they were kept: damaged --------------------


def test_sqlite_labels_checksums_nulled_are_damage(made: dict[str, Path], tmp_path: Path) -> None:
    """The audit's case: every labels_checksum NULLed, then an id outside the sample edited."""
    store = copied_store(made, "s.db", tmp_path)
    row = OUTSIDE[0]
    _sql(
        store,
        ("UPDATE embeddings SET labels_checksum = NULL", ()),
        ("UPDATE embeddings SET id = '999x' WHERE id = ?", (str(row + 1),)),
    )
    line = _one_line_error(_verify(store, made), "collection 'default' in", "s.db")
    assert "checksums of its rows' ids and texts are missing" in line
    assert "NULL in its rows' `labels_checksum` column" in line and "stripped by an edit" in line


def test_npy_labels_checksums_removed_are_damage(made: dict[str, Path], tmp_path: Path) -> None:
    store = copied_store(made, "s.npy", tmp_path)
    _settings(store, lambda s: [b.pop("labels") for b in s["checksums"]["batches"]])
    _one_line_error(_verify(store, made), "s.npy", "checksums do not match their digest")
    _settings(store, lambda s: s["checksums"].pop(CHECKSUMS_DIGEST_KEY))  # stripped too
    ids = store.with_suffix(".ids.txt")
    lines = ids.read_text().splitlines(keepends=True)
    lines[OUTSIDE[0]] = "999x\n"
    ids.write_text("".join(lines))
    line = _one_line_error(_verify(store, made), "s.npy", "stripped by an edit")
    assert 'no "labels" in the batches of the "checksums" in its .settings.json' in line


def test_parquet_labels_checksums_removed_are_damage(made: dict[str, Path], tmp_path: Path) -> None:
    store = copied_store(made, "s.parquet", tmp_path)
    _rewrite_parquet(
        store, lambda t: t, sums=lambda s: [(g.pop("id"), g.pop("text")) for g in s["row_groups"]]
    )
    _one_line_error(_verify(store, made), "s.parquet", "checksums do not match their digest")
    _rewrite_parquet(store, lambda t: t, sums=lambda s: s.pop(CHECKSUMS_DIGEST_KEY))  # stripped too
    line = _one_line_error(_verify(store, made), "s.parquet", "stripped by an edit")
    assert 'no "id" in the row groups of its `bertscope.checksums`' in line


# A vector moved to another row with its checksum: found ----------------------------------------------


def _swap_vectors(store: Path, a: int, b: int) -> None:
    """Rows a and b's vectors swapped: in SQLite with each row's own vector checksum (nothing computed
    again), in a .npy matrix and a Parquet column in place (their checksums are their batches')."""
    if store.suffix == ".db":
        with closing(sqlite3.connect(store)) as db, db:
            select = "SELECT embedding, checksum FROM embeddings WHERE id = ?"
            (va, sa), (vb, sb) = (db.execute(select, (str(r + 1),)).fetchone() for r in (a, b))
            update = "UPDATE embeddings SET embedding = ?, checksum = ? WHERE id = ?"
            db.execute(update, (vb, sb, str(a + 1)))
            db.execute(update, (va, sa, str(b + 1)))
    elif store.suffix == ".npy":
        with npy_in_place(store) as matrix:
            matrix[[a, b]] = matrix[[b, a]]
    else:

        def swapped(table: Any) -> Any:
            order = list(range(table.num_rows))
            order[a], order[b] = b, a
            column = table.column("embedding").take(pa.array(order))
            return table.set_column(table.schema.get_field_index("embedding"), "embedding", column)

        _rewrite_parquet(store, swapped)


@pytest.mark.parametrize("name", ["s.db", "s.npy", "s.parquet"])
def test_a_vector_moved_to_another_row_with_its_checksum_is_found(
    made: dict[str, Path], tmp_path: Path, name: str
) -> None:
    """SQLite checks every row, so rows anywhere outside the sample; a Parquet or .npy batch's checksum
    covers its rows in order, so rows of a batch the sample falls in (not the sampled row itself)."""
    store = copied_store(made, name, tmp_path)
    if name == "s.db":
        a, b = OUTSIDE[0], OUTSIDE[-1]
    else:
        a, b = [r for r in range(SAMPLED // BATCH * BATCH, SAMPLED // BATCH * BATCH + BATCH) if r != SAMPLED][
            :2
        ]
    _swap_vectors(store, a, b)
    line = _one_line_error(_verify(store, made), "the file is corrupt")
    if name == "s.db":  # a collection has no row numbers: its rows are named by their ids alone
        assert f"the rows of collection 'default' in {store} (id '{a + 1}', '{b + 1}') changed" in line
        return
    assert (
        f"rows {a}, {b} of " in line and f"(id '{a + 1}', '{b + 1}') changed after they were written" in line
    )


def test_a_collection_of_an_older_generation_is_read_and_added_to_by_its_own_rule(
    made: dict[str, Path], tmp_path: Path
) -> None:
    """A collection sealed at row checks 1 (labels checksums of id, text and hash alone) verifies, and
    rows added to it keep that rule, so that every row of it is read by one."""
    store = copied_store(made, "s.db", tmp_path)
    with closing(sqlite3.connect(store)) as db, db:
        (raw,) = db.execute("SELECT settings FROM collections").fetchone()
        settings = {k: v for k, v in json.loads(raw).items() if k != SETTINGS_KEY}
        db.execute(
            "UPDATE collections SET settings = ?", (json.dumps(sealed({**settings, ROW_CHECKS_KEY: 1})),)
        )
        for rowid, *labels in db.execute("SELECT rowid, id, text, content_hash FROM embeddings").fetchall():
            db.execute(
                "UPDATE embeddings SET labels_checksum = ? WHERE rowid = ?", (labels_checksum(labels), rowid)
            )
    more = tmp_path / "more.jsonl"
    more.write_text(
        json.dumps({"id": "new", "text": "another sentence about a dog"}) + "\n", encoding="utf-8"
    )
    assert run_main("embed", "-i", str(more), "-o", str(store), "--id-field", "id", "-q").code == 0
    with closing(sqlite3.connect(store)) as db:
        found = db.execute(
            "SELECT id, text, content_hash, labels_checksum FROM embeddings WHERE id = 'new'"
        ).fetchone()
    assert labels_checksum(found[:3]) == found[3]
    assert row_checks(open_store(store).settings) == 1
    ran = _verify(store, made, "--json")
    assert ran.code == 0 and json.loads(ran.stdout)["notes"] == [], ran


# Rows deleted or added with their checksums: found ----------------------------------------------------


def test_every_store_records_its_rows(made: dict[str, Path], tmp_path: Path) -> None:
    for name in ("s.npy", "s.parquet"):
        block = stored_checksums(made[name])
        assert block is not None and block["rows"] == len(TEXTS) and block["rows_recorded"]
    store = copied_store(made, "s.db", tmp_path)
    more = tmp_path / "more.jsonl"  # a job added to it, with a text it holds (its row copied)
    lines = [{"id": "new", "text": "another sentence about a dog"}, {"id": "again", "text": TEXTS[0]}]
    more.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert run_main("embed", "-i", str(more), "-o", str(store), "--id-field", "id", "-q").code == 0
    with closing(sqlite3.connect(store)) as db:
        assert db.execute("SELECT row_count FROM collections").fetchone() == (len(TEXTS) + 2,)
    ran = _verify(store, made, "--json")
    assert ran.code == 0 and json.loads(ran.stdout)["notes"] == [], ran


def test_sqlite_rows_deleted_are_found(made: dict[str, Path], tmp_path: Path) -> None:
    store = copied_store(made, "s.db", tmp_path)
    _sql(store, ("DELETE FROM embeddings WHERE id = ?", (str(OUTSIDE[0] + 1),)))
    line = _one_line_error(_verify(store, made), "collection 'default' in")
    assert f"holds {len(TEXTS) - 1} rows where the bertscope that wrote it stored {len(TEXTS)}" in line
    assert "rows were deleted after they were written" in line
    _sql(store, ("UPDATE collections SET row_count = row_count - 1", ()))  # the count edited too
    _one_line_error(_verify(store, made), "its row count does not match its checksum")
    _sql(store, ("UPDATE collections SET row_count = NULL, row_count_checksum = NULL", ()))  # or stripped
    line = _one_line_error(_verify(store, made), "the record of its rows is missing")
    assert "NULL in its collection's `row_count`" in line and "stripped by an edit" in line


def _parquet_groups(store: Path, edit: Any) -> None:
    """The Parquet store rewritten with its row groups and their checksum entries (and row digests) both
    edited by `edit` (a list of groups in, a list out), nothing computed again."""
    file = pq.ParquetFile(store)
    kept = dict(file.metadata.metadata)
    sums = json.loads(kept[PARQUET_KEY])
    digests = json.loads(kept[PARQUET_ROWS_KEY])
    groups = list(range(file.metadata.num_row_groups))
    order = edit(groups)
    sums["row_groups"] = [sums["row_groups"][g] for g in order]
    digests = [digests[g] for g in order]
    with pq.ParquetWriter(store.with_suffix(".tmp"), file.schema_arrow) as writer:
        for g in order:
            writer.write_table(file.read_row_group(g), row_group_size=BATCH)
        writer.add_key_value_metadata({PARQUET_KEY: json.dumps(sums), PARQUET_ROWS_KEY: json.dumps(digests)})
    store.with_suffix(".tmp").replace(store)


@pytest.mark.parametrize(
    "edit",
    [lambda g: g[:-1], lambda g: [*g, g[0]], lambda g: g[::-1]],
    ids=["dropped", "duplicated", "moved"],
)
def test_parquet_row_groups_dropped_duplicated_or_moved_with_their_checksums_are_found(
    made: dict[str, Path], tmp_path: Path, edit: Any
) -> None:
    store = copied_store(made, "s.parquet", tmp_path)
    _parquet_groups(store, edit)
    line = _one_line_error(_verify(store, made), "s.parquet", "checksums do not match their digest")
    assert "with their checksums" in line


def test_npy_batches_dropped_with_their_checksums_are_found(made: dict[str, Path], tmp_path: Path) -> None:
    store = copied_store(made, "s.npy", tmp_path)
    np.save(store, np.load(store)[:-BATCH])
    ids = store.with_suffix(".ids.txt")
    ids.write_text("".join(ids.read_text().splitlines(keepends=True)[:-BATCH]))
    _settings(store, lambda s: s["checksums"]["batches"].pop())
    _one_line_error(_verify(store, made), "s.npy", "checksums do not match their digest")


def test_a_job_adding_rows_while_verify_counts_them_is_not_damage(
    made: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job commits its rows and their recorded count together (WAL: readers go on meanwhile); the
    reader counts both in one snapshot, so a batch landing between its reads is no 'rows deleted'.
    The batch is committed from the reader's trace hook, just before it reads the recorded count."""
    from bertscope.io import sqlite_store

    store = copied_store(made, "s.db", tmp_path)
    opened = sqlite_store.connect_read
    landed: list[int] = []

    def add_a_row_now(statement: str) -> None:
        if landed or "row_count" not in statement:
            return
        with closing(sqlite3.connect(store)) as writer, writer:  # as a job's batch: rows and count at once
            kept = "collection, content_hash, text, metadata, embedding, n_tokens, truncated, checksum"
            writer.execute(  # a row under a new id (ids are unique in a collection)
                f"INSERT INTO embeddings (id, {kept}, labels_checksum) SELECT id || '+', {kept}, "
                "labels_checksum FROM embeddings ORDER BY rowid LIMIT 1"
            )
            (count,) = writer.execute("SELECT row_count FROM collections").fetchone()
            writer.execute(
                "UPDATE collections SET row_count = ?, row_count_checksum = ?",
                (count + 1, sqlite_store.count_crc("default", count + 1)),
            )
        landed.append(count + 1)

    def traced(path: Any) -> sqlite3.Connection:
        db = opened(path)
        db.set_trace_callback(add_a_row_now)
        return db

    sqlite3.enable_callback_tracebacks(True)  # a hook's error is otherwise swallowed
    monkeypatch.setattr(sqlite_store, "connect_read", traced)
    assert sqlite_store.row_checksums(store, "default") is not None
    assert landed == [len(TEXTS) + 1]  # the batch did land while it read
