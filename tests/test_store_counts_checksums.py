"""A stored row's counts (`n_tokens`, `truncated`) are covered by checksums (row checks 4): a Parquet row
group keeps an entry for each count column, an SQLite row's labels checksum binds them, a .npy keeps them
(token rows) in the labels its batches' checksums cover. An edit to them is found on reading and by
`verify --store`; a store written before they were covered is read as before."""

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

import bertscope
from bertscope.errors import CorpusError
from bertscope.io.checksums import (
    PARQUET_KEY,
    ROW_CHECKS_KEY,
    checksums_block,
    labels_checksum,
    sealed,
    unsealed,
)
from bertscope.io.stores import open_store
from bertscope.model import Model
from console import run_main
from store_checks import copied_store
from test_verify_tamper import TEXTS, _one_line_error, _rewrite_parquet, embed_stores

COUNTS = ("n_tokens", "truncated")
EDITED = {"n_tokens": 99, "truncated": 1}  # values no row of TEXTS holds
ROW = 5  # the row edited (the second row group of the Parquet store)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> dict[str, Path]:
    return embed_stores(tmp_path_factory.mktemp("counts"), bundled, ("s.parquet", "s.db"))


def _read_all(store: Path) -> int:
    """Every row of a store read back as bertscope reads it (its checksums checked); the rows read."""
    opened = open_store(store)
    rows = sum(len(ids) for ids, _, _ in opened.chunks(size=5))
    if store.suffix == ".parquet":  # and by number, as a search or a sampled verify reads it
        assert len(opened.take(np.arange(rows))[0]) == rows
    return rows


def _edit_parquet(store: Path, column: str) -> None:
    """Row ROW's `column` set to EDITED[column], the file's settings and checksums kept as they were."""

    def edit(table: Any) -> Any:
        values = table.column(column).to_pylist()
        assert values[ROW] != EDITED[column]
        values[ROW] = EDITED[column]
        return table.set_column(table.schema.get_field_index(column), column, pa.array(values, pa.int32()))

    _rewrite_parquet(store, edit)
    assert pq.read_table(store).column(column).to_pylist()[ROW] == EDITED[column]


def _sql(store: Path, statement: str, values: tuple[Any, ...] = ()) -> list[Any]:
    with closing(sqlite3.connect(store)) as db, db:
        return db.execute(statement, values).fetchall()


def _edit_sqlite(store: Path, column: str) -> None:
    (row_id,) = _sql(store, "SELECT id FROM embeddings ORDER BY rowid LIMIT 1 OFFSET ?", (ROW,))[0]
    _sql(store, f"UPDATE embeddings SET {column} = ? WHERE id = ?", (EDITED[column], row_id))


@pytest.mark.parametrize("column", COUNTS)
@pytest.mark.parametrize("name", ["s.parquet", "s.db"])
def test_an_edited_count_is_found_on_reading_and_by_verify(
    made: dict[str, Path], tmp_path: Path, name: str, column: str
) -> None:
    store = copied_store(made, name, tmp_path)
    (_edit_parquet if name == "s.parquet" else _edit_sqlite)(store, column)
    with pytest.raises(CorpusError, match=r"do(es)? not match (its|their) checksum: the file is corrupt"):
        _read_all(store)
    line = _one_line_error(run_main("verify", "--store", str(store)), str(store), "--overwrite")
    assert "checksum" in line and "corrupt" in line
    if name == "s.db":  # each row keeps its own checksums: the row edited is named by its id
        assert f"the row of collection 'default' in {store} (id '{ROW + 1}')" in line
    else:  # the row group that holds it
        assert "rows 4-7 of" in line


@pytest.mark.parametrize("name", ["s.parquet", "s.db"])
def test_an_unedited_store_covers_its_counts_and_passes(made: dict[str, Path], name: str) -> None:
    store = made[name]
    if name == "s.parquet":
        groups = json.loads(pq.ParquetFile(store).metadata.metadata[PARQUET_KEY])["row_groups"]
        assert all(set(COUNTS) <= set(group) for group in groups)
    else:
        for item_id, text, digest, vector_sum, n, cut, collection, labels in _sql(
            store,
            "SELECT id, text, content_hash, checksum, n_tokens, truncated, collection, labels_checksum "
            "FROM embeddings",
        ):  # row checks 5 on, the collection's name too
            assert labels == labels_checksum([item_id, text, digest, vector_sum, n, cut, collection])
    assert _read_all(store) == len(TEXTS)
    ran = run_main("verify", "--store", str(store))
    assert ran.code == 0 and ran.stdout.startswith("ok"), ran


def _strip_counts(checks: dict[str, Any]) -> None:
    """A Parquet store's checksums without their `n_tokens` and `truncated` entries, their digest
    computed again."""
    groups = [{k: v for k, v in g.items() if k not in COUNTS} for g in checks["row_groups"]]
    checks.clear()
    checks.update(checksums_block("row_groups", groups))


def _settings_at_row_checks_3(table: Any) -> Any:
    """The table with its store settings saying row checks 3, sealed again."""
    meta = dict(table.schema.metadata)
    settings = {**unsealed(json.loads(meta[b"bertscope"]))[0], ROW_CHECKS_KEY: 3}
    meta[b"bertscope"] = json.dumps(sealed(settings), sort_keys=True).encode()
    return table.replace_schema_metadata(meta)


def _as_written_before_counts_parquet(store: Path) -> None:
    """The Parquet store as bertscope wrote it at row checks 3: its settings say 3 (sealed again) and
    its checksums keep no `n_tokens` or `truncated` entries."""
    _rewrite_parquet(store, _settings_at_row_checks_3, sums=_strip_counts)


def test_count_checksums_stripped_from_a_store_that_kept_them_are_refused(
    made: dict[str, Path], tmp_path: Path
) -> None:
    """A store whose settings say row checks 4 was written with its counts' checksums: one without them
    was edited (re-saved by another tool, or stripped to hide an edit), and is refused, not read as an
    older store."""
    store = copied_store(made, "s.parquet", tmp_path)
    _rewrite_parquet(store, lambda table: table, sums=_strip_counts)
    with pytest.raises(CorpusError, match="checksums of its rows' n_tokens and truncated are missing"):
        _read_all(store)
    line = _one_line_error(run_main("verify", "--store", str(store)), str(store))
    assert "n_tokens and truncated are missing" in line and '"n_tokens"' in line


def _as_written_before_counts_sqlite(store: Path) -> None:
    """The SQLite collection as bertscope wrote it at row checks 3: its settings say 3 (sealed again) and
    its rows' labels checksums bind id, text, content hash and vector checksum, not the counts."""
    ((raw,),) = _sql(store, "SELECT settings FROM collections")
    settings = {**unsealed(json.loads(raw))[0], ROW_CHECKS_KEY: 3}
    _sql(store, "UPDATE collections SET settings = ?", (json.dumps(sealed(settings), sort_keys=True),))
    for rowid, item_id, text, digest, vector_sum in _sql(
        store, "SELECT rowid, id, text, content_hash, checksum FROM embeddings"
    ):
        old = labels_checksum([item_id, text, digest, vector_sum])
        _sql(store, "UPDATE embeddings SET labels_checksum = ? WHERE rowid = ?", (old, rowid))


@pytest.mark.parametrize("name", ["s.parquet", "s.db"])
def test_a_store_written_before_counts_were_covered_reads_as_before(
    made: dict[str, Path], tmp_path: Path, name: str
) -> None:
    store = copied_store(made, name, tmp_path)
    if name == "s.parquet":
        before = json.loads(pq.ParquetFile(store).metadata.metadata[PARQUET_KEY])["row_groups"]
        assert all("n_tokens" in g for g in before)  # the new store covers them; the old one did not
        _as_written_before_counts_parquet(store)
        after = json.loads(pq.ParquetFile(store).metadata.metadata[PARQUET_KEY])["row_groups"]
        assert not any(set(COUNTS) & set(g) for g in after)
    else:
        ((labels,),) = _sql(store, "SELECT labels_checksum FROM embeddings ORDER BY rowid LIMIT 1")
        _as_written_before_counts_sqlite(store)
        ((old,),) = _sql(store, "SELECT labels_checksum FROM embeddings ORDER BY rowid LIMIT 1")
        assert labels != old  # the new store's labels checksum binds the counts
    assert _read_all(store) == len(TEXTS)
    ran = run_main("verify", "--store", str(store))
    assert ran.code == 0 and ran.stdout.startswith("ok"), ran
    # as before: counts no checksum covers are read as they are
    (_edit_parquet if name == "s.parquet" else _edit_sqlite)(store, "n_tokens")
    assert _read_all(store) == len(TEXTS)


def test_a_npy_store_keeps_its_counts_in_its_checked_labels_or_none(tmp_path: Path, bundled: Model) -> None:
    """A sentence .npy keeps no counts (its ids alone beside it); a token .npy keeps `truncated` in its
    `.rows.jsonl`, which its batches' labels checksums cover: an edit to it is found."""
    texts = TEXTS[:3]
    sentences = tmp_path / "s.npy"
    bertscope.embed_corpus(texts, sentences, model=bundled, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.ids.txt", "s.npy", "s.settings.json"]
    tokens = tmp_path / "t.npy"
    bertscope.embed_corpus(texts, tokens, model=bundled, progress=False, level="tokens")
    labels = tokens.with_suffix(".rows.jsonl")
    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    assert rows[0]["truncated"] == 0
    rows[0]["truncated"] = 1
    labels.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    line = _one_line_error(run_main("verify", "--store", str(tokens)), f"row 0 of {tokens} (id '1')")
    assert "does not match its checksum; the file is corrupt" in line and "--overwrite" in line


def test_a_null_count_set_in_a_token_store_is_found(tmp_path: Path, bundled: Model) -> None:
    """A token Parquet store keeps `truncated` on each text's first row, null on the others: a null set
    to 0 is an edit too (a count's checksum tells a null from every number)."""
    store = tmp_path / "t.parquet"
    bertscope.embed_corpus(TEXTS[:2], store, model=bundled, progress=False, level="tokens")
    file = pq.ParquetFile(store)
    kept, table = dict(file.metadata.metadata), file.read()
    values = table.column("truncated").to_pylist()
    assert values[0] == 0 and values[1] is None and file.metadata.num_row_groups == 1
    values[1] = 0
    table = table.set_column(
        table.schema.get_field_index("truncated"), "truncated", pa.array(values, pa.int32())
    )
    with pq.ParquetWriter(store, table.schema) as writer:  # one row group, settings and checksums kept
        writer.write_table(table, row_group_size=table.num_rows)
        writer.add_key_value_metadata({k: v for k, v in kept.items() if k.startswith(b"bertscope.")})
    line = _one_line_error(run_main("verify", "--store", str(store)), str(store), "--overwrite")
    assert f"rows 0-{table.num_rows - 1} of {store} do not match their checksum" in line
