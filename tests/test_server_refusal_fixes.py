"""Refusals end in their fix: a body over --max-body-bytes, an auto-split request longer than the queue,
a /v2 body that is not JSON (400, a syntax error); and the first errors a 422 lists name an enum's values
as the client sends them, not Python's repr of its members."""

from __future__ import annotations

from fastapi.testclient import TestClient

import bertscope
from bertscope.server import ServerSettings, create_app


def test_the_fixes_are_named(bundled: bertscope.Model) -> None:
    settings = ServerSettings(max_body_bytes=4000, max_inputs=2, max_queue=3, auto_split=True)
    with TestClient(create_app(bundled, settings=settings)) as client:
        big = client.post("/v2/embed", json={"inputs": ["word " * 1000]})
        assert big.status_code == 413
        assert big.json()["detail"].endswith("or start bertscope serve with a higher --max-body-bytes")
        many = client.post("/v2/embed", json={"inputs": ["a cat"] * 7})
        assert many.status_code == 413, many.text
        assert many.json()["detail"].endswith(
            "send at most 6 per request, or start bertscope serve with a higher --max-queue or --max-inputs"
        )
        assert client.post("/v2/embed", json={"inputs": ["a cat"] * 6}).status_code == 200
        broken = client.post(
            "/v2/embed", content=b'{"inputs": ', headers={"Content-Type": "application/json"}
        )
        assert broken.status_code == 400  # a syntax error, as TEI and OpenAI answer it
        assert broken.json()["detail"].endswith("; send one JSON object")


def test_the_listed_errors_name_enum_values_as_sent(bundled: bertscope.Model) -> None:
    with TestClient(create_app(bundled)) as client:
        refused = client.post("/attention", json={"inputs": "a cat", "long": "window"})
        assert refused.status_code == 422
        said = refused.json()
        assert "<LongText" not in refused.text and "'truncate'" in said["errors"][0]["msg"]
