"""A request is logged and counted once, with the status it was sent (audit 20d): 499 only where nothing was
answered. A body dripped a byte a chunk gets the connection's 400 (counted 400, not 499); an answer begun
and then left by its client keeps its 200 (uvicorn logged it; the guard adds no 499 line).

Every test waits on a condition (an answer, a metric), never on a clock."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import bertscope
from bertscope.server import ServerSettings, create_app
from bertscope.server.guard import Guard
from bertscope.server.metrics import Metrics
from test_server import serving_app
from test_server_drip import _chunked_head
from test_server_limits import _socket, _until_closed


@contextmanager
def access_lines() -> Iterator[list[logging.LogRecord]]:
    """uvicorn's access lines written while inside (its logger may not propagate to the root)."""
    lines: list[logging.LogRecord] = []
    access = logging.getLogger("uvicorn.access")
    catcher = logging.Handler(logging.INFO)
    catcher.emit = lines.append  # type: ignore[method-assign]
    level = access.level
    access.addHandler(catcher)
    access.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        access.removeHandler(catcher)
        access.setLevel(level)


def _count(metrics: Metrics, endpoint: str, status: str) -> float:
    labels = {"endpoint": endpoint, "status": status}
    return metrics.registry.get_sample_value("bertscope_requests_total", labels) or 0.0


def test_a_dripped_body_is_logged_and_counted_as_its_400(bundled: bertscope.Model) -> None:
    settings = ServerSettings(body_timeout_s=600)
    app = create_app(bundled, settings=settings)
    metrics = app.state.service.batcher.metrics
    with serving_app(app, settings) as base, access_lines() as lines:  # after uvicorn set its logging up
        with _socket(base) as sock:
            sock.sendall(_chunked_head("/v2/tokenize") + b"1\r\nx\r\n" * 1100)
            assert _until_closed(sock).startswith(b"HTTP/1.1 400 ")
        while not (_count(metrics, "/v2/tokenize", "400") or _count(metrics, "/v2/tokenize", "499")):
            pass  # the guard has counted the request (the look is the condition itself, no sleep)
    assert _count(metrics, "/v2/tokenize", "400") == 1
    assert _count(metrics, "/v2/tokenize", "499") == 0
    said = [r.getMessage() for r in lines if "/v2/tokenize" in r.getMessage()]
    assert len(said) == 1 and said[0].endswith('"POST /v2/tokenize HTTP/1.1" 400'), said


def test_an_answer_begun_and_left_keeps_its_status_and_one_line() -> None:
    left = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"[1,", "more_body": True})
        left.set()  # the client goes away with the answer half sent
        await asyncio.Event().wait()

    async def receive() -> dict[str, Any]:
        if not left.is_set() and not getattr(receive, "read", False):
            receive.read = True  # type: ignore[attr-defined]
            return {"type": "http.request", "body": b"", "more_body": False}
        await left.wait()
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    metrics = Metrics()
    guard = Guard(app, settings=ServerSettings(), metrics=metrics, endpoints=frozenset({"/x"}))
    scope = {
        "type": "http", "method": "GET", "path": "/x", "raw_path": b"/x", "query_string": b"",
        "headers": [], "client": ("127.0.0.1", 5000), "http_version": "1.1", "root_path": "",
    }  # fmt: skip
    with access_lines() as lines:
        asyncio.run(guard(scope, receive, send))
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert _count(metrics, "/x", "200") == 1
    assert _count(metrics, "/x", "499") == 0
    assert not lines  # uvicorn wrote the 200's line as it began; the guard writes no 499 beside it
