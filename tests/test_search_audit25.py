"""Audit 25a: search refuses another model before loading it, reads an id as it reads the store, and the
command line refuses -k 0 as a range error and shortens a long query in its table's title."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.core import loaders
from bertscope.errors import CorpusError, InvalidInput
from bertscope.io.occurrences import search_occurrences
from bertscope.io.search import search
from bertscope.io.stores import Store
from console import run_main
from test_index import clustered, write_store
from tiny_models import build_tiny_model

TEXTS = ["a storm hits the coast", "the cat sat", "we sat on the bank of the river"]


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT folder: a model whose files are not the bundled model's."""
    return build_tiny_model("bert", tmp_path_factory.mktemp("other") / "tinybert")


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, bundled: bertscope.Model) -> dict[str, Path]:
    """A sentence store and a token store made with the bundled model."""
    root = tmp_path_factory.mktemp("stores")
    made = {"sentence": root / "s.parquet", "tokens": root / "tok.parquet"}
    bertscope.embed_corpus(TEXTS, made["sentence"], model=bundled, progress=False)
    bertscope.embed_corpus(TEXTS, made["tokens"], model=bundled, level="tokens", progress=False)
    return made


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch, cache: Path) -> list[Any]:
    """The names the registered loader was asked for; each load stops the search (nothing loads)."""
    asked: list[Any] = []

    def load_model(name: Any, **options: Any) -> None:
        asked.append(name)
        raise InvalidInput("stop: the model would load here")

    monkeypatch.setattr(loaders, "load_model", load_model)
    return asked


def test_a_folder_of_other_files_is_refused_before_it_loads(
    stores: dict[str, Path], other: Path, bundled_path: Path, loads: list[Any], cache: Path
) -> None:
    """`similar -m OTHER` (no --device) and `search(..., model=folder)` loaded and exported OTHER (~15 s)
    before `same_model` refused it: the folder's files are compared first now, by search and by the
    occurrence search alike; the store's own folder still loads."""
    store, tokens = stores["sentence"], stores["tokens"]
    refusal = f"the files of the model {other} are not those it was made with"
    with pytest.raises(CorpusError, match=refusal):
        search("a storm", store, model=str(other))
    with pytest.raises(CorpusError, match=refusal):
        search_occurrences(tokens, word="bank", context="the bank of the river", model=other)
    ran = run_main("similar", "a storm", "--store", str(store), "-m", str(other), "-k", "2")
    assert ran.code == 1 and refusal in ran.stderr, ran.stderr
    ran = run_main(
        "similar", "--store", str(tokens), "--word", "bank", "--context", "the bank", "-m", str(other)
    )
    assert ran.code == 1 and refusal in ran.stderr, ran.stderr
    assert loads == [] and not list(cache.rglob("*.onnx"))
    with pytest.raises(InvalidInput, match="stop: the model would load here"):
        search("a storm", store, model=str(bundled_path))
    assert loads == [str(bundled_path)]


def test_an_id_is_looked_up_rows_per_read_rows_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`search(item_id=...)` read the id's vector 65,536 rows at a time whatever `rows_per_read` said (a
    50k-row store: 387 MiB where the search itself stayed at 171): the lookup reads as the search does."""
    vectors = clustered(20, 1)
    path = write_store(tmp_path / "store.parquet", vectors)
    sizes: list[int] = []
    chunks = Store.chunks

    def recorded(self: Store, size: int = 65536) -> Any:
        sizes.append(size)
        return chunks(self, size)

    monkeypatch.setattr(Store, "chunks", recorded)
    hits = search(None, path, item_id="r7", rows_per_read=3, exact=True, top_k=1)
    assert sizes and set(sizes) == {3}
    assert hits[0].id != "r7"  # the id itself is left out of its own neighbours


@pytest.mark.parametrize("k", ["0", "-1"])
def test_top_k_under_one_is_a_range_error(stores: dict[str, Path], k: str) -> None:
    """`similar -k 0` exited 1 with the library's line, where --nprobe 0 and the other commands' -k are
    click range errors (exit 2, docs/errors.md)."""
    ran = run_main("similar", "a storm", "--store", str(stores["sentence"]), "-k", k)
    assert ran.code == 2 and "greater than or equal to 1" in ran.stderr, ran.stderr


def test_a_long_query_is_shortened_in_the_title(stores: dict[str, Path]) -> None:
    """A query of 400 words was printed whole as the table's title (~90 lines above a 2-row table)."""
    query = " ".join(["storm coast"] * 400)
    ran = run_main("similar", query, "--store", str(stores["sentence"]), "-k", "2")
    assert ran.code == 0, ran.stderr
    assert "storm coast storm" in ran.stdout and query not in ran.stdout
    assert len(ran.stdout.splitlines()) < 12, ran.stdout
