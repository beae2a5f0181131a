"""How many tokens texts make at least, counted cheaply, so a request over a limit is refused before its
texts are tokenized whole.

Tokenizing a text whole builds a `Tokens` (a Python object per piece, offset and word id): about a
kilobyte a token, so a 4 MB body of 2 million tokens costs gigabytes even when it is then refused. Here
each text is cut into pieces of a few thousand characters (at a space where there is one), the pieces
are tokenized a group at a time by the Rust tokenizer alone (no specials, no Python objects per token),
and the count stops as soon as it passes the limit: the work is one group past the limit at most.

The count is a lower bound of what the whole text makes, so it refuses only what the exact count would:
the model's tokenizers split a text into words first (BERT's whitespace and punctuation, byte-level
BPE's regex, SentencePiece's spaces) and cut each word on its own, so a piece's words other than its
first and last come out as they do in the whole text. Those two, which a cut or the text's own start
and end may change, are left out of the count.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["least_tokens"]

_PIECE_CHARS = 4096  # characters of one piece: a cut lands on the last space in its second half
_GROUP_CHARS = 1 << 18  # characters tokenized at once (a few MB of the tokenizer's own memory)


def least_tokens(backend: Any, texts: Sequence[Any], *, stop_at: int) -> int:
    """At least how many tokens `texts` (strings or (A, B) pairs) make when read whole; stops once the
    count passes `stop_at`.

    `backend` is the model's `tokenizers.Tokenizer`. The specials and prompt are not counted.
    """
    total = 0
    group: list[str] = []
    size = 0
    for piece in _pieces(texts):
        group.append(piece)
        size += len(piece)
        if size >= _GROUP_CHARS:
            total += _count(backend, group)
            if total > stop_at:
                return total
            group, size = [], 0
    return total + (_count(backend, group) if group else 0)


def _count(backend: Any, group: list[str]) -> int:
    """Tokens of the pieces' interior words."""
    return sum(_interior(e.word_ids) for e in backend.encode_batch(group, add_special_tokens=False))


def _interior(words: list[int | None]) -> int:
    """Tokens of a piece that belong to neither its first word nor its last."""
    if not words or words[0] == words[-1]:
        return 0
    start, stop = 0, len(words)
    while start < stop and words[start] == words[0]:
        start += 1
    while stop > start and words[stop - 1] == words[-1]:
        stop -= 1
    return stop - start


def _pieces(texts: Sequence[Any]) -> Iterator[str]:
    """Every piece of every text, a pair's two parts apart."""
    for text in texts:
        for part in text if isinstance(text, tuple) else (text,):
            start = 0
            while start < len(part):
                stop = min(len(part), start + _PIECE_CHARS)
                if stop < len(part):
                    space = max(part.rfind(" ", start + _PIECE_CHARS // 2, stop), 0)
                    stop = space or stop
                yield part[start:stop]
                start = stop
