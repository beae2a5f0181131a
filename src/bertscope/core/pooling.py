"""Token, word and sentence pooling over (batch, tokens, d) tensors; pad never counts."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..errors import InvalidSpec
from ._enums import Pooling, SubwordPooling
from .results import TokenEmbeddings, WordEmbeddings

__all__ = ["pool_sentences", "pool_words", "group_words", "word_embeddings"]


def pool_sentences(
    hidden: torch.Tensor,
    mask: torch.Tensor,
    pooling: Pooling,
    *,
    pooler: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """(batch, d) sentence vectors from hidden (batch, tokens, d) and a 0/1 mask (batch, tokens)."""
    if pooling is Pooling.CLS:
        return hidden[:, 0]
    if pooling is Pooling.POOLER:
        if pooler is None:
            raise InvalidSpec("this model has no trained pooler; use pooling='cls' or 'mean'")
        return pooler(hidden)
    weights = mask.to(hidden.dtype).unsqueeze(-1)
    if pooling is Pooling.MAX:
        # A copy, never an in-place fill: the hidden states may be shared with other requests.
        return hidden.masked_fill(weights == 0, -1e9).max(dim=1).values
    summed = (hidden * weights).sum(dim=1)
    counts = weights.sum(dim=1).clamp(min=1e-9)
    if pooling is Pooling.MEAN_SQRT_LEN:
        return summed / counts.sqrt()
    if pooling in (Pooling.MEAN, Pooling.FIRST_LAST_AVG):
        return summed / counts
    raise InvalidSpec(f"pooling {pooling.value!r} must be resolved before pooling")


def group_words(word_ids: Sequence[int | None], special_mask: Sequence[bool]) -> list[list[int]]:
    """Token indices of each word, in order, from the tokenizer's own word ids (specials left out)."""
    groups: dict[int, list[int]] = {}
    for index, (word, special) in enumerate(zip(word_ids, special_mask, strict=True)):
        if word is not None and not special:
            groups.setdefault(word, []).append(index)
    return list(groups.values())


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
    spans = [(tok.offsets[g[0]][0], tok.offsets[g[-1]][1]) for g in groups]
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
