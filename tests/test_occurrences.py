"""Search by occurrence: the right sense first, the store's own way, bad input, the CLI and the service."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.errors import CorpusError, InvalidInput
from bertscope.io.occurrences import occurrence_vectors, search_occurrences
from bertscope.server import ServerSettings, create_app
from test_cli import run_ok
from test_server import serving

SENSES = Path(__file__).parent / "data" / "bank_senses.txt"
RIVER = {str(i) for i in range(1, 11)}  # lines 1-10 use "bank" for a river's side, 11-20 for money
MONEY = {str(i) for i in range(11, 21)}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, bundled: bertscope.Model) -> dict[str, Path]:
    """The bank corpus as token rows (two stacked layers, float16), word rows, and sentence vectors."""
    root = tmp_path_factory.mktemp("occurrences")
    made = {
        "tokens": root / "tokens.parquet",
        "words": root / "words.parquet",
        "sentence": root / "sentence.parquet",
    }
    bertscope.embed_corpus(
        SENSES,
        made["tokens"],
        model=bundled,
        level="tokens",
        layers="-2,-1",
        combine="stack",
        precision="float16",
    )
    bertscope.embed_corpus(SENSES, made["words"], model=bundled, level="words")
    bertscope.embed_corpus(SENSES, made["sentence"], model=bundled)
    return made


@pytest.mark.parametrize("level", ["tokens", "words"])
@pytest.mark.parametrize(
    "context, sense",
    [("we sat on the bank of the river", RIVER), ("the bank charged interest on the loan", MONEY)],
)
def test_the_sense_of_the_context_comes_first(
    stores: dict[str, Path], bundled: bertscope.Model, level: str, context: str, sense: set[str]
) -> None:
    found = search_occurrences(stores[level], word="bank", context=context, k=5, model=bundled)
    assert found.n_occurrences == 20
    assert {hit.id for hit in found.hits} <= sense
    scores = [hit.score for hit in found.hits]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


def test_a_stored_context_finds_its_own_occurrence_at_cosine_one(
    stores: dict[str, Path], bundled: bertscope.Model
) -> None:
    line = SENSES.read_text().splitlines()[11]  # id 12
    for level in ("tokens", "words"):
        top = search_occurrences(stores[level], word="bank", context=line, k=1, model=bundled).hits[0]
        assert top.id == "12" and top.score == pytest.approx(1.0, abs=1e-5)
        assert line[top.start : top.end] == "bank" and "«bank»" in top.snippet


def test_listing_and_vectors_of_a_word(stores: dict[str, Path]) -> None:
    listed = search_occurrences(stores["tokens"], word="Bank", k=3)
    assert listed.n_occurrences == 20 and [h.id for h in listed.hits] == ["1", "2", "3"]
    assert all(h.score is None for h in listed.hits)
    hits, vectors = occurrence_vectors(stores["tokens"], word="bank")
    assert len(hits) == 20 and vectors.shape == (20, 2 * 384)


def test_bad_input_says_what_to_do(
    stores: dict[str, Path], bundled: bertscope.Model, tiny_models: dict[str, bertscope.Model]
) -> None:
    with pytest.raises(CorpusError, match="'bnak' never occurs.*close words that do: bank"):
        search_occurrences(stores["tokens"], word="bnak")
    with pytest.raises(InvalidInput, match="does not contain the word 'bank'"):
        search_occurrences(stores["tokens"], word="bank", context="a river runs through it", model=bundled)
    with pytest.raises(CorpusError, match="sentence rows.*--tokens"):
        search_occurrences(stores["sentence"], word="bank")
    with pytest.raises(CorpusError, match="made with all-MiniLM.*layers \\[5, 6\\].*stack"):
        search_occurrences(stores["tokens"], word="bank", context="the bank", model=tiny_models["bert"])
    with pytest.raises(CorpusError, match=r"made with .*layers '-1' were asked.*\(leave layers= out\)$"):
        search_occurrences(stores["tokens"], word="bank", context="the bank", model=bundled, layers="-1")
    with pytest.raises(CorpusError, match="tokens rows.*--word"):
        bertscope.search("a river", stores["tokens"], model=bundled)
    # model= and layers= embed the context: without one they were ignored in silence
    with pytest.raises(InvalidInput, match=r"^model= embed the context.*add context=TEXT, or drop model=$"):
        search_occurrences(stores["tokens"], word="bank", model=tiny_models["bert"])
    with pytest.raises(InvalidInput, match=r"^model= and layers= embed the context"):
        search_occurrences(stores["tokens"], word="bank", model=bundled, layers="-1")
    npy = stores["tokens"].with_name("tokens.npy")
    bertscope.embed_corpus(SENSES, npy, model=bundled, level="tokens", overwrite=True)
    with pytest.raises(CorpusError, match="tokens rows in .npy; occurrences need a .parquet store"):
        search_occurrences(npy, word="bank")


def test_cli_similar_by_word(stores: dict[str, Path]) -> None:
    found = json.loads(
        run_ok(
            "similar",
            "--in",
            str(stores["words"]),
            "--word",
            "bank",
            "--context",
            "she paid the bank back",
            "-k",
            "3",
            "--json",
        )  # fmt: skip
    )
    assert found["n_occurrences"] == 20 and {h["id"] for h in found["hits"]} <= MONEY
    table = run_ok("similar", "--in", str(stores["tokens"]), "--word", "bank", "-k", "2")
    assert "occurrences of 'bank' (20 in the store)" in table and "«bank»" in table
    result = CliRunner().invoke(app, ["similar", "--in", str(stores["tokens"]), "--word", "banks"])
    assert result.exit_code != 0 and "never occurs" in str(result.exception)


def test_service_occurrences(stores: dict[str, Path], bundled: bertscope.Model) -> None:
    with serving(bundled, stores=(("bank", str(stores["tokens"])),)) as base:
        body = {"store": "bank", "word": "bank", "context": "the river bank was muddy", "k": 4}
        answer = httpx.post(f"{base}/occurrences", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        hits = answer.json()["hits"]
        assert answer.json()["n_occurrences"] == answer.json()["total"] == 20  # its older name beside it
        assert {h["id"] for h in hits} <= RIVER
        local = search_occurrences(stores["tokens"], word="bank", context=body["context"], k=4, model=bundled)
        np.testing.assert_allclose([h["score"] for h in hits], [h.score for h in local.hits], atol=1e-6)
        missing = httpx.post(f"{base}/occurrences", json={**body, "store": "nope"}, timeout=60)
        assert missing.status_code == 422 and "no store named 'nope'" in missing.text
        absent = httpx.post(f"{base}/occurrences", json={**body, "context": "money"}, timeout=60)
        assert absent.status_code == 422 and "does not contain" in absent.text
        listed = httpx.post(f"{base}/occurrences", json={"store": "bank", "word": "bank", "k": 2}, timeout=60)
        assert listed.status_code == 200, listed.text
        assert listed.json()["n_occurrences"] == 20 and [h["id"] for h in listed.json()["hits"]] == ["1", "2"]


def test_service_refuses_a_store_of_another_model(
    stores: dict[str, Path], tiny_models: dict[str, bertscope.Model]
) -> None:
    with pytest.raises(CorpusError, match=r"made with all-MiniLM.*serve the store's own model \(-m\)"):
        create_app(tiny_models["bert"], settings=_settings(stores["tokens"]))


def test_service_serves_a_store_with_its_models_files_under_another_name(
    stores: dict[str, Path], bundled_path: Path
) -> None:
    """The served model is compared by its files, as each query compares it: the bundled model loaded by
    its folder's path is the store's model."""
    same_files = bertscope.load(str(bundled_path))
    assert same_files.info().source != bertscope.load().info().source
    create_app(same_files, settings=_settings(stores["tokens"]))


def _settings(path: Path) -> ServerSettings:
    return ServerSettings(stores=(("bank", str(path)),))
