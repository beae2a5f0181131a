"""The ANN index beside a store: recall against exact search, exact cosines, staleness, the missing extra."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from bertscope.cli import app
from bertscope.errors import BackendUnavailable, CorpusError
from bertscope.io import index as index_module
from bertscope.io.formats import open_sink
from bertscope.io.index import IndexStaleWarning, index_paths, index_state
from bertscope.io.index_build import build_index
from bertscope.io.levels import Rows
from bertscope.io.readers import Record
from bertscope.io.search import search

DIM = 64
SETTINGS = {"model": "synthetic", "layers": [6], "pooling": "mean"}


def clustered(n: int, seed: int) -> np.ndarray:
    """(n, DIM) float32 vectors around 50 random centres (neighbours are meaningful, not ties)."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).standard_normal((50, DIM))
    return (centres[rng.integers(0, 50, n)] + 0.5 * rng.standard_normal((n, DIM))).astype(np.float32)


def write_store(path: Path, vectors: np.ndarray, *, overwrite: bool = False) -> Path:
    """A finished bertscope store holding these vectors, with ids "r0", "r1", ... and texts."""
    sink = open_sink(path, settings=SETTINGS, overwrite=overwrite)
    for start in range(0, len(vectors), 1000):
        block = vectors[start : start + 1000]
        records = [Record(f"r{start + i}", f"text {start + i}", start + i + 1) for i in range(len(block))]
        table = pa.table(
            {
                "id": [r.id for r in records],
                "text": [r.text for r in records],
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), DIM),
                "n_tokens": pa.array(np.full(len(block), 3, np.int32)),
                "truncated": pa.array(np.zeros(len(block), np.int32)),
            }
        )
        sink.write(records, Rows(table, len(block), 3 * len(block), 0))
    sink.finish()
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """5,000 clustered vectors in Parquet, with their index built."""
    path = write_store(tmp_path_factory.mktemp("index") / "store.parquet", clustered(5000, 0))
    build_index(path)
    return path


def recall_and_errors(path: Path, queries: np.ndarray, k: int = 10) -> tuple[float, float]:
    """Mean recall@k of the indexed search against exact search, and the largest cosine difference."""
    found, worst = 0, 0.0
    for query in queries:
        indexed = search(query, path, k=k)
        exact = {h.id: h.score for h in search(query, path, k=k, exact=True)}
        found += sum(h.id in exact for h in indexed)
        worst = max([worst] + [abs(h.score - exact[h.id]) for h in indexed if h.id in exact])
    return found / (k * len(queries)), worst


def test_indexed_search_recalls_exact_top10_with_exact_cosines(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    real = index_module.ann_search
    monkeypatch.setattr(index_module, "ann_search", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    recall, worst = recall_and_errors(store, clustered(50, 1))
    assert len(calls) == 50  # the index answered every query
    assert recall >= 0.95
    assert worst <= 1e-6
    meta = json.loads(index_paths(store)[1].read_text())
    assert meta["rows"] == 5000 and meta["dimension"] == DIM and meta["column"] == "embedding"


def test_search_by_id_through_the_index_leaves_the_id_out(store: Path) -> None:
    hits = search(None, store, item_id="r7", k=5)
    exact = search(None, store, item_id="r7", k=5, exact=True)
    assert "r7" not in [h.id for h in hits]
    assert [h.id for h in hits] == [h.id for h in exact]
    assert hits[0].text == exact[0].text


def test_npy_store_is_indexed_too(tmp_path: Path) -> None:
    path = write_store(tmp_path / "store.npy", clustered(3000, 2))
    build_index(path)
    assert index_state(path).fresh
    recall, worst = recall_and_errors(path, clustered(20, 3))
    assert recall >= 0.95 and worst <= 1e-6


@pytest.mark.parametrize("k", [10, 300, 2000])
def test_a_large_k_visits_more_cells_instead_of_returning_fewer_hits(tmp_path: Path, k: int) -> None:
    path = write_store(tmp_path / "store.npy", clustered(2000, 9))
    build_index(path, cells=40)  # about 50 rows a cell: one cell holds fewer than 4k + 1 candidates
    query = clustered(1, 10)[0]
    hits = search(query, path, k=k, nprobe=1)
    exact = search(query, path, k=k, exact=True)
    assert len(hits) == k
    assert len({h.id for h in hits} & {h.id for h in exact}) >= 0.9 * k  # recall did not collapse
    by_id = search(None, path, item_id="r5", k=1999, nprobe=1)  # all the other rows
    assert len(by_id) == 1999 and "r5" not in {h.id for h in by_id}


def test_npy_token_store_is_refused_an_index_it_would_never_use(tmp_path: Path) -> None:
    path = tmp_path / "tokens.npy"
    sink = open_sink(path, settings={**SETTINGS, "level": "tokens"})
    block = clustered(100, 11)
    table = pa.table(
        {
            "id": [f"t{i // 10}" for i in range(100)],
            "position": pa.array(np.arange(100) % 10, pa.int32()),
            "token": ["x"] * 100,
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), DIM),
        }
    )
    sink.write([Record(f"t{i}", "x " * 10, i + 1) for i in range(10)], Rows(table, 10, 100, 0))
    sink.finish()
    with pytest.raises(CorpusError, match="tokens rows are searched by occurrence, which reads .parquet"):
        build_index(path)
    assert not any(p.exists() for p in index_paths(path))


def test_rewritten_store_makes_the_index_stale(tmp_path: Path) -> None:
    path = write_store(tmp_path / "store.parquet", clustered(2000, 4))
    build_index(path)
    write_store(path, clustered(2000, 5), overwrite=True)
    state = index_state(path)
    assert state.status == "stale" and "rows_sha256" in state.reason
    query = clustered(1, 6)[0]
    with pytest.warns(IndexStaleWarning, match="index build"):
        hits = search(query, path, k=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [h.id for h in hits] == [h.id for h in search(query, path, k=5, exact=True)]
    with pytest.raises(CorpusError, match="--overwrite"):
        build_index(path)
    build_index(path, overwrite=True)
    assert index_state(path).fresh


def test_missing_library_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_store(tmp_path / "store.parquet", clustered(500, 7))
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(BackendUnavailable, match=r"bertscope\[ann\]"):
        build_index(path)
    assert index_state(path).status == "missing"


def test_cli_builds_inspects_and_searches(tmp_path: Path) -> None:
    path = write_store(tmp_path / "store.parquet", clustered(2000, 8))
    runner = CliRunner()
    built = runner.invoke(app, ["index", "build", str(path), "--json", "-q"])
    assert built.exit_code == 0, built.output
    assert json.loads(built.stdout)["rows"] == 2000
    info = runner.invoke(app, ["index", "info", str(path), "--json"])
    assert json.loads(info.stdout)["status"] == "fresh"
    indexed = runner.invoke(app, ["similar", "--id", "r3", "--in", str(path), "-k", "3", "--json"])
    exact = runner.invoke(app, ["similar", "--id", "r3", "--in", str(path), "-k", "3", "--json", "--exact"])
    assert json.loads(indexed.stdout) == json.loads(exact.stdout)
    again = runner.invoke(app, ["index", "build", str(path)])
    assert again.exit_code != 0
