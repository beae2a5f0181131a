"""Contextual vectors of an Encoder: sentences (streamed or at once), tokens, words, every layer, cosine.

`bertscope.Model`'s embed, iter_embed, embed_with, embed_tokens, embed_words, hidden_states and similarity
are these functions; their options are the recipe's (core/spec.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .core._enums import LongText, SubwordPooling
from .core.encoder import Encoder, single
from .core.pooling import word_embeddings
from .core.progress import progress_callback
from .core.results import SentenceEmbeddings, TokenEmbeddings, WordEmbeddings
from .core.similarity import cos_sim
from .core.spec import EmbedOptions, EmbedSpec, Recipe, resolve
from .core.tokens import Text, Tokens, check_texts, iter_checked
from .errors import InvalidSpec

__all__ = [
    "embed",
    "embed_fitted_tokens",
    "embed_tokens",
    "embed_with",
    "embed_words",
    "hidden_states",
    "iter_embed",
    "similarity",
]


def iter_embed(
    encoder: Encoder,
    texts: Iterable[str],
    options: EmbedOptions,
    *,
    progress: bool | None = None,
    total: int | None = None,
) -> Iterator[SentenceEmbeddings]:
    """Sentence vectors (n, d) for a stream of texts, chunk by chunk in input order (bounded memory)."""
    recipe = resolve(encoder, options)
    with progress_callback(total, enabled=progress) as on_batch:
        checked = iter_checked(texts, pairs=True)
        for chunk in encoder.engine.sentences(checked, recipe.spec, on_batch=on_batch):
            yield recipe.finish(chunk)


def embed_with(
    encoder: Encoder, texts: Text | Sequence[Text], recipe: Recipe, *, progress: bool | None = None
) -> SentenceEmbeddings:
    """Sentence vectors (n, d) for texts or pairs with a recipe already resolved by `spec.resolve`."""
    items = check_texts(texts, pairs=True)
    with progress_callback(len(items), enabled=progress) as on_batch:
        return recipe.finish(encoder.engine.sentences_once(items, recipe.spec, on_batch=on_batch))


def embed(
    encoder: Encoder, texts: Text | Sequence[Text], options: EmbedOptions, *, progress: bool | None = None
) -> SentenceEmbeddings:
    """Sentence vectors (n, d) float32 for texts (or (A, B) pairs) with the options resolved once."""
    return embed_with(encoder, texts, resolve(encoder, options), progress=progress)


def similarity(
    encoder: Encoder, a: str | Sequence[str], b: str | Sequence[str] | None, options: EmbedOptions
) -> np.ndarray:
    """Cosine matrix (len(a), len(b)) of sentence vectors; b defaults to a."""
    recipe = resolve(encoder, options)
    left = embed_with(encoder, a, recipe).vectors
    right = left if b is None else embed_with(encoder, b, recipe).vectors
    return cos_sim(left, right)


def embed_tokens(
    encoder: Encoder, texts: Text | Sequence[Text], *, progress: bool | None = None, **options: Any
) -> list[TokenEmbeddings]:
    """Per text (or pair): tokens, offsets and vectors (tokens, d) of the chosen layers, pad trimmed.

    `options`: layers, combine, long, stride (as `Encoder.spec`). combine="stack" keeps each layer
    apart: vectors (tokens, layers, d), in the order of `layers`.
    """
    items = check_texts(texts, pairs=True)
    spec = encoder.spec(pooling="mean", **options)
    with progress_callback(len(items), enabled=progress) as on_batch:
        found = encoder.engine.token_matrices(items, spec, on_batch=on_batch)
        return [TokenEmbeddings.of(t, m, spec.as_dict()) for t, m in found]


def embed_fitted_tokens(encoder: Encoder, tokens: Sequence[Tokens], spec: EmbedSpec) -> list[TokenEmbeddings]:
    """`embed_tokens` of Tokens already through `engine.prepare` with `spec` (tokenized once)."""
    found = encoder.engine.fitted_token_matrices(tokens, spec)
    return [TokenEmbeddings.of(t, m, spec.as_dict()) for t, m in found]


def embed_words(
    encoder: Encoder, texts: str | Sequence[str], *, subword: SubwordPooling | str = "mean", **options: Any
) -> list[WordEmbeddings]:
    """Per text: words (from the tokenizer's word ids), char spans, and pooled word vectors."""
    how = SubwordPooling.parse(subword, what="subword pooling")
    check_texts(texts)  # words index into one text: pairs are not taken here
    return [word_embeddings(tok, how) for tok in embed_tokens(encoder, texts, **options)]


def hidden_states(encoder: Encoder, text: Text, *, long: LongText | str = "truncate") -> np.ndarray:
    """(L+1, tokens, d) every layer's token vectors for one text or pair: 0 is the embedding output."""
    if not single(text):
        raise InvalidSpec("hidden_states takes one text (or one (A, B) pair); use embed_tokens for many")
    tok = embed_tokens(encoder, text, layers="all", combine="concat", long=long)[0]
    width = tok.vectors.shape[1] // (encoder.n_layers + 1)
    return tok.vectors.reshape(len(tok.tokens), encoder.n_layers + 1, width).transpose(1, 0, 2).copy()
