"""The API review of round 23: a list pair in LlamaIndex, a 2-column object array of pairs in similarity,
an embedding result given as a corpus, SentenceEmbeddings' indexes, `in`, DLPack's copy and repr, a bytes
array, LangChain's async names (integrations/, core/given.py, core/results.py, core/texts_given.py,
io/readers.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.core.results import SentenceEmbeddings
from bertscope.errors import CorpusError, InvalidInput


@pytest.fixture(scope="module")
def bert(tiny_models: dict[str, bertscope.Model]) -> bertscope.Model:
    return tiny_models["bert"]


def result(n: int = 3, d: int = 4) -> SentenceEmbeddings:
    vectors = np.arange(n * d, dtype=np.float32).reshape(n, d)
    return SentenceEmbeddings(vectors, np.arange(2, 2 + n), np.zeros(n, dtype=int), {"pooling": "mean"})


# 1. LlamaIndex refuses a pair as Model.embed reads one: a tuple or a list of two strings.


def test_llamaindex_refuses_a_list_pair_before_the_model_runs(bert: bertscope.Model) -> None:
    pytest.importorskip("llama_index.core")
    from bertscope.integrations.llamaindex import BertscopeEmbedding

    li = BertscopeEmbedding(bert)
    for call in (
        lambda: li.get_text_embedding_batch(["c", ["a", "b"]]),  # type: ignore[list-item]
        lambda: asyncio.run(li.aget_text_embedding_batch(["c", ["a", "b"]])),  # type: ignore[list-item]
    ):
        with pytest.raises(
            InvalidInput, match=r"^text 1 is a list of two strings \(an A, B pair\), not a string"
        ):
            call()
    with pytest.raises(InvalidInput, match=r"^text 0 is a list of two strings"):
        # reached directly, it gave one vector for the pair
        li._get_text_embeddings([["a", "b"]])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match=r"^text 0 is an \(A, B\) pair, not a string"):
        li.get_text_embedding_batch([("a", "b")])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match=r"^text 1 is a list, not a string: LlamaIndex takes strings"):
        li.get_text_embedding_batch(["x", ["a", 1]])  # type: ignore[list-item]  # embed spoke of pairs
    assert len(li.get_text_embedding_batch(["a", "b"])) == 2


# 8. LangChain's async methods name themselves.


def test_langchain_async_refusals_name_the_async_method(bert: bertscope.Model) -> None:
    pytest.importorskip("langchain_core")
    from bertscope.integrations.langchain import BertscopeEmbeddings

    lc = BertscopeEmbeddings(bert)
    with pytest.raises(
        InvalidInput, match=r"^aembed_query takes one string .*: aembed_documents takes a list"
    ):
        asyncio.run(lc.aembed_query(["a"]))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"^aembed_documents takes a list .* or aembed_query\(text\)"):
        asyncio.run(lc.aembed_documents("abc"))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"^embed_query takes one string"):
        lc.embed_query(["a"])  # type: ignore[arg-type]
    assert asyncio.run(lc.aembed_documents(["a b"])) == lc.embed_documents(["a b"])
    assert asyncio.run(lc.aembed_query("a b")) == lc.embed_query("a b")


# 2. A 2-column object array of pairs (df[["q", "d"]].to_numpy()) is pairs, as the <U array is.


def test_similarity_reads_an_object_array_of_pairs_as_the_string_array(bert: bertscope.Model) -> None:
    pairs = [["hello world", "a b"], ["x y", "z"]]
    as_objects = bert.similarity(np.array(pairs, dtype=object), ["x"])
    np.testing.assert_array_equal(as_objects, bert.similarity(np.array(pairs), ["x"]))
    assert as_objects.shape == (2, 1)
    with pytest.raises(InvalidInput, match=r"; a is a 2-D object array$"):  # numbers: still vectors
        bert.similarity(np.array([[1.0, 2.0]], dtype=object), np.array([[1.0, 2.0]]))


# 4. An embedding result given as a corpus says what it is.


def test_an_embedding_result_as_a_corpus_is_refused_as_vectors(bert: bertscope.Model, tmp_path: Path) -> None:
    made = bert.embed(["a b", "c d"])
    said = r"^cannot read a SentenceEmbeddings as a corpus: vectors already made, not texts; pass the texts"
    with pytest.raises(CorpusError, match=said):
        bertscope.embed_corpus(made, tmp_path / "out.parquet", model=bert)  # type: ignore[arg-type]
    with pytest.raises(CorpusError, match=said):
        bert.static_from_corpus(made)  # type: ignore[arg-type]


# 5. Indexes that would give vectors of the wrong shape.


def test_a_zero_d_integer_array_is_a_row_and_none_or_a_bool_is_refused() -> None:
    found = result()
    np.testing.assert_array_equal(found[np.array(1)], found.vectors[1])
    np.testing.assert_array_equal(found[np.array(-1, dtype=np.int64)], found.vectors[2])
    for index, shown in ((None, "None"), (True, "True"), (np.bool_(True), "np.True_"), (np.array(True), "")):
        refused = r"^SentenceEmbeddings is indexed by a row number, .* not " + shown
        with pytest.raises(InvalidInput, match=refused):
            found[index]  # type: ignore[index]
    assert len(found[np.array([True, False, True])]) == 2  # a mask of rows still selects them


# 9. `in` as a list of rows reads it; DLPack's copy=False on read-only vectors.


def test_in_asks_whether_a_row_equals_the_vector() -> None:
    found = result()
    assert found.vectors[1] in found
    assert found.vectors[1].tolist() in found
    assert found.vectors[1] + 0.5 not in found
    assert found.vectors[:, :2] not in found
    assert "a" not in found


def test_dlpack_copy_false_on_read_only_vectors_raises_as_numpy_does() -> None:
    vectors = np.ones((2, 3), np.float32)
    vectors.flags.writeable = False
    found = SentenceEmbeddings(vectors, np.array([1, 1]), np.array([0, 0]))
    with pytest.raises(BufferError):
        vectors.__dlpack__(copy=False)  # NumPy's own answer
    with pytest.raises(BufferError):
        found.__dlpack__(copy=False)
    assert found.__dlpack__() is not None  # no copy asked for: a copy goes
    np.testing.assert_array_equal(np.from_dlpack(found), vectors)


# 7. A repr never raises.


def test_repr_of_lists_given_for_arrays_does_not_raise() -> None:
    made = SentenceEmbeddings(np.zeros((2, 3), np.float32), [1, 2], [0, 1], {})  # type: ignore[arg-type]
    assert repr(made) == "SentenceEmbeddings(2 texts, vectors (2, 3) float32, tokens 3, 1 cut)"
    assert made.n_truncated == 1


# 6. A bytes array is refused as bytes, not as numbers.


def test_a_bytes_array_is_refused_as_bytes(bert: bertscope.Model) -> None:
    decode = r"not bytes: decode them first, such as np\.char\.decode\(texts, 'utf-8'\)"
    with pytest.raises(InvalidInput, match=r"^texts must be a string or a list of strings, " + decode):
        bert.embed(np.array([[b"a", b"b"]]))
    with pytest.raises(InvalidInput, match=r"^encode takes a str or a list of str, " + decode):
        bert.encode(np.array([[b"a", b"b"]]))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=decode):
        bert.embed(np.array([b"a", b"b"]))
