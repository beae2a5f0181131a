"""Connections are capped (audit 18b-1): one over --max-connections is answered 503 and closed as it opens,
counted in /metrics; the accept loop's out-of-descriptors errors are said in one line an interval."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import bertscope
from bertscope.server import ServerSettings, create_app
from bertscope.server.capacity import AcceptErrors, Server, default_max_connections
from bertscope.server.metrics import Metrics
from test_server import serving_app


@contextmanager
def served(model: bertscope.Model, **settings: Any) -> Iterator[tuple[int, Any]]:
    """The service on a free loopback port, run as `bertscope serve` runs it; yields its port and app."""
    given = ServerSettings(**settings)
    app = create_app(model, settings=given)
    with serving_app(app, given, server_type=Server) as base:
        yield int(base.rsplit(":", 1)[1]), app


def capped(model: bertscope.Model, cap: int) -> Any:
    """`served` under a cap of `cap` connections, the whole cap one address's (every test is 127.0.0.1)."""
    return served(model, max_connections=cap, connection_share=1.0)


def everything(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection."""
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def test_a_connection_over_the_cap_is_answered_503_and_closed_unread(bundled: bertscope.Model) -> None:
    with capped(bundled, 2) as (port, app):
        held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(2)]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as third:
                answer = everything(third)  # closed by the server: it sent nothing and waited for nothing
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503 ")
            assert b"retry-after: 1" in head.lower()
            assert b"--max-connections" in body and b'"error_type": "Overloaded"' in body
            metrics = app.state.service.batcher.metrics.registry
            assert metrics.get_sample_value("bertscope_connections_refused_total") == 1
            # a held connection still works: the cap refused the one over it, not the ones under it
            held[0].sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert everything(held[0]).startswith(b"HTTP/1.1 200 ")
        finally:
            for sock in held:
                sock.close()


def test_the_default_cap_is_half_the_open_file_limit_within_bounds() -> None:
    assert default_max_connections(1024) == 512
    assert default_max_connections(1_048_576) == 4096
    assert default_max_connections(20) == 16
    assert default_max_connections(None) == 4096


def test_accept_errors_are_one_line_an_interval_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    metrics = Metrics()
    handler = AcceptErrors(metrics, every=60.0, clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    failed = {"message": "socket.accept() out of system resource", "exception": OSError(24, "Too many")}
    try:
        with caplog.at_level(logging.WARNING, logger="uvicorn.error"):
            for second in range(0, 130):  # asyncio retries the accept each second
                now[0] = float(second)
                handler(loop, failed)
    finally:
        loop.close()
    said = [r for r in caplog.records if "cannot accept connections" in r.getMessage()]
    assert len(said) == 3  # at 0 s, 60 s and 120 s
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in said)
    assert "60 failed accepts" in said[1].getMessage()
    assert "ulimit -n" in said[0].getMessage()
    assert metrics.registry.get_sample_value("bertscope_accept_errors_total") == 130


def test_other_loop_errors_go_to_asyncio(caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            AcceptErrors()(loop, {"message": "something else broke"})
    finally:
        loop.close()
    assert any("something else broke" in r.getMessage() for r in caplog.records)
