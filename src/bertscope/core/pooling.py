"""Token, word and sentence pooling over (batch, tokens, d) float32 arrays; pad never counts.

`POOLING_RULES` is the one table of sentence poolings: every fact of a pooling is its entry, read by the
engine (a whole text), late chunking (a chunk's span of a document), explain (the token weights or the
owner of each dimension that split a score exactly), the service's schema (which poolings have an exact
split) and the sentence-transformers folder reader (its mode name). `POOLINGS` is the part of it that
pools a text's tokens. A new pooling is a `Pooling` member and an entry here.
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..errors import InvalidSpec
from ._enums import Pooling, SubwordPooling
from .results import TokenEmbeddings, WordEmbeddings

__all__ = [
    "POOLINGS", "POOLING_RULES", "PoolingRule", "exact_poolings", "pool_sentences", "pool_span", "pool_words",
    "group_words", "text_words", "whole_words", "word_embeddings", "word_spans",
]  # fmt: skip

# NumPy, not torch: a process that answers from an exported graph imports no torch (DESIGN.md).
Tokens = Callable[[np.ndarray, np.ndarray], np.ndarray]
Weights = Callable[[np.ndarray], np.ndarray]
Owners = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _weighted_sum(hidden: np.ndarray, weights: np.ndarray) -> np.ndarray:
    # einsum sums in the order (hidden * weights).sum(axis=1) does, without its (batch, tokens, d)
    # temporary: 5x faster on 1,200 rows of 35 x 384, which a GPU's batch hands back at once
    return np.einsum("btd,bt->bd", hidden, weights[..., 0])


def _mean(hidden: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return _weighted_sum(hidden, weights) / np.maximum(weights.sum(axis=1), np.float32(1e-9))


def _mean_sqrt_len(hidden: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return _weighted_sum(hidden, weights) / np.sqrt(np.maximum(weights.sum(axis=1), np.float32(1e-9)))


def _max(hidden: np.ndarray, weights: np.ndarray) -> np.ndarray:
    # A copy, never an in-place fill: the hidden states may be shared with other requests.
    return np.where(weights == 0, np.float32(-1e9), hidden).max(axis=1)


def _mean_weights(keep: np.ndarray) -> np.ndarray:
    return keep / max(float(keep.sum()), 1e-9)


def _mean_sqrt_len_weights(keep: np.ndarray) -> np.ndarray:
    return keep / np.sqrt(max(float(keep.sum()), 1e-9))


def _max_owners(vectors: np.ndarray, keep: np.ndarray) -> np.ndarray:
    return np.where(keep[:, None] > 0, vectors, -np.inf).argmax(axis=0)


@dataclass(frozen=True)
class PoolingRule:
    """Every fact of one sentence pooling: how it pools, how a score splits over its tokens, its ST name."""

    # (batch, tokens, d) hidden and (batch, tokens, 1) 0/1 float32 weights -> (batch, d); None: the
    # pooling reads one vector instead (cls, pooler)
    tokens: Tokens | None
    # (tokens,) 0/1 kept tokens -> (tokens,) float64 weights w with pooled = w @ vectors: a cosine splits
    # exactly into token pairs. Held equal to `tokens` by tests/test_pooling_table.py.
    weights: Weights | None = None
    # (tokens, d) vectors and (tokens,) 0/1 kept -> (d,) the token each dimension is taken from: a cosine
    # splits exactly by dimension (max pooling).
    owners: Owners | None = None
    st_mode: str | None = None  # sentence-transformers' `pooling_mode` name, where it has this pooling

    @property
    def linear(self) -> bool:
        """A weighted sum of token vectors."""
        return self.weights is not None

    @property
    def exact(self) -> bool:
        """Whether a cosine of two pooled vectors splits exactly over the texts' tokens."""
        return self.weights is not None or self.owners is not None


# auto resolves to another pooling (core/spec.py); cls and pooler read one vector that depends on every
# token through the layers, so they pool no span and have no exact split.
POOLING_RULES: dict[Pooling, PoolingRule] = {
    Pooling.MEAN: PoolingRule(_mean, weights=_mean_weights, st_mode="mean"),
    Pooling.MEAN_SQRT_LEN: PoolingRule(
        _mean_sqrt_len, weights=_mean_sqrt_len_weights, st_mode="mean_sqrt_len_tokens"
    ),
    Pooling.FIRST_LAST_AVG: PoolingRule(_mean, weights=_mean_weights),  # its layers are chosen by the spec
    Pooling.MAX: PoolingRule(_max, owners=_max_owners, st_mode="max"),
    Pooling.CLS: PoolingRule(None, st_mode="cls"),
    Pooling.POOLER: PoolingRule(None),
}


class _OverTokens(Mapping[Pooling, PoolingRule]):
    """The entries of POOLING_RULES that pool a text's tokens: a live view, never a second table."""

    def __getitem__(self, pooling: Pooling) -> PoolingRule:
        rule = POOLING_RULES[pooling]
        if rule.tokens is None:
            raise KeyError(pooling)
        return rule

    def __iter__(self) -> Iterator[Pooling]:
        return (p for p, rule in POOLING_RULES.items() if rule.tokens is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


POOLINGS: Mapping[Pooling, PoolingRule] = _OverTokens()


def exact_poolings() -> list[Pooling]:
    """The poolings whose cosine splits exactly over tokens, in the table's order."""
    return [p for p, rule in POOLING_RULES.items() if rule.exact]


def pool_sentences(
    hidden: np.ndarray,
    mask: np.ndarray,
    pooling: Pooling,
    *,
    pooler: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """(batch, d) float32 sentence vectors from hidden (batch, tokens, d) float32 and a 0/1 mask (batch,
    tokens)."""
    if pooling is Pooling.CLS:
        return hidden[:, 0]
    if pooling is Pooling.POOLER:
        if pooler is None:
            raise InvalidSpec("this model has no trained pooler; use pooling='cls' or 'mean'")
        return pooler(hidden)
    rule = POOLINGS.get(pooling)
    if rule is None or rule.tokens is None:
        raise InvalidSpec(f"pooling {pooling.value!r} must be resolved before pooling")
    return rule.tokens(hidden, np.asarray(mask, dtype=hidden.dtype)[..., None])


def pool_span(block: np.ndarray, pooling: Pooling) -> np.ndarray:
    """(d,) float32: the token vectors `block` (tokens, d) of one span pooled as a whole text would be."""
    rule = POOLINGS.get(pooling)
    if rule is None or rule.tokens is None:
        spannable = ", ".join(p.value for p in POOLINGS)
        raise InvalidSpec(f"pooling {pooling.value!r} cannot pool a span of tokens; use one of: {spannable}")
    hidden = np.ascontiguousarray(block, dtype=np.float32)[None]
    return rule.tokens(hidden, np.ones((1, len(block), 1), dtype=np.float32))[0]


def group_words(word_ids: Sequence[int | None], special_tokens_mask: Sequence[bool]) -> list[list[int]]:
    """Token indices of each word, in order, from the tokenizer's own word ids (specials left out)."""
    groups: dict[int, list[int]] = {}
    for index, (word, special) in enumerate(zip(word_ids, special_tokens_mask, strict=True)):
        if word is not None and not special:
            groups.setdefault(word, []).append(index)
    return list(groups.values())


def word_spans(
    text: str, offsets: Sequence[tuple[int, int]], groups: Sequence[Sequence[int]]
) -> list[tuple[int, int]]:
    """Each word's (start, end) characters in `text`, from its first piece's start to its last's end.

    Byte-level BPE tokenizers whose offsets keep the space before a word ("Ġlike" at " like": ModernBERT's,
    GPT-2's) would make the word " like"; the space is not part of the word, so it is left out. Combining
    marks right after the last piece that no piece holds (an uncased WordPiece strips the accents of
    decomposed "e\u0301te\u0301": its last piece "##e" ends before the mark) are the word's: "été", not "éte".
    """
    spans = []
    starts: list[int] | None = None  # every piece's start, sorted: made for a word followed by a mark
    for group in groups:
        start, end = offsets[group[0]][0], offsets[group[-1]][1]
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start < end < len(text) and _is_mark(text[end]):
            starts = sorted(a for a, b in offsets if b > a) if starts is None else starts
            after = bisect.bisect_left(starts, end)
            end = _over_marks(text, end, starts[after] if after < len(starts) else len(text))
        spans.append((start, end))
    return spans


def _is_mark(char: str) -> bool:
    return unicodedata.category(char)[0] == "M"


def _over_marks(text: str, end: int, limit: int) -> int:
    """`end` moved over the combining marks (Unicode M*) that follow it, up to `limit` (the next piece's
    start: a mark a piece holds is that piece's word's)."""
    while end < limit and _is_mark(text[end]):
        end += 1
    return end


class Pieces(Protocol):
    """One text's word pieces as `text_words` reads them (core/tokens.py's Tokens, a TokenEmbeddings)."""

    @property
    def text(self) -> str: ...
    @property
    def offsets(self) -> Sequence[tuple[int, int]]: ...
    @property
    def word_ids(self) -> Sequence[int | None]: ...
    @property
    def special_tokens_mask(self) -> Sequence[bool]: ...


def text_words(tok: Pieces) -> tuple[list[list[int]], list[tuple[int, int]]]:
    """A text's words: each one's token indices (`group_words`) and (start, end) characters (`word_spans`).

    A group of whitespace alone is no word and is left out: a byte-level BPE tokenizer (ModernBERT's,
    RoBERTa's) gives a line break ("Ċ") or a second space ("Ġ") a word id of its own, which would make a
    word of no characters. Word vectors, word rows, occurrences and contextuality all read words here.
    """
    groups = group_words(tok.word_ids, tok.special_tokens_mask)
    spans = word_spans(tok.text, tok.offsets, groups)
    kept = [i for i, (start, end) in enumerate(spans) if start < end]
    return [groups[i] for i in kept], [spans[i] for i in kept]


class CutPieces(Pieces, Protocol):
    """A text's word pieces with whether the limit cut inside its last word (Tokens, TokenEmbeddings)."""

    @property
    def last_word_cut(self) -> bool: ...


def whole_words(tok: CutPieces) -> tuple[list[list[int]], list[tuple[int, int]]]:
    """`text_words` less a word whose last pieces a truncation cut off ("storm" kept as st ##or).

    The tokenizer tells (`Tokens.last_word_cut`: the first dropped piece has the last kept one's word id),
    so a word is whole or cut as the tokenizer splits words: WordPiece's "coast" before a cut "," is whole
    (the comma is a word of its own), SentencePiece's "coast" of "coast," is not (one word there).
    """
    groups, spans = text_words(tok)
    content = [i for i, special in enumerate(tok.special_tokens_mask) if not special]
    if tok.last_word_cut and groups and content and groups[-1][-1] == content[-1]:
        return groups[:-1], spans[:-1]
    return groups, spans


def pool_words(vectors: np.ndarray, groups: Sequence[Sequence[int]], subword: SubwordPooling) -> np.ndarray:
    """(words, d) word vectors (2d for first_last) from token vectors (tokens, d) and word groups."""
    width = vectors.shape[1] * (2 if subword is SubwordPooling.FIRST_LAST else 1)
    out = np.empty((len(groups), width), dtype=np.float32)
    for row, group in enumerate(groups):
        pieces = vectors[list(group)]
        if subword is SubwordPooling.FIRST:
            out[row] = pieces[0]
        elif subword is SubwordPooling.LAST:
            out[row] = pieces[-1]
        elif subword is SubwordPooling.MEAN:
            out[row] = pieces.mean(axis=0)
        else:
            out[row] = np.concatenate([pieces[0], pieces[-1]])
    return out


def word_embeddings(tok: TokenEmbeddings, subword: SubwordPooling) -> WordEmbeddings:
    """One text's words (from the tokenizer's word ids) pooled from its token vectors, each layer apart;
    a word the truncation cut is left out (`whole_words`), as word rows leave it out."""
    groups, spans = whole_words(tok)
    if tok.vectors.ndim == 3:  # stacked layers: (tokens, k, d) -> (words, k, d), pooled per layer
        layers = range(tok.vectors.shape[1])
        vectors = np.stack([pool_words(tok.vectors[:, i], groups, subword) for i in layers], axis=1)
    else:
        vectors = pool_words(tok.vectors, groups, subword)
    return WordEmbeddings(
        text=tok.text,
        words=[tok.text[s:e] for s, e in spans],
        spans=spans,
        pieces=[[tok.tokens[i] for i in g] for g in groups],
        vectors=vectors,
        n_dropped=tok.n_dropped,
        spec={**tok.spec, "subword": subword.value},
    )
