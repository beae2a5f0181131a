"""The result types: NumPy arrays with the tokens, offsets and provenance that produced them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["SentenceEmbeddings", "TokenEmbeddings", "WordEmbeddings"]


@dataclass
class SentenceEmbeddings:
    """Sentence vectors (n, d) float32 with per-text token counts, dropped-token counts and the spec."""

    vectors: np.ndarray
    n_tokens: np.ndarray
    truncated: np.ndarray
    spec: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def n_truncated(self) -> int:
        """How many texts lost tokens to truncation."""
        return int((self.truncated > 0).sum())


@dataclass
class TokenEmbeddings:
    """One text's token vectors (tokens, d), pad trimmed, with tokens and character offsets."""

    text: str
    tokens: list[str]
    offsets: list[tuple[int, int]]
    word_ids: list[int | None]
    special_mask: list[bool]
    vectors: np.ndarray
    n_dropped: int
    spec: dict[str, Any] = field(default_factory=dict)
    pair: str | None = None


@dataclass
class WordEmbeddings:
    """One text's word vectors (words, d), each word with its character span and pieces."""

    text: str
    words: list[str]
    spans: list[tuple[int, int]]
    pieces: list[list[str]]
    vectors: np.ndarray
    n_dropped: int
    spec: dict[str, Any] = field(default_factory=dict)
