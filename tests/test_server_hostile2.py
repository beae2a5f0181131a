"""The service under hostile clients, second part: a short window stride held to the token budget, and
answers a client does not read bounded in bytes and in time.

Every test waits on a condition (an answer, a metric), never on a clock.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import ServerSettings, create_app
from test_server import serving

LONG = "word " * 300  # 302 tokens: two windows at the default stride, 47 at stride 1 (47 x 256 run)
# Each route that reads a long text in windows, with stride 1.
STRIDED = [
    ("/v2/embed", {"inputs": LONG, "long": "window"}),
    ("/v2/similarity", {"source": "a cat", "sentences": [LONG], "long": "window"}),
    ("/embed_tokens", {"inputs": LONG, "long": "window"}),
    ("/explain", {"a": LONG, "b": "a cat", "long": "window"}),
    ("/v2/embed_chunks", {"inputs": LONG}),
]


def _metric(client: Any, name: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


@pytest.mark.parametrize(("path", "body"), STRIDED, ids=[p for p, _ in STRIDED])
def test_a_short_window_stride_counts_the_windows_it_runs(
    bundled: bertscope.Model, path: str, body: dict[str, Any]
) -> None:
    settings = ServerSettings(max_request_tokens=2000)
    with TestClient(create_app(bundled, settings=settings)) as client:
        forwards = _metric(client, "bertscope_forward_texts_count")
        refused = client.post(path, json={**body, "stride": 1})
        assert refused.status_code == 413, refused.text[:300]
        detail = refused.json()["detail"]
        assert "windows every 1 tokens" in detail and "(--max-request-tokens)" in detail, detail
        assert _metric(client, "bertscope_forward_texts_count") == forwards  # refused before any forward
        for stride in (None, 100):  # the default and a longer stride run about the text's own tokens
            within = client.post(path, json={**body, **({"stride": stride} if stride else {})})
            assert within.status_code == 200, within.text[:300]


# About 14 MB of token records: more than the socket buffers of both ends hold, so the service keeps
# the rest until a client reads it.
BIG = json.dumps({"inputs": ", " * 200_000}).encode()


def _ask_and_read_nothing(base: str) -> socket.socket:
    """A client that asks for the big answer, gets its head, and then reads nothing."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
    sock.settimeout(60)  # only keeps a broken server from hanging the test
    sock.connect(("127.0.0.1", int(base.rsplit(":", 1)[1])))
    head = (
        "POST /tokenize HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BIG)}\r\n\r\n"
    ).encode()
    sock.sendall(head + BIG)
    assert sock.recv(12) == b"HTTP/1.1 200"
    return sock


def _wait_answer_bytes(client: httpx.Client, done: Any) -> float:
    while not done(held := _metric(client, "bertscope_answer_bytes_held")):
        pass  # each look is a request: the condition itself, no sleep
    return held


def test_answers_nobody_reads_share_one_budget(bundled: bertscope.Model) -> None:
    with (
        # One address's share is the whole budget here: every client of the test is 127.0.0.1.
        serving(bundled, max_buffered_bytes=1 << 20, send_timeout_s=600, max_buffered_share=1) as base,
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        stalled = _ask_and_read_nothing(base)
        assert _wait_answer_bytes(client, lambda held: held > 0) > 1 << 20  # one alone always fits
        refused = client.post("/tokenize", content=BIG, headers={"content-type": "application/json"})
        assert refused.status_code == 503, refused.text[:300]
        assert "answers waiting for their clients" in refused.json()["error"]
        assert refused.headers["retry-after"] == "600"  # a hold lasts up to --send-timeout
        assert client.post("/tokenize", json={"inputs": "a cat"}).status_code == 200  # small ones go on
        stalled.close()
        _wait_answer_bytes(client, lambda held: held == 0)
        answered = client.post("/tokenize", content=BIG, headers={"content-type": "application/json"})
        assert answered.status_code == 200 and len(answered.json()[0]) == 200_002


def test_a_client_that_takes_none_of_its_answer_is_dropped(bundled: bertscope.Model) -> None:
    with serving(bundled, send_timeout_s=0.5) as base, httpx.Client(base_url=base, timeout=60) as client:
        stalled = _ask_and_read_nothing(base)
        _wait_answer_bytes(client, lambda held: held > 0)
        _wait_answer_bytes(client, lambda held: held == 0)  # the connection was dropped, the bytes freed
        got = 0
        try:
            while chunk := stalled.recv(1 << 20):
                got += len(chunk)
        except ConnectionResetError:
            pass
        stalled.close()
        assert got < 10_000_000  # what the socket buffers held, not the answer
        assert client.get("/health").status_code == 200
