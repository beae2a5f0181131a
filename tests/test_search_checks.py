"""io/search.py's checks and chunk stores: query vectors with no direction refused, a chunk store searched
from .parquet and .npy alike, through its ANN index when it has a fresh one; io/query.py's query: options
the search would not read refused, the store's model known by its files, a vector as any 1-D sequence."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.errors import CorpusError, InvalidInput, InvalidSpec
from bertscope.io import index as index_module
from bertscope.io.checksums import SETTINGS_KEY, sealed
from bertscope.io.formats import open_sink
from bertscope.io.index import index_paths, index_state
from bertscope.io.index_build import build_index
from bertscope.io.levels import Rows
from bertscope.io.readers import Record
from bertscope.io.search import search
from bertscope.io.stores import open_store
from console import run_main
from tiny_models import build_tiny_model

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
    hits = search(query, chunk_store, k=7, exact=True, rows_per_read=64)  # several reads of rows
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
    with pytest.raises(CorpusError, match=r"^rows 0-\d+ of .*chunks.rows.jsonl do not match their checksum"):
        search(vectors(1, 1)[0], path, k=3, exact=True)  # the labels are checked before they are read
    settings_file = path.with_suffix(".settings.json")  # as a store written before labels were covered
    settings = json.loads(settings_file.read_text())
    for batch in settings["checksums"]["batches"]:
        batch.pop("labels")
    settings["checksums"].pop("rows"), settings["checksums"].pop("sha256")  # nor recorded its rows
    settings.pop("row_checks")  # nor said which row checks it kept (a store saying so is refused: stripped)
    kept = {k: v for k, v in settings.items() if k not in ("checksums", SETTINGS_KEY)}
    settings[SETTINGS_KEY] = sealed(kept)[SETTINGS_KEY]  # sealed as that bertscope wrote them
    settings_file.write_text(json.dumps(settings))
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


# A query's options, model and form ----------------------------------------------------------------------

TEXTS = ["a cat sits on the mat", "stocks fell sharply today", "a dog barks at night", "rain is coming"]


@pytest.fixture(scope="module")
def cls_store(tmp_path_factory: pytest.TempPathFactory, bundled: bertscope.Model) -> Path:
    """The texts' vectors of layer 5 pooled by [CLS]: not the model's own recipe (layer 6, mean)."""
    path = tmp_path_factory.mktemp("cls") / "cls.parquet"
    bertscope.embed_corpus(TEXTS, path, model=bundled, layers="-2", pooling="cls")
    return path


def test_a_recipe_option_given_to_search_is_refused_not_dropped(
    cls_store: Path, bundled: bertscope.Model
) -> None:
    """pooling= was taken and dropped: the query was embedded the store's way, whatever was asked."""
    with pytest.raises(InvalidSpec) as refused:
        search("cats", cls_store, model=bundled, k=1, pooling="mean")  # type: ignore[call-arg]
    assert str(refused.value) == (
        f"{cls_store} was made with layers [5], pooling cls; search embeds the query the store's way: "
        "drop pooling="
    )
    for options, named in (
        ({"layers": "-1", "normalize": True}, "drop layers= and normalize="),
        ({"mask_special": True}, "mask_special False; search embeds"),
        ({"combine": "sum"}, "drop combine="),
        ({"long": "window", "stride": 64}, "drop long= and stride="),
    ):
        with pytest.raises(InvalidSpec, match=named):
            search("cats", cls_store, model=bundled, k=1, **options)  # type: ignore[arg-type]
    # None: as not given
    left_out = search("cats", cls_store, model=bundled, k=2, pooling=None, normalize=None)  # type: ignore[call-arg]
    assert left_out == search("cats", cls_store, model=bundled, k=2)
    vector = bundled.embed("cats", layers="-2", pooling="cls").vectors[0]
    with pytest.raises(
        InvalidSpec, match=r"^the query vector is searched as it is, not embedded: drop post=$"
    ):
        search(vector, cls_store, k=1, post="white.safetensors")
    with pytest.raises(InvalidSpec, match=r"^the stored vector of '2' is searched as it is.*drop prompt=$"):
        search(None, cls_store, item_id="2", k=1, prompt="query: ")
    # model= embeds a query text: with a vector or an id it was ignored in silence (any model, any family)
    with pytest.raises(InvalidSpec, match=r"^the stored vector of '2' is searched as it is.*drop model=$"):
        search(None, cls_store, item_id="2", k=1, model=bundled)
    with pytest.raises(InvalidSpec, match=r"^the query vector is searched as it is.*drop model=$"):
        search(vector, cls_store, k=1, model="no/such-model")


def test_similar_words_the_refusals_as_flags(cls_store: Path) -> None:
    ran = run_main("similar", "--id", "2", "--store", str(cls_store), "--post", "white.safetensors")
    assert ran.code != 0 and ran.stderr.strip() == (
        "error: the stored vector of '2' is searched as it is, not embedded: drop --post"
    )
    ran = run_main("similar", "cats", "--store", str(cls_store), "-k", "1", "--json")
    assert ran.code == 0 and json.loads(ran.stdout)[0]["id"] == search("cats", cls_store, k=1)[0].id


def test_the_stores_model_is_known_by_its_files_not_its_name(
    tmp_path: Path, cls_store: Path, bundled_path: Path
) -> None:
    """A folder changed in place was searched with no error and the wrong hits; the same files under
    another name (the bundled model by its path) were refused."""
    folder = build_tiny_model("bert", tmp_path / "tiny", seed=0)
    store = tmp_path / "s.parquet"
    texts = ["hello world", "a b c", "d e f g", "abc def"]
    bertscope.embed_corpus(texts, store, model=bertscope.load(str(folder), device="cpu"))
    shutil.rmtree(folder)
    build_tiny_model("bert", folder, seed=1)  # fine-tuned in place: the same name, other weights
    tuned = bertscope.load(str(folder), device="cpu")
    for model in (tuned, None):  # the one given, or the store's own loaded by its name again
        with pytest.raises(CorpusError) as refused:
            search("hello world", store, model=model, k=2)
        said = str(refused.value)
        assert said.startswith(f"{store} was made with {folder}; the files of the model {folder} are not")
        assert "fingerprint files.model.safetensors: '" in said and "config.json" not in said, said
        assert "leave model= out" not in said and "-m/--model" not in said
    by_path = bertscope.load(str(bundled_path), device="cpu")  # the bundled model's files, by their path
    assert search("cats", cls_store, model=by_path, k=2) == search("cats", cls_store, k=2)


def test_a_store_without_a_fingerprint_names_the_keyword(cls_store: Path, tmp_path: Path) -> None:
    """A store written before stores carried a fingerprint is compared by the model's name; a Python
    caller is told model=, not the command line's -m/--model."""
    tiny = bertscope.load(str(build_tiny_model("bert", tmp_path / "tiny")), device="cpu")
    old = tmp_path / "old.parquet"
    sink = open_sink(old, settings={"model": "synthetic", "layers": [1], "pooling": "mean"})
    table = pa.table(
        {
            "id": ["r0", "r1"],
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors(2, 1).reshape(-1)), DIM),
            "n_tokens": pa.array([3, 3], pa.int32()),
            "truncated": pa.array([0, 0], pa.int32()),
        }
    )
    sink.write([Record(f"r{i}", "t", i + 1) for i in range(2)], Rows(table, 2, 6, 0))
    sink.finish()
    with pytest.raises(CorpusError, match=r"made with synthetic; the model given is .*\(leave model= out\)$"):
        search("a b", old, model=tiny)


def test_search_reads_rows_per_read_and_chunk_size_with_a_warning(cls_store: Path) -> None:
    """chunk_size is tokens per chunk everywhere else (embed_corpus, embed_chunks)."""
    vector = vectors(1, 1)[0]
    query = np.resize(vector, 384)
    expected = [h.id for h in search(query, cls_store, k=3)]
    assert [h.id for h in search(query, cls_store, k=3, rows_per_read=1)] == expected
    with pytest.warns(
        DeprecationWarning, match=r"search\(chunk_size=...\) is deprecated; use rows_per_read="
    ):
        assert [h.id for h in search(query, cls_store, k=3, chunk_size=1)] == expected
    with pytest.raises(InvalidInput, match="chunk_size= is the old name of rows_per_read="):
        search(query, cls_store, k=3, chunk_size=1, rows_per_read=1)
    with pytest.raises(CorpusError, match="rows_per_read must be a whole number of at least 1"):
        search(query, cls_store, k=3, rows_per_read=0)


def test_a_query_vector_is_any_one_dimensional_sequence(cls_store: Path) -> None:
    """Only an np.ndarray was taken: a list or a torch tensor was "give a query text, a vector, or ..."."""
    import torch

    vector = open_store(cls_store).vector_of("3")  # its nearest row is its own
    expected = [h.id for h in search(vector, cls_store, k=2)]
    assert expected[0] == "3"
    for given in (vector.tolist(), tuple(vector.astype(np.float64)), torch.from_numpy(vector.copy())):
        assert [h.id for h in search(given, cls_store, k=2)] == expected
    with pytest.raises(
        InvalidInput, match=r"^the query vector has 10 numbers but the store's vectors have 384"
    ):
        search([1.0] * 10, cls_store)
    with pytest.raises(InvalidInput, match=r"^the query is an array of shape \(2, 384\): give a query text"):
        search(np.ones((2, 384)), cls_store)
    with pytest.raises(InvalidInput, match=r"^the query is a dict: give a query text, a vector"):
        search({"a": 1}, cls_store)  # type: ignore[arg-type]


def test_a_searched_sqlite_store_leaves_no_file_beside_it(tmp_path: Path, bundled: bertscope.Model) -> None:
    """Its read-only connection left the -wal and -shm files it made after every search."""
    store = tmp_path / "w.db"
    bertscope.embed_corpus(TEXTS, store, model=bundled)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.db"]
    assert search("a cat", store, model=bundled, k=1)[0].id == "1"
    assert search(None, store, item_id="2", k=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.db"]
