"""A field bertscope's own body lacks is said by what it is (audit 23): another route's field names the routes
that take it ("pooling" on /v2/embed_tokens), a near miss names the field meant; TEI's bodies keep TEI's line."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import create_app


@pytest.fixture(scope="module")
def client(tiny_models: dict[str, bertscope.Model]) -> Any:
    with TestClient(create_app(tiny_models["bert"])) as c:
        yield c


def _detail(client: Any, route: str, body: dict[str, Any]) -> str:
    answer = client.post(route, json=body)
    assert answer.status_code == 422, answer.text
    return str(answer.json()["detail"])


def test_another_routes_field_names_the_routes_that_take_it(client: Any) -> None:
    said = _detail(client, "/embed_tokens", {"inputs": "hi", "pooling": "cls"})
    assert said == "pooling: not a field of this route (POST /v2/embed and 3 more take it): drop it here"
    said = _detail(client, "/v2/embed", {"inputs": "hi", "subword": "mean"})
    assert said == "subword: not a field of this route (POST /embed_tokens takes it): drop it here"


def test_a_near_miss_names_the_field_meant(client: Any) -> None:
    assert _detail(client, "/v2/embed", {"inputs": "hi", "poolng": "cls"}) == (
        'poolng: not a field of this route: did you mean "pooling"?'
    )


def test_an_unknown_name_and_teis_bodies_keep_pydantics_line(client: Any) -> None:
    assert (
        _detail(client, "/embed_tokens", {"inputs": "hi", "bogus": 1})
        == "bogus: Extra inputs are not permitted"
    )
    # TEI's POST /embed answers as TEI does, whatever bertscope's own routes take
    assert client.post("/embed", json={"inputs": "hi", "subword": "mean"}).json()["error"] == (
        "subword: Extra inputs are not permitted"
    )
