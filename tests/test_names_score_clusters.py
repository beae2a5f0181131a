"""One concept, one name (audit 5 N3, N12): a static neighbour's cosine is its `score`, as every hit's and
as the service's /static neighbours say (`Neighbor.score`, `static --json`'s `score`); the number of a word's
senses is scikit-learn's `n_clusters`, as `word_senses(n_clusters=)` and `senses -n/--n-clusters` name it
(`Senses.n_clusters`, `senses --json`'s `n_clusters`). The old library names (`Neighbor.cosine`,
`Senses.k`) still give the same values, with a DeprecationWarning that points at the caller's line; the
--json keys are renamed outright."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.research.senses import Senses, word_senses
from bertscope.static import Neighbor, lookup
from console import json_of, no_deprecation, run_main

SENSES = Path(__file__).parent / "data" / "bank_senses.txt"
NEIGHBOUR_KEYS = {"token", "id", "score"}


def _old_name(value: Any, attribute: str) -> Any:
    """`value.attribute` read under its old name: the DeprecationWarning names the new one and points here."""
    with pytest.warns(DeprecationWarning, match=r"is deprecated; use \.") as said:
        got = getattr(value, attribute)
    assert said[0].filename == __file__, said[0].filename
    return got


# A static neighbour's score -------------------------------------------------------------------------


def test_neighbours_say_score_the_cosine_of_the_rows(bundled: bertscope.Model) -> None:
    with no_deprecation("is deprecated; use ."):
        found = bundled.static_neighbors("bread", top_k=3)
        weight = bundled.static(list(range(bundled.static_shape[0]))).astype(np.float64)
        query = weight[bundled.vocab["bread"]]
        for n in found:
            row = weight[n.id]
            direct = float(row @ query / (np.linalg.norm(row) * np.linalg.norm(query)))
            assert n.score == pytest.approx(direct, abs=1e-5)
            assert n.to_dict() == {"token": n.token, "id": n.id, "score": n.score}
    assert [n.score for n in found] == sorted((n.score for n in found), reverse=True)
    assert "cosine" not in {f.name for f in Neighbor.__dataclass_fields__.values()}


def test_the_old_neighbour_name_still_gives_the_score(bundled: bertscope.Model, static_m2v: Any) -> None:
    for n in bundled.static_neighbors("bread", top_k=3):
        assert _old_name(n, "cosine") == n.score
    piece = next(t for t in static_m2v.vocab if t.isalpha() and len(t) > 1)
    distilled = static_m2v.static_neighbors(piece, top_k=2)  # a StaticModel's neighbours, the same type
    assert len(distilled) == 2 and all(isinstance(n, Neighbor) for n in distilled)
    assert [_old_name(n, "cosine") for n in distilled] == [n.score for n in distilled]
    with pytest.raises(AttributeError):
        distilled[0].cosine = 0.5  # type: ignore[misc]  # read-only: the score is set as `score`


def test_lookup_and_static_json_name_each_neighbours_score(bundled: bertscope.Model) -> None:
    want = bundled.static_neighbors("bread", top_k=3)
    with no_deprecation("is deprecated; use ."):
        piece = lookup(bundled, "bread", top_k=3)
        word = lookup(bundled, "breadmaker", as_words=True, top_k=2)
        said = json_of("static", "bread", "-k", "3")["items"][0]
        said_word = json_of("static", "breadmaker", "--as-words", "-k", "2")["items"][0]
    for record in (piece, word, said, said_word):
        assert [set(n) for n in record["neighbors"]] == [NEIGHBOUR_KEYS] * len(record["neighbors"])
    assert piece["neighbors"] == said["neighbors"] == [n.to_dict() for n in want]
    assert said_word["neighbors"] == word["neighbors"]
    assert (
        said_word["neighbors"][0]["score"]
        == bundled.static_neighbors(bundled.static_word("breadmaker").vector, top_k=1)[0].score
    )
    # The table keeps its readable header and prints the same score.
    table = run_main("static", "bread", "-k", "1")
    assert table.code == 0 and "score" in table.stdout  # the table heads its column as --json names it
    assert f"{want[0].score:.4f}" in table.stdout


# A word's number of senses -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, bundled: bertscope.Model) -> Path:
    """The bank corpus (10 river uses, 10 money uses) as word rows of the last layer."""
    path = tmp_path_factory.mktemp("clusters") / "words.parquet"
    bertscope.embed_corpus(SENSES, path, model=bundled, level="words")
    return path


@pytest.fixture(scope="module")
def chosen(store: Path) -> Senses:
    with no_deprecation("is deprecated; use ."):
        return word_senses(store, "bank")


def test_senses_say_n_clusters(store: Path, chosen: Senses) -> None:
    assert chosen.n_clusters == 2 == len(chosen.senses)  # chosen by silhouette
    with no_deprecation("is deprecated; use ."):
        given = word_senses(store, "bank", n_clusters=3)
        said = given.to_dict()
    assert given.n_clusters == 3 == len(given.senses) and given.criterion == "3 clusters: given"
    assert said["n_clusters"] == 3 and "k" not in said and said == given.as_dict()
    assert "k" not in {f.name for f in Senses.__dataclass_fields__.values()}


def test_the_old_senses_name_still_gives_the_number(store: Path, chosen: Senses) -> None:
    assert _old_name(chosen, "k") == chosen.n_clusters == 2
    with pytest.warns(DeprecationWarning, match=r"word_senses\(k=\.\.\.\) is deprecated; use n_clusters="):
        given = word_senses(store, "bank", k=3)  # the old keyword, still read
    assert _old_name(given, "k") == given.n_clusters == 3
    with pytest.raises(AttributeError):
        given.k = 4  # type: ignore[misc]  # read-only: the number is set as `n_clusters`


def test_senses_json_says_n_clusters(store: Path, chosen: Senses) -> None:
    with no_deprecation("is deprecated; use ."):
        found = json_of("senses", "bank", "--store", str(store), "--examples", "1")
        given = json_of("senses", "bank", "--store", str(store), "-n", "3", "--examples", "1")
    assert found["n_clusters"] == chosen.n_clusters == 2 and "k" not in found
    assert given["n_clusters"] == 3 and "k" not in given
    assert [s["size"] for s in found["senses"]] == [s.size for s in chosen.senses]
