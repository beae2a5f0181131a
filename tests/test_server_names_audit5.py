"""Audit 5 on the service (D2, N7, N8): /v2/similarity takes `post` as /v2/embed does and as
`Model.similarity(..., post=)` (its baseline fitted with the same post, as `Model.baseline(post=)`); an
unknown field that sentence-transformers, TEI or OpenAI name is refused with bertscope's name for it (the
library's hint where it has one); a raw `prompt` is refused with the name the service takes instead."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.core.post import fit_post_on_texts
from bertscope.research.baseline import reference_sentences
from bertscope.server import ServerSettings, create_app

SENTENCES = ["a kitten", "a car", "the stock market fell"]


@pytest.fixture(scope="module")
def pca_file(bundled: bertscope.Model, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("post") / "pca.safetensors"
    fit_post_on_texts(bundled, reference_sentences(), "pca", dim=16).save(path)
    return path


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model, pca_file: Path) -> Iterator[TestClient]:
    settings = ServerSettings(posts=(("pca", str(pca_file)),))
    with TestClient(create_app(bundled, settings=settings)) as c:
        yield c


def _refused(client: TestClient, path: str, body: dict[str, Any]) -> str:
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail
    return detail


def test_similarity_applies_a_loaded_post_as_the_library(
    client: TestClient, bundled: bertscope.Model, pca_file: Path
) -> None:
    # Before, /v2/similarity refused `post`: "post: Extra inputs are not permitted".
    body = {"source": "a cat", "sentences": SENTENCES, "post": "pca"}
    response = client.post("/v2/similarity", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    expected = bundled.similarity(["a cat"], SENTENCES, post=pca_file)[0]
    np.testing.assert_allclose(answer["scores"], expected, atol=1e-6)
    plain = bundled.similarity(["a cat"], SENTENCES)[0]
    assert np.abs(np.array(answer["scores"]) - plain).max() > 1e-3  # the post changed the scores
    assert answer["spec"]["post"]["kind"] == "pca" and answer["spec"]["post"]["dim_out"] == 16


def test_similarity_baseline_is_fitted_with_the_same_post(
    client: TestClient, bundled: bertscope.Model, pca_file: Path
) -> None:
    body = {"source": "a cat", "sentences": SENTENCES, "baseline": True}
    # Without post first: a baseline kept for the spec must not answer the same spec with a post.
    without = client.post("/v2/similarity", json=body).json()
    response = client.post("/v2/similarity", json={**body, "post": "pca"})
    assert response.status_code == 200, response.text
    answer = response.json()
    baseline = bundled.baseline(post=pca_file)
    np.testing.assert_allclose(
        answer["percentile"], baseline.percentile(np.array(answer["scores"])), atol=1e-6
    )
    assert answer["baseline"]["post"] == baseline.describe()["post"] is not None
    assert answer["baseline"]["median"] == pytest.approx(baseline.describe()["median"], abs=1e-6)
    assert without["baseline"]["post"] is None
    assert without["baseline"]["median"] != pytest.approx(answer["baseline"]["median"], abs=1e-4)
    reference = ["the weather is mild", "a red bicycle", "tax law changed", "she plays the cello"]
    own = client.post("/v2/similarity", json={**body, "post": "pca", "reference": reference}).json()
    fitted = bundled.baseline(reference=reference, post=pca_file)
    np.testing.assert_allclose(own["percentile"], fitted.percentile(np.array(own["scores"])), atol=1e-6)
    assert own["baseline"]["post"] == fitted.describe()["post"]


def test_similarity_refuses_a_post_not_loaded_as_embed_does(client: TestClient) -> None:
    said = _refused(client, "/v2/similarity", {"source": "a cat", "sentences": ["a dog"], "post": "white"})
    embed = _refused(client, "/v2/embed", {"inputs": "a cat", "post": "white"})
    assert said == embed == "post: no post-processing named 'white' is loaded; loaded: pca"
    # Checked against the spec it was fitted on, as /v2/embed checks it.
    other = _refused(
        client, "/v2/similarity", {"source": "a", "sentences": ["b"], "post": "pca", "layers": "-2"}
    )
    assert "fitted on" in other


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("normalize_embeddings", True, "normalize_embeddings: bertscope calls it normalize"),
        (
            "truncate",
            True,
            'truncate: bertscope calls it long ("truncate", the default, "window" or "error")',
        ),
        ("dimensions", 8, "dimensions: this route's vectors keep the model's full width"),
        ("truncate_dim", 8, "truncate_dim: this route's vectors keep the model's full width"),
        ("layer", 3, 'layer: use layers (one layer or several: -1, "-4:", "0,6")'),
        ("truncation", True, 'truncation: "long" says what a text over the limit does'),
    ],
)
def test_other_apis_names_are_refused_with_bertscopes(
    client: TestClient, name: str, value: Any, says: str
) -> None:
    # Before: "<name>: Extra inputs are not permitted".
    for path, body in (
        ("/v2/embed", {"inputs": ["a cat"]}),
        ("/v2/similarity", {"source": "a cat", "sentences": ["a dog"]}),
    ):
        response = client.post(path, json={**body, name: value})
        assert response.status_code == 422, response.text
        answer = response.json()
        assert answer["detail"].startswith(says), answer["detail"]
        assert "Extra inputs" not in answer["detail"]
        # The body keeps its shape: pydantic's errors (the hint as their message) and their count.
        assert answer["n_errors"] == 1 and answer["errors"][0]["loc"] == ["body", name]
        assert answer["errors"][0]["type"] == "extra_forbidden"


def test_the_hint_is_given_where_the_route_has_the_field(client: TestClient) -> None:
    # /embed_tokens has no normalize: pointing there would send the client to another refusal.
    assert _refused(client, "/embed_tokens", {"inputs": "a", "normalize_embeddings": True}) == (
        "normalize_embeddings: Extra inputs are not permitted"
    )
    assert _refused(client, "/embed_tokens", {"inputs": "a", "layer": 3}).startswith("layer: use layers")
    # TEI's own routes answer as TEI's bodies do: the plain refusal, in TEI's error shape.
    response = client.post("/embed", json={"inputs": "a", "normalize_embeddings": True})
    assert response.status_code == 422
    assert response.json()["error"] == "normalize_embeddings: Extra inputs are not permitted"
    assert response.json()["error_type"] == "Validation"
    assert client.post("/embed", json={"inputs": "a", "truncate": True}).status_code == 200


def test_a_raw_prompt_is_refused_with_prompt_name(client: TestClient) -> None:
    # Before: "prompt: Extra inputs are not permitted", with nothing saying the service takes names.
    expected = 'prompt: the service takes the model\'s prompts by name: send "prompt_name"'
    assert _refused(client, "/v2/embed", {"inputs": "a cat", "prompt": "query: "}) == expected
    body = {"source": "a cat", "sentences": ["a dog"], "prompt": "query: "}
    assert _refused(client, "/v2/similarity", body) == expected


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"source": " ", "sentences": ["x"]}, "source is empty"),
        ({"source": "a", "sentences": ["x", ""]}, "sentences[1] is empty"),
        ({"source": "a", "sentences": ["x", "word " * 300], "long": "error"}, "sentences[1] has 302 tokens"),
    ],
)
def test_similarity_names_a_bad_text_by_its_field(
    client: TestClient, body: dict[str, Any], said: str
) -> None:
    """/v2/similarity said "text 0 is empty" of its source (audit 19a): the request's own fields."""
    assert _refused(client, "/v2/similarity", body).startswith(said)
