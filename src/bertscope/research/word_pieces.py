"""Which word pieces make each word of a sentence the probes read as words joined by spaces (a CoNLL-U
tree, a labelled sentence): the one rule of the structural probes and the label probe.

The sentence's words are given (the treebank's), not the tokenizer's word ids, so pieces are matched to
words by characters: a piece goes to the word its first non-space character, from the piece's start on,
falls in. Byte-level BPE tokenizers (RoBERTa's, ModernBERT's) give a piece the space before its word
("Ġs" at " s" of " splits"), so its offsets start in the gap after the word before; a piece of the space
alone ("Ġ" before "." where "Ġ." is no piece of the vocabulary) goes to the word after it. On words
joined by single spaces these are the tokenizer's own words, as `embed --words` reads them
(core/pooling.py `text_words`); WordPiece offsets never start at a space, so there nothing changes.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence

from ..core.pooling import Pieces

__all__ = ["word_pieces"]

_NON_SPACE = re.compile(r"\S")


def word_pieces(tok: Pieces, spans: Sequence[tuple[int, int]]) -> list[list[int]]:
    """Each word's token indices, for words at (start, end) characters of `tok.text` in order: the
    non-special pieces whose first non-space character (from the piece's start on) lies in its span.
    A word may get none (the caller refuses it, naming its sentence)."""
    starts = [a for a, _ in spans]
    groups: list[list[int]] = [[] for _ in spans]
    for j, ((a, b), special) in enumerate(zip(tok.offsets, tok.special_tokens_mask, strict=True)):
        if special or b <= a:
            continue
        found = _NON_SPACE.search(tok.text, a)
        if found is None:  # spaces at the end of the text: no word's
            continue
        first = found.start()
        word = bisect_right(starts, first) - 1
        if word >= 0 and first < spans[word][1]:
            groups[word].append(j)
    return groups
