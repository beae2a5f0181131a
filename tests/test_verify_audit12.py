"""`verify` audit 12: every column of a Parquet token, word or chunk row is covered by its row group's
checksums (an edit is damage naming the row; a store written before reads as before), an SQLite
collection lists the model its sealed settings record, one lossy side against an exact one is held to
the floor itself, and the wording of a file of several collections and of Model.verify's floor."""

from __future__ import annotations

import json
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
from bertscope.backends.onnx import calibration_texts
from bertscope.errors import CorpusError
from bertscope.io.checksums import (
    CHECKED_COLUMNS,
    DIGEST_COLUMNS_KEY,
    PARQUET_KEY,
    PARQUET_ROWS_KEY,
    checksums_block,
    row_digests,
    row_labels,
    table_checksums,
    vector_names,
)
from bertscope.io.sqlite_reader import SqliteReader, list_collections
from bertscope.model import Model
from bertscope.verify import drift
from console import run_main

TEXTS = calibration_texts()[:3]
LEVELS = {"t.parquet": "tokens", "w.parquet": "words", "c.parquet": "chunks"}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> dict[str, Path]:
    """The texts as a token, word and chunk Parquet store, and the corpus."""
    folder = tmp_path_factory.mktemp("audit12")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    paths = {"corpus": corpus}
    for name, level in LEVELS.items():
        bertscope.embed_corpus(corpus, folder / name, model=bundled, progress=False, level=level)
        paths[name] = folder / name
    return paths


def _rewritten(
    source: Path, to: Path, edit: Callable[[Any], Any], meta: dict[bytes, bytes] | None = None
) -> Path:
    """A copy of a one-row-group Parquet store with `edit` applied to its table, its settings and
    checksums kept as they were (or `meta` in their place): an edit that computes nothing again."""
    file = pq.ParquetFile(source)
    assert file.metadata.num_row_groups == 1
    kept = meta or {k: v for k, v in file.metadata.metadata.items() if k in (PARQUET_KEY, PARQUET_ROWS_KEY)}
    table = edit(file.read())
    with pq.ParquetWriter(to, file.schema_arrow) as writer:
        writer.write_table(table.cast(file.schema_arrow), row_group_size=table.num_rows)
        writer.add_key_value_metadata(kept)
    return to


def _set(column: str, row: int, value: Any) -> Callable[[Any], Any]:
    def edit(table: Any) -> Any:
        values = table.column(column).to_pylist()
        assert values[row] != value
        values[row] = value
        field = table.schema.field(column)
        return table.set_column(table.schema.get_field_index(column), field, pa.array(values, field.type))

    return edit


# (store, column, row, value): each a column the checksums covered none of before.
EDITS = [
    ("t.parquet", "token", 3, "xx"),
    ("t.parquet", "token_id", 3, 7),
    ("t.parquet", "word_index", 3, 9),
    ("t.parquet", "special", 3, True),
    ("t.parquet", "start", 3, 99),
    ("w.parquet", "word", 3, "mw"),
    ("w.parquet", "end", 3, 99),
    ("w.parquet", "position", 3, 40),
    ("c.parquet", "end", 1, 5),
]


@pytest.mark.parametrize(("name", "column", "row", "value"), EDITS)
def test_an_edited_label_column_is_damage_naming_its_row(
    made: dict[str, Path], tmp_path: Path, name: str, column: str, row: int, value: Any
) -> None:
    store = _rewritten(made[name], tmp_path / name, _set(column, row, value))
    ids = pq.read_table(store, columns=["id"]).column("id").to_pylist()
    ran = run_main("verify", "--store", str(store), "--corpus", str(made["corpus"]))
    assert ran.code == 2 and len(ran.stderr.strip().splitlines()) == 1, ran
    assert f"row {row} of {store} (id '{ids[row]}') changed after it was written" in ran.stderr, ran.stderr


def test_a_position_swapped_between_rows_is_damage_not_drift(made: dict[str, Path], tmp_path: Path) -> None:
    """Two rows' positions swapped was DRIFT (exit 1) blaming the model; it is damage naming both."""

    def swap(table: Any) -> Any:
        values = table.column("position").to_pylist()
        values[3], values[4] = values[4], values[3]
        field = table.schema.field("position")
        return table.set_column(table.schema.get_field_index("position"), field, pa.array(values, field.type))

    store = _rewritten(made["t.parquet"], tmp_path / "swap.parquet", swap)
    ran = run_main("verify", "--store", str(store))
    assert ran.code == 2, ran
    assert "rows 3, 4 of" in ran.stderr and "changed after they were written" in ran.stderr, ran.stderr


def test_similar_refuses_an_edited_word(made: dict[str, Path], tmp_path: Path) -> None:
    store = _rewritten(made["w.parquet"], tmp_path / "w.parquet", _set("word", 3, "mw"))
    ran = run_main("similar", "--store", str(store), "--word", "mw")
    assert ran.code != 0 and "do not match their checksum" in ran.stderr, ran
    assert "mw" not in ran.stdout


def _as_written_before(source: Path, to: Path) -> Path:
    """A copy of a store as a bertscope that covered ids, texts and counts only wrote it: no checksum of
    its other columns, no `digest_columns`, row digests over ids and texts."""
    table = pq.read_table(source)
    sums = table_checksums(table)
    kept = {k: v for k, v in sums.items() if k in CHECKED_COLUMNS or k in vector_names(table.schema)}
    vectors = [
        np.asarray(table.column(n).combine_chunks().flatten()).reshape(table.num_rows, -1)
        for n in vector_names(table.schema)
    ]
    block = checksums_block("row_groups", [{"rows": table.num_rows, **kept}])
    assert DIGEST_COLUMNS_KEY not in block
    digests = [row_digests(vectors, row_labels(table))]
    meta = {PARQUET_KEY: json.dumps(block).encode(), PARQUET_ROWS_KEY: json.dumps(digests).encode()}
    return _rewritten(source, to, lambda t: t, meta)


def test_a_store_written_before_verifies_as_before(made: dict[str, Path], tmp_path: Path) -> None:
    """Its row groups keep no checksum of `word`: read the old way, it passes, and an edit of its ids
    is still found by the checksums it keeps, naming the row."""
    old = _as_written_before(made["w.parquet"], tmp_path / "old.parquet")
    assert run_main("verify", "--store", str(old)).code == 0
    edited = _rewritten(old, tmp_path / "old_id.parquet", _set("id", 3, "9"))
    ran = run_main("verify", "--store", str(edited), "--corpus", str(made["corpus"]))
    assert ran.code == 2 and f"row 3 of {edited} (id '9') changed" in ran.stderr, ran


def test_a_new_store_records_the_columns_its_digests_cover(made: dict[str, Path]) -> None:
    block = json.loads(pq.ParquetFile(made["t.parquet"]).metadata.metadata[PARQUET_KEY])
    covered = ["id", "position", "token", "token_id", "start", "end", "word_index", "special", "text"]
    assert block[DIGEST_COLUMNS_KEY] == covered
    assert set(covered) | {"truncated", "embedding", "rows"} == set(block["row_groups"][0])


@pytest.fixture(scope="module")
def two_collections(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> Path:
    folder = tmp_path_factory.mktemp("collections12")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    for name in ("a", "b"):
        bertscope.embed_corpus(corpus, folder / "s.db", model=bundled, progress=False, collection=name)
    return folder / "s.db"


def test_a_collection_lists_the_model_of_its_sealed_settings(two_collections: Path, tmp_path: Path) -> None:
    """The `model` column is covered by no checksum: an edit there is not listed as the model."""
    store = tmp_path / "s.db"
    store.write_bytes(two_collections.read_bytes())
    with closing(sqlite3.connect(store)) as db, db:
        db.execute("UPDATE collections SET model = 'mw'")
    assert {c["model"] for c in list_collections(store)} == {"all-MiniLM-L6-v2 (bundled)"}
    ran = run_main("collections", str(store))
    assert ran.code == 0 and "mw" not in ran.stdout, ran


def test_several_collections_are_named_once_in_each_wording(two_collections: Path) -> None:
    with pytest.raises(CorpusError, match=r"name one with collection='a' \(--collection a\)$"):
        SqliteReader().open(two_collections, None)
    ran = run_main("verify", "--store", str(two_collections))
    assert ran.code == 2 and "name one with --collection a" in ran.stderr, ran
    assert ran.stderr.count("--collection") == 1 and "Python" not in ran.stderr, ran.stderr


def _at_cosine(stored: np.ndarray, cosine: float) -> np.ndarray:
    noise = np.random.default_rng(1).normal(size=stored.shape)
    noise -= (noise @ stored) / (stored @ stored) * stored
    unit = stored / np.linalg.norm(stored)
    return (cosine * unit + np.sqrt(1 - cosine**2) * noise / np.linalg.norm(noise)).astype(np.float32)


@pytest.mark.parametrize(
    ("store_quantize", "bound"), [(None, 0.98), ("int8", 2 * 0.98**2 - 1)], ids=["exact store", "int8 store"]
)
def test_one_lossy_side_is_held_to_the_floor_itself(
    monkeypatch: pytest.MonkeyPatch, store_quantize: str | None, bound: float
) -> None:
    """An int8 deployment against an exact float32 store: cosine 0.93 passed under 2 * 0.98^2 - 1."""
    monkeypatch.setattr(
        drift, "vector_settings", lambda _: {"precision": {"dtype": "float32", "quantize": "int8"}}
    )
    monkeypatch.setattr(drift, "lossy_floor", lambda _: 0.98)
    stored = np.random.default_rng(0).normal(size=384).astype(np.float32)
    settings = {"dtype": "float32", "quantize": store_quantize}
    for cosine in (0.99, 0.95, 0.93):
        check = drift.StoreCheck(True, 1, 0.0, 1.0)
        drift.add_drift(check, None, settings, ["row 0"], stored[None], _at_cosine(stored, cosine)[None])
        assert check.tolerance == {"min_cosine": pytest.approx(bound)}
        assert bool(check.differences) == (cosine < bound), (cosine, check.differences)


def test_model_verify_says_each_lossy_floor() -> None:
    doc = " ".join((Model.verify.__doc__ or "").split())
    assert "0.98 for int8" in doc and "0.999 for bfloat16 and float16" in doc
    assert "fast bound or 0.999" not in doc
