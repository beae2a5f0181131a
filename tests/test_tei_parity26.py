"""Audit 26c: the service's TEI and OpenAI routes answer as TEI's router (text-embeddings-inference,
router/src/http/server.rs and types.rs) and OpenAI's API answer the same requests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import ServerSettings, create_app
from bertscope.server.settings import TokenIds
from prompted import with_prompts


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    """The service on the bundled model (no default prompt), token ids taken as the model's own."""
    with TestClient(create_app(bundled, settings=ServerSettings(token_ids=TokenIds.MODEL))) as c:
        yield c


@pytest.fixture(scope="module")
def prompted_client(bundled_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The service on a model with a default prompt ('query: '), token ids taken as the model's own."""
    folder = with_prompts(
        bundled_path, tmp_path_factory.mktemp("p26") / "m", include_prompt=True, default="query"
    )
    model = bertscope.load(folder, device="cpu")
    assert isinstance(model, bertscope.Model)
    with TestClient(create_app(model, settings=ServerSettings(token_ids=TokenIds.MODEL))) as c:
        yield c


def _error(response: Any) -> str:
    return str(response.json()["error"])


# 1. huggingface_hub 2.4: InferenceClient.feature_extraction(encoding_format="float") sends it top-level.
@pytest.mark.parametrize("path", ["/", "/embed"])
def test_tei_embed_takes_encoding_format_float_as_floats(client: TestClient, path: str) -> None:
    plain = client.post(path, json={"inputs": "a cat"})
    for sent in ("float", None):
        given = client.post(path, json={"inputs": "a cat", "encoding_format": sent})
        assert given.status_code == 200, given.text
        assert given.json() == plain.json()


def test_tei_embed_refuses_base64_naming_v1_embeddings(client: TestClient) -> None:
    response = client.post("/embed", json={"inputs": "a cat", "encoding_format": "base64"})
    assert response.status_code == 422
    assert response.json()["error_type"] == "Validation"
    assert "encoding_format" in _error(response) and "/v1/embeddings" in _error(response)
    assert "\n" not in _error(response)
    other = client.post("/embed", json={"inputs": "a cat", "encoding_format": "binary"})
    assert other.status_code == 422
    assert _error(other) == "encoding_format: Input should be 'float'"


# 2. /v1/embeddings' token-id refusals name `input` as OpenAI's `param`, as its text refusals do.
@pytest.mark.parametrize("given", [[40000], [[]], [[1045], [2066, -5]]])
def test_v1_token_id_refusals_name_input(client: TestClient, given: Any) -> None:
    response = client.post("/v1/embeddings", json={"input": given})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "input"


def test_v1_token_ids_under_a_default_prompt_name_input(prompted_client: TestClient) -> None:
    response = prompted_client.post("/v1/embeddings", json={"input": [1045, 2066]})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "input" and "default prompt 'query'" in error["message"]
    tei = prompted_client.post("/embed", json={"inputs": [1045, 2066]})
    assert tei.status_code == 422 and _error(tei).startswith("inputs: this model puts its default prompt")


def _float32_shortest(numbers: list[float]) -> list[str]:
    """Each number as TEI writes its f32: the shortest text that reads back as the same float32."""
    return [np.format_float_positional(np.float32(n), unique=True, trim="-") for n in numbers]


# 3. TEI's /similarity (Vec<f32>) and /v2/similarity write each score as its shortest float32 text.
def test_similarity_scores_are_written_as_shortest_float32(client: TestClient) -> None:
    body = {"inputs": {"source_sentence": "a cat sat", "sentences": ["a dog ran", "the stock fell"]}}
    tei = client.post("/similarity", json=body)
    assert tei.status_code == 200, tei.text
    scores = tei.json()
    assert tei.text == "[" + ",".join(_float32_shortest(scores)) + "]"
    own = client.post(
        "/v2/similarity", json={"source": "a cat sat", "sentences": ["a dog ran", "the stock fell"]}
    )
    assert own.status_code == 200, own.text
    assert own.json()["scores"] == scores
    assert '"scores":[' + ",".join(_float32_shortest(scores)) + "]" in own.text


# 4. TEI's /tokenize refuses "" alone (its Empty 400) and tokenizes every other text as the tokenizer does.
@pytest.mark.parametrize("text", ["  ", "\u200b", "\u0301", "\t\n"])
def test_tokenize_takes_every_text_but_the_empty_one(client: TestClient, text: str) -> None:
    response = client.post("/tokenize", json={"inputs": [text, "a"]})
    assert response.status_code == 200, response.text
    first = response.json()[0]
    assert [(t["text"], t["special"]) for t in first] == [("[CLS]", True), ("[SEP]", True)]
    bare = client.post("/tokenize", json={"inputs": text, "add_special_tokens": False})
    assert bare.status_code == 200 and bare.json() == [[]]


def test_tokenize_still_refuses_the_empty_text_and_embed_a_text_of_no_pieces(client: TestClient) -> None:
    empty = client.post("/tokenize", json={"inputs": ["a", ""]})
    assert empty.status_code == 400 and empty.json()["error_type"] == "Empty"
    for text in ("  ", "\u200b", "\u0301"):
        assert client.post("/embed", json={"inputs": text}).status_code == 422


# 5. TEI's routes for other kinds of model answer an embedding model 424, error_type Backend, TEI's words.
@pytest.mark.parametrize(
    ("path", "tei_words", "needs"),
    [
        ("/rerank", "model is not a re-ranker model", "re-ranker"),
        ("/predict", "Model is not a classifier model", "classifier"),
        ("/embed_sparse", "Model is not an embedding model with SPLADE pooling", "SPLADE"),
    ],
)
def test_other_model_routes_answer_as_tei_does(
    client: TestClient, path: str, tei_words: str, needs: str
) -> None:
    response = client.post(path, json={"query": "a", "texts": ["b"], "inputs": "a"})
    assert response.status_code == 424, response.text
    body = response.json()
    assert body["error_type"] == "Backend"
    assert body["error"].startswith(f"Backend error: {tei_words}: ")
    assert "embedding models only" in body["error"] and needs in body["error"] and "\n" not in body["error"]


# 6. truncation_direction "left": the fix named is one that works (the old one named truncate and shortening).
def test_left_truncation_names_a_fix_that_works(client: TestClient) -> None:
    response = client.post("/embed", json={"inputs": "a", "truncation_direction": "left"})
    assert response.status_code == 422
    assert _error(response) == (
        "truncation_direction: 'left' is not taken: bertscope cuts long texts on the right only; "
        'send "right", or leave truncation_direction out'
    )
    assert client.post("/embed", json={"inputs": "a", "truncation_direction": "right"}).status_code == 200


# 7. dimensions on bertscope's own routes: TEI's /embed and POST / take it too, and are named.
@pytest.mark.parametrize("name", ["dimensions", "truncate_dim"])
def test_dimensions_on_v2_embed_names_every_route_that_takes_it(client: TestClient, name: str) -> None:
    response = client.post("/v2/embed", json={"inputs": "a", name: 8})
    assert response.status_code == 422
    said = next(e["msg"] for e in response.json()["errors"] if e["loc"] == ["body", name])
    assert "no such option" not in said
    assert "POST /embed" in said and "POST /)" in said and "POST /v1/embeddings" in said
    for path in ("/embed", "/"):  # and they do take it
        taken = client.post(path, json={"inputs": "a", "dimensions": 8})
        assert taken.status_code == 200 and len(taken.json()[0]) == 8


# 8. /openapi.json lists each route's own errors: a GET without a body none of a body's, no 401 without a
# key (or on the open paths), /v1/'s 400 for its refusals (never 422), TEI's error body on TEI's routes.
def _responses(doc: dict[str, Any], path: str, method: str) -> dict[str, Any]:
    return doc["paths"][path][method]["responses"]  # type: ignore[no-any-return]


def test_openapi_lists_each_routes_own_errors(client: TestClient, bundled: bertscope.Model) -> None:
    doc = client.get("/openapi.json").json()
    for path in ("/ping", "/health", "/info", "/v2/info"):
        assert not {"400", "401", "408", "413", "415", "422", "429"} & set(_responses(doc, path, "get")), path
    v1 = _responses(doc, "/v1/embeddings", "post")
    assert "422" not in v1 and "400" in v1 and "OpenAI" in v1["400"]["description"]
    assert client.post("/v1/embeddings", json={"input": 3}).status_code == 400
    tei_error = {"$ref": "#/components/schemas/TEIError"}
    for path in ("/", "/embed", "/embed_all", "/similarity", "/tokenize", "/decode"):
        for status, answer in _responses(doc, path, "post").items():
            if status != "200":
                assert answer["content"]["application/json"]["schema"] == tei_error, (path, status)
    assert _responses(doc, "/v2/embed", "post")["422"]["content"]["application/json"]["schema"] != tei_error
    assert "401" not in _responses(doc, "/v2/embed", "post")  # no --api-key here
    with TestClient(create_app(bundled, settings=ServerSettings(api_key="k"))) as keyed:
        keyed_doc = keyed.get("/openapi.json").json()
    assert "401" in _responses(keyed_doc, "/v2/embed", "post") and "401" in _responses(keyed_doc, "/", "post")
    assert "401" not in _responses(keyed_doc, "/health", "get")
