"""Audit 19b: encode's sentence-transformers parity where prompts, truncate_dim and similarity settings meet a
folder's pipeline, each against SentenceTransformer 6 (equal within 1e-5) or a one-line refusal."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from tiny_models import build_tiny_model

TEXTS = ["the cat ate bread", "a dog saw the big red car"]
# Far more pieces than the 24-token window: the prompt alone fills it.
LONG_PROMPT = "the cat ate bread and the dog " * 8


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model("bert", tmp_path_factory.mktemp("audit19") / "bert")


def _st_folder(
    source: Path,
    folder: Path,
    mode: str,
    *,
    include_prompt: bool = True,
    normalize: bool = False,
    **settings: Any,
) -> Path:
    """A sentence-transformers folder saved by SentenceTransformer itself: Transformer (24 tokens) and
    Pooling(`mode`, `include_prompt`), Normalize where asked, with `settings` (prompts, truncate_dim, ...)
    given to its constructor."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    transformer = Transformer(str(source), max_seq_length=24)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode=mode, include_prompt=include_prompt)
    modules = [transformer, pooling, *([Normalize()] if normalize else [])]
    SentenceTransformer(modules=modules, device="cpu", **settings).save(str(folder))
    return folder


def _pair(folder: Path) -> tuple[Any, bertscope.Model]:
    from sentence_transformers import SentenceTransformer

    model = bertscope.load(folder, device="cpu")
    assert isinstance(model, bertscope.Model)
    return SentenceTransformer(str(folder), device="cpu"), model


@pytest.mark.parametrize("mode", ["mean", "max", "mean_sqrt_len_tokens"])
def test_a_prompt_filling_the_window_leaves_the_closing_sep_pooled(
    tiny_bert: Path, tmp_path: Path, mode: str
) -> None:
    # sentence-transformers measures the prompt cut at max_seq_length, so the closing [SEP] stays pooled
    folder = _st_folder(
        tiny_bert, tmp_path / mode, mode, include_prompt=False, prompts={"query": LONG_PROMPT}
    )
    st, model = _pair(folder)
    want = st.encode(TEXTS, prompt=LONG_PROMPT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the texts are cut at the limit, and said so
        got = model.encode(TEXTS, prompt=LONG_PROMPT)
        named = model.encode(TEXTS, prompt_name="query")
        embedded = model.embed(TEXTS, prompt=LONG_PROMPT).vectors
    assert np.abs(want).max() > 1e-3 and np.abs(want).max() < 1e3  # neither all zero nor the max's fill
    for vectors in (got, named, embedded):
        np.testing.assert_allclose(vectors, want, atol=1e-5)


def test_a_saved_truncate_dim_is_the_models_until_set(tiny_bert: Path, tmp_path: Path) -> None:
    from bertscope.integrations import langchain as lc
    from bertscope.integrations import llamaindex as li

    folder = _st_folder(tiny_bert, tmp_path / "cut", "mean", normalize=True, truncate_dim=8)
    st, model = _pair(folder)
    assert model.truncate_dim == st.truncate_dim == 8
    assert model.get_sentence_embedding_dimension() == st.get_embedding_dimension() == 8
    want = st.encode(TEXTS)
    for got in (
        model.encode(TEXTS),
        model.encode_query(TEXTS),
        model.encode_document(TEXTS),
        np.array(lc.BertscopeEmbeddings(model).embed_documents(TEXTS)),
        np.array(li.BertscopeEmbedding(model).get_text_embedding_batch(TEXTS)),
    ):
        np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(model.similarity(want, want), st.similarity(want, want).numpy(), atol=1e-5)
    model.truncate_dim = st.truncate_dim = None  # set, as there: the full width again
    np.testing.assert_allclose(model.encode(TEXTS), st.encode(TEXTS), atol=1e-5)


def test_a_saved_truncate_dim_that_is_no_width_is_refused_at_load(tiny_bert: Path, tmp_path: Path) -> None:
    import json

    folder = _st_folder(tiny_bert, tmp_path / "bad", "mean")
    config = folder / "config_sentence_transformers.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "truncate_dim": 0}))
    with pytest.raises(bertscope.errors.ModelLoadError, match=r"its truncate_dim 0 is not a whole number"):
        bertscope.load(folder, device="cpu")


def test_cls_pooling_leaving_the_prompt_out_reads_the_first_token_after_it(
    tiny_bert: Path, tmp_path: Path
) -> None:
    # sentence-transformers 6 reads the first token the mask keeps (the argmax after zeroing the prompt)
    prompts = {"query": "query : "}
    folder = _st_folder(tiny_bert, tmp_path / "cls", "cls", include_prompt=False, prompts=prompts)
    st, model = _pair(folder)
    want = st.encode(TEXTS, prompt_name="query")
    np.testing.assert_allclose(model.encode(TEXTS, prompt_name="query"), want, atol=1e-5)
    np.testing.assert_allclose(model.embed(TEXTS, prompt_name="query").vectors, want, atol=1e-5)
    np.testing.assert_allclose(model.encode(TEXTS), st.encode(TEXTS), atol=1e-5)  # no prompt: [CLS]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cut at the limit, and said so
        got = model.encode(TEXTS, prompt=LONG_PROMPT)
    np.testing.assert_allclose(got, st.encode(TEXTS, prompt=LONG_PROMPT), atol=1e-5)


def test_prompts_set_in_code_replace_sentence_transformers_empty_roles(
    tiny_bert: Path, tmp_path: Path
) -> None:
    # as loaded, sentence-transformers lists an empty "document" prompt; a dict set replaces that too
    prompts = {"query": "query : "}
    folder = _st_folder(tiny_bert, tmp_path / "roles", "mean", prompts=prompts, default_prompt_name="query")
    st, model = _pair(folder)
    np.testing.assert_allclose(model.encode_document(TEXTS), st.encode_document(TEXTS), atol=1e-5)
    np.testing.assert_allclose(
        model.encode(TEXTS, prompt_name="document"), st.encode(TEXTS, prompt_name="document"), atol=1e-5
    )
    model.prompts = st.prompts = {"query": "query : ", "other": "x : "}
    assert st.default_prompt_name == model.default_prompt_name == "query"
    want = st.encode_document(TEXTS)  # no document prompt left: the default one
    np.testing.assert_allclose(want, st.encode(TEXTS, prompt_name="query"), atol=1e-6)
    np.testing.assert_allclose(model.encode_document(TEXTS), want, atol=1e-5)
    np.testing.assert_allclose(model.encode_query(TEXTS), st.encode_query(TEXTS), atol=1e-5)
    with pytest.raises(ValueError, match="'document' not found"):
        st.encode(TEXTS, prompt_name="document")
    with pytest.raises(bertscope.errors.InvalidSpec, match=r"^unknown prompt name 'document'"):
        model.encode(TEXTS, prompt_name="document")


@pytest.mark.parametrize("name", ["maxsim", "meanmaxsim"])
def test_a_multi_vector_similarity_name_loads_as_cosine(tiny_bert: Path, tmp_path: Path, name: str) -> None:
    # a SentenceTransformer inherits only the names it computes on one vector per text: cosine stays
    import json

    folder = _st_folder(tiny_bert, tmp_path / name, "mean", normalize=True)
    config = folder / "config_sentence_transformers.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "similarity_fn_name": name}))
    st, model = _pair(folder)
    assert model.similarity_fn_name == st.similarity_fn_name == "cosine"
    a, b = model.encode(TEXTS), st.encode(TEXTS[::-1])
    np.testing.assert_allclose(a, st.encode(TEXTS), atol=1e-5)
    np.testing.assert_allclose(model.similarity(a, b), st.similarity(a, b).numpy(), atol=1e-5)
    np.testing.assert_allclose(
        model.similarity_pairwise(a, b), st.similarity_pairwise(a, b).numpy(), atol=1e-5
    )


def test_the_integrations_take_the_load_options_their_hint_names(tiny_bert: Path, tmp_path: Path) -> None:
    import re

    from bertscope.errors import UnknownOption
    from bertscope.integrations import langchain as lc
    from bertscope.integrations import llamaindex as li

    folder = _st_folder(tiny_bert, tmp_path / "plain", "mean")
    model = bertscope.load(folder, device="cpu")
    for cls in (lc.BertscopeEmbeddings, li.BertscopeEmbedding):
        with pytest.raises(UnknownOption) as refused:
            cls(folder, model_kwargs={})
        said = str(refused.value)
        named = re.findall(r"(\w+)=", said.split("; the options are: ")[0])
        listed = said.split("; the options are: ")[1].split(", ")
        assert named == ["dtype", "device", "trust_remote_code"] and set(named) <= set(listed), said
        assert len(listed) == len(set(listed)), said  # each option once
        trusted = cls(folder, trust_remote_code=True, device="cpu")
        np.testing.assert_allclose(trusted.model.encode(TEXTS), model.encode(TEXTS), atol=1e-6)
        with pytest.raises(bertscope.errors.InvalidSpec, match=r"^trust_remote_code: how a model loads"):
            cls(model, trust_remote_code=True)


def test_encode_refusals_name_the_choices_and_the_library_arguments(bundled: bertscope.Model) -> None:
    from bertscope.errors import InvalidSpec

    with pytest.raises(
        InvalidSpec,
        match=r"^precision=.bogus.: encode returns float32 only \(precision='float32'\); quantize",
    ):
        bundled.encode(TEXTS, precision="bogus")
    with pytest.raises(InvalidSpec, match=r"^precision='int8': encode returns float32 only .*; quantize"):
        bundled.encode(TEXTS, precision="int8")
    for call in (bundled.encode, bundled.encode_query, bundled.encode_document):
        with pytest.raises(InvalidSpec, match=r"^unknown prompt name 'nope'") as refused:
            call(TEXTS, prompt_name="nope")
        assert str(refused.value).endswith("give the text with prompt="), refused.value  # no --prompt


def test_cls_after_the_prompt_is_read_in_windows_too(tiny_bert: Path, tmp_path: Path) -> None:
    """long="window" pools cls from the window that holds the first token after the prompt: the row the
    first window's forward gives it, as a text cut at the limit reads it (not the [CLS] before the prompt)."""
    prompts = {"query": "query : "}
    folder = _st_folder(tiny_bert, tmp_path / "cls_w", "cls", include_prompt=False, prompts=prompts)
    model = bertscope.load(folder, device="cpu")
    long_text = "the cat ate bread and the dog saw the big red car " * 6  # several 24-token windows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cut = model.embed([long_text], prompt_name="query", pooling="cls", long="truncate").vectors
    windowed = model.embed([long_text], prompt_name="query", pooling="cls", long="window").vectors
    np.testing.assert_allclose(windowed, cut, atol=1e-5)
    plain = model.embed([long_text], pooling="cls", long="window").vectors  # no prompt: [CLS]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(
            plain, model.embed([long_text], pooling="cls", long="truncate").vectors, atol=1e-5
        )


def test_a_stores_fingerprint_is_the_same_as_before_the_prompt_roles(bundled: bertscope.Model) -> None:
    """Prompts.st_roles (146060f) entered the fingerprint and changed every model's id, so every store
    written before read as made by another model: the fingerprint holds what decides vectors only."""
    from bertscope.core.fingerprint_facts import store_fingerprint, vector_settings

    assert set(vector_settings(bundled)["prompts"]) == {"prompts", "default_name", "include_prompt"}
    assert store_fingerprint(bundled)["id"] == "11138381b84f0c0b"  # docs/verify.md's, from before this round
