"""TEI's routes say why (audit 20d): "truncation_direction": "left" is refused naming bertscope's right-only
cut and the fix; a pair of texts sent to TEI's /embed is named as a pair, with /v2/embed that takes it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import create_app

LEFT = {"truncation_direction": "left"}


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    with TestClient(create_app(bundled)) as c:
        yield c


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/embed", {"inputs": "a", "truncation_direction": "Left"}),
        ("/embed_all", {"inputs": "a", "truncation_direction": "left"}),
        ("/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b"]}, "parameters": LEFT}),
    ],
)
def test_left_truncation_says_why_and_the_fix(client: TestClient, path: str, body: dict[str, Any]) -> None:
    answer = client.post(path, json=body)
    assert answer.status_code == 422
    said = answer.json()["error"]
    assert said.startswith("truncation_direction: ") and "\n" not in said, said
    assert "bertscope cuts long texts on the right only" in said
    assert 'send "right", or leave truncation_direction out' in said
    assert answer.json()["error_type"] == "Validation"


@pytest.mark.parametrize(("path", "inputs", "at"), [("/embed", [["a", "b"]], 0), ("/", ["x", ["a", "b"]], 1)])
def test_a_pair_on_teis_embed_is_named_with_the_route_that_takes_it(
    client: TestClient, path: str, inputs: list[Any], at: int
) -> None:
    answer = client.post(path, json={"inputs": inputs})
    assert answer.status_code == 422
    said = answer.json()["error"]
    assert said.startswith(f"inputs: item {at} is a pair of texts, which TEI's /embed does not take"), said
    assert "send the pair to /v2/embed" in said
    assert "not a token id" not in said
    assert client.post("/v2/embed", json={"inputs": [["a", "b"]]}).status_code == 200  # as it says
