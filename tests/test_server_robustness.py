"""The service under bad input and misuse (issue 13): JSON answers always, keys compared as sent."""

from __future__ import annotations

import json

import httpx
import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app as cli_app
from bertscope.server import ServerSettings
from test_server import serving

SURROGATE_BODIES = [
    ("/embed", {"inputs": ["fine", "\ud800"]}),
    ("/embed_tokens", {"inputs": "\ud800"}),
    ("/v1/embeddings", {"input": "\ud800"}),
    ("/tokenize", {"inputs": "\ud800"}),
    ("/static", {"items": ["\ud800"]}),
    ("/anatomy", {"text": "\ud800"}),
    ("/similarity", {"source": "\ud800", "sentences": ["a"]}),
]


def test_a_lone_surrogate_is_a_json_422_and_the_connection_stays_usable(bundled: bertscope.Model) -> None:
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:
        for path, body in SURROGATE_BODIES:
            # json.dumps escapes the surrogate as \\ud800, as a client's JSON library would.
            response = client.post(
                path, content=json.dumps(body), headers={"content-type": "application/json"}
            )
            assert response.status_code == 422, (path, response.text)
            assert "surrogate" in response.json()["detail"], path
            assert client.post("/tokenize", json={"inputs": "still here"}).status_code == 200


def test_an_unexpected_error_answers_json_500(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:

        def broken() -> None:
            raise RuntimeError("boom")

        monkeypatch.setattr(bundled, "info", broken)
        response = client.get("/info")
        assert response.status_code == 500
        assert response.headers["content-type"].startswith("application/json")
        assert "internal error (RuntimeError)" in response.json()["detail"]
        monkeypatch.undo()
        assert client.get("/info").status_code == 200


def test_api_keys_are_compared_as_sent(bundled: bertscope.Model) -> None:
    key = "clé-secrète"
    with serving(bundled, api_key=key) as base, httpx.Client(base_url=base, timeout=60) as client:
        body = {"inputs": "a cat"}
        assert client.post("/tokenize", json=body).status_code == 401
        assert client.post("/tokenize", json=body, headers={"X-API-Key": key.encode()}).status_code == 200
        bearer = {"Authorization": b"Bearer " + key.encode(), "X-API-Key": "wrong"}
        assert client.post("/tokenize", json=body, headers=bearer).status_code == 200
        wrong = {"Authorization": "Bearer wrong", "X-API-Key": "also-wrong"}
        assert client.post("/tokenize", json=body, headers=wrong).status_code == 401


def test_an_empty_api_key_is_refused_not_taken_as_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(bertscope.InvalidSpec, match="api_key is empty"):
        ServerSettings(api_key=" ")
    monkeypatch.setenv("BERTSCOPE_API_KEY", "")
    result = CliRunner().invoke(cli_app, ["serve"])
    assert result.exit_code != 0
    assert "BERTSCOPE_API_KEY is set but empty" in str(result.exception or result.output)


def test_a_port_out_of_range_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli_app, ["serve", "--port", "99999"])
    assert result.exit_code == 2 and "65535" in result.output and "Traceback" not in result.output
