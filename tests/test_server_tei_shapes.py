"""TEI's routes as TEI answers them at their edges (an empty text or id list, /ping), /decode's work off the
event loop, and an OpenAPI document whose 200 schemas say what every route answers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import create_app

# TEI's words (core/src/tokenization.rs, its Empty error as router/src/lib.rs writes it).
EMPTY_TEXT = "Input validation error: `inputs` cannot be empty"
EMPTY_IDS = "Input validation error: `input_ids` cannot be empty"


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    """The service on the bundled model, in process."""
    with TestClient(create_app(bundled)) as c:
        yield c


@pytest.fixture(scope="module")
def doc(client: TestClient) -> dict[str, Any]:
    response = client.get("/openapi.json")
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(
    ("path", "body", "says"),
    [
        ("/embed", {"inputs": ""}, EMPTY_TEXT),
        ("/", {"inputs": ["a cat", ""]}, EMPTY_TEXT),
        ("/embed_all", {"inputs": ""}, EMPTY_TEXT),
        ("/tokenize", {"inputs": ["", "a cat"]}, EMPTY_TEXT),
        ("/similarity", {"inputs": {"source_sentence": "", "sentences": ["a"]}}, EMPTY_TEXT),
        ("/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b", ""]}}, EMPTY_TEXT),
        # An empty id list is TEI's tokenizer's Empty too, even where ids are refused (no --token-ids model).
        ("/embed", {"inputs": [[]]}, EMPTY_TEXT),
        # TEI's untagged InputIds reads a bare [] as one empty sequence, refused as an empty inner list is.
        ("/decode", {"ids": []}, EMPTY_IDS),
        ("/decode", {"ids": [[]]}, EMPTY_IDS),
        ("/decode", {"ids": [[101, 1037], []]}, EMPTY_IDS),
    ],
)
def test_an_empty_text_or_id_list_is_teis_400_empty(
    client: TestClient, path: str, body: dict[str, Any], says: str
) -> None:
    response = client.post(path, json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == says and response.json()["error_type"] == "Empty"


def test_bertscope_routes_keep_their_own_rule_for_empty_and_blank_texts(client: TestClient) -> None:
    """Only TEI's routes answer TEI's 400; /v2/ keeps its 422 naming the text, and a text of spaces alone
    stays refused on TEI's routes too (a documented difference: no word piece to pool)."""
    for path, body in (("/v2/embed", {"inputs": ["a", ""]}), ("/embed", {"inputs": ["a", "  "]})):
        response = client.post(path, json=body)
        assert response.status_code == 422, response.text
        assert response.json()["detail"].startswith("text 1 is empty"), response.text


def test_ping_answers_health_as_tei(client: TestClient, doc: dict[str, Any]) -> None:
    """TEI (and SageMaker) probe GET /ping: 200 with no body while the worker runs."""
    response = client.get("/ping")
    assert response.status_code == 200 and response.content == b""
    assert "content" not in doc["paths"]["/ping"]["get"]["responses"]["200"]


def test_ping_is_teis_503_once_the_worker_stops(bundled: bertscope.Model) -> None:
    app = create_app(bundled)
    with TestClient(app) as c:
        app.state.service.batcher.stop()  # returns once the worker thread has ended
        response = c.get("/ping")
    assert response.status_code == 503
    assert response.json() == {"error": "unhealthy", "error_type": "Unhealthy"}


class _Watched:
    """The tokenizer's backend, noting whether decode_batch ran with an event loop running in its thread."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.on_loop: list[bool] = []

    def decode_batch(self, *args: Any, **kwargs: Any) -> Any:
        try:
            asyncio.get_running_loop()
            self.on_loop.append(True)
        except RuntimeError:
            self.on_loop.append(False)
        return self._backend.decode_batch(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


def test_decode_runs_off_the_event_loop(
    client: TestClient, bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The id scan and decode_batch run in a worker thread, as every other route's CPU work does."""
    watched = _Watched(bundled.tokenizer.backend)
    monkeypatch.setattr(bundled.tokenizer, "backend", watched)
    response = client.post("/decode", json={"ids": [[101, 1045, 2066, 7852, 102]] * 3})
    assert response.status_code == 200, response.text
    assert response.json() == ["i like bread"] * 3
    assert watched.on_loop == [False]
    # The control: the same check on the event loop's own thread says True.
    assert asyncio.run(_on_loop(watched)) == [False, True]


async def _on_loop(watched: _Watched) -> list[bool]:
    watched.decode_batch([[101]])
    return watched.on_loop


def test_every_operation_documents_its_200_answer(doc: dict[str, Any]) -> None:
    empty = [
        f"{method.upper()} {path}"
        for path, operations in doc["paths"].items()
        for method, operation in operations.items()
        for content in [operation["responses"]["200"].get("content", {})]
        if any(not media.get("schema") for media in content.values())
    ]
    assert not empty, empty
    # TEI's shapes, as TEI's own document gives them.
    schemas = doc["components"]["schemas"]
    assert schemas["TEIEmbedResponse"]["type"] == "array"
    assert schemas["TEIEmbedResponse"]["items"]["items"]["type"] == "number"
    assert schemas["TEIDecodeResponse"]["items"] == {"type": "string"}
    info = schemas["TEIInfo"]["required"]
    assert {"model_id", "model_type", "max_input_length", "max_client_batch_size", "version"} <= set(info)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/embed", {"inputs": ["a cat", "a dog"]}),
        ("post", "/embed_all", {"inputs": "a cat"}),
        ("post", "/similarity", {"inputs": {"source_sentence": "a cat", "sentences": ["a dog"]}}),
        ("post", "/tokenize", {"inputs": ["héllo wörld", "a cat"]}),
        ("post", "/decode", {"ids": [101, 1037, 4937, 102]}),
        ("get", "/info", None),
        ("get", "/health", None),
        ("get", "/v2/info", None),
        ("post", "/v2/tokenize", {"inputs": ["a cat", ["a", "b"]]}),
        ("post", "/static", {"inputs": ["bread", 7852], "k": 2}),
        ("post", "/static", {"inputs": "bread loaf", "as_words": True}),
        ("post", "/anatomy", {"inputs": "a cat"}),
        ("post", "/explain", {"a": "a cat", "b": "a dog"}),
        ("post", "/explain", {"a": "a cat", "b": "a dog", "pooling": "cls"}),
        ("post", "/attention", {"inputs": "a cat", "layer": 1, "head": 0}),
        ("post", "/attention", {"inputs": "a cat", "layer": 2}),
        ("post", "/explore/layers", {"inputs": "a cat"}),
        ("post", "/explore/batch", {"inputs": ["a cat", "a"]}),
        ("get", "/explore/posts", None),
    ],
)
def test_real_answers_validate_against_their_documented_schema(
    client: TestClient, doc: dict[str, Any], method: str, path: str, body: Any
) -> None:
    response = client.request(method, path, json=body)
    assert response.status_code == 200, response.text
    schema = doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema.get("$ref"), schema  # a named schema, not {}
    validator = jsonschema.Draft202012Validator({**schema, "components": doc["components"]})
    errors = [f"{list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(response.json())]
    assert not errors, errors
    # The check can fail: a wrong answer is refused by the same schema.
    assert not validator.is_valid({"surely": "not this"} if isinstance(response.json(), list) else [1])
