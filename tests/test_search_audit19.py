"""Audit 19g: search, the ANN index and the stores it reads say what is so, and what to do."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import bertscope
from bertscope.errors import CorpusError, InvalidInput
from bertscope.io.index import IndexStaleWarning, index_paths, index_state
from bertscope.io.index_build import build_index
from bertscope.io.query import PrecisionWarning, same_model
from bertscope.io.search import search
from console import run_main
from test_index import clustered, write_store


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Parquet store of 400 synthetic vectors ("r0".."r399") with its index, never changed by a test."""
    path = write_store(tmp_path_factory.mktemp("indexed") / "store.parquet", clustered(400, 3))
    build_index(path)
    return path


@pytest.mark.parametrize("lost", [1, 2])  # the description (.index.json), the vectors' copy (.index.npy)
def test_a_half_deleted_index_is_damaged_not_missing(tmp_path: Path, lost: int) -> None:
    """An index with one of its files deleted is stale, naming the file, with the rebuild: not 'no index'
    (which sent `index build` into 'exists; pass --overwrite' and let --nprobe say 'build one')."""
    path = write_store(tmp_path / "store.parquet", clustered(400, 4))
    build_index(path)
    gone = index_paths(path)[lost]
    gone.unlink()
    state = index_state(path)
    assert state.status == "stale" and f"{gone} is missing" in state.reason
    with pytest.warns(IndexStaleWarning, match=rf"{gone} is missing.*index build {path} --overwrite"):
        hits = search(clustered(400, 4)[7], path, top_k=1, nprobe=4)
    assert hits[0].id == "r7"  # read exactly, every row
    info = run_main("index", "info", str(path), "--json")
    shown = json.loads(info.stdout)
    assert info.code == 0 and shown["status"] == "stale" and f"{gone} is missing" in shown["reason"]
    assert shown["fix"] == f"rebuild the index with `bertscope index build {path} --overwrite`"
    assert "--overwrite" in run_main("index", "info", str(path)).stdout
    rebuilt = run_main("index", "build", str(path), "--overwrite", "-q")
    assert rebuilt.code == 0 and index_state(path).fresh


def test_an_npy_store_needs_no_copy_and_no_files_is_missing(tmp_path: Path) -> None:
    """A .npy store's index has no copy (its matrix is read): two files make it whole; none is 'missing'."""
    path = write_store(tmp_path / "store.npy", clustered(400, 5))
    assert index_state(path).status == "missing"
    build_index(path)
    assert index_state(path).fresh and not index_paths(path)[2].exists()
    index_paths(path)[0].unlink()
    state = index_state(path)
    assert state.status == "stale" and f"{index_paths(path)[0]} is missing" in state.reason


def test_index_commands_refuse_a_db_before_asking_for_a_collection(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    """`index build/info` on a .db say it takes no index: not 'name one with --collection' (an option
    neither has) for several collections, nor 'missing: no index beside one.db' for one."""
    store = tmp_path / "c.db"
    for name in ("a", "b"):
        bertscope.embed_corpus(["one text", "another"], store, model=bundled, collection=name)
    single = tmp_path / "one.db"
    bertscope.embed_corpus(["one text", "another"], single, model=bundled)
    for path in (store, single):
        for command in ("build", "info"):
            ran = run_main("index", command, str(path))
            assert ran.code != 0 and "--collection" not in ran.stderr, ran.stderr
            assert f"{path}: a .db store takes no index" in ran.stderr
        with pytest.raises(CorpusError, match="a .db store takes no index"):
            index_state(path)
        with pytest.raises(CorpusError, match="a .db store takes no index"):
            build_index(path)
    helped = run_main("index", "info", "--help").stdout
    assert "Which view's index" in helped and "to index" not in helped


def test_similar_refuses_stdin_dash_instead_of_searching_for_it(indexed: Path) -> None:
    """`similar -` searched for the text "-" (every other command reads '-' as stdin): refused in one line."""
    ran = run_main("similar", "-", "--store", str(indexed))
    assert ran.code != 0 and ran.stdout == ""
    assert "reads no stdin ('-'): give the text in quotes" in ran.stderr, ran.stderr


@pytest.mark.parametrize("query", ["", "   "])
def test_an_empty_query_is_named_as_the_query_before_a_model_loads(indexed: Path, query: str) -> None:
    """An empty query said "text 0 is empty" (after loading the store's model): now "the query is empty",
    checked first (this store's model, "synthetic", cannot be loaded at all)."""
    with pytest.raises(InvalidInput, match=r"^the query is empty: every text needs a non-space character"):
        search(query, indexed)
    ran = run_main("similar", query, "--store", str(indexed))
    assert ran.code != 0 and "error: the query is empty" in ran.stderr, ran.stderr


def test_a_precision_asked_by_flag_is_named_as_the_flag_not_as_a_model(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    """`similar --dtype bfloat16` with no -m warned "... or leave -m out": it names the flag given now,
    and the library still names the model given, with the keyword that loads it at the store's precision."""
    store = tmp_path / "s.parquet"
    bertscope.embed_corpus(["a storm hits the coast", "the cat sat"], store, model=bundled)
    ran = run_main("similar", "a storm", "--store", str(store), "--dtype", "bfloat16", "--backend", "torch")
    assert ran.code == 0, ran.stderr
    assert (
        f"warning: {store} was made with dtype float32; the query's model runs with --dtype bfloat16: scores "
        "may move a little; for the store's own cosines leave --dtype out"
    ) in " ".join(ran.stderr.split()), ran.stderr
    assert "leave -m out" not in ran.stderr
    settings = {"model": "synthetic", "dtype": "float32", "quantize": None}
    model = SimpleNamespace(source="synthetic", dtype="float32", quantize="int8")
    given = SimpleNamespace(info=lambda: model, loaded=SimpleNamespace(path=None))
    with pytest.warns(PrecisionWarning, match=r"at its precision \(quantize='none'\), or leave model= out"):
        same_model(settings, given, path=store)


def test_a_query_vector_of_another_width_is_refused_alike_in_every_store(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    """A wrong-width query vector on SQLite or a view said "search with the model, settings and
    post-processing the store was made with"; every store kind says the .parquet line now, before a row
    is read: the collection's width, a view's own (concat of two layers: twice the store's first)."""
    texts = ["a storm hits the coast", "the cat sat"]
    db = tmp_path / "s.db"
    bertscope.embed_corpus(texts, db, model=bundled, collection="news", progress=False)
    views = tmp_path / "v.parquet"
    bertscope.embed_corpus(
        texts, views, model=bundled, views=["a=-1/mean", "b=-1,-2/mean/concat"], progress=False
    )
    npy = write_store(tmp_path / "s.npy", clustered(10, 6))
    cases = [(db, {"collection": "news"}, 384), (views, {"view": "a"}, 384), (views, {"view": "b"}, 768)]
    for path, options, width in [*cases, (npy, {}, 64)]:
        with pytest.raises(
            InvalidInput,
            match=rf"^the query vector has 10 numbers but the store's vectors have {width}: give a vector of",
        ):
            search([1.0] * 10, path, **options)
        hits = search([1.0] * width, path, top_k=1, **options)
        assert len(hits) == 1


def test_a_missing_word_is_said_of_the_store_the_caller_named(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    """POST /occurrences for a word that never occurs named the server's file ('never occurs in
    /srv/tok.parquet') where the client sent the store `news`: said of "the store" now; the library and
    the command line, given a path, name it."""
    from fastapi.testclient import TestClient

    from bertscope.io.occurrences import search_occurrences
    from bertscope.server import ServerSettings, create_app

    store = tmp_path / "tok.parquet"
    bertscope.embed_corpus(
        ["we sat on the bank", "the bank was closed"], store, model=bundled, level="tokens"
    )
    settings = ServerSettings(stores=(("news", str(store)),))
    with TestClient(create_app(bundled, settings=settings)) as client:
        refused = client.post("/occurrences", json={"store": "news", "word": "bnak"})
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert detail.startswith("'bnak' never occurs in the store; close words that do: bank"), detail
    assert str(tmp_path) not in detail
    with pytest.raises(CorpusError, match=rf"^'bnak' never occurs in {store}; close words"):
        search_occurrences(store, word="bnak")
    ran = run_main("similar", "--store", str(store), "--word", "bnak")
    assert ran.code != 0 and f"'bnak' never occurs in {store}" in ran.stderr, ran.stderr


def test_a_model_folder_of_other_files_is_refused_before_it_loads(
    tmp_path: Path,
    bundled: bertscope.Model,
    bundled_path: Path,
    tiny_dirs: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`similar -m OTHER --dtype ...` loaded and exported OTHER (~7 s) before the files check refused it:
    the folder's files are compared first now; the store's own folder still loads."""
    import sys

    import bertscope.cli

    cli_app = sys.modules["bertscope.cli.app"]  # the module: `bertscope.cli.app` is also the Typer app
    store = tmp_path / "s.parquet"
    bertscope.embed_corpus(["a storm hits the coast", "the cat sat"], store, model=bundled, progress=False)
    loads: list[object] = []

    def load_model(name: object, **options: object) -> None:
        loads.append(name)
        raise InvalidInput("stop: the model would load here")

    monkeypatch.setattr(cli_app, "load_model", load_model)
    other = tiny_dirs["bert"]
    ran = run_main("similar", "a storm", "--store", str(store), "-m", str(other), "--dtype", "float32")
    assert ran.code != 0 and loads == [], ran.stderr
    assert f"the files of the model {other} are not those it was made with" in ran.stderr
    ran = run_main("similar", "a storm", "--store", str(store), "-m", str(bundled_path), "--dtype", "float32")
    assert "stop: the model would load here" in ran.stderr and loads == [str(bundled_path)], ran.stderr


def test_index_on_a_path_of_no_known_kind_is_left_to_the_store_to_name(tmp_path: Path) -> None:
    """A Ray job's output folder read 'not a bertscope output' once the format was checked first (review):
    the store's own reading names it, as before."""
    folder = tmp_path / "rayout"
    folder.mkdir()
    for command in ("build", "info"):
        ran = run_main("index", command, str(folder))
        assert ran.code != 0 and "not a bertscope output" not in ran.stderr, ran
        assert "a folder, not a file" in ran.stderr, ran
