"""OpenAI's error bodies on /v1/embeddings (audit 18a-9): a wrong key is 401 with type
invalid_request_error and code invalid_api_key, a full queue 429 with type requests and code
rate_limit_exceeded, as OpenAI sends them."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import ServerSettings, create_app
from bertscope.server.tickets import QueueFull


def test_a_wrong_key_is_openais_401(bundled: bertscope.Model) -> None:
    with TestClient(create_app(bundled, settings=ServerSettings(api_key="secret"))) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            refused = client.post("/v1/embeddings", json={"input": "a"}, headers=headers)
            assert refused.status_code == 401
            error = refused.json()["error"]
            assert (error["type"], error["code"], error["param"]) == (
                "invalid_request_error",
                "invalid_api_key",
                None,
            )


def test_a_full_queue_is_openais_429(bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch) -> None:
    with TestClient(create_app(bundled)) as client:
        service = client.app.state.service  # type: ignore[attr-defined]

        def full(n_jobs: int) -> None:
            raise QueueFull("the queue is full", retry_after=3)

        monkeypatch.setattr(service, "refuse_when_full", full)
        refused = client.post("/v1/embeddings", json={"input": "a"})
        tei = client.post("/embed", json={"inputs": "a"})
    assert refused.status_code == 429 and refused.headers["retry-after"] == "3"
    error = refused.json()["error"]
    assert (error["type"], error["code"], error["message"]) == (
        "requests",
        "rate_limit_exceeded",
        "the queue is full",
    )
    assert tei.status_code == 429 and tei.json()["error_type"] == "Overloaded"  # TEI's own, unchanged
