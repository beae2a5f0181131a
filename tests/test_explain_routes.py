"""POST /explain and /attention, and sentence pairs through the service, against the library's own answers."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import pytest

import bertscope
from test_server import serving

A, B = "The cat sat on the mat.", "A dog lay on the rug."
PAIR = ["How are you?", "Fine, thanks."]


@pytest.fixture(scope="module")
def url(bundled: bertscope.Model) -> Iterator[str]:
    with serving(bundled) as base:
        yield base


def test_explain_equals_the_library(url: str, bundled: bertscope.Model) -> None:
    body = httpx.post(f"{url}/explain", json={"a": A, "b": B, "pooling": "mean", "top": 3}, timeout=60).json()
    expected = bundled.explain(A, B, pooling="mean", top=3)
    assert body["exact"] and body["score"] == pytest.approx(expected.score, abs=1e-6)
    np.testing.assert_allclose(body["contributions"], expected.contributions, atol=1e-6)
    assert abs(np.sum(body["contributions"]) - body["score"]) < 1e-5
    assert [p["token_a"] for p in body["top_pairs"]] == [p["token_a"] for p in expected.top_pairs]


def test_explain_answer_and_its_schema_say_the_tokens_cut(url: str) -> None:
    """/explain sends n_dropped ([a, b]) and the OpenAPI schema declares every key the answer sends."""
    body = httpx.post(f"{url}/explain", json={"a": "bread " * 400, "b": B, "pooling": "mean"}, timeout=60)
    answer = body.json()
    assert answer["n_dropped"][0] > 0 and answer["n_dropped"][1] == 0
    schema = httpx.get(f"{url}/openapi.json", timeout=60).json()["components"]["schemas"]["ExplainResponse"]
    assert set(answer) <= set(schema["properties"]) and "n_dropped" in schema["required"]


def test_explain_cls_is_labelled_and_exact_refuses_it(url: str) -> None:
    body = httpx.post(f"{url}/explain", json={"a": A, "b": B, "pooling": "cls"}, timeout=60).json()
    assert body["exact"] is False and body["contributions"] is None and "not an exact" in body["note"]
    refused = httpx.post(f"{url}/explain", json={"a": A, "b": B, "pooling": "cls", "exact": True}, timeout=60)
    assert refused.status_code == 422 and "no exact split" in refused.text


def test_attention_slices_equal_the_library(url: str, bundled: bertscope.Model) -> None:
    full = bundled.attentions(tuple(PAIR))  # type: ignore[arg-type]
    one = httpx.post(f"{url}/attention", json={"text": PAIR, "layer": 3, "head": 2}, timeout=60).json()
    np.testing.assert_allclose(one["attention"], full[2, 2], atol=1e-5)
    assert one["token_type_ids"][-1] == 1 and (one["n_layers"], one["n_heads"]) == (6, 12)
    mean = httpx.post(
        f"{url}/attention", json={"text": A, "layer": -1, "mean_heads": True}, timeout=60
    ).json()
    np.testing.assert_allclose(mean["attention"], bundled.attentions(A)[-1].mean(axis=0), atol=1e-5)
    everything = httpx.post(f"{url}/attention", json={"text": A}, timeout=60).json()
    assert np.asarray(everything["attention"]).shape == bundled.attentions(A).shape
    bad = httpx.post(f"{url}/attention", json={"text": A, "layer": 0}, timeout=60)
    assert bad.status_code == 422 and "1..6" in bad.text
    # head 2's weights came back labelled mean_heads: true
    both = httpx.post(
        f"{url}/attention", json={"text": A, "layer": 1, "head": 2, "mean_heads": True}, timeout=60
    )
    assert both.status_code == 422 and "give one head or their mean, not both" in both.text


def test_pairs_through_tokenize_anatomy_and_embed(url: str, bundled: bertscope.Model) -> None:
    item = httpx.post(f"{url}/v2/tokenize", json={"inputs": [PAIR, "a cat"]}, timeout=60).json()["items"]
    assert item[0]["pair"] == PAIR[1] and item[1]["pair"] is None
    assert item[0]["tokens"][-2]["token_type_id"] == 1
    anatomy = httpx.post(f"{url}/anatomy", json={"text": PAIR}, timeout=60).json()
    assert anatomy["token_type_ids"] == bundled.tokenize([tuple(PAIR)])[0].token_type_ids
    vectors = httpx.post(f"{url}/v2/embed", json={"inputs": [PAIR], "pooling": "mean"}, timeout=60).json()[
        "vectors"
    ]
    np.testing.assert_allclose(vectors[0], bundled.embed([tuple(PAIR)], pooling="mean").vectors[0], atol=1e-5)


def test_attention_takes_inputs_as_tei_names_it(url: str, bundled: bertscope.Model) -> None:
    by_inputs = httpx.post(f"{url}/attention", json={"inputs": PAIR, "layer": 2}, timeout=60)
    assert by_inputs.status_code == 200, by_inputs.text
    full = bundled.attentions(tuple(PAIR))  # type: ignore[arg-type]
    np.testing.assert_allclose(by_inputs.json()["attention"], full[1], atol=1e-5)
    both = httpx.post(f"{url}/attention", json={"inputs": A, "text": A}, timeout=60)
    assert both.status_code == 422 and "inputs" in both.json()["detail"]


def test_attention_reads_the_text_once(
    url: str, bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The route counted the tokens (gated) and the worker tokenized the text again, ungated."""
    calls: list[object] = []
    real = bundled.tokenizer.encode_fitted  # what every way of tokenizing a text calls
    monkeypatch.setattr(bundled.tokenizer, "encode_fitted", lambda *a, **k: calls.append(a) or real(*a, **k))
    answer = httpx.post(f"{url}/attention", json={"text": A, "layer": 1, "head": 0}, timeout=60)
    assert answer.status_code == 200 and len(calls) == 1
    np.testing.assert_allclose(answer.json()["attention"], bundled.attentions(A)[0, 0], atol=1e-5)
