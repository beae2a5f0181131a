"""A field bertscope's own body lacks is said by what it is (audit 23): another route's field names the
routes that take it ("pooling" on /embed_tokens), a near miss names the field meant; TEI's keep TEI's line."""

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
    routes = "POST /v2/embed, POST /v2/similarity and 2 more"
    assert said == f"pooling: not a field of this route ({routes} take it): drop it here"
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


def test_every_bertscope_body_says_so(client: Any) -> None:
    """Bodies that take no other API's names (/attention, /occurrences) still say another route's field,
    and their own fields are named from other routes (top_k: /explain and /occurrences)."""
    assert _detail(client, "/attention", {"inputs": "hi", "pooling": "cls"}).startswith(
        "pooling: not a field of this route (POST /v2/embed, POST /v2/similarity and"
    )
    said = _detail(client, "/v2/embed", {"inputs": "hi", "top_k": 3})
    routes = "POST /static, POST /explain and POST /occurrences"
    assert said == f"top_k: not a field of this route ({routes} take it): drop it here"
