"""One status for a JSON syntax error (audit 18b-5): bytes that are not JSON are 400 on bertscope's own
routes too, as on TEI's and OpenAI's and as a too-deep or too-long body already was there; a body whose
top level is not an object names the fix with the route's first field (audit 18b-7)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import create_app

JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    """The service on the bundled model, in process."""
    with TestClient(create_app(bundled)) as c:
        yield c


DIGITS = b'{"n": ' + b"9" * 5000 + b"}"
SYNTAX = [b'{"inputs": [a]', b'{"inputs": ["a"]} x', b"[" * 5000 + b"]" * 5000, DIGITS]


@pytest.mark.parametrize("path", ["/v2/embed", "/v2/similarity", "/embed_tokens", "/static", "/embed"])
@pytest.mark.parametrize("raw", SYNTAX, ids=["not JSON", "more after it", "nested too deeply", "digits"])
def test_a_syntax_error_is_400_on_every_route(client: TestClient, path: str, raw: bytes) -> None:
    refused = client.post(path, content=raw, headers=JSON)
    assert refused.status_code == 400, refused.text[:300]
    assert refused.json()["detail"].startswith("body: ")


@pytest.mark.parametrize(
    ("path", "field"),
    [("/embed", "inputs"), ("/similarity", "inputs"), ("/decode", "ids"), ("/v2/similarity", "source")],
)
def test_a_body_that_is_no_object_names_the_fix(client: TestClient, path: str, field: str) -> None:
    for raw, kind in ((b'["a cat"]', "a list"), (b'"a cat"', "a string ('a cat')"), (b"null", "null")):
        refused = client.post(path, content=raw, headers=JSON)
        assert refused.status_code == 422, refused.text[:300]
        assert refused.json()["detail"] == (
            f'body is {kind}, not a JSON object: send a JSON object such as {{"{field}": ...}}'
        )


def test_openai_names_its_own_field(client: TestClient) -> None:
    refused = client.post("/v1/embeddings", content=b'["a cat"]', headers=JSON)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].endswith('send a JSON object such as {"input": ...}')
