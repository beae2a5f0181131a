"""Vectors holding NaN or infinity refused in one wording (`refuse_non_finite`), never returned as they came:
a lower precision's overflow (float16 past 65,504) or a broken model gives them, and a cosine, a search or
a JSON answer made from them is wrong without a word. Stores refuse such a batch in their own words
(`io.checksums.refuse_non_finite`), naming its ids.

A measurement that reads such vectors as its own finding (verify's comparison with the reference, a mode's
or runtime's drift to float32) runs the public calls inside `non_finite_read()`, where nothing is refused."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar

import numpy as np

from ..errors import NonFiniteVectors
from .context_vars import set_within

__all__ = ["LIBRARY_FIX", "non_finite_message", "non_finite_read", "non_finite_rows", "refuse_non_finite"]

LIBRARY_FIX = "use dtype='float32' where it ran in float16 or bfloat16, or check the model's weights"
# rows checked at a time: the check's booleans stay small whatever the result's size
_BLOCK_VALUES = 1 << 20
_READ: ContextVar[bool] = ContextVar("bertscope_non_finite_read", default=False)


def non_finite_read() -> AbstractContextManager[None]:
    """Inside: vectors that are not finite are handed back as they came, for a measurement that reads them
    as its own finding (verify, a runtime's drift); this thread and task only."""
    return set_within(_READ, True)


def non_finite_rows(vectors: np.ndarray | Sequence[np.ndarray]) -> list[int]:
    """The positions of the texts whose vectors hold NaN or infinity: rows of an (n, ...) array, or items
    of a list of per-text arrays (token vectors)."""
    if isinstance(vectors, np.ndarray):
        if vectors.dtype.kind not in "fc" or vectors.size == 0:
            return []
        flat = vectors.reshape(len(vectors), -1)
        step = max(1, _BLOCK_VALUES // max(1, flat.shape[1]))
        bad: list[int] = []
        for at in range(0, len(flat), step):
            bad += (at + np.flatnonzero(~np.isfinite(flat[at : at + step]).all(axis=1))).tolist()
        return bad
    return [i for i, v in enumerate(vectors) if np.asarray(v).dtype.kind in "fc" and not np.isfinite(v).all()]


def refuse_non_finite(
    vectors: np.ndarray | Sequence[np.ndarray],
    *,
    fix: str = LIBRARY_FIX,
    start: int = 0,
    so_far: bool = False,
) -> None:
    """Raise `NonFiniteVectors` where any text's vectors hold NaN or infinity, naming those texts (by
    position, from `start`: a stream's chunk counts on from the texts before it, `so_far` then says of how
    many read until here) and `fix`; nothing inside `non_finite_read()`."""
    if _READ.get():
        return
    bad = tuple(start + i for i in non_finite_rows(vectors))
    if bad:
        n_texts = start + len(vectors)
        message = non_finite_message(bad, n_texts, fix, so_far=so_far)
        raise NonFiniteVectors(message, bad=bad, n_texts=n_texts)


def non_finite_message(
    bad: Sequence[int], n_texts: int, fix: str, what: str = "text", *, so_far: bool = False
) -> str:
    """The one sentence for `bad` of `n_texts` texts (or inputs: `what`) whose vectors are not finite."""
    shown = ", ".join(map(str, bad[:3])) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
    of = f"the first {n_texts}" if so_far else str(n_texts)
    return (
        f"the vectors of {len(bad)} of {of} {what}(s) are not finite (NaN or infinity; {what} {shown}, "
        f"counting from 0), as a lower precision's overflow or a broken model gives; {fix}, or leave those "
        f"{what}s out"
    )
