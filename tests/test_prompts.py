"""The model's own prompts (bertscope.core.prompts): read from its folder, equal to sentence-transformers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.core.prompts import Prompts, query_prompt_name, read_prompts
from prompted import PROMPTS, with_prompts

TEXTS = ["a cat sat on the mat", "Berlin is the capital of Germany and its largest city."]


@pytest.fixture(scope="module", params=[True, False], ids=["include_prompt", "exclude_prompt"])
def prompted(
    request: pytest.FixtureRequest, bundled_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The bundled model with prompts (default: passage), pooling with and without the prompt's tokens."""
    folder = tmp_path_factory.mktemp("prompted") / "model"
    return with_prompts(bundled_path, folder, include_prompt=request.param, default="passage")


@pytest.fixture(scope="module")
def prompted_model(prompted: Path) -> bertscope.Model:
    """The prompted folder loaded through bertscope."""
    return bertscope.load(prompted, device="cpu")


def test_prompts_equal_sentence_transformers(prompted: Path, prompted_model: bertscope.Model) -> None:
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(prompted), device="cpu")
    for prompt_name in ("query", "instruct", None):
        result = prompted_model.embed(TEXTS, prompt_name=prompt_name)
        expected = reference.encode(TEXTS, prompt_name=prompt_name)
        np.testing.assert_allclose(result.vectors, expected, atol=1e-5)
        assert result.spec["prompt_name"] == (prompt_name or "passage")
        assert result.spec["prompt"] == PROMPTS[prompt_name or "passage"]


def test_exclude_prompt_leaves_cls_and_prompt_pieces_out(prompted_model: bertscope.Model) -> None:
    model = prompted_model
    spec = model.spec(prompt_name="query")
    # "query: " is [CLS] query : as sentence-transformers counts it (the closing [SEP] not counted).
    assert spec.prompt_length == (0 if model.prompts.include_prompt else 3)


def test_prompt_changes_the_vector_and_empty_prompt_turns_the_default_off(
    prompted_model: bertscope.Model, bundled: bertscope.Model
) -> None:
    model = prompted_model
    default = model.embed(TEXTS).vectors
    explicit = model.embed(TEXTS, prompt="passage: ").vectors
    plain = model.embed(TEXTS, prompt="").vectors
    np.testing.assert_allclose(default, explicit, atol=1e-6)
    assert np.abs(plain - default).max() > 1e-3
    np.testing.assert_allclose(plain, bundled.embed(TEXTS).vectors, atol=1e-6)


def test_prompt_text_and_window(bundled: bertscope.Model) -> None:
    long_text = " ".join(["the river bank was muddy after the storm"] * 60)
    result = bundled.embed([long_text], prompt="query: ", long="window")
    assert result.spec["prompt"] == "query: " and result.spec["prompt_name"] is None
    assert result.n_dropped.tolist() == [0]


def test_unknown_prompt_name_lists_the_models_prompts(
    prompted_model: bertscope.Model, bundled: bertscope.Model
) -> None:
    model = prompted_model
    with pytest.raises(bertscope.InvalidSpec, match="'query', 'passage', 'instruct'"):
        model.embed(TEXTS, prompt_name="qeury")
    with pytest.raises(bertscope.InvalidSpec, match="prompts: none"):
        bundled.embed(TEXTS, prompt_name="query")
    with pytest.raises(bertscope.InvalidSpec, match="not both"):
        model.embed(TEXTS, prompt_name="query", prompt="q: ")


def test_read_prompts_of_plain_and_bad_folders(tmp_path: Path, bundled_path: Path) -> None:
    assert read_prompts(None) == Prompts()
    assert read_prompts(bundled_path) == Prompts({}, None, True)
    bad = with_prompts(bundled_path, tmp_path / "bad", include_prompt=True, default=None)
    config = json.loads((bad / "config_sentence_transformers.json").read_text())
    (bad / "config_sentence_transformers.json").write_text(json.dumps({**config, "default_prompt_name": "x"}))
    with pytest.raises(bertscope.ModelLoadError, match="default_prompt_name 'x'"):
        read_prompts(bad)


def test_query_prompt_for_a_passage_store() -> None:
    prompts = Prompts(PROMPTS, "passage", True)
    assert query_prompt_name({"prompt_name": "passage"}, prompts) == "query"
    assert query_prompt_name({"prompt_name": "instruct"}, prompts) == "instruct"
    assert query_prompt_name({}, prompts) is None
    assert query_prompt_name({"prompt_name": "passage"}, Prompts({"passage": "p: "})) == "passage"


def test_a_store_made_with_prompts_set_in_code_is_searched_by_a_freshly_loaded_model(
    bundled_path: Path, tmp_path: Path
) -> None:
    """The store records the prompt's text: a fresh model without the prompt set in code searches with it."""
    writer = bertscope.load(bundled_path, device="cpu")
    writer.prompts = {"query": "q: ", "passage": "p: "}
    store = tmp_path / "docs.parquet"
    bertscope.embed_corpus(TEXTS, store, model=writer, prompt_name="passage", progress=False)
    fresh = bertscope.load(bundled_path, device="cpu")
    hits = bertscope.search("money and loans", store, model=fresh, top_k=len(TEXTS))
    # the fresh model has no "query" prompt, so the query gets the store's own prompt text, as documented
    query = fresh.embed("money and loans", prompt="p: ").vectors[0]
    expected = sorted(writer.embed(TEXTS, prompt_name="passage").vectors @ query, reverse=True)
    np.testing.assert_allclose([hit.score for hit in hits], expected, atol=1e-5)


def test_a_prompt_named_as_stored_but_with_other_text_is_not_taken_by_name() -> None:
    prompts = Prompts({"instruct": "other: "})
    assert query_prompt_name({"prompt_name": "instruct", "prompt": "Represent: "}, prompts) is None
    assert query_prompt_name({"prompt_name": "instruct", "prompt": "other: "}, prompts) == "instruct"
