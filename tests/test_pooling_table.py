"""One table of sentence poolings (core/pooling.py): the engine, late chunking and explain read it."""

from __future__ import annotations

import numpy as np
import pytest

import bertscope
from bertscope import InvalidSpec, LongText, Pooling
from bertscope.chunk_embed import late_spec, pool_spans
from bertscope.core.pooling import POOLING_RULES, POOLINGS, PoolingRule, pool_sentences, pool_span
from bertscope.core.spec import EmbedSpec


def test_a_span_pools_as_a_whole_text_does() -> None:
    rng = np.random.default_rng(0)
    block = rng.standard_normal((5, 8)).astype(np.float32)
    hidden = np.concatenate([block, np.zeros((2, 8), np.float32)])[None]
    mask = np.array([[1] * 5 + [0, 0]])
    for pooling in POOLINGS:
        whole = pool_sentences(hidden, mask, pooling)[0]
        np.testing.assert_allclose(pool_span(block, pooling), whole, atol=1e-6)
    np.testing.assert_allclose(pool_span(block, Pooling.MEAN_SQRT_LEN), block.sum(0) / np.sqrt(5), atol=1e-6)


@pytest.mark.parametrize("pooling", [Pooling.CLS, Pooling.POOLER, Pooling.AUTO])
def test_late_chunking_refuses_a_pooling_it_cannot_do_on_a_span(pooling: Pooling) -> None:
    matrix = np.ones((4, 3), dtype=np.float32)
    with pytest.raises(InvalidSpec, match="cannot pool a span"):
        pool_spans(matrix, [[0, 1], [2, 3]], pooling)  # was: silently mean-pooled
    with pytest.raises(InvalidSpec, match="late chunking"):
        late_spec(EmbedSpec(layers=(1,), pooling=pooling, long=LongText.WINDOW))


def test_every_pooling_is_in_the_table_or_named_apart() -> None:
    # cls and pooler read one token, auto resolves to another: every other pooling pools tokens here
    assert set(Pooling) - set(POOLINGS) == {Pooling.CLS, Pooling.POOLER, Pooling.AUTO}


def _by_position(keep: np.ndarray) -> np.ndarray:
    """A linear pooling no built-in entry has: kept token i weighs i + 1, the weights summing to 1."""
    weights = keep * np.arange(1, len(keep) + 1)
    return weights / max(float(weights.sum()), 1e-9)


def _by_position_tokens(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    weights = mask * np.arange(1, hidden.shape[1] + 1, dtype=np.float32)[None, :, None]
    return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), np.float32(1e-9))


def test_each_linear_rules_weights_give_its_pooled_vector() -> None:
    rng = np.random.default_rng(1)
    hidden = rng.standard_normal((1, 6, 4)).astype(np.float32)
    keep = np.array([1, 1, 0, 1, 1, 0], dtype=np.float64)
    for pooling, rule in POOLING_RULES.items():
        if rule.weights is not None:
            pooled = pool_sentences(hidden, keep[None], pooling)[0]
            np.testing.assert_allclose(rule.weights(keep) @ hidden[0].astype(np.float64), pooled, atol=1e-5)
        if rule.owners is not None:
            owners = rule.owners(hidden[0].astype(np.float64), keep)
            np.testing.assert_array_equal(
                hidden[0][owners, np.arange(4)], pool_sentences(hidden, keep[None], pooling)[0]
            )


def test_a_new_linear_pooling_is_explained_with_its_own_weights(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mean's entry stands in for a new one: a linear pooling whose weights are not the mean's.
    monkeypatch.setitem(POOLING_RULES, Pooling.MEAN, PoolingRule(_by_position_tokens, weights=_by_position))
    a, b = "Weights by position, a pooling of its own.", "Each later token weighs more here."
    explained = bundled.explain(a, b, pooling="mean", exact=True)
    score = float(bundled.similarity(a, b, pooling="mean")[0, 0])
    assert explained.contributions is not None
    assert abs(explained.contributions.sum() - score) < 1e-5  # the mean's weights would miss it


def test_the_schema_and_explain_refuse_what_the_table_says(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from bertscope.server import create_app

    def exact_max_taken() -> bool:
        with TestClient(create_app(bundled)) as client:
            schema = client.get("/openapi.json").json()["components"]["schemas"]["ExplainRequest"]
        refused = [r["not"]["properties"]["pooling"]["enum"] for r in schema.get("allOf", [])
                   if "exact" in r["not"]["properties"]]  # fmt: skip
        return all(Pooling.MAX.value not in enum for enum in refused)

    assert exact_max_taken()
    # max without its owner of each dimension: a pooling with no exact split, as the table now says.
    monkeypatch.setitem(POOLING_RULES, Pooling.MAX, PoolingRule(POOLING_RULES[Pooling.MAX].tokens))
    assert not exact_max_taken()
    with pytest.raises(InvalidSpec, match="no exact split"):
        bundled.explain("a", "b", pooling="max", exact=True)


def test_sentence_transformers_mode_names_come_from_the_table() -> None:
    from bertscope.core.st_settings import ST_POOLING_MODES, pooling_config

    # what a sentence-transformers folder's Pooling config is read as (stored settings depend on it)
    ours = {"mean": "mean", "mean_sqrt_len_tokens": "mean_sqrt_len", "max": "max", "cls": "cls"}
    assert ST_POOLING_MODES == ours
    flags = pooling_config("mean_sqrt_len", 8)
    assert flags["pooling_mode_mean_sqrt_len_tokens"] and not flags["pooling_mode_mean_tokens"]
