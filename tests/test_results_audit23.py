"""Results as a notebook shows them and as NumPy, pandas and torch read them; the public result types at
the top level; the one rule of a 2-D array of texts (core/results.py, bertscope/__init__.py,
core/texts_given.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import bertscope
from bertscope.core.results import SentenceEmbeddings
from bertscope.errors import InvalidInput

SPEC = {"layers": (6,), "combine": "mean", "pooling": "mean", "normalize": True, "subword": "mean"}


def sentence(n: int = 3, d: int = 384) -> SentenceEmbeddings:
    vectors = np.arange(n * d, dtype=np.float32).reshape(n, d) / (n * d)
    return SentenceEmbeddings(vectors, np.arange(4, 4 + n), np.array([0] * (n - 1) + [2]), dict(SPEC))


# 7. One rule for a 2-D array of texts: 2 columns are (A, B) pairs, in embed as in encode.


def test_a_result_given_as_texts_is_refused_as_vectors_already_made(bundled: bertscope.Model) -> None:
    with pytest.raises(InvalidInput, match=r"got SentenceEmbeddings: vectors already made, not texts"):
        bundled.embed(sentence())  # type: ignore[arg-type]
    # and still read as vectors where vectors are taken
    assert bundled.similarity(sentence(2), sentence(2)).shape == (2, 2)


def test_a_two_column_array_is_pairs_in_embed_as_in_encode(bundled: bertscope.Model) -> None:
    pairs = [("a cat", "sat down"), ("a dog", "ran off")]
    array = np.array(pairs)
    want = bundled.embed(pairs).vectors
    np.testing.assert_allclose(bundled.embed(array).vectors, want, atol=1e-6)
    np.testing.assert_allclose(bundled.embed(array.astype(object)).vectors, want, atol=1e-6)
    np.testing.assert_allclose(bundled.encode(array), want, atol=1e-6)  # type: ignore[arg-type]
    assert [t.pair for t in bundled.embed_tokens(array)] == ["sat down", "ran off"]


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (
            np.array([["a", "b", "c"]]),
            "got a 2-D array with 3 columns: a 2-D array must have 2 columns (A, B pairs)",
        ),
        (np.array([["a"]]), "got a 2-D array with 1 column: a 2-D array must have 2 columns (A, B pairs)"),
        (np.zeros((2, 2)), "got a 2-D array of float64: pass texts, not numbers"),
        (np.array([[["a", "b"]]]), "got a 3-D array: pass a 1-D array of texts, or a 2-D array of 2 columns"),
        (np.array("a cat"), "got a 0-D array: pass its text, array.item()"),
    ],
)
def test_another_array_is_refused_saying_the_rule(
    bundled: bertscope.Model, given: np.ndarray, said: str
) -> None:
    with pytest.raises(
        InvalidInput, match="^texts must be a string or a list of strings, " + re.escape(said)
    ):
        bundled.embed(given)
    with pytest.raises(InvalidInput, match=re.escape(said)):
        bundled.encode(given)  # type: ignore[arg-type]


def test_text_items_says_the_refusal_in_the_callers_words() -> None:
    from bertscope.core.texts_given import text_items

    takes = "encode takes a str or a list of str"
    with pytest.raises(
        InvalidInput, match=f"^{takes}, got a 2-D array with 3 columns: a 2-D array must have 2"
    ):
        text_items(np.array([["a", "b", "c"]]), pairs=True, takes=takes)
    with pytest.raises(
        InvalidInput, match=r"got a 2-D array: pass a 1-D array of texts \(pairs are not taken"
    ):
        text_items(np.array([["a", "b"]]))  # where pairs are not taken, two columns are no pairs either
