"""What a caller gave: texts or vectors already made (NumPy, torch, rows of numbers), and row ids.

Told apart without importing torch, so the light engine and the static model read them too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import InvalidInput, InvalidSpec, UnknownToken
from .similarity import cos_sim
from .texts_given import type_named

__all__ = [
    "QUOTED", "given_vectors", "is_tensor", "is_vectors", "past_rows", "past_segments", "quoted_text",
    "row_id", "row_ids", "shown_value", "single", "vector_cosines",
]  # fmt: skip


# What similarity takes, as every refusal of its operands begins.
TAKES = (
    "similarity takes two lists of texts, or two arrays of vectors ((n, d) or (d,) floats, as encode gives: "
    "NumPy, torch or rows of numbers)"
)


def vector_cosines(a: object, b: object, options: Mapping[str, object]) -> np.ndarray:
    """(n, m) cosines of vectors already made: sentence-transformers' `similarity(embeddings, embeddings)`."""
    return cos_sim(*given_vectors(a, b, options))


def given_vectors(a: object, b: object, options: Mapping[str, object]) -> tuple[np.ndarray, np.ndarray]:
    """Vectors already made, a and b (b None: a again), as (n, d) or (d,) arrays of one width, checked as
    `similarity` takes them (no embedding options, finite numbers)."""
    if options:
        named = ", ".join(options)
        raise InvalidSpec(
            f"similarity of vectors already made takes no embedding options (given: {named}): leave them "
            "out, or pass the texts"
        )
    _refuse_mixed(a, b)
    left = _vectors(a, "a")
    right = left if b is None else _vectors(b, "b")
    if left.shape[-1] != right.shape[-1]:
        raise InvalidInput(
            f"a has {left.shape[-1]} dimensions and b {right.shape[-1]}: compare vectors made by one model "
            "with one recipe"
        )
    return left, right


def _refuse_mixed(a: object, b: object) -> None:
    """Refuse texts beside vectors (a str is one text: not something to read as numbers) and an empty side,
    naming both sides: the general line alone ('a is str') hid that the other side was vectors."""
    for name, side, other in (("a", a, "b"), ("b", b, "a")):
        if isinstance(side, (list, tuple)) and not side:
            raise InvalidInput(
                f"{TAKES}; {name} is an empty {type(side).__name__}: give one text or vector at least"
            )
        if _is_texts(side):
            what = "one text (a str)" if isinstance(side, str) else f"{type(side).__name__} of texts"
            raise InvalidInput(
                f"{TAKES}; {name} is {what} and {other} is vectors: give both the same kind (embed {name} "
                f"with encode first, or give {other}'s texts)"
            )


def _is_texts(given: object) -> bool:
    """Whether `given` is one text, an array of texts, or a list whose first item is a text or a pair."""
    if isinstance(given, str) or _holds_text(given):
        return True
    first = given[0] if isinstance(given, (list, tuple)) and given else None
    return isinstance(first, str) or (isinstance(first, tuple) and bool(first) and isinstance(first[0], str))


def is_tensor(given: object) -> bool:
    """Whether `given` is a torch tensor (or one like it), told without importing torch."""
    return hasattr(given, "detach") and hasattr(given, "numpy") and hasattr(given, "cpu")


def is_vectors(given: object) -> bool:
    """Whether `given` is vectors already made rather than texts: a NumPy array, a torch tensor, anything
    NumPy reads (`__array__`), or a non-empty list or tuple of such rows or of lists of numbers."""
    if isinstance(given, str) or _holds_text(given):
        return False
    if isinstance(given, np.ndarray) or is_tensor(given) or hasattr(given, "__array__"):
        return True
    if isinstance(given, (list, tuple)) and given:
        first = given[0]
        if isinstance(first, (list, tuple)):
            return (
                bool(first)
                and isinstance(first[0], (int, float, np.number))
                and not isinstance(first[0], bool)
            )
        return isinstance(first, np.ndarray) or is_tensor(first)
    return False


def _holds_text(given: object) -> bool:
    """Whether `given` is an array of texts (a NumPy string or object array, a pandas Series of strings):
    texts to embed, not vectors. An object array holding any string, at any number of dimensions, is
    texts (a 2-column one, `df[["q", "d"]].to_numpy()`, (A, B) pairs, as the same array of dtype <U), so
    a missing cell (None, NaN) is named as the text it is, not refused as vectors."""
    kind = getattr(getattr(given, "dtype", None), "kind", None)
    if kind in ("U", "S"):
        return True
    if kind != "O":
        return False
    if isinstance(given, np.ndarray):
        return any(isinstance(item, str) for item in given.flat)  # stops at the first string
    if getattr(given, "ndim", 1) != 1 or not len(given):  # type: ignore[arg-type]
        return False
    return any(isinstance(item, str) for item in given)  # type: ignore[attr-defined]  # a Series


def _array(given: object) -> object:
    """Vectors given as a tensor, a list of rows or tensors, or an array-like, as a NumPy array (anything
    else as given, for `_vectors` to name)."""
    if is_tensor(given):
        tensor = given.detach().cpu()  # type: ignore[attr-defined]
        if "bfloat16" in str(tensor.dtype):  # NumPy has no bfloat16
            tensor = tensor.float()
        return tensor.numpy()
    if isinstance(given, (list, tuple)) and given and is_vectors(given):
        try:
            return np.stack([np.asarray(_array(row)) for row in given])
        except ValueError:
            return given  # rows of differing lengths: named as not an array of vectors below
    if hasattr(given, "__array__") and not isinstance(given, np.ndarray):
        return np.asarray(given)
    return given


def _vectors(given: object, name: str) -> np.ndarray:
    """A (d,) or (n, d) array of numbers, or InvalidInput saying what similarity takes."""
    given = _array(given)
    if isinstance(given, np.ndarray):
        if given.dtype.kind in "fiu" and given.ndim in (1, 2):
            if not np.isfinite(given).all():
                row = int(np.argwhere(~np.isfinite(given.reshape(-1, given.shape[-1])))[0][0])
                raise InvalidInput(
                    f"similarity: {name} holds a value that is not finite (NaN or infinity) in row {row}; "
                    "embed that text again, or leave it out"
                )
            return given
        shown = f"a {given.ndim}-D {given.dtype} array"
    else:
        shown = type(given).__name__
    raise InvalidInput(f"{TAKES}; {name} is {shown}")


def shown_value(value: object) -> str:
    """A wrong argument as a one-line error shows it: its repr where short, else its type ('a list')."""
    return repr(value) if len(repr(value)) <= 40 else type_named(value)


QUOTED = 60  # characters of an input a refusal quotes


def quoted_text(text: str, width: int = QUOTED) -> str:
    """`text` as a refusal quotes it: whole when short, else its first `width` characters and its length,
    so a refusal never echoes a long input back."""
    return repr(text) if len(text) <= width else f"{text[:width]!r}... ({len(text):,} characters)"


def past_segments(segment: int, rows: int, apart: str) -> str:
    """The one line of a pair's second text on a model of `rows` segment rows (type_vocab_size=1), with
    `apart` the fix in the caller's verb ("embed the texts apart")."""
    return (
        f"segment (token type) id {segment} is out of range: this model has type_vocab_size={rows}, so it "
        f"takes no text pairs; {apart}"
    )


def past_rows(token_id: int, rows: int) -> str:
    """The one line of a tokenizer's id past the model's `rows` embedding rows (tokens added to the
    tokenizer without resizing the embeddings), with the two fixes."""
    return (
        f"token id {token_id} is past this model's {rows} embedding rows (ids 0..{rows - 1}): its tokenizer "
        "has tokens the model has no row for; resize the embeddings (transformers: "
        "model.resize_token_embeddings(len(tokenizer)), then save the folder) or add words with "
        "`bertscope vocab add`"
    )


def row_id(item: object, rows: int, *, tokens: int | None = None) -> int:
    """`item` as a row of a (rows, d) embedding matrix: a whole number (not a bool, not 7852.0) in
    0..rows-1, else InvalidInput or UnknownToken (a negative id is out of range, never counted from the end).
    `tokens`: the tokenizer's size, where known: an id it gives past the rows is `past_rows`'s line.
    `static` (token_ids) and `embedding_rows` both check ids here."""
    if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
        raise InvalidInput(f"{shown_value(item)} is not a token id: pass ids as ints (7852, not 7852.0)")
    if rows <= int(item) < (tokens or 0):
        raise UnknownToken(past_rows(int(item), rows))
    if not 0 <= int(item) < rows:
        raise UnknownToken(f"token id {item} is out of range: this vocabulary has ids 0..{rows - 1}")
    return int(item)


def row_ids(ids: object, rows: int, *, tokens: int | None = None) -> list[int]:
    """Ids of rows of a (rows, d) matrix, each checked by `row_id` (`tokens` as there): one id, or a list
    or 1-D array of them."""
    if isinstance(ids, (int, np.integer)) and not isinstance(ids, bool):
        ids = [ids]
    if isinstance(ids, np.ndarray) and ids.ndim == 1 and ids.dtype.kind in "iu":
        if len(ids) and not (0 <= ids.min() and ids.max() < rows):  # many ids at once (a whole export)
            row_id(int(ids[(ids < 0) | (ids >= rows)][0]), rows, tokens=tokens)
        return [int(i) for i in ids]
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (Sequence, np.ndarray)):
        raise InvalidInput(
            f"embedding rows are asked by token id: {ids!r} is not an id or a list of ids; "
            "use static() for word pieces"
        )
    return [row_id(item, rows, tokens=tokens) for item in ids]


def single(texts: object) -> bool:
    """Whether `texts` is one text, not a list of texts and pairs (a bare tuple (A, B) is refused by
    `check_texts`, as it reads two ways: one pair or two texts)."""
    return isinstance(texts, str)
