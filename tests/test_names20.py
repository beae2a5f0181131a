"""One name for a vector's width (session 20): `dimension`, as collections, index info and geometry say
it, in `embed --json`, `SentenceEmbeddings.to_dict()` and /v2/embed (which still sends `dim` beside it,
marked deprecated)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import create_app
from console import run_main


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    with TestClient(create_app(bundled)) as c:
        yield c


def test_to_dict_and_embed_json_name_the_width_dimension(bundled: bertscope.Model) -> None:
    made = bundled.embed(["a cat", "a dog"]).to_dict()
    assert made["dimension"] == 384 and "dim" not in made
    code, out, _ = run_main("embed", "a cat", "--json")
    assert code == 0 and json.loads(out)["dimension"] == 384 and "dim" not in json.loads(out)


def test_v2_embed_sends_dimension_and_its_older_name(client: TestClient) -> None:
    answer = client.post("/v2/embed", json={"inputs": ["a cat"]}).json()
    assert answer["dimension"] == answer["dim"] == len(answer["vectors"][0]) == 384
    assert list(answer)[:3] == ["model", "dimension", "dim"]
    schema = client.get("/openapi.json").json()["components"]["schemas"]["EmbedResponse"]["properties"]
    assert schema["dim"].get("deprecated") is True and not schema["dimension"].get("deprecated")
    assert client.get("/v2/info").json()["hidden_size"] == 384  # the model's width keeps transformers' name
