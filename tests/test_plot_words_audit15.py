"""Audit 15's picture findings: one vector repeated has no 2-D layout (t-SNE crashed the process on it),
and plot words takes each word once, a lone string as one word, and says why a word is left out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.research.plots import Projection, _project, word_points

SENTENCES = [
    "The bank by the river was closed.",
    "I don't like the river bank.",
    "She put money in the bank.",
    "The river flooded the town.",
]


@pytest.mark.parametrize("method", ["pca", "tsne"])
def test_points_that_are_all_one_vector_are_refused_in_one_line(method: str) -> None:
    # sklearn's TSNE ended the process (SIGSEGV, exit 139) on three equal rows; PCA drew rounding noise
    with pytest.raises(bertscope.InvalidInput, match="the 3 points are all one vector"):
        _project(np.ones((3, 384), dtype=np.float32), Projection(method), 0)
    apart = np.vstack([np.ones((2, 8)), np.full((1, 8), 2.0)])
    assert _project(apart, Projection(method), 0).shape == (3, 2)


def test_the_command_refuses_a_word_in_one_context_repeated(tmp_path: Path) -> None:
    from console import run_main

    texts = tmp_path / "repeated.txt"
    texts.write_text("the bank is closed.\n" * 3)
    ran = run_main(
        "plot", "words", "bank", "-i", str(texts), "--method", "tsne", "-o", str(tmp_path / "w.png")
    )
    assert ran.code == 1 and "the 3 points are all one vector" in ran.stderr
    assert not (tmp_path / "w.png").exists()


def test_each_word_once_and_a_lone_string_is_one_word(bundled: bertscope.Model) -> None:
    twice = word_points(bundled, ["bank", "Bank", "river"], SENTENCES)  # drew every bank point twice
    once = word_points(bundled, ["bank", "river"], SENTENCES)
    assert twice.words == once.words == ["bank"] * 3 + ["river"] * 3
    np.testing.assert_array_equal(twice.points, once.points)
    lone = word_points(bundled, "bank", SENTENCES)  # was read as its letters: the word 'a' drawn
    assert lone.words == ["bank"] * 3


def test_a_word_left_out_is_said_with_its_reason(bundled: bertscope.Model) -> None:
    with pytest.warns(UserWarning) as said:
        word_points(bundled, ["don't", "bank", "zebra"], SENTENCES)
    message = str(said[0].message)
    assert "don't (the tokenizer reads 3 words, don ' t: name one of them)" in message
    assert "zebra (0 occurrences in the sentences given)" in message
    with pytest.raises(bertscope.InvalidInput, match="none of the words occurs"):
        word_points(bundled, ["zebra"], SENTENCES)


def test_a_word_past_the_occurrence_cap_is_said(bundled: bertscope.Model) -> None:
    """plot words and contextuality kept the first 200 (max_contexts) occurrences of a word in silence."""
    many = [f"the bank number {i}" for i in range(203)]
    with pytest.warns(UserWarning, match="drawn: bank: the first 200 of 203 occurrences"):
        assert word_points(bundled, ["bank"], many).words == ["bank"] * 200
    result = bundled.contextuality(SENTENCES + ["A bank again."], words=["bank"], max_contexts=2)
    assert result.n_occurrences == {"bank": 2}
    assert result.note == "occurrences kept per word (max_contexts=2): bank: the first 2 of 4 occurrences"
    # no cap reached: the only note is the few occurrences' (bank's 3), no "occurrences kept" line
    note = bundled.contextuality(SENTENCES, words=["bank"]).note
    assert note is not None and note.startswith("few occurrences (under 5): bank (3 occurrences, 3 pair(s))")
    assert "max_contexts" not in note
