"""Senses, pictures, eval and calibrate after audit 26: `eval words` refuses a phrase or a punctuated entry
by its file and line (it was averaged and counted as one split word); docs/names.md maps eval's and
calibrate's keys to sentence-transformers' evaluators'; the senses picture's legend says every sense in
one form; `senses --seed` lays out the picture; calibrate warns of repeated pairs as eval pairs does;
one spelling and one plural in the messages."""

from __future__ import annotations

from pathlib import Path

import pytest

import bertscope
from bertscope.errors import InvalidInput
from bertscope.research.static_kinds import compare_kinds
from console import run_main


@pytest.mark.parametrize(
    ("word", "said"),
    [("cat dog", "the tokenizer reads 2 words, cat dog"), ("cat,", "the tokenizer reads 2 words, cat ,")],
)
def test_compare_kinds_refuses_a_word_the_tokenizer_reads_as_several(
    bundled: bertscope.Model, word: str, said: str
) -> None:
    pairs = [("car", "bus", 6.0), ("cup", "mug", 8.0), ("tea", word, 7.0)]
    with pytest.raises(InvalidInput) as caught:
        compare_kinds(bundled, pairs, layers="6")
    assert str(caught.value) == f"pair 2: the second word {word!r} is not one word: {said}: name one of them"


def test_eval_words_names_a_phrase_by_its_file_and_line(bundled_path: Path, tmp_path: Path) -> None:
    words = tmp_path / "words.tsv"
    words.write_text("car\tbus\t6\ncat dog\tdog\t7\ncup\tmug\t8\n")
    ran = run_main("eval", "words", "-i", str(words), "-l", "6", "-m", str(bundled_path))
    assert ran.code == 1 and "split into word pieces" not in ran.stdout
    line = ran.stderr.strip().splitlines()[-1]
    assert f"{words}:2: the first word 'cat dog' is not one word: the tokenizer reads 2 words" in line


def test_eval_words_spells_decontextualized_one_way(bundled_path: Path, tmp_path: Path) -> None:
    words = tmp_path / "words.tsv"
    words.write_text("car\tbus\t6\ncat\tdog\t7\ncup\tmug\t8\nbreadmaker\toven\t5\n")
    ran = run_main("eval", "words", "-i", str(words), "-l", "6", "-m", str(bundled_path))
    assert ran.code == 0, ran.stderr
    assert "1 split into word pieces (rows and decontextualized: " in ran.stdout
    assert "decontextualised" not in ran.stdout
