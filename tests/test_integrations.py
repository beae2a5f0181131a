"""bertscope inside LangChain and LlamaIndex, in process: each framework's calls equal `Model.embed`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.errors import InvalidSpec
from bertscope.static_model import StaticModel
from prompted import with_prompts

ATOL = 1e-5
TEXTS = ["I like eating bread", "The banana bread was horrible", "a cat sat on the mat"]
OPTIONS = {"layers": "-2", "pooling": "mean", "mask_special": True}


@pytest.fixture(scope="module")
def prompted(bundled_path: Path, tmp_path_factory: pytest.TempPathFactory) -> bertscope.Model:
    """The bundled model with "query" / "passage" prompts and "passage" as its default."""
    folder = tmp_path_factory.mktemp("prompted") / "model"
    return bertscope.load(
        with_prompts(bundled_path, folder, include_prompt=False, default="passage"), device="cpu"
    )


def test_langchain_embeddings_equal_the_library(bundled: bertscope.Model, prompted: bertscope.Model) -> None:
    langchain = pytest.importorskip("bertscope.integrations.langchain")
    from langchain_core.embeddings import Embeddings

    emb = langchain.BertscopeEmbeddings(bundled, **OPTIONS)
    assert isinstance(emb, Embeddings) and emb.embed_documents([]) == []
    want = bundled.embed(TEXTS, **OPTIONS).vectors
    np.testing.assert_allclose(emb.embed_documents(TEXTS), want, atol=ATOL)
    np.testing.assert_allclose(emb.embed_query(TEXTS[1]), want[1], atol=ATOL)
    # LangChain's async default runs the sync call in an executor: the same vectors.
    np.testing.assert_allclose(asyncio.run(emb.aembed_documents(TEXTS)), want, atol=ATOL)
    # Each role gets its own prompt; none given is the model's default ("passage").
    roles = langchain.BertscopeEmbeddings(prompted, query_prompt_name="query")
    np.testing.assert_allclose(
        roles.embed_query(TEXTS[0]), prompted.embed(TEXTS[0], prompt_name="query").vectors[0], atol=ATOL
    )
    passages = prompted.embed(TEXTS).vectors
    np.testing.assert_allclose(roles.embed_documents(TEXTS), passages, atol=ATOL)
    assert not np.allclose(passages, prompted.embed(TEXTS, prompt="").vectors, atol=1e-3)
    texted = langchain.BertscopeEmbeddings(prompted, document_prompt="search_document: ")
    np.testing.assert_allclose(
        texted.embed_documents(TEXTS[:1]),
        prompted.embed(TEXTS[:1], prompt="search_document: ").vectors,
        atol=ATOL,
    )


def test_llamaindex_embedding_equals_the_library(bundled: bertscope.Model, prompted: bertscope.Model) -> None:
    llamaindex = pytest.importorskip("bertscope.integrations.llamaindex")
    from llama_index.core.base.embeddings.base import BaseEmbedding

    emb = llamaindex.BertscopeEmbedding(bundled, embed_batch_size=2, **OPTIONS)
    assert isinstance(emb, BaseEmbedding) and emb.model_name == bundled.info().source
    want = bundled.embed(TEXTS, **OPTIONS).vectors
    # Batches of 2 (LlamaIndex splits them): vectors do not depend on the batch.
    np.testing.assert_allclose(emb.get_text_embedding_batch(TEXTS), want, atol=ATOL)
    np.testing.assert_allclose(emb.get_text_embedding(TEXTS[2]), want[2], atol=ATOL)
    np.testing.assert_allclose(emb.get_query_embedding(TEXTS[0]), want[0], atol=ATOL)
    np.testing.assert_allclose(asyncio.run(emb.aget_text_embedding_batch(TEXTS)), want, atol=ATOL)
    roles = llamaindex.BertscopeEmbedding(prompted, query_prompt_name="query", text_prompt_name="passage")
    np.testing.assert_allclose(
        asyncio.run(roles.aget_query_embedding(TEXTS[0])),
        prompted.embed(TEXTS[0], prompt_name="query").vectors[0],
        atol=ATOL,
    )
    np.testing.assert_allclose(
        roles.get_text_embedding_batch(TEXTS), prompted.embed(TEXTS, prompt_name="passage").vectors, atol=ATOL
    )


def test_bad_options_fail_when_the_embeddings_are_made(bundled: bertscope.Model) -> None:
    langchain = pytest.importorskip("bertscope.integrations.langchain")
    llamaindex = pytest.importorskip("bertscope.integrations.llamaindex")
    with pytest.raises(InvalidSpec, match="query_prompt_name, document_prompt_name"):
        langchain.BertscopeEmbeddings(bundled, prompt_name="query")
    with pytest.raises(InvalidSpec, match="query_prompt, text_prompt"):
        llamaindex.BertscopeEmbedding(bundled, prompt="query: ")
    with pytest.raises(InvalidSpec, match="mode: how a model loads"):
        langchain.BertscopeEmbeddings(bundled, mode="fast")
    with pytest.raises(InvalidSpec, match="unknown prompt name 'query'"):
        llamaindex.BertscopeEmbedding(bundled, query_prompt_name="query")
    with pytest.raises(InvalidSpec, match="malformed"):
        langchain.BertscopeEmbeddings(bundled, layers="x:y")


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("langchain", "langchain_core", "bertscope[langchain]"),
        ("llamaindex", "llama_index", "bertscope[llamaindex]"),
    ],
)
def test_a_missing_framework_names_the_extra_to_install(module: str, blocked: str, extra: str) -> None:
    # A fresh interpreter where the framework cannot be imported, as on a machine without the extra.
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        f"try:\n    import bertscope.integrations.{module}\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert f"pip install '{extra}'" in out.stdout, out.stdout + out.stderr


@pytest.fixture(scope="module")
def static_model(
    tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, bertscope.Model]
) -> StaticModel:
    """A model2vec folder (what `bertscope distill` writes), loaded: a StaticModel, not a Model."""
    from bertscope.research.distill import distill

    folder = distill(tiny_models["bert"], tmp_path_factory.mktemp("m2v") / "static", dim=8, progress=False)
    loaded = bertscope.load(folder)
    assert isinstance(loaded, StaticModel)
    return loaded


def test_a_loaded_static_model_is_taken_as_load_gives_it(static_model: StaticModel) -> None:
    langchain = pytest.importorskip("bertscope.integrations.langchain")
    llamaindex = pytest.importorskip("bertscope.integrations.llamaindex")
    want = static_model.embed(TEXTS).vectors
    np.testing.assert_allclose(
        langchain.BertscopeEmbeddings(static_model).embed_documents(TEXTS), want, atol=ATOL
    )
    index = llamaindex.BertscopeEmbedding(static_model)
    assert index.model is static_model
    np.testing.assert_allclose(index.get_query_embedding(TEXTS[0]), want[0], atol=ATOL)
    with pytest.raises(InvalidSpec, match="mode: how a model loads"):
        langchain.BertscopeEmbeddings(static_model, mode="fast")


def test_a_text_over_the_limit_is_truncated_with_a_warning(bundled: bertscope.Model) -> None:
    """As sentence-transformers truncates at max_seq_length, but never in silence: one warning a call,
    saying how many texts were cut and that long='window' keeps every token."""
    from bertscope.research.aggregate import TruncatedTextsWarning

    langchain = pytest.importorskip("bertscope.integrations.langchain")
    llamaindex = pytest.importorskip("bertscope.integrations.llamaindex")
    long = "The river bank was muddy. " * 80 + "THE END MATTERS"
    emb = langchain.BertscopeEmbeddings(bundled)
    with pytest.warns(
        TruncatedTextsWarning, match=r"1 of 2 text\(s\) ran past .*long='window' keeps every token"
    ):
        found = emb.embed_documents([long, TEXTS[0]])
    np.testing.assert_allclose(found, bundled.embed([long, TEXTS[0]]).vectors, atol=ATOL)
    with pytest.warns(TruncatedTextsWarning, match=r"1 of 1 text\(s\)"):
        llamaindex.BertscopeEmbedding(bundled).get_text_embedding(long)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedTextsWarning)
        emb.embed_documents(TEXTS)  # nothing cut: nothing said
        langchain.BertscopeEmbeddings(bundled, long="window").embed_query(long)  # every token kept


def test_a_loaded_model_with_load_options_names_them_in_the_fix(bundled: bertscope.Model) -> None:
    langchain = pytest.importorskip("bertscope.integrations.langchain")
    llamaindex = pytest.importorskip("bertscope.integrations.llamaindex")
    with pytest.raises(InvalidSpec, match=r"bertscope.load\(\.\.\., device='cuda'\) yourself"):
        langchain.BertscopeEmbeddings(bundled, device="cuda")
    with pytest.raises(InvalidSpec, match=r"bertscope.load\(\.\.\., mode='fast', dtype='bfloat16'\)"):
        llamaindex.BertscopeEmbedding(bundled, mode="fast", dtype="bfloat16")


def test_an_unknown_option_lists_what_the_class_takes(bundled: bertscope.Model) -> None:
    langchain = pytest.importorskip("bertscope.integrations.langchain")
    llamaindex = pytest.importorskip("bertscope.integrations.llamaindex")
    with pytest.raises(bertscope.UnknownOption, match="'poolin': did you mean pooling") as lc:
        langchain.BertscopeEmbeddings(bundled, poolin="mean")  # type: ignore[call-arg]
    with pytest.raises(bertscope.UnknownOption, match="'normalise'") as li:
        llamaindex.BertscopeEmbedding(bundled, normalise=True)  # type: ignore[call-arg]
    for refused, roles in ((lc, ("query", "document")), (li, ("query", "text"))):
        listed = str(refused.value).split("the options are: ")[1].split(", ")
        assert {"device", "mode", "dtype", "backend", "layers", "pooling", "normalize"} <= set(listed)
        assert {f"{role}_prompt_name" for role in roles} <= set(listed)
        assert "prompt_name" not in listed and "prompt" not in listed
    assert "embed_batch_size" in str(li.value) and "embed_batch_size" not in str(lc.value)


@pytest.mark.parametrize("module", ["langchain", "llamaindex"])
def test_the_module_docstring_example_runs_as_written(module: str, bundled: bertscope.Model) -> None:
    """The example at the top of each module runs on the bundled model, and equals `embed`."""
    imported = pytest.importorskip(f"bertscope.integrations.{module}")
    example = imported.__doc__.split("\n\n")[1]
    assert "query_prompt=" in example
    scope: dict[str, Any] = {}
    exec(compile(example, f"{module} docstring", "exec"), scope)  # noqa: S102
    made = scope.get("emb") or scope["Settings"].embed_model
    query = made.embed_query("pets") if module == "langchain" else made.get_query_embedding("pets")
    expected = bundled.embed("pets", layers="-2", pooling="mean", prompt="query: ").vectors[0]
    np.testing.assert_allclose(query, expected, atol=ATOL)
