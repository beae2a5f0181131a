"""Several sentence views from one forward pass: the syntax, the stored columns, and searching one view."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.core.similarity import cos_sim
from bertscope.errors import CorpusError, InvalidSpec
from bertscope.io.job import embed_corpus
from bertscope.io.search import search
from bertscope.io.stores import open_store
from bertscope.io.views import parse_view, parse_views

NEWS = Path(__file__).parents[1] / "examples" / "news.txt"
VIEWS = {
    "last": {"layers": "-1", "pooling": "mean"},
    "cls4": {"layers": "-4:", "pooling": "cls", "combine": "concat"},
    "mid": {"layers": "2:4", "pooling": "max", "mask_special": True, "normalize": True},
}


def test_view_syntax() -> None:
    assert parse_view("cls4=-4:/cls/concat") == (
        "cls4",
        {"layers": "-4:", "pooling": "cls", "combine": "concat"},
    )
    assert parse_view("m=0,6/mean/mask_special/no_normalize")[1] == {
        "layers": "0,6",
        "pooling": "mean",
        "mask_special": True,
        "normalize": False,
    }
    for bad in ("last", "last=-1", "la st=-1/mean", "x=-1/mean/sideways", "=-1/mean"):
        with pytest.raises(InvalidSpec):
            parse_view(bad)
    with pytest.raises(InvalidSpec, match="twice"):
        parse_views(["a=-1/mean", "a=-2/mean"])
    with pytest.raises(InvalidSpec, match="long"):
        parse_views({"a": {"layers": "-1", "long": "window"}})


@pytest.fixture(scope="module")
def texts() -> list[str]:
    lines = [line for line in NEWS.read_text().splitlines() if line.strip()][:12]
    return lines + ["a very long text " * 90]  # over 512 tokens: windows, stitched per view


@pytest.fixture(scope="module")
def views_store(tmp_path_factory: pytest.TempPathFactory, bundled: bertscope.Model, texts: list[str]) -> Path:
    path = tmp_path_factory.mktemp("views") / "views.parquet"
    embed_corpus(texts, path, model=bundled, views=VIEWS, long="window", progress=False)
    return path


def test_each_view_column_equals_embed_with_its_options(
    views_store: Path, bundled: bertscope.Model, texts: list[str]
) -> None:
    table = pq.read_table(views_store)
    settings = open_store(views_store).settings
    assert set(settings["views"]) == set(VIEWS)
    assert settings["views"]["cls4"]["combine"] == "concat" and settings["long"] == "window"
    for name, options in VIEWS.items():
        stored = np.array(table.column(f"embedding_{name}").to_pylist(), dtype=np.float32)
        expected = bundled.embed(texts, long="window", **options).vectors  # type: ignore[arg-type]
        assert stored.shape == expected.shape
        np.testing.assert_allclose(stored, expected, atol=1e-5)
    assert "embedding" not in table.column_names


def test_views_cost_one_forward_per_batch(
    tmp_path: Path, bundled: bertscope.Model, texts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = bundled.engine.forward

    def counted(ids: np.ndarray, type_ids: np.ndarray, mask: np.ndarray, deepest: int, layers=None):  # type: ignore[no-untyped-def]
        calls.append(deepest)
        return real(ids, type_ids, mask, deepest, layers)

    monkeypatch.setattr(bundled.engine, "forward", counted)
    embed_corpus(texts, tmp_path / "one.parquet", model=bundled, layers="-1", long="window", progress=False)
    single = list(calls)
    calls.clear()
    shallow = {"a": {"layers": "1", "pooling": "mean"}, "b": {"layers": "2,3", "pooling": "cls"}}
    embed_corpus(
        texts, tmp_path / "views.parquet", model=bundled, views=shallow, long="window", progress=False
    )
    assert len(calls) == len(single)  # the same batches, one forward each, for two views
    assert set(calls) == {3}  # stopped at the deepest layer a view needs


def test_similar_view_ranks_with_that_view(
    views_store: Path, bundled: bertscope.Model, texts: list[str]
) -> None:
    query = "a storm hits the coast"
    table = pq.read_table(views_store)
    for name, options in VIEWS.items():
        hits = search(query, views_store, view=name, k=len(texts), model=bundled)
        stored = np.array(table.column(f"embedding_{name}").to_pylist(), dtype=np.float32)
        q = bundled.embed([query], long="window", **options).vectors  # type: ignore[arg-type]
        scores = cos_sim(q, stored)[0]
        assert [h.id for h in hits] == [
            table.column("id")[i].as_py() for i in np.argsort(-scores, kind="stable")
        ]
        np.testing.assert_allclose([h.score for h in hits], np.sort(scores)[::-1], atol=1e-5)
    with pytest.raises(CorpusError, match="cls4, mid|last, cls4"):
        search(query, views_store, model=bundled)
    with pytest.raises(CorpusError, match="no view 'nope'"):
        search(query, views_store, view="nope", model=bundled)
    result = CliRunner().invoke(app, ["similar", query, "--in", str(views_store), "--view", "cls4", "--json"])
    assert result.exit_code == 0, result.output
    expected = search(query, views_store, view="cls4", k=5, model=bundled)
    assert [h["id"] for h in json.loads(result.stdout)] == [h.id for h in expected]


def test_views_need_a_parquet_output(tmp_path: Path, bundled: bertscope.Model) -> None:
    with pytest.raises(CorpusError, match="parquet"):
        embed_corpus(["a text"], tmp_path / "v.npy", model=bundled, views=["a=-1/mean"], progress=False)
    result = CliRunner().invoke(app, ["embed", "a text", "--view", "a=-1/mean"])
    assert result.exit_code != 0
