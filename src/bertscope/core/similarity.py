"""Cosine similarity: all pairs (`cos_sim`), row with row (`pairwise_cos_sim`), and chunked exact top-k."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidInput

__all__ = ["cos_sim", "pairwise_cos_sim", "row_cosines", "unit", "Hit", "TopK"]


def unit(vectors: np.ndarray, *, dtype: type[np.floating[Any]] = np.float32) -> np.ndarray:
    """(..., d) rows scaled to unit length in `dtype` (zero rows stay zero); the one normalisation."""
    vectors = np.asarray(vectors, dtype=dtype)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def vectors_given(value: Any, name: str, caller: str) -> np.ndarray:
    """`value` as an array of numbers for the public call `caller` (its argument `name`), or the one line
    that sends text through a model first."""
    return _numbers(value, name, caller)


def _numbers(value: Any, name: str, caller: str) -> np.ndarray:
    """`value` as an array of numbers, or a one-line InvalidInput: texts go through a model first."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        what = "text" if array.dtype.kind in "USO" else f"{array.dtype} values"
        raise InvalidInput(
            f"{caller} takes vectors (arrays of numbers), but {name} holds {what}; embed texts first "
            f"(model.encode(texts)), or use model.similarity(a, b) for texts"
        )
    return array


def cos_sim(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(a), len(b)) cosine of every row of a with every row of b; both (n, d) or (d,), one d."""
    a, b = np.atleast_2d(_numbers(a, "a", "cos_sim")), np.atleast_2d(_numbers(b, "b", "cos_sim"))
    if a.shape[-1] != b.shape[-1]:
        raise InvalidInput(
            f"cos_sim: a's vectors have {a.shape[-1]} numbers and b's {b.shape[-1]} (a is {a.shape}, b is "
            f"{b.shape}); give vectors of one width (one model, one layer choice)"
        )
    return unit(a) @ unit(b).T


def pairwise_cos_sim(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n,) cosine of row i of a with row i of b; a and b of one shape (n, d)."""
    a, b = _numbers(a, "a", "pairwise_cos_sim"), _numbers(b, "b", "pairwise_cos_sim")
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise InvalidInput(
            f"pairwise_cos_sim: a is {a.shape} and b is {b.shape}; it pairs row i of a with row i of b, so "
            "give arrays of one shape (cos_sim compares every row with every row)"
        ) from None
    return np.sum(unit(a) * unit(b), axis=-1)


@dataclass
class Hit:
    """One search result: stored id, its text when stored, and the cosine to the query.

    From a chunk store, `id` is the document's id and `chunk`, `start`, `end` the chunk's number and
    character span in that document.
    """

    id: str
    score: float
    text: str | None = None
    chunk: int | None = None
    start: int | None = None
    end: int | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-able: id, score (cosine), text (None when the store keeps no texts); chunk, start, end too."""
        found: dict[str, object] = {"id": self.id, "score": self.score, "text": self.text}
        if self.chunk is not None:
            found.update(chunk=self.chunk, start=self.start, end=self.end)
        return found


def row_cosines(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """(rows,) cosine of each (rows, d) row with a unit (d,) `query`, clipped to [-1, 1]: each row's sum
    taken alone, so a row scores the same float whatever rows are read with it (a matrix product's
    blocking moves the last bits with the chunk's size, and ties with them)."""
    products = unit(vectors)
    products *= query
    return np.clip(products.sum(axis=1), -1.0, 1.0)


class TopK:
    """Exact top-k by cosine over vectors that arrive in chunks (memory: one chunk plus k).

    Each row is scored alone (`row_cosines`), and among equal cosines the row numbered first ranks
    first (rows are numbered in the order added, or as `add(..., rows=)` gives them), so the answer is
    the same whatever the chunks' sizes, and through an index as without.
    """

    def __init__(self, query: np.ndarray, k: int, *, exclude: str | None = None) -> None:
        self.query = unit(query.reshape(-1))
        self.k = k
        self.exclude = exclude
        self._kept: list[tuple[float, int, Hit]] = []
        self._seen = 0

    @property
    def hits(self) -> list[Hit]:
        """The best k so far, best first."""
        return [hit for _, _, hit in self._kept]

    def add(
        self, ids: list[str], texts: Iterable[str | None], vectors: np.ndarray, rows: np.ndarray | None = None
    ) -> None:
        """Score one chunk, its rows numbered `rows` (default: following the rows added before), and keep
        the best k so far."""
        if vectors.shape[1] != len(self.query):
            raise InvalidInput(
                f"the query has {len(self.query)} dimensions but the stored vectors have {vectors.shape[1]}; "
                "search with the model, settings and post-processing the store was made with"
            )
        scores = row_cosines(vectors, self.query)
        numbers = np.arange(self._seen, self._seen + len(scores)) if rows is None else np.asarray(rows)
        self._seen += len(scores)
        keep = np.ones(len(scores), dtype=bool)
        if self.exclude is not None:
            keep &= np.array(ids, dtype=object) != self.exclude
        if keep.sum() > self.k > 0:  # every row tied with the k-th best stays in the running
            kth = np.partition(-scores[keep], self.k - 1)[self.k - 1]
            keep &= -scores <= kth
        picked = np.flatnonzero(keep) if self.k else np.array([], dtype=np.int64)
        texts = list(texts)
        found = [(float(scores[i]), int(numbers[i]), Hit(ids[i], float(scores[i]), texts[i])) for i in picked]
        self._kept = sorted(self._kept + found, key=lambda kept: (-kept[0], kept[1]))[: self.k]
