"""Results as a notebook shows them and as NumPy, pandas and torch read them; the public result types at
the top level; the one rule of a 2-D array of texts (core/results.py, bertscope/__init__.py,
core/texts_given.py)."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.core.results import ChunkEmbeddings, SentenceEmbeddings, TokenEmbeddings, WordEmbeddings
from bertscope.errors import InvalidInput

SPEC = {"layers": (6,), "combine": "mean", "pooling": "mean", "normalize": True, "subword": "mean"}


def sentence(n: int = 3, d: int = 384) -> SentenceEmbeddings:
    vectors = np.arange(n * d, dtype=np.float32).reshape(n, d) / (n * d)
    return SentenceEmbeddings(vectors, np.arange(4, 4 + n), np.array([0] * (n - 1) + [2]), dict(SPEC))


# 4. A repr that says what the result is, never its floats.


def test_each_result_repr_is_short_and_says_count_shape_dtype_and_recipe() -> None:
    text = "a cat " * 20
    token = TokenEmbeddings(
        text, ["[CLS]", "a", "[SEP]"], [(0, 0), (0, 1), (0, 0)], [None, 0, None], [True, False, True],
        np.zeros((3, 384), np.float32), 1, dict(SPEC),
    )  # fmt: skip
    word = WordEmbeddings(text, ["a", "cat"], [(0, 1), (2, 5)], [["a"], ["cat"]], np.zeros((2, 384)), 0, SPEC)
    chunk = ChunkEmbeddings(
        text, ["a cat"], [(0, 5)], np.zeros((1, 384), np.float32), np.array([3]), np.array([0]), SPEC
    )
    shown = {
        "SentenceEmbeddings(3 texts, vectors (3, 384) float32, tokens 15, 1 cut": repr(sentence()),
        "TokenEmbeddings(3 tokens, vectors (3, 384) float32, text 'a cat a cat": repr(token),
        "WordEmbeddings(2 words, vectors (2, 384) float64, text 'a cat a cat": repr(word),
        "ChunkEmbeddings(1 chunk, vectors (1, 384) float32, text 'a cat a cat": repr(chunk),
    }
    for start, said in shown.items():
        assert said.startswith(start), said
        assert len(said) < 250 and "e-0" not in said and "array(" not in said, said
        assert "layers=(6,)" in said
    assert repr(sentence()).endswith("pooling=mean, normalize=True)")
    assert "(120 chars), 1 dropped, layers=(6,), combine=mean)" in repr(token)
    assert repr(word).endswith("combine=mean, subword=mean)")


def test_the_repr_of_two_embedded_texts_is_short(bundled: bertscope.Model) -> None:
    # two texts (768 floats) were under NumPy's summary threshold: the old repr printed every one
    assert repr(bundled.embed(["a cat", "a dog"])).startswith("SentenceEmbeddings(2 texts, vectors (2, 384)")
    assert len(repr(bundled.embed(["a cat", "a dog"]))) < 200
    assert len(repr(bundled.embed_words(["a cat"])[0])) < 200
    assert len(repr(bundled.embed_tokens([("a cat", "a dog")])[0])) < 250


# 5. SentenceEmbeddings reads as a list of rows, and as NumPy's array.


def test_sentence_embeddings_index_iterate_and_slice_as_rows() -> None:
    se = sentence()
    np.testing.assert_array_equal(se[1], se.vectors[1])
    np.testing.assert_array_equal(se[-1], se.vectors[2])
    assert [row.shape for row in se] == [(384,)] * 3
    np.testing.assert_array_equal(np.stack(list(se)), se.vectors)
    part = se[1:]
    assert isinstance(part, SentenceEmbeddings) and len(part) == 2 and part.spec == se.spec
    np.testing.assert_array_equal(part.vectors, se.vectors[1:])
    assert part.n_tokens.tolist() == [5, 6] and part.n_dropped.tolist() == [0, 2]
    assert se[[2, 0]].n_tokens.tolist() == [6, 4]
    assert se[np.array([True, False, True])].n_dropped.tolist() == [0, 2]
    assert se[:, :8].shape == (3, 8)
    with pytest.raises(IndexError):
        se[3]


def test_sentence_embeddings_shape_dtype_tolist_and_the_array_readers() -> None:
    se = sentence()
    assert se.shape == (3, 384) and se.dtype == np.float32
    assert se.tolist() == se.vectors.tolist()
    np.testing.assert_array_equal(np.asarray(se), se.vectors)
    pandas = pytest.importorskip("pandas")
    assert pandas.DataFrame(se).shape == (3, 384)
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # read whole, not row by row (torch warns that is slow)
        tensor = torch.as_tensor(se)
    assert tensor.shape == (3, 384) and tensor.dtype == torch.float32
    np.testing.assert_array_equal(tensor.numpy(), se.vectors)
    frozen = sentence()
    frozen.vectors.flags.writeable = False
    assert torch.as_tensor(frozen).shape == (3, 384)


def test_a_result_given_as_texts_is_refused_as_vectors_already_made(bundled: bertscope.Model) -> None:
    with pytest.raises(InvalidInput, match=r"got SentenceEmbeddings: vectors already made, not texts"):
        bundled.embed(sentence())  # type: ignore[arg-type]
    # and still read as vectors where vectors are taken
    assert bundled.similarity(sentence(2), sentence(2)).shape == (2, 2)


# 6. The result types the Model's methods return are public names, and still import no torch.

RESULT_TYPES = [
    "ChunkEmbeddings", "ForwardOutput", "Explanation", "Baseline", "CkaResult", "Contextuality",
    "GeometryResult", "ProbeResult", "Sense", "StructuralResult", "FingerprintCheck", "Verification",
]  # fmt: skip


@pytest.mark.parametrize("name", RESULT_TYPES)
def test_each_result_type_is_a_public_name(name: str) -> None:
    assert name in bertscope.__all__
    assert isinstance(getattr(bertscope, name), type)


def test_embed_chunks_gives_the_public_chunk_type(bundled: bertscope.Model) -> None:
    assert isinstance(bundled.embed_chunks("a cat sat. a dog ran."), bertscope.ChunkEmbeddings)


def test_import_bertscope_still_imports_no_torch() -> None:
    code = "import sys, bertscope; bertscope.__all__; print('torch' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"


# 7. One rule for a 2-D array of texts: 2 columns are (A, B) pairs, in embed as in encode.


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


# 9. docs/names.md names a token's id by both its names, each of which the code answers to.


def test_the_names_page_says_both_names_of_token_ids(bundled: bertscope.Model) -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "names.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| token ids "))
    assert "`Tokens.ids`" in row and '`batch()["input_ids"]`' in row and "`forward(texts).input_ids`" in row
    ids = bundled.tokenize("a cat").ids
    assert bundled.batch(["a cat"])["input_ids"][0].tolist() == ids
    assert bundled.forward(["a cat"]).input_ids[0].tolist() == ids
