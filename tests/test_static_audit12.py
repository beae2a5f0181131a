"""Audit 12 of static vectors and vocab: an overwriting save compares every subfolder; a layer's export
files keep its name without a suffix; refusals name only what the caller has (plot static, min_count= in
Python, static --corpus's fields, --init beside --init-from); vocab add's empty, CJK and special words."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from tests.console import run_main

import bertscope
from bertscope.errors import CorpusError, InvalidInput, UnknownToken
from bertscope.research.aggregate import export_files
from bertscope.vocab import add_tokens, new_words, save

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, stderr
    return lines[0]


# 1. save(overwrite=True) keeps a user's file inside 1_Pooling/ ------------------------------------


def test_overwrite_refuses_a_folder_with_a_file_of_the_users_in_a_subfolder(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path
) -> None:
    tiny = tiny_models["bert"]
    # the tiny model with a sentence-transformers pooling and normalisation, as the bundled one has
    loaded = dataclasses.replace(tiny.loaded, st_pooling="mean", st_normalize=True)
    model = type(tiny)(
        loaded, device="cpu", max_tokens=tiny.max_tokens, token_budget=tiny.engine.token_budget
    )
    folder = save(model, tmp_path / "ext")
    notes = folder / "2_Normalize" / "notes.txt"
    notes.write_text("notes")
    with pytest.raises(InvalidInput, match=r"not a model folder a save wrote \(2_Normalize/notes.txt\)"):
        save(model, folder, overwrite=True)
    assert notes.read_text() == "notes"
    notes.unlink()
    assert save(model, folder, overwrite=True) == folder  # an earlier save's folder alone is replaced
    assert (folder / "1_Pooling" / "config.json").is_file()


# 2. several layers without a suffix: one file set per layer ---------------------------------------


@pytest.mark.parametrize(
    ("fmt", "names"),
    [
        ("projector", ["h.layer0.vectors.tsv", "h.layer0.metadata.tsv", "h.layer1.vectors.tsv",
                       "h.layer1.metadata.tsv"]),
        ("word2vec", ["h.layer0", "h.layer0.counts.tsv", "h.layer1", "h.layer1.counts.tsv"]),
    ],
)  # fmt: skip
def test_layers_without_a_suffix_keep_their_layer_in_every_file(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path, fmt: str, names: list[str]
) -> None:
    agg = tiny_models["bert"].static_from_corpus(["a cat sat", "the cat ran"], layers=[0, 1])
    written = agg.export(tmp_path / "h", format=fmt)
    assert [p.name for p in written] == names
    assert [p.name for p in export_files(tmp_path / "h", [0, 1], format=fmt)] == names
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)


def test_a_suffix_still_names_the_side_files(tiny_models: dict[str, bertscope.Model], tmp_path: Path) -> None:
    agg = tiny_models["bert"].static_from_corpus(["a cat sat"], layers=[1])
    assert [p.name for p in agg.export(tmp_path / "w.vec")] == ["w.vec", "w.counts.tsv"]
    assert [p.name for p in agg.export(tmp_path / "p.tsv", format="projector")] == [
        "p.vectors.tsv", "p.metadata.tsv",
    ]  # fmt: skip


# 3 and 9. what a piece lookup names -------------------------------------------------------------------


def test_plot_static_names_no_option_it_lacks(tmp_path: Path) -> None:
    ran = run_main("plot", "static", "tokenization", "bread", "cake", "-o", str(tmp_path / "s.png"))
    line = _error_line(ran.stderr)
    assert ran.code == 1 and "'tokenization' is not a single word piece" in line, line
    assert "--as-words" not in line and "static_word" not in line, line


def test_an_added_phrase_is_named_as_the_vocabulary_spells_it(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path
) -> None:
    from bertscope.research.distill import distill

    folder = distill(tiny_models["bert"], tmp_path / "d", dim=4, vocabulary=["New York"], progress=False)
    static = bertscope.load(folder)
    assert "new york" in static.vocab
    with pytest.raises(UnknownToken, match=r"pass 'new york'$"):
        static.static_ids(["new york "])


# 4 and 5. vocab add's words ---------------------------------------------------------------------------


def test_an_empty_and_a_cjk_word_are_refused_each_for_what_it_is(bundled: bertscope.Model) -> None:
    with pytest.raises(InvalidInput, match=r"^'' is empty"):
        new_words(bundled, [""])
    with pytest.raises(InvalidInput, match="CJK character") as cjk:
        new_words(bundled, ["日本語"])
    assert "without spaces" not in str(cjk.value)


def test_special_tokens_are_left_as_they_are(bundled: bertscope.Model) -> None:
    assert new_words(bundled, ["[MASK]", "[CLS]", "covid19"]) == ["covid19"]
    assert add_tokens(bundled, ["[MASK]", "[CLS]"]) is bundled


# 6. refusals in the caller's words ---------------------------------------------------------------------


def test_min_count_refusal_reads_in_python_words(tiny_models: dict[str, bertscope.Model]) -> None:
    with pytest.raises(CorpusError) as caught:
        tiny_models["bert"].static_from_corpus(["Hello world"], min_count=2)
    message = str(caught.value)
    assert "no word occurs 2 times" in message and "occurs once)" in message, message
    assert "min_count=" in message and "--min-count" not in message, message


def test_a_changed_corpus_names_only_the_text_field(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path
) -> None:
    model = tiny_models["bert"]
    with pytest.raises(CorpusError, match="the sums are kept in") as kept:
        model.static_from_corpus(["a cat", "a dog"], min_count=9, checkpoint=tmp_path / "ck")
    assert str(kept.value).endswith("add resume=True)"), kept.value
    with pytest.raises(CorpusError, match="the input changed since") as caught:
        model.static_from_corpus(["the sun", "a dog"], checkpoint=tmp_path / "ck", resume=True)
    assert "(and text_field=)" in str(caught.value) and "id_field" not in str(caught.value)


# 7. --init beside --init-from ---------------------------------------------------------------------------


def test_init_beside_init_from_is_refused(tmp_path: Path) -> None:
    out = str(tmp_path / "x")
    ran = run_main("vocab", "add", "covid19", "--init", "random", "--init-from", "covid19=virus", "-o", out)
    assert ran.code == 1
    assert "--init random and --init-from both set the new rows" in _error_line(ran.stderr)
    assert not (tmp_path / "x").exists()


# 8. the docs name the neighbour table's column as it is --------------------------------------------------


def test_docs_name_the_score_column() -> None:
    text = (DOCS / "static-vectors.md").read_text()
    assert 'column says "cosine"' not in text and "the table's column says `score`" in text
