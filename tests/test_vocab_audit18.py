"""Audit 18f of vocab add, static words and distill: a byte-level tokenizer is refused (its new token
would not be one token after a space); words one token once normalised are added once; one --init-from
per word; an --init-from word the vocabulary splits is refused; several words as one 'word' are refused
alike by static --as-words, static_decontextualized and vocab add; distill's libraries' log lines are
silenced while it runs."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.vocab import add_tokens, new_words
from console import run_main
from tiny_models import build_tiny_model


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, stderr
    return lines[0]


# 1. byte-level BPE: the new token would not be one token after a space ------------------------------


def test_a_byte_level_tokenizer_is_refused_in_one_line(tmp_path: Path) -> None:
    """Byte-level BPE reads ' covid19' as ['Ġ', 'covid19']: the row would never be the running text's."""
    model = bertscope.load(build_tiny_model("bert", tmp_path / "bl", byte_level=True), device="cpu")
    with pytest.raises(InvalidInput, match=r"'covid19' cannot be added as one token of running text.*'Ġ'"):
        add_tokens(model, ["covid19"])


def test_a_wordpiece_token_is_one_token_mid_sentence(bundled: bertscope.Model) -> None:
    extended = add_tokens(bundled, ["covid19"])
    assert "covid19" in extended.tokenize("we saw covid19 spread").tokens


# 2. words one token once normalised are added once; one --init-from per word --------------------------


def test_words_one_token_once_normalised_are_added_once(bundled: bertscope.Model) -> None:
    assert new_words(bundled, ["covid19", "covid19", "COVID19"]) == ["covid19"]
    extended = add_tokens(bundled, ["covid19", "covid19", "COVID19"])
    assert len(extended.vocab) == len(bundled.vocab) + 1


def test_one_token_given_two_init_lists_is_refused(bundled: bertscope.Model) -> None:
    with pytest.raises(InvalidSpec, match=r"'covid19' and 'COVID19' are one token \('covid19'\)"):
        add_tokens(bundled, ["covid19", "COVID19"], init={"covid19": ["virus"], "COVID19": ["disease"]})


def test_vocab_add_counts_a_repeated_word_once(tmp_path: Path) -> None:
    ran = run_main("vocab", "add", "covid19", "covid19", "COVID19", "-o", str(tmp_path / "v"))
    assert ran.code == 0, ran.stderr
    assert "added 1 of 3: covid19;" in ran.stdout and "COVID19 as covid19" in ran.stdout
    assert "30,522 -> 30,523" in ran.stdout


def test_init_from_given_twice_for_one_word_is_refused(tmp_path: Path) -> None:
    ran = run_main(
        "vocab", "add", "covid19", "--init-from", "covid19=virus", "--init-from", "covid19=disease",
        "-o", str(tmp_path / "v"),
    )  # fmt: skip
    assert ran.code == 1 and "--init-from covid19 is given twice" in _error_line(ran.stderr)
    assert not (tmp_path / "v").exists()


# 3. an --init-from word the vocabulary splits: its pieces' mean, said -------------------------------------


def test_an_init_word_the_vocabulary_splits_is_said(bundled: bertscope.Model, tmp_path: Path) -> None:
    """A misspelt --init-from word was averaged from its pieces in silence (audit 18f): the mean of its
    pieces stays (as init="pieces" makes a new word's; 'coronavirus' is one such source), said in a
    warning naming the pieces."""
    with pytest.warns(UserWarning, match=r"'zzqqxx', a word to initialise 'covid19' from, is not one piece"):
        added = add_tokens(bundled, ["covid19"], init={"covid19": ["zzqqxx", "virus"]})
    pieces = bundled.static_word("zzqqxx").vector
    expected = (pieces + bundled.static_word("virus").vector) / 2
    np.testing.assert_allclose(added.static_word("covid19").vector, expected, atol=1e-6)
    ran = run_main(
        "vocab", "add", "covid19", "--init-from", "covid19=zzqqxx,virus", "-o", str(tmp_path / "v")
    )
    assert ran.code == 0 and "['z', '##z', '##q', '##q', '##xx']" in ran.stderr, ran


# 4. several words as one 'word': a new token refuses them, a static vector is their pieces' mean ----------


def test_several_words_are_one_rule(bundled: bertscope.Model, tmp_path: Path) -> None:
    """vocab add refused 'new york' in its own words while static --as-words took it silently (audit 18f):
    a new token cannot hold a space (refused, naming the static vector that takes a phrase); a phrase's
    static vector is the mean of every piece's row, as said in static_word's docstring and the docs."""
    said = "'new york' is several words: a new token is one word without spaces"
    with pytest.raises(InvalidInput, match=said):
        add_tokens(bundled, ["new york"])
    ran = run_main("vocab", "add", "new york", "-o", str(tmp_path / "v"))
    assert ran.code == 1 and said in _error_line(ran.stderr)
    phrase = bundled.static_word("new york")
    assert phrase.pieces == ["new", "york"]
    np.testing.assert_allclose(phrase.vector, bundled.static(phrase.ids).mean(axis=0), atol=1e-7)


# 5. distill's libraries say nothing on stderr --------------------------------------------------------


def test_distill_silences_its_libraries_log_lines_only_while_it_runs(
    tmp_path: Path, tiny_models: dict[str, bertscope.Model], caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("model2vec")
    from bertscope.research.distill import distill

    caplog.set_level(logging.INFO)
    levels = {name: logging.getLogger(name).level for name in ("model2vec", "skeletoken")}
    distill(tiny_models["bert"], tmp_path / "s", dim=4, vocabulary=["the", "[CLS]"], progress=False)
    said = [r.getMessage() for r in caplog.records if r.name.startswith(("model2vec", "skeletoken"))]
    assert said == []
    assert {name: logging.getLogger(name).level for name in levels} == levels
    logging.getLogger("model2vec.mine").warning("the user's own line")
    assert "the user's own line" in caplog.text
