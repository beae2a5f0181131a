"""Senses: the bank corpus splits into its river and money uses; the CLI prints, draws and says why k."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bertscope
from bertscope.errors import InvalidInput
from bertscope.research.senses import word_senses
from console import run_main
from test_cli import run_ok

SENSES = Path(__file__).parent / "data" / "bank_senses.txt"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, bundled: bertscope.Model) -> Path:
    """The bank corpus as word rows of the last layer."""
    path = tmp_path_factory.mktemp("senses") / "words.parquet"
    bertscope.embed_corpus(SENSES, path, model=bundled, level="words")
    return path


def test_silhouette_finds_the_two_senses(store: Path) -> None:
    found = word_senses(store, "bank")
    assert found.n_clusters == 2 and "silhouette" in found.criterion
    assert max(found.silhouettes, key=lambda n: found.silhouettes[n]) == 2
    groups = [
        {o.id for o, label in zip(found.occurrences, found.labels, strict=True) if label == n} for n in (0, 1)
    ]
    river, money = {str(i) for i in range(1, 11)}, {str(i) for i in range(11, 21)}
    assert sorted(groups, key=min) in ([river, money], [money, river])
    for sense in found.senses:
        scores = [e.score for e in sense.examples]
        assert len(scores) == 3 and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    said = found.to_dict()  # the name every research result uses; as_dict, the older one, says the same
    assert (
        said == found.as_dict() and said["n_clusters"] == 2 and sum(s["size"] for s in said["senses"]) == 20
    )


def test_given_k_and_bad_input(store: Path) -> None:
    found = word_senses(store, "bank", n_clusters=3)
    assert (
        found.n_clusters == 3
        and found.criterion == "3 clusters: given"
        and sum(s.size for s in found.senses) == 20
    )
    sizes = [s.size for s in found.senses]
    assert sizes == sorted(sizes, reverse=True)
    with pytest.raises(InvalidInput, match="n_clusters=40"):
        word_senses(store, "bank", n_clusters=40)
    with pytest.raises(InvalidInput, match="'estuary' occurs 1 time"):
        word_senses(store, "estuary")
    with pytest.raises(InvalidInput, match=r"^word_senses takes layer= .*, not layers='-1': the store fixes"):
        word_senses(store, "bank", layers="-1")


def test_cli_senses_prints_json_and_draws(store: Path, tmp_path: Path) -> None:
    picture = tmp_path / "senses.png"
    found = json.loads(run_ok("senses", "bank", "--in", str(store), "-o", str(picture), "--json"))
    assert (
        found["n_clusters"] == 2 and "silhouette" in found["criterion"] and found["picture"] == str(picture)
    )
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = run_ok("senses", "bank", "--in", str(store), "-k", "2", "--method", "tsne")
    assert "2 clusters: given" in table and "«bank»" in table
    seeded = json.loads(run_ok("senses", "bank", "--store", str(store), "-k", "3", "--seed", "5", "--json"))
    assert {**word_senses(store, "bank", n_clusters=3, seed=5).to_dict(), "picture": None} == seeded


def _store_of(lines: list[str], directory: Path, model: bertscope.Model) -> Path:
    corpus, path = directory / "corpus.txt", directory / "words.parquet"
    corpus.write_text("".join(f"{line}\n" for line in lines))
    bertscope.embed_corpus(corpus, path, model=model, level="words")
    return path


def test_repeats_cap_k_and_leave_no_empty_sense(tmp_path: Path, bundled: bertscope.Model) -> None:
    same = "I went to the bank."
    lines = [same, same, same, "We sat on the river bank.", "The bank raised rates."]
    store = _store_of(lines, tmp_path, bundled)
    found = word_senses(store, "bank", n_clusters=4)
    assert found.n_clusters == 3 and found.criterion.startswith(
        "3 clusters: given 4, capped at the 3 distinct"
    )
    assert sorted(s.size for s in found.senses) == [1, 1, 3] and len(set(found.labels.tolist())) == 3
    chosen = word_senses(store, "bank")
    assert all(n <= 3 for n in chosen.silhouettes) and chosen.n_clusters in chosen.silhouettes
    assert all(s.size > 0 for s in chosen.senses) and len(chosen.senses) == chosen.n_clusters


def test_one_repeated_occurrence_is_one_line_error(tmp_path: Path, bundled: bertscope.Model) -> None:
    store = _store_of(["I went to the bank."] * 4, tmp_path, bundled)
    for k in (None, 2):
        with pytest.raises(InvalidInput, match="all have the same vector"):
            word_senses(store, "bank", n_clusters=k)
    assert [s.size for s in word_senses(store, "bank", n_clusters=1).senses] == [4]
    ran = run_main("senses", "bank", "--in", str(store))
    assert ran.code != 0 and "Traceback" not in ran.stderr
    assert ran.stderr.count("\n") == 1 and "all have the same vector" in ran.stderr


def test_a_layer_the_store_lacks_names_the_keywords_in_python_and_the_flags_at_the_prompt(
    store: Path,
) -> None:
    """A Python caller was told --layers and --combine stack (flags it cannot type in a call)."""
    with pytest.raises(InvalidInput) as refused:
        word_senses(store, "bank", layer=3)
    said = str(refused.value)
    assert said.endswith("embed the corpus again with layers= including it and combine='stack'"), said
    ran = run_main("senses", "bank", "--store", str(store), "--layer", "3")
    assert ran.code != 0 and ran.stderr.strip().endswith(
        "embed the corpus again with --layers including it and --combine stack"
    ), ran.stderr
