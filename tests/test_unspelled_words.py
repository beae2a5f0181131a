"""Words the vocabulary cannot spell (read as [UNK]) are never passed off as vectors: the corpus aggregation
leaves them out and counts them, decontextualised vectors refuse them, the piece lookup does not offer
the [UNK] row, and a static model refuses --layers in its own words."""

from __future__ import annotations

import pytest

import bertscope
from console import run_main

EMOJI = ["😀 🎉 naïve café ﷽", "the cat sat", "a cat 😀 sat"]


@pytest.mark.parametrize("words", [["😀"], ["cat", "🎉"]])
def test_decontextualized_refuses_a_word_read_as_unk(bundled: bertscope.Model, words: list[str]) -> None:
    """static_decontextualized(['😀']) gave [['[UNK]']] and the [UNK] vector for it, silently."""
    with pytest.raises(
        bertscope.InvalidInput, match=r"is not in this model's vocabulary: its pieces are \['\[UNK\]'\]"
    ):
        bundled.static_decontextualized(words, layers=1)


def test_a_piece_read_as_unk_is_not_offered_the_unk_row() -> None:
    """`static 😀` said "pass '[UNK]'": the unknown token's row, which is no vector of 😀."""
    ran = run_main("static", "😀")
    assert ran.code != 0 and "Traceback" not in ran.stderr
    assert "pass '[UNK]'" not in ran.stderr
    assert "has no piece in the vocabulary" in ran.stderr and "`bertscope tokens`" in ran.stderr
