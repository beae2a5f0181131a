"""Infinity, NaN and 1e400 where a layer or a token id goes (audit 18b-4) are said to be no finite number,
not "a number with a fraction (inf)"."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import ServerSettings, create_app
from bertscope.server.settings import TokenIds


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    """The service on the bundled model, taking the model's own token ids."""
    with TestClient(create_app(bundled, settings=ServerSettings(token_ids=TokenIds.MODEL))) as c:
        yield c


def said(client: TestClient, path: str, raw: str) -> str:
    """The one-line message of a refused raw JSON body."""
    r = client.post(path, content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code in (400, 422), r.text
    return str(r.json()["detail"])


@pytest.mark.parametrize(
    ("raw", "shown"), [("Infinity", "inf"), ("NaN", "nan"), ("1e400", "inf"), ("-Infinity", "-inf")]
)
def test_a_layer_that_is_no_finite_number_is_said_so(client: TestClient, raw: str, shown: str) -> None:
    message = said(client, "/v2/embed", f'{{"inputs": ["a"], "layers": {raw}}}')
    assert message.startswith(f"layers is not a finite number ({shown}): give a layer spec"), message
    message = said(client, "/embed_tokens", f'{{"inputs": ["a"], "layers": [1, {raw}]}}')
    assert f"layers: item 1 is not a finite number ({shown}), so not a layer number" in message, message


def test_a_token_id_past_a_float_is_said_to_be_no_finite_number(client: TestClient) -> None:
    message = said(client, "/embed", '{"inputs": [[101, 1e400]]}')
    assert "position 1 is not a finite number (inf), so not a token id" in message, message
    message = said(client, "/decode", '{"ids": [101, 1e400]}')
    assert "item 1 is not a finite number (inf), so not a token id" in message, message
    assert "fraction" not in said(client, "/v1/embeddings", '{"input": [101, 1e400]}')


def test_a_fraction_is_still_a_fraction(client: TestClient) -> None:
    message = said(client, "/v2/embed", '{"inputs": ["a"], "layers": 1.5}')
    assert message.startswith("layers is a number with a fraction (1.5)"), message
