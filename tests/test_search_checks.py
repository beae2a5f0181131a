"""io/search.py's checks and chunk stores: query vectors with no direction refused, a chunk store searched
from .parquet and .npy alike, through its ANN index when it has a fresh one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from bertscope.cli import app
from bertscope.errors import CorpusError, InvalidInput
from bertscope.io import index as index_module
from bertscope.io.formats import open_sink
from bertscope.io.index import build_index, index_paths, index_state
from bertscope.io.levels import Rows
from bertscope.io.readers import Record
from bertscope.io.search import search

DIM = 16
DOCS, CHUNKS = 60, 5  # 300 chunk rows: enough for an index of 7 cells
CHUNK_SETTINGS = {"model": "synthetic", "layers": [6], "pooling": "mean", "level": "chunks"}


def vectors(n: int, seed: int) -> np.ndarray:
    """(n, DIM) float32 vectors around 20 random centres."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).standard_normal((20, DIM))
    return (centres[rng.integers(0, 20, n)] + 0.5 * rng.standard_normal((n, DIM))).astype(np.float32)


def write_chunks(path: Path, matrix: np.ndarray) -> Path:
    """A chunk store: document d{i} has CHUNKS chunks, chunk j spans 10j..10j+9 and reads "d{i} c{j}"."""
    sink = open_sink(path, settings=CHUNK_SETTINGS)
    for doc in range(DOCS):
        block = matrix[doc * CHUNKS : (doc + 1) * CHUNKS]
        table = pa.table(
            {
                "id": [f"d{doc}"] * CHUNKS,
                "position": pa.array(np.arange(CHUNKS), pa.int32()),
                "start": pa.array(10 * np.arange(CHUNKS), pa.int32()),
                "end": pa.array(10 * np.arange(CHUNKS) + 9, pa.int32()),
                "text": [f"d{doc} c{j}" for j in range(CHUNKS)],
                "n_tokens": pa.array(np.full(CHUNKS, 3), pa.int32()),
                "truncated": pa.array(np.zeros(CHUNKS), pa.int32()),
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), DIM),
            }
        )
        sink.write([Record(f"d{doc}", "text", doc + 1)], Rows(table, 1, 3 * CHUNKS, 0))
    sink.finish()
    return path


@pytest.fixture(scope="module")
def matrix() -> np.ndarray:
    return vectors(DOCS * CHUNKS, 0)


@pytest.fixture(scope="module", params=["parquet", "npy"])
def chunk_store(
    request: pytest.FixtureRequest, matrix: np.ndarray, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return write_chunks(tmp_path_factory.mktemp("chunks") / f"chunks.{request.param}", matrix)


def expected(matrix: np.ndarray, query: np.ndarray, k: int) -> list[tuple[str, int, int, int, str]]:
    """(document, chunk, start, end, text) of the k rows nearest `query` by cosine."""
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    best = np.argsort(-(unit @ (query / np.linalg.norm(query))), kind="stable")[:k]
    found = [(int(r) // CHUNKS, int(r) % CHUNKS) for r in best]
    return [(f"d{doc}", j, 10 * j, 10 * j + 9, f"d{doc} c{j}") for doc, j in found]


def spans(hits: list) -> list[tuple[str, int | None, int | None, int | None, str | None]]:
    return [(h.id, h.chunk, h.start, h.end, h.text) for h in hits]


def test_a_chunk_store_is_searched_exactly_from_parquet_and_npy(
    chunk_store: Path, matrix: np.ndarray
) -> None:
    query = vectors(1, 1)[0]
    hits = search(query, chunk_store, k=7, exact=True, chunk_size=64)  # several chunks of rows
    assert spans(hits) == expected(matrix, query, 7)


def test_a_chunk_store_is_searched_through_its_fresh_index(
    chunk_store: Path, matrix: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_index(chunk_store, overwrite=True)
    assert index_state(chunk_store).fresh
    calls = []
    real = index_module.ann_search
    monkeypatch.setattr(index_module, "ann_search", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    for seed in range(2, 6):
        query = vectors(1, seed)[0]
        indexed = search(query, chunk_store, k=5)
        assert spans(indexed) == spans(search(query, chunk_store, k=5, exact=True))
        assert spans(indexed) == expected(matrix, query, 5)
    assert len(calls) == 4  # the index answered every query


def test_a_chunk_store_is_not_searched_by_id(chunk_store: Path) -> None:
    with pytest.raises(CorpusError, match="an id names a whole document"):
        search(None, chunk_store, item_id="d0")


def test_npy_chunk_store_with_damaged_labels_is_one_line(tmp_path: Path, matrix: np.ndarray) -> None:
    path = write_chunks(tmp_path / "chunks.npy", matrix)
    labels = path.with_suffix(".rows.jsonl")
    lines = labels.read_text().splitlines(keepends=True)
    labels.write_text("".join(lines[:-3]))  # the last three rows lost their labels
    with pytest.raises(CorpusError, match=r"ends before row 297 of the 300 rows"):
        search(vectors(1, 1)[0], path, k=3, exact=True)
    labels.write_text("".join(lines[:3]) + "not json\n" + "".join(lines[4:]))
    with pytest.raises(CorpusError, match=r"line 4 of .*chunks.rows.jsonl is not a chunk's labels"):
        search(vectors(1, 1)[0], path, k=3, exact=True)


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize(
    ("query", "problem"),
    [
        (np.zeros(DIM, np.float32), "all zeros"),
        (np.full(DIM, np.nan, np.float32), "NaN or infinite"),
        (np.r_[np.ones(DIM - 1), np.inf].astype(np.float32), "NaN or infinite"),
    ],
)
def test_a_query_vector_with_no_direction_is_refused(
    chunk_store: Path, tmp_path: Path, query: np.ndarray, problem: str, exact: bool
) -> None:
    if not exact and not index_state(chunk_store).fresh:
        build_index(chunk_store)
    with pytest.raises(InvalidInput, match=problem):
        search(query, chunk_store, k=3, exact=exact)


def test_a_stored_zero_vector_is_refused_as_a_query_by_its_id(tmp_path: Path) -> None:
    path = tmp_path / "store.parquet"
    sink = open_sink(path, settings={"model": "synthetic", "layers": [6], "pooling": "mean"})
    stored = vectors(50, 3)
    stored[7] = 0.0
    table = pa.table(
        {
            "id": [f"r{i}" for i in range(50)],
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(stored.reshape(-1)), DIM),
            "n_tokens": pa.array(np.full(50, 3), pa.int32()),
            "truncated": pa.array(np.zeros(50), pa.int32()),
        }
    )
    sink.write([Record(f"r{i}", "t", i + 1) for i in range(50)], Rows(table, 50, 150, 0))
    sink.finish()
    with pytest.raises(InvalidInput, match="stored vector of 'r7' is all zeros"):
        search(None, path, item_id="r7", k=3)
    assert len(search(None, path, item_id="r8", k=3)) == 3


@pytest.mark.parametrize(
    ("name", "flags", "reason"),
    [
        ("words.parquet", ["--words"], "words rows are searched by occurrence"),
        ("out.db", [], "out.db is searched by reading every row"),
    ],
)
def test_embed_index_is_refused_before_the_job_where_no_index_would_be_used(
    tmp_path: Path, name: str, flags: list[str], reason: str
) -> None:
    out = tmp_path / name
    result = CliRunner().invoke(app, ["embed", "a b c", "-o", str(out), *flags, "--index"])
    assert isinstance(result.exception, InvalidInput) and reason in str(result.exception)
    assert "give -o" not in str(result.exception)  # -o was given
    assert not out.exists()  # refused before the job, not after it


def test_embed_chunks_with_index_builds_the_index_similar_uses(tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    text = "Berlin is the capital of Germany. The city has about 3.8 million inhabitants."
    docs.write_text(json.dumps({"id": "berlin", "text": text}) + "\n")
    out = tmp_path / "chunks.parquet"
    args = [
        "embed",
        "-i",
        str(docs),
        "--id-field",
        "id",
        "-o",
        str(out),
        "--chunks",
        "sentence",
        "--index",
        "-q",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert index_state(out).fresh and index_paths(out)[2].exists()
    found = CliRunner().invoke(app, ["similar", "How many people live there?", "--in", str(out), "--json"])
    assert found.exit_code == 0, found.output
    assert {(h["id"], h["chunk"]) for h in json.loads(found.stdout)} == {("berlin", 0), ("berlin", 1)}
