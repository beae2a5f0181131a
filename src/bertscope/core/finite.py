"""Vectors holding NaN or infinity refused in one wording (`refuse_non_finite`), never returned as they came:
a lower precision's overflow (float16 past 65,504) or a broken model gives them, and a cosine, a search or
a JSON answer made from them is wrong without a word. Stores refuse such a batch in their own words
(`io.checksums.refuse_non_finite`), naming its ids; `verify` reads a fresh one as drift."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import NonFiniteVectors

__all__ = ["LIBRARY_FIX", "non_finite_message", "non_finite_rows", "refuse_non_finite"]

LIBRARY_FIX = "use dtype='float32'"


def non_finite_rows(vectors: np.ndarray | Sequence[np.ndarray]) -> list[int]:
    """The positions of the texts whose vectors hold NaN or infinity: rows of an (n, ...) array, or items
    of a list of per-text arrays (token vectors)."""
    if isinstance(vectors, np.ndarray):
        if vectors.dtype.kind not in "fc" or vectors.size == 0:
            return []
        flat = vectors.reshape(len(vectors), -1)
        return np.flatnonzero(~np.isfinite(flat).all(axis=1)).tolist()
    return [i for i, v in enumerate(vectors) if np.asarray(v).dtype.kind in "fc" and not np.isfinite(v).all()]


def refuse_non_finite(
    vectors: np.ndarray | Sequence[np.ndarray], *, fix: str = LIBRARY_FIX, start: int = 0
) -> None:
    """Raise `NonFiniteVectors` where any text's vectors hold NaN or infinity, naming those texts (by
    position, from `start`: a stream's chunk counts on from the texts before it) and `fix`."""
    bad = tuple(start + i for i in non_finite_rows(vectors))
    if bad:
        raise NonFiniteVectors(non_finite_message(bad, len(vectors), fix), bad=bad, n_texts=len(vectors))


def non_finite_message(bad: Sequence[int], n_texts: int, fix: str, what: str = "text") -> str:
    """The one sentence for `bad` of `n_texts` texts (or inputs: `what`) whose vectors are not finite."""
    shown = ", ".join(map(str, bad[:3])) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
    return (
        f"the vectors of {len(bad)} of {n_texts} {what}(s) are not finite (NaN or infinity; {what} {shown}, "
        f"counting from 0), as a lower precision's overflow or a broken model gives; {fix}, or leave those "
        f"{what}s out"
    )
