"""Static look-ups as docs/static-vectors.md says them: an empty word is one line in the command line's own
words (no library name in it); special pieces and [unusedN] rows are left out of neighbours unless asked."""

from __future__ import annotations

import pytest

import bertscope
from bertscope.errors import InvalidInput
from console import run_main


@pytest.mark.parametrize("word", ["", "   "])
def test_an_empty_word_is_one_line_naming_no_library_call(word: str) -> None:
    ran = run_main("static", word, "--as-words")
    lines = ran.stderr.strip().splitlines()
    assert ran.code == 1 and len(lines) == 1, ran
    assert lines[0] == f"error: {word!r} is no word (empty or only spaces): give a word, e.g. 'breadmaker'"
    assert "static_word" not in ran.stderr


def test_the_library_says_an_empty_word_the_same_way(bundled: bertscope.Model) -> None:
    with pytest.raises(InvalidInput, match=r"^'' is no word \(empty or only spaces\)"):
        bundled.static_word("")


def test_unused_rows_are_neighbours_only_when_special_ones_are_asked(bundled: bertscope.Model) -> None:
    plain = [n.token for n in bundled.static_neighbors("the", k=10)]
    special = [n.token for n in bundled.static_neighbors("the", k=10, include_special=True)]
    assert not any(t.startswith("[unused") or t in ("[SEP]", "[CLS]") for t in plain)
    assert special.index("[SEP]") == 6 and special.index("[unused80]") == 8  # 7th and 9th, as the doc says
