"""One concept, one name: a count of results is `top_k` in the library (sentence-transformers'
`util.semantic_search(top_k=)`), on the command line (`-k/--top-k`) and in the service's bodies. The older
spellings (`top=`, `k=`; `"top"`, `"k"`) are still read, with the same answer and no warning; both at once
is refused in one line naming both; the OpenAPI schema names `top_k` only."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import bertscope
from bertscope.errors import InvalidInput
from bertscope.research.compare import moved_rows
from bertscope.static import lookup, neighbors
from test_server import serving

A, B = "The cat sat on the mat.", "A dog lay on the rug."
TEXTS = ["The bank raised its interest rates.", "We sat on the river bank.", "A storm closed two roads."]
SENSES = Path(__file__).parent / "data" / "bank_senses.txt"


def _same(new: Callable[..., Any], old: Callable[..., Any], count: int, old_name: str) -> tuple[Any, Any]:
    """The answers under top_k= and under the older name, the older one giving no warning at all."""
    by_new = new(top_k=count)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        by_old = old(**{old_name: count})
    return by_new, by_old


def _refused(call: Callable[..., Any], old_name: str) -> None:
    with pytest.raises(
        InvalidInput, match=rf"^{old_name}= is the older spelling of top_k=; give top_k= only$"
    ):
        call(top_k=2, **{old_name: 2})  # whatever the values: both given is refused


@pytest.fixture(scope="module")
def token_store(tmp_path_factory: pytest.TempPathFactory, bundled: bertscope.Model) -> Path:
    path = tmp_path_factory.mktemp("top_k") / "tokens.parquet"
    bertscope.embed_corpus(SENSES, path, model=bundled, level="tokens")
    return path


@pytest.fixture(scope="module")
def sentence_store(tmp_path_factory: pytest.TempPathFactory, bundled: bertscope.Model) -> Path:
    path = tmp_path_factory.mktemp("top_k") / "sentences.npy"
    bertscope.embed_corpus(SENSES, path, model=bundled)
    return path


# The library -----------------------------------------------------------------------------------------


def test_explain_takes_top_k_and_still_reads_top(bundled: bertscope.Model) -> None:
    def call(**count: Any) -> Any:
        return bundled.explain(A, B, pooling="mean", **count)

    new, old = _same(call, call, 3, "top")
    assert len(new.top_pairs) == 3 and new.top_pairs == old.top_pairs
    assert len(call().top_pairs) == 10  # the default is unchanged
    _refused(call, "top")
    with pytest.raises(bertscope.InvalidSpec, match="top_k must be a whole number of at least 0, got -1"):
        call(top_k=-1)


def test_static_neighbors_take_top_k_and_still_read_k(bundled: bertscope.Model) -> None:
    def call(**count: Any) -> list[str]:
        return [n.token for n in bundled.static_neighbors("bread", **count)]

    new, old = _same(call, call, 4, "k")
    assert len(new) == 4 and new == old
    assert len(call()) == 10
    _refused(call, "k")
    _refused(lambda **count: neighbors(bundled, "bread", **count), "k")
    with pytest.raises(bertscope.InvalidSpec, match="top_k must be a whole number of at least 1, got 0"):
        call(top_k=0)
    by_lookup = lookup(bundled, "bread", top_k=4)
    assert (
        [n["token"] for n in by_lookup["neighbors"]]
        == new
        == [n["token"] for n in lookup(bundled, "bread", k=4)["neighbors"]]
    )
    assert "neighbors" not in lookup(bundled, "bread")
    _refused(lambda **count: lookup(bundled, "bread", **count), "k")


def test_search_takes_top_k_and_still_reads_k(bundled: bertscope.Model, sentence_store: Path) -> None:
    def call(**count: Any) -> list[tuple[str, float]]:
        return [
            (h.id, h.score)
            for h in bertscope.search("money at the bank", sentence_store, model=bundled, **count)
        ]

    new, old = _same(call, call, 3, "k")
    assert len(new) == 3 and new == old
    assert len(call()) == 5
    _refused(call, "k")
    with pytest.raises(bertscope.CorpusError, match="top_k must be a whole number of at least 1, got 0"):
        call(top_k=0)


def test_search_occurrences_takes_top_k_and_still_reads_k(
    bundled: bertscope.Model, token_store: Path
) -> None:
    def call(**count: Any) -> list[tuple[str, int, float | None]]:
        found = bertscope.search_occurrences(
            token_store, word="bank", context="we sat on the bank of the river", model=bundled, **count
        )
        return [(h.id, h.position, h.score) for h in found.hits]

    new, old = _same(call, call, 4, "k")
    assert len(new) == 4 and new == old
    assert len(call()) == 5  # the default, as search and similar list texts
    _refused(call, "k")


def test_contextuality_and_geometry_take_top_k(bundled: bertscope.Model) -> None:
    sentences = ["the cat sat", "the cat ran", "a cat and the dog", "the dog sat", "a dog ran"]

    def words(**count: Any) -> list[str]:
        return list(bundled.contextuality(sentences, min_contexts=2, **count).per_word)

    new, old = _same(words, words, 2, "top")
    assert len(new) == 2 and new == old
    _refused(words, "top")

    def rogue(**count: Any) -> Any:
        return [row["rogue"] for row in bundled.geometry(TEXTS, layers="-1", **count).layers]

    new, old = _same(rogue, rogue, 2, "top")
    assert len(new[0]) == 2 and new == old
    _refused(rogue, "top")
    for bad in (-1, 1.5, "3", True):  # refused before the pass over the texts, as every count is
        with pytest.raises(
            bertscope.InvalidSpec, match=r"^top_k must be a whole number of at least 0 \(rogue"
        ):
            rogue(top_k=bad)
    assert rogue(top_k=0) == [[]]


def test_compare_takes_top_k(
    tiny_dirs: dict[str, Path], tiny_models: dict[str, bertscope.Model], tmp_path: Path
) -> None:
    """A copy of the tiny BERT with five input rows changed: top_k=3 lists three of them, as top=3 does."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(tiny_dirs["bert"], tmp_path / "child")
    weights = load_file(tmp_path / "child" / "model.safetensors")
    name = next(key for key in weights if key.endswith("word_embeddings.weight"))
    for i in range(10, 15):
        weights[name][i] = weights[name][i] * 2 + 0.1 * (i - 9)
    save_file(weights, tmp_path / "child" / "model.safetensors", metadata={"format": "pt"})
    a, b = tiny_models["bert"], bertscope.load(tmp_path / "child", device="cpu", backend="torch")
    texts = [" ".join(a.id_to_token[i] for i in range(20, 30))]

    def rows(**count: Any) -> list[int]:
        return [r["id"] for r in bertscope.compare(a, b, texts, **count).static]

    new, old = _same(rows, rows, 3, "top")
    assert len(new) == 3 and new == old and set(new) <= set(range(10, 15))
    assert len(rows()) == 5  # the default (20) lists every changed row
    _refused(rows, "top")
    assert moved_rows(a, b, top_k=2) == moved_rows(a, b, top=2) and len(moved_rows(a, b, top_k=2)[0]) == 2
    _refused(lambda **count: moved_rows(a, b, **count), "top")
    for bad in (-1, 0, 1.5, "3", True):  # as the command line's min=1: not every row, nor a TypeError
        for call in (lambda **count: moved_rows(a, b, **count), rows):
            with pytest.raises(bertscope.InvalidSpec, match=r"^top_k must be a whole number of at least 1"):
                call(top_k=bad)
    with pytest.raises(bertscope.InvalidSpec, match=r"^top must be a whole number of at least 1"):
        moved_rows(a, b, top=0)  # named as the caller wrote it


# The service -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http(bundled: bertscope.Model, token_store: Path) -> Iterator[httpx.Client]:
    with (
        serving(bundled, stores=(("bank", str(token_store)),)) as base,
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        yield client


def _answer(http: httpx.Client, route: str, body: dict[str, Any]) -> Any:
    response = http.post(route, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def _both_refused(http: httpx.Client, route: str, body: dict[str, Any], old: str) -> None:
    response = http.post(route, json={**body, "top_k": 2, old: 2})
    assert response.status_code == 422, response.text
    detail = str(response.json()["detail"])
    assert "\n" not in detail
    assert (
        f'"top_k" and "{old}" both given: "{old}" is the older spelling of "top_k"; send "top_k" only'
        in detail
    )


ROUTES = [
    ("/explain", {"a": A, "b": B, "pooling": "mean"}, "top", "top_pairs"),
    ("/occurrences", {"store": "bank", "word": "bank", "context": "the river bank was muddy"}, "k", "hits"),
    ("/static", {"inputs": "bread"}, "k", "items"),
]


@pytest.mark.parametrize(("route", "body", "old", "listed"), ROUTES)
def test_routes_take_top_k_and_still_read_the_older_name(
    http: httpx.Client, route: str, body: dict[str, Any], old: str, listed: str
) -> None:
    by_new = _answer(http, route, {**body, "top_k": 3})
    by_old = _answer(http, route, {**body, old: 3})
    assert by_new == by_old
    found = by_new[listed][0]["neighbors"] if route == "/static" else by_new[listed]
    assert len(found) == 3
    _both_refused(http, route, body, old)
    below = http.post(route, json={**body, "top_k": -1})
    assert below.status_code == 422 and "top_k" in below.text


def test_routes_answer_as_the_library(
    http: httpx.Client, bundled: bertscope.Model, token_store: Path
) -> None:
    explained = _answer(http, "/explain", {"a": A, "b": B, "pooling": "mean", "top_k": 2})["top_pairs"]
    assert len(explained) == 2
    assert [(p["i"], p["j"]) for p in explained] == [
        (p["i"], p["j"]) for p in bundled.explain(A, B, pooling="mean", top_k=2).top_pairs
    ]
    static = _answer(http, "/static", {"inputs": "bread", "top_k": 2})["items"][0]["neighbors"]
    assert [n["token"] for n in static] == [n.token for n in bundled.static_neighbors("bread", top_k=2)]


@pytest.mark.parametrize(
    ("schema", "old"), [("ExplainRequest", "top"), ("OccurrencesRequest", "k"), ("StaticRequest", "k")]
)
def test_the_openapi_schema_names_top_k_only(http: httpx.Client, schema: str, old: str) -> None:
    properties = http.get("/openapi.json").json()["components"]["schemas"][schema]["properties"]
    assert "top_k" in properties and old not in properties
