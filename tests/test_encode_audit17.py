"""Audit 17: encode and its neighbours (the framework adapters, similarity, encode_query) against
sentence-transformers where they meet, and one-line refusals where they part."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.errors import InputTooLong, InvalidInput, InvalidSpec
from bertscope.integrations import langchain as lc
from bertscope.integrations import llamaindex as li

TEXTS = ["the cat sat", "a dog ran"]


def _adapters(model: Any) -> list[Any]:
    """Each adapter's list method, and LangChain's async one run to its end."""
    chain, index = lc.BertscopeEmbeddings(model), li.BertscopeEmbedding(model)
    return [
        chain.embed_documents,
        lambda texts: asyncio.run(chain.aembed_documents(texts)),
        index.get_text_embedding_batch,
        lambda texts: asyncio.run(index.aget_text_embedding_batch(texts)),
    ]


@pytest.mark.parametrize(("given", "kind"), [({"the cat": 1, "the dog": 2}, "dict"), ({"a", "b"}, "set")])
def test_adapters_refuse_a_dict_or_a_set(bundled: bertscope.Model, given: Any, kind: str) -> None:
    with pytest.raises(InvalidInput, match=f"encode takes a str or a list of str, not a {kind}: "):
        bundled.encode(given)
    for method in _adapters(bundled):
        with pytest.raises(InvalidInput, match=f"takes a list of texts, not a {kind}: "):
            method(given)


def test_bytes_are_refused_in_one_line_naming_the_fix(bundled: bertscope.Model, static_m2v: Any) -> None:
    calls = [bundled.encode, bundled.encode_query, bundled.encode_document, static_m2v.encode]
    for call in calls:
        with pytest.raises(InvalidInput, match="a list of str, not bytes: decode them"):
            call(b"ab")
    for method in _adapters(bundled):
        with pytest.raises(InvalidInput, match=r"takes a list of texts, not bytes: decode them"):
            method(bytearray(b"ab"))


def test_none_is_refused_in_one_line_by_the_adapters(bundled: bertscope.Model) -> None:
    with pytest.raises(InvalidInput, match="^encode needs texts"):
        bundled.encode(None)
    for method in _adapters(bundled):
        with pytest.raises(InvalidInput, match=r"takes a list of texts, not None$"):
            method(None)


def test_similarity_takes_sentence_transformers_keyword_names(
    bundled: bertscope.Model, st_model: Any, static_m2v: Any
) -> None:
    e, f = bundled.encode(TEXTS), bundled.encode(["a car", "the cat sat", "rain"])
    want = st_model.similarity(embeddings1=e, embeddings2=f).numpy()
    np.testing.assert_allclose(bundled.similarity(embeddings1=e, embeddings2=f), want, atol=1e-6)
    np.testing.assert_allclose(bundled.similarity(e, embeddings2=f), want, atol=1e-6)
    np.testing.assert_allclose(bundled.similarity(a=e, b=f), want, atol=1e-6)  # the forms that worked work
    np.testing.assert_allclose(bundled.similarity(TEXTS, ["a car"]), bundled.similarity(a=TEXTS, b=["a car"]))
    s = static_m2v.encode(TEXTS)
    given = static_m2v.similarity(embeddings1=s, embeddings2=s)
    np.testing.assert_allclose(given, static_m2v.similarity(s, s))
    for model, vectors in ((bundled, e), (static_m2v, s)):
        with pytest.raises(InvalidInput, match=r"^give a= or embeddings1= .*not both"):
            model.similarity(vectors, embeddings1=vectors)
        with pytest.raises(InvalidInput, match=r"^give b= or embeddings2= .*not both"):
            model.similarity(vectors, vectors, embeddings2=vectors)
        with pytest.raises(InvalidInput, match=r"^similarity needs a"):
            model.similarity(embeddings2=vectors)


def test_encode_query_takes_encodes_positional_arguments(
    bundled: bertscope.Model, st_model: Any, static_m2v: Any
) -> None:
    in_order = (None, None, 8, False, "sentence_embedding", "float32", True, True)  # ... convert_to_tensor
    for role in ("encode_query", "encode_document"):
        want = getattr(st_model, role)(TEXTS, *in_order)
        found = getattr(bundled, role)(TEXTS, *in_order)
        np.testing.assert_allclose(found.numpy(), want.numpy(), atol=1e-5)
        static = getattr(static_m2v, role)(TEXTS, None, None, 8, False)
        np.testing.assert_array_equal(static, static_m2v.encode(TEXTS))


def test_token_embeddings_of_pairs_as_sentence_transformers(bundled: bertscope.Model, st_model: Any) -> None:
    pairs = [("a question here", "an answer"), ("x", "a much longer second part of the pair")]
    found = bundled.encode(pairs, output_value="token_embeddings")
    want = st_model.encode(pairs, output_value="token_embeddings")
    for mine, theirs in zip(found, want, strict=True):
        assert mine.shape == theirs.shape
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), atol=1e-5)
    with pytest.raises(InputTooLong, match="encode refuses it too, where sentence-transformers cuts"):
        bundled.encode([("word " * 300, "b")], output_value="token_embeddings")


NAMES = Path(__file__).resolve().parents[1] / "docs" / "names.md"


def test_where_encode_parts_from_sentence_transformers_is_said(bundled: bertscope.Model) -> None:
    page = " ".join(NAMES.read_text().split())
    with pytest.raises(InvalidSpec, match=r"^output_value=None .* model.batch\(texts\) the input_ids"):
        bundled.encode(TEXTS, output_value=None)
    assert "`encode(output_value=None)` is refused" in page
    with pytest.raises(InvalidSpec, match="give prompt_name= or prompt=, not both"):
        bundled.encode(TEXTS, prompt_name="query", prompt="x: ")
    assert "sentence-transformers warns and uses `prompt`" in page
    assert bundled.device == "cpu" and str(bundled.device) == "cpu"  # the default backend: no torch
    assert '`m.device` is the str `"cpu"` on the default backend (onnxruntime)' in page
    assert "A static (model2vec) folder stored in float16: `encode` gives float32" in page
