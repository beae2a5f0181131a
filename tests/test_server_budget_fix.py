"""A request over --max-request-tokens is refused with the fixes its route has: the cut (`"long":
"truncate"`) only where the texts were read whole (window); never where they were cut already, where TEI's
or OpenAI's routes cut them, or where the route cannot cut (late chunking)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import ServerSettings, create_app

LONG = "word " * 300  # 302 tokens, cut to 256
CUT_OFFER = 'or cut them ("long": "truncate")'


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    with TestClient(create_app(bundled, settings=ServerSettings(max_request_tokens=1000))) as c:
        yield c


CUT_ALREADY: list[tuple[str, dict[str, Any]]] = [
    ("/embed", {"inputs": [LONG] * 5, "truncate": True}),
    ("/v1/embeddings", {"input": [LONG] * 5, "truncate": True}),
    ("/v2/embed", {"inputs": [LONG] * 5, "long": "truncate"}),
    ("/embed_tokens", {"inputs": [LONG] * 5, "long": "truncate"}),
    ("/v2/embed_chunks", {"inputs": LONG * 5}),
]


@pytest.mark.parametrize(("path", "body"), CUT_ALREADY, ids=[p for p, _ in CUT_ALREADY])
def test_no_cut_is_offered_where_it_cannot_help(client: TestClient, path: str, body: dict[str, Any]) -> None:
    refused = client.post(path, json=body)
    assert refused.status_code == 413, refused.text
    said = refused.json()
    detail = said["error"]["message"] if path.startswith("/v1/") else said.get("detail", said.get("error"))
    assert "--max-request-tokens" in detail and "fewer or shorter texts" in detail
    assert "cut them" not in detail and "truncate" not in detail.split("--max-request-tokens")[1]


@pytest.mark.parametrize("path", ["/v2/embed", "/embed_tokens"])
def test_the_cut_is_offered_in_the_route_s_field_where_texts_were_read_whole(
    client: TestClient, path: str
) -> None:
    refused = client.post(path, json={"inputs": [LONG] * 5, "long": "window"})
    assert refused.status_code == 413, refused.text
    assert refused.json()["detail"].endswith(f"fewer or shorter texts, {CUT_OFFER}")
    taken = client.post(path, json={"inputs": [LONG] * 3, "long": "truncate"})
    assert taken.status_code == 200, taken.text
