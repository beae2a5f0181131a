"""A service on loopback answers only requests addressed to loopback: a page that points its own name at
127.0.0.1 (DNS rebinding) is refused in one line before any route runs; a service meant to be reached by
name (--host 0.0.0.0) is left alone."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import create_app
from bertscope.server.hosts import guard_loopback, host_name


@pytest.mark.parametrize(
    ("base", "status"),
    [
        ("http://127.0.0.1:8080", 200),
        ("http://localhost:8080", 200),
        ("http://LOCALHOST", 200),
        ("http://[::1]:8080", 200),
        ("http://evil.example:8080", 400),
        ("http://127.0.0.1.evil.example", 400),
    ],
)
def test_a_loopback_service_answers_only_loopback_hosts(
    tiny_models: dict[str, bertscope.Model], base: str, status: int
) -> None:
    app = create_app(tiny_models["bert"])
    guard_loopback(app, "127.0.0.1")
    with TestClient(app, base_url=base) as client:
        answer = client.post("/v2/embed", json={"inputs": "hi"})
    assert answer.status_code == status, answer.text
    if status == 400:
        assert answer.json()["detail"].startswith("the Host header names ")
        assert "DNS rebinding, is refused" in answer.json()["detail"]


def test_a_service_meant_to_be_reached_by_name_is_left_alone(tiny_models: dict[str, bertscope.Model]) -> None:
    app = create_app(tiny_models["bert"])
    guard_loopback(app, "0.0.0.0")
    with TestClient(app, base_url="http://embeddings.internal:8080") as client:
        assert client.post("/v2/embed", json={"inputs": "hi"}).status_code == 200


def test_host_names() -> None:
    assert [host_name(h) for h in ("127.0.0.1:80", "[::1]:80", "[::1]", "localhost", "::1")] == [
        "127.0.0.1", "::1", "::1", "localhost", "::1",
    ]  # fmt: skip


def test_a_reverse_proxys_name_is_answered_when_allowed(tiny_models: dict[str, bertscope.Model]) -> None:
    """nginx with `proxy_set_header Host $host` passes the public name: serve --allow-host NAME."""
    app = create_app(tiny_models["bert"])
    guard_loopback(app, "127.0.0.1", allow=["API.example.com"])
    with TestClient(app, base_url="https://api.example.com") as client:
        assert client.post("/v2/embed", json={"inputs": "hi"}).status_code == 200
    with TestClient(app, base_url="https://other.example.com") as client:
        said = client.post("/v2/embed", json={"inputs": "hi"}).json()["detail"]
    assert said.endswith("a reverse proxy's name: serve --allow-host NAME")
