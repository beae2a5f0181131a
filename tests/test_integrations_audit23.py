"""The framework audit of round 23: LangChain's and LlamaIndex's classes copy (sharing the loaded model)
and pickle (loading it again); LlamaIndex refuses an (A, B) pair before the model runs and a fitted
post-processing its to_dict cannot hold; the single-text methods name themselves and what takes a list;
the reprs show the recipe."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.post import fit_post

lc = pytest.importorskip("bertscope.integrations.langchain")
li = pytest.importorskip("bertscope.integrations.llamaindex")

TEXTS = ["I like eating bread", "The banana bread was horrible", "a cat sat on the mat"]
OPTIONS: dict[str, Any] = {"layers": "-2", "pooling": "mean", "mask_special": True}


def test_deep_copies_share_the_loaded_model(bundled: bertscope.Model) -> None:
    """copy.deepcopy (and LlamaIndex's model_copy(deep=True)) raised "cannot pickle '_thread.lock'"."""
    want = bundled.embed(TEXTS, **OPTIONS).vectors
    lang = lc.BertscopeEmbeddings(bundled, **OPTIONS)
    llama = li.BertscopeEmbedding(bundled, embed_batch_size=2, **OPTIONS)
    for made in (copy.deepcopy(lang), copy.copy(lang)):
        assert made.model is bundled
        np.testing.assert_allclose(made.embed_documents(TEXTS), want, atol=1e-5)
    for again in (copy.deepcopy(llama), llama.model_copy(deep=True)):
        assert again.model is bundled and again.embed_batch_size == 2
        assert again.to_dict() == llama.to_dict()
        np.testing.assert_allclose(again.get_text_embedding_batch(TEXTS), want, atol=1e-5)


def test_langchain_pickles_by_loading_its_model_again(bundled_path: Path, bundled: bertscope.Model) -> None:
    """It raised "Can't pickle local object 'Encoder.__init__.<locals>.<lambda>'"."""
    emb = lc.BertscopeEmbeddings(bundled_path, device="cpu", query_prompt="q: ", **OPTIONS)
    again = pickle.loads(pickle.dumps(emb))
    assert again.model is not emb.model and repr(again) == repr(emb)
    np.testing.assert_allclose(
        again.embed_documents(TEXTS), bundled.embed(TEXTS, **OPTIONS).vectors, atol=1e-5
    )
    query = bundled.embed(["pets"], prompt="q: ", **OPTIONS).vectors[0]
    np.testing.assert_allclose(again.embed_query("pets"), query, atol=1e-5)
    # A model the caller loaded has load options no process can know: one line naming the fix.
    with pytest.raises(
        InvalidSpec, match=r"^a BertscopeEmbeddings made from a loaded model does not pickle .* give its name"
    ):
        pickle.dumps(lc.BertscopeEmbeddings(bundled))


@pytest.fixture
def forwards(bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The texts each forward of the bundled model was given, while the test runs."""
    given: list[Any] = []
    embed_with = bundled.embed_with

    def counted(texts: Any, *args: Any, **kwargs: Any) -> Any:
        given.append(texts)
        return embed_with(texts, *args, **kwargs)

    monkeypatch.setattr(bundled, "embed_with", counted)
    return given


def test_llamaindex_refuses_a_pair_before_the_model_runs(
    bundled: bertscope.Model, forwards: list[Any]
) -> None:
    """A pair ran the model, then LlamaIndex's EmbeddingEndEvent raised a pydantic ValidationError."""
    emb = li.BertscopeEmbedding(bundled)
    pair = ("a cat", "a dog")
    fix = r"LlamaIndex's embeddings take strings; embed \(A, B\) pairs with the model itself"
    with pytest.raises(
        InvalidInput, match=rf"^get_query_embedding takes one string, not an \(A, B\) pair: {fix}"
    ):
        emb.get_query_embedding(pair)
    with pytest.raises(
        InvalidInput, match=rf"^get_text_embedding takes one string, not an \(A, B\) pair: {fix}"
    ):
        emb.get_text_embedding(pair)
    with pytest.raises(InvalidInput, match=rf"^text 1 is an \(A, B\) pair, not a string: {fix}"):
        emb.get_text_embedding_batch(["a bird", pair])
    assert forwards == []
    # LangChain takes pairs, as langchain-huggingface's classes do.
    want = bundled.embed([pair]).vectors
    np.testing.assert_allclose(lc.BertscopeEmbeddings(bundled).embed_documents([pair]), want, atol=1e-5)
    np.testing.assert_allclose(lc.BertscopeEmbeddings(bundled).embed_query(pair), want[0], atol=1e-5)


def test_llamaindex_takes_a_saved_post_and_refuses_a_fitted_one(
    bundled: bertscope.Model, tmp_path: Path
) -> None:
    """A fitted post made to_json raise "Object of type PCA is not JSON serializable", and to_dict, which
    LlamaIndex's ingestion cache hashes, held numpy's shortened print of it."""
    corpus = [f"note {i}: the {word} sat by the window" for i, word in enumerate(["cat", "dog"] * 20)]
    fitted = fit_post(bundled.embed(corpus).vectors, "pca", dim=16)
    with pytest.raises(
        InvalidSpec, match=r"^post= is a fitted pca, .* save it with \.save\(path\), pass post=path$"
    ):
        li.BertscopeEmbedding(bundled, post=fitted)
    saved = fitted.save(tmp_path / "pca.safetensors")
    emb = li.BertscopeEmbedding(bundled, post=saved)
    again = li.BertscopeEmbedding.from_json(emb.to_json())
    assert again.to_dict()["post"] == str(saved)
    want = bundled.embed(TEXTS, post=saved).vectors
    np.testing.assert_allclose(again.get_text_embedding_batch(TEXTS), want, atol=1e-5)


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda e: e.embed_query(None), r"^embed_query takes one string or an \(A, B\) pair, not None$"),
        (
            lambda e: e.embed_query(["a"]),
            r"^embed_query takes one string .*, not a list: embed_documents takes a list$",
        ),
        (
            lambda e: e.get_query_embedding(["a"]),
            r"^get_query_embedding takes one string, not a list: call it once",
        ),
        (lambda e: e.get_text_embedding(None), r"^get_text_embedding takes one string, not None$"),
        (
            lambda e: e.get_text_embedding(["a", "b", "c"]),
            r"^get_text_embedding takes one string, not a list: get_text_embedding_batch takes a list$",
        ),
    ],
)
def test_single_text_methods_name_themselves_and_what_takes_a_list(
    bundled: bertscope.Model, forwards: list[Any], call: Any, said: str
) -> None:
    """They said "text 0 is None, not a string: pass strings or (A, B) pairs", naming no method."""
    emb = lc.BertscopeEmbeddings(bundled) if "embed_query" in said else li.BertscopeEmbedding(bundled)
    with pytest.raises(InvalidInput, match=said):
        call(emb)
    assert forwards == []


def test_reprs_show_the_model_and_the_keywords_given(bundled: bertscope.Model, bundled_path: Path) -> None:
    """LangChain's was <... object at 0x...>; LlamaIndex's was the same for every recipe."""
    lang = lc.BertscopeEmbeddings(bundled, layers="-2", query_prompt="q: ")
    assert repr(lang) == f"BertscopeEmbeddings({bundled!r}, query_prompt='q: ', layers='-2')"
    llama = li.BertscopeEmbedding(bundled, layers="-2", query_prompt="q: ", embed_batch_size=2)
    assert (
        repr(llama) == f"BertscopeEmbedding({bundled!r}, query_prompt='q: ', layers='-2', embed_batch_size=2)"
    )
    assert repr(llama) != repr(li.BertscopeEmbedding(bundled))
    named = lc.BertscopeEmbeddings(bundled_path, device="cpu")
    assert repr(named) == f"BertscopeEmbeddings({str(bundled_path)!r}, device='cpu')"
    fitted = fit_post(bundled.embed([f"text {i} on cats" for i in range(20)]).vectors, "pca", dim=4)
    assert repr(lc.BertscopeEmbeddings(bundled, post=fitted)).endswith("post=<fitted pca 384 -> 4>)")
