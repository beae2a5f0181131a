"""Token, word and sentence pooling over (batch, tokens, d) float32 arrays; pad never counts.

`POOLINGS` is the one table of sentence poolings: each pooling over a text's tokens is one entry, used by
the engine (a whole text), late chunking (a chunk's span of a document) and explain (whether a score
splits exactly into token pairs). A new pooling is a `Pooling` member and an entry here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidSpec
from ._enums import Pooling, SubwordPooling
from .results import TokenEmbeddings, WordEmbeddings

__all__ = [
    "POOLINGS", "PoolingRule", "pool_sentences", "pool_span", "pool_words", "group_words", "word_embeddings",
    "word_spans",
]  # fmt: skip

# NumPy, not torch: a process that answers from an exported graph imports no torch (DESIGN.md).
Tokens = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _mean(hidden: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), np.float32(1e-9))


def _mean_sqrt_len(hidden: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return (hidden * weights).sum(axis=1) / np.sqrt(np.maximum(weights.sum(axis=1), np.float32(1e-9)))


def _max(hidden: np.ndarray, weights: np.ndarray) -> np.ndarray:
    # A copy, never an in-place fill: the hidden states may be shared with other requests.
    return np.where(weights == 0, np.float32(-1e9), hidden).max(axis=1)


@dataclass(frozen=True)
class PoolingRule:
    """A pooling over the (masked) token vectors of a text: its function, and whether it is linear."""

    tokens: Tokens  # (batch, tokens, d) hidden and (batch, tokens, 1) 0/1 float32 weights -> (batch, d)
    linear: bool  # a weighted sum of token vectors: a cosine splits exactly into token pairs


# cls and pooler read one token, auto resolves to another pooling (core/spec.py): none pools a span.
POOLINGS: dict[Pooling, PoolingRule] = {
    Pooling.MEAN: PoolingRule(_mean, linear=True),
    Pooling.FIRST_LAST_AVG: PoolingRule(_mean, linear=True),  # its layers are chosen by the spec
    Pooling.MEAN_SQRT_LEN: PoolingRule(_mean_sqrt_len, linear=True),
    Pooling.MAX: PoolingRule(_max, linear=False),
}


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
    if rule is None:
        raise InvalidSpec(f"pooling {pooling.value!r} must be resolved before pooling")
    return rule.tokens(hidden, np.asarray(mask, dtype=hidden.dtype)[..., None])


def pool_span(block: np.ndarray, pooling: Pooling) -> np.ndarray:
    """(d,) float32: the token vectors `block` (tokens, d) of one span pooled as a whole text would be."""
    rule = POOLINGS.get(pooling)
    if rule is None:
        spannable = ", ".join(p.value for p in POOLINGS)
        raise InvalidSpec(f"pooling {pooling.value!r} cannot pool a span of tokens; use one of: {spannable}")
    hidden = np.ascontiguousarray(block, dtype=np.float32)[None]
    return rule.tokens(hidden, np.ones((1, len(block), 1), dtype=np.float32))[0]


def group_words(word_ids: Sequence[int | None], special_mask: Sequence[bool]) -> list[list[int]]:
    """Token indices of each word, in order, from the tokenizer's own word ids (specials left out)."""
    groups: dict[int, list[int]] = {}
    for index, (word, special) in enumerate(zip(word_ids, special_mask, strict=True)):
        if word is not None and not special:
            groups.setdefault(word, []).append(index)
    return list(groups.values())


def word_spans(
    text: str, offsets: Sequence[tuple[int, int]], groups: Sequence[Sequence[int]]
) -> list[tuple[int, int]]:
    """Each word's (start, end) characters in `text`, from its first piece's start to its last's end.

    Byte-level BPE tokenizers whose offsets keep the space before a word ("Ġlike" at " like": ModernBERT's,
    GPT-2's) would make the word " like"; the space is not part of the word, so it is left out.
    """
    spans = []
    for group in groups:
        start, end = offsets[group[0]][0], offsets[group[-1]][1]
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        spans.append((start, end))
    return spans


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
    """One text's words (from the tokenizer's word ids) pooled from its token vectors, each layer apart."""
    groups = group_words(tok.word_ids, tok.special_mask)
    spans = word_spans(tok.text, tok.offsets, groups)
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
