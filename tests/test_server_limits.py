"""The service's limits under hostile load (issue 34): one truncation rule, one strictness for booleans,
offline docs, bounded bodies and headers, a token budget per request, and fair, abandonable work.

Every test waits on a condition (an answer, a closed socket, a counter), never on a clock.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import ServerSettings, create_app
from bertscope.server.error_answers import TEI_PATHS
from bertscope.server.service import request_token_budget
from test_server import serving, serving_app

LONG = "bread " * 400  # 402 tokens, over the bundled model's 256


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    """The service on the bundled model, in process."""
    with TestClient(create_app(bundled)) as c:
        yield c


# (path, an over-long request, the field named in the refusal, the same request with that field set)
TOO_LONG = [
    ("/embed", {"inputs": LONG}, '"truncate": true', {"truncate": True}),
    ("/", {"inputs": [LONG]}, '"truncate": true', {"truncate": True}),
    ("/embed_all", {"inputs": LONG}, '"truncate": true', {"truncate": True}),
    (
        "/similarity",
        {"inputs": {"source_sentence": LONG, "sentences": ["a"]}},
        '"parameters": {"truncate": true}',
        {"parameters": {"truncate": True}},
    ),
    ("/v1/embeddings", {"input": LONG}, '"truncate": true', {"truncate": True}),
    ("/v2/embed", {"inputs": LONG, "long": "error"}, '"long": "truncate"', {"long": "truncate"}),
    ("/embed_tokens", {"inputs": LONG, "long": "error"}, '"long": "window"', {"long": "window"}),
    ("/v2/similarity", {"source": LONG, "sentences": ["a"], "long": "error"}, '"long"', {"long": "window"}),
    ("/explain", {"a": LONG, "b": "a", "long": "error"}, '"long": "truncate"', {"long": "truncate"}),
    ("/anatomy", {"text": LONG, "long": "error"}, '"long": "truncate"', {"long": "truncate"}),
    ("/attention", {"text": LONG, "long": "error", "layer": 1}, '"long": "truncate"', {"long": "truncate"}),
]


@pytest.mark.parametrize(("path", "body", "field", "fix"), TOO_LONG, ids=[t[0] for t in TOO_LONG])
def test_an_over_long_input_is_refused_naming_the_routes_own_field(
    client: TestClient, path: str, body: dict[str, Any], field: str, fix: dict[str, Any]
) -> None:
    refused = client.post(path, json=body)
    answer = refused.json()
    if path.startswith("/v1/"):
        # OpenAI refuses input over the model's context with a 400 naming the limit.
        assert refused.status_code == 400, refused.text
        assert answer["error"]["type"] == "invalid_request_error"
        assert "maximum context length is 256 tokens" in answer["error"]["message"]
    else:
        assert refused.status_code == 422, refused.text
        assert "takes at most 256" in answer["detail"]
    assert field in answer["detail"]
    if path in TEI_PATHS:
        assert answer["error_type"] == "Validation" and "long" not in answer["detail"]
    if path in ("/anatomy", "/attention"):
        assert "window" not in answer["detail"]  # these read one window: window is not theirs to offer
    accepted = client.post(path, json={**body, **fix})
    assert accepted.status_code == 200, accepted.text


def test_v1_embeddings_cuts_only_when_asked_and_counts_what_it_read(client: TestClient) -> None:
    cut = client.post("/v1/embeddings", json={"input": LONG, "truncate": True}).json()
    assert cut["usage"]["prompt_tokens"] == 256
    assert client.get("/info").json()["auto_truncate"] is False


def test_one_text_routes_report_what_they_cut(client: TestClient) -> None:
    for path, body in (("/anatomy", {"text": LONG}), ("/attention", {"text": LONG, "layer": 1})):
        answer = client.post(path, json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["n_dropped"] == 402 - 256


# Every boolean field of every route: JSON's true and false only, as TEI's own (serde) parser reads them.
BOOLEANS = [
    ("/embed", {"inputs": "a"}, "normalize"),
    ("/embed", {"inputs": "a"}, "truncate"),
    ("/embed_all", {"inputs": "a"}, "truncate"),
    ("/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b"]}, "parameters": {}}, "truncate"),
    ("/tokenize", {"inputs": "a"}, "add_special_tokens"),
    ("/decode", {"ids": [101, 102]}, "skip_special_tokens"),
    ("/v1/embeddings", {"input": "a"}, "truncate"),
    ("/v2/embed", {"inputs": "a"}, "normalize"),
    ("/v2/embed", {"inputs": "a"}, "mask_special"),
    ("/embed_tokens", {"inputs": "a"}, "words"),
    ("/v2/similarity", {"source": "a", "sentences": ["b"]}, "baseline"),
    ("/static", {"items": "bread"}, "as_words"),
    ("/static", {"items": "bread"}, "word"),
    ("/v2/embed_chunks", {"inputs": "A cat. A dog."}, "late"),
    ("/explain", {"a": "a", "b": "b"}, "exact"),
    ("/attention", {"text": "a"}, "mean_heads"),
    ("/v2/cka", {"inputs": ["a b", "c d", "e f", "g h"]}, "debiased"),
]


@pytest.mark.parametrize(("path", "body", "field"), BOOLEANS, ids=[f"{p}:{f}" for p, _, f in BOOLEANS])
@pytest.mark.parametrize("value", ["yes", 1, "true", 0])
def test_every_boolean_takes_json_true_or_false_only(
    client: TestClient, path: str, body: dict[str, Any], field: str, value: Any
) -> None:
    sent = {**body, field: value}
    if path == "/similarity":
        sent = {**body, "parameters": {field: value}}
    response = client.post(path, json=sent)
    assert response.status_code == (400 if path.startswith("/v1/") else 422), response.text  # OpenAI's 400
    assert f"{field}: Input should be a valid boolean" in response.json()["detail"]


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_api_pages_load_only_the_services_own_files(bundled: bertscope.Model, page: str) -> None:
    """/docs and /redoc work offline: every script, style and icon they name is served by the service."""
    with TestClient(create_app(bundled, settings=ServerSettings(api_key="k"))) as keyless:
        html = keyless.get(page)
        assert html.status_code == 200
        named = re.findall(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)['"]""", html.text)
        assert any(url.endswith(".js") for url in named), named
        for url in named:
            assert url.startswith("/"), f"{page} loads {url} from elsewhere"
            assert keyless.get(url).status_code == 200, url  # open without the key, like the page
        assert "http://" not in html.text and "https://" not in html.text  # no CDN, no web fonts


def _socket(base: str) -> socket.socket:
    """A raw connection to the service; the timeout only keeps a broken server from hanging the test."""
    return socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=60)


def _until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _head(length: int, path: str = "/v2/tokenize") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def test_a_stalled_body_is_answered_408_and_its_connection_closed(bundled: bertscope.Model) -> None:
    with serving(bundled, body_timeout_s=0.2) as base, _socket(base) as sock:
        sock.sendall(_head(100) + b'{"inputs": "a ')  # and then nothing
        answer = _until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"did not arrive within 0.2 s" in answer


def test_a_request_head_that_never_ends_is_cut_off(bundled: bertscope.Model) -> None:
    # The keep-alive timer (reset by every byte) is long here: only the head deadline can close these.
    with serving(bundled, header_timeout_s=0.2, keep_alive_s=600) as base:
        with _socket(base) as silent, _socket(base) as slow:
            slow.sendall(b"POST /v2/tokenize HTTP/1.1\r\nHost: test\r\n")  # one header line, no more
            assert _until_closed(slow) == b""
            assert _until_closed(silent) == b""


def _held(client: httpx.Client) -> float:
    """Bytes of request bodies the service holds now, from /metrics."""
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("bertscope_request_body_bytes_held "):
            return float(line.split()[1])
    raise AssertionError("no bertscope_request_body_bytes_held in /metrics")


def _wait_held(client: httpx.Client, wanted: float) -> None:
    while _held(client) != wanted:  # each look is a request: the condition itself, no sleep
        pass


def test_bodies_held_across_connections_share_one_budget(bundled: bertscope.Model) -> None:
    big = json.dumps({"inputs": "a " * 1900}).encode()  # ~3,800 bytes of one valid request
    # One address's share is the whole budget here: every client of the test is 127.0.0.1.
    settings = {
        "max_body_bytes": 4096,
        "max_buffered_bytes": 6000,
        "body_timeout_s": 600,
        "max_buffered_share": 1,
    }
    with serving(bundled, **settings) as base, httpx.Client(base_url=base, timeout=60) as client:
        with _socket(base) as stalled:
            stalled.sendall(_head(len(big)) + big[:-1])  # holds the bytes it sent, and stalls
            _wait_held(client, len(big) - 1)
            refused = client.post("/v2/tokenize", content=big, headers={"content-type": "application/json"})
            assert refused.status_code == 503, refused.text
            assert "--max-buffered-bytes" in refused.json()["detail"]
            assert refused.headers["retry-after"] == "600"  # a hold lasts up to --body-timeout
            # A small body still fits beside the stalled one.
            assert client.post("/v2/tokenize", json={"inputs": "a cat"}).status_code == 200
        _wait_held(client, 0)  # the stalled client left: its bytes are given back
        again = client.post("/v2/tokenize", content=big, headers={"content-type": "application/json"})
        assert again.status_code == 200, again.text


# 1,002 tokens: 7 windows of 256, each its own forward under `one_window_a_forward` (the tests below need
# 4 window forwards at least; at the engine's own 16 windows a forward that took a 7,002-token document,
# and each test ran two forwards of 4,096 tokens for one that stops between batches of any size).
DOC = "word " * 1000

# (path, a request over a budget of 300 tokens, the layers its budget counts)
OVER_BUDGET = [
    ("/v2/embed", {"inputs": "word " * 400, "long": "window"}),
    ("/embed", {"inputs": ["word " * 200, "word " * 200]}),
    ("/v1/embeddings", {"input": ["word " * 200, "word " * 200]}),
    ("/embed_tokens", {"inputs": "word " * 400, "long": "window"}),
    ("/embed_all", {"inputs": ["word " * 200, "word " * 200]}),
    ("/v2/embed_chunks", {"inputs": "word " * 400}),
    ("/explain", {"a": "word " * 400, "b": "a", "long": "window"}),
    ("/v2/similarity", {"source": "word " * 200, "sentences": ["word " * 200]}),
    # 4 texts of 12 tokens are 48 tokens, but CKA keeps 7 layers of each: 336 > 300.
    ("/v2/cka", {"inputs": ["one two three four five six seven eight nine ten"] * 4}),
]


def _forwards(client: Any) -> float:
    """Forwards the worker has run, from /metrics."""
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("bertscope_forward_texts_count "):
            return float(line.split()[1])
    raise AssertionError("no bertscope_forward_texts_count in /metrics")


@pytest.mark.parametrize(("path", "body"), OVER_BUDGET, ids=[p for p, _ in OVER_BUDGET])
def test_a_request_over_the_token_budget_is_refused_before_any_forward(
    bundled: bertscope.Model, path: str, body: dict[str, Any]
) -> None:
    with TestClient(create_app(bundled, settings=ServerSettings(max_request_tokens=300))) as budgeted:
        before = _forwards(budgeted)
        refused = budgeted.post(path, json=body)
        assert refused.status_code == 413, refused.text
        assert "(--max-request-tokens)" in refused.json()["detail"]
        assert _forwards(budgeted) == before
        limits = budgeted.get("/v2/info").json()["limits"]
        assert limits["max_request_tokens"] == 300
        assert limits["max_answer_floats"] == ServerSettings().max_answer_floats


def test_the_default_token_budget_follows_the_machines_memory(bundled: bertscope.Model) -> None:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    budget = request_token_budget(bundled)
    assert budget >= 4 * bundled.max_tokens
    assert budget * bundled.info().hidden_size * 4 * 8 <= max(memory // 8, 4 * bundled.max_tokens * 384 * 32)


def _is_window_batch(args: tuple[Any, ...]) -> bool:
    return bool(args[0].shape[1] == 256)  # a batch of the long document's windows


@pytest.fixture
def one_window_a_forward(bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled model's engine runs one 256-token window a forward (its budget, and no least rows):
    a short document then has several batch boundaries, where the worker's fairness and abandoning act.
    The app, made after this, reads the same budget for its batches (server/app.py)."""
    monkeypatch.setattr(bundled.engine, "token_budget", 256)
    monkeypatch.setattr(bundled.engine, "min_rows", 1)


def test_a_small_request_runs_between_a_long_documents_batches(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch, one_window_a_forward: None
) -> None:
    """The small request is sent once the long document's 1st batch runs; the long one's 2nd batch waits
    until the small one is queued, its 3rd until the small one has its answer: only a worker that runs
    the small request between the long one's batches gets past both."""
    settings = ServerSettings()
    app = create_app(bundled, settings=settings)
    batcher = app.state.service.batcher
    first, queued, answered = threading.Event(), threading.Event(), threading.Event()
    plain, long_batches = type(bundled.engine).forward.__get__(bundled.engine), [0]
    put = batcher.sentences

    def noted(*args: Any) -> Any:
        futures = put(*args)
        queued.set()
        return futures

    def gated(*args: Any) -> Any:
        if threading.current_thread().name == "bertscope-worker" and _is_window_batch(args):
            long_batches[0] += 1
            first.set()
            if long_batches[0] == 2:
                assert queued.wait(60), "no small request came"
            if long_batches[0] == 3:
                assert answered.wait(60), "the small request was not answered between the long one's batches"
        return plain(*args)

    monkeypatch.setattr(batcher, "sentences", noted)
    monkeypatch.setattr(bundled.engine, "forward", gated)
    with serving_app(app, settings) as base, httpx.Client(base_url=base, timeout=120) as client:
        with ThreadPoolExecutor(1) as pool:
            long = pool.submit(client.post, "/v2/embed_chunks", json={"inputs": DOC})
            assert first.wait(120), "the long document never started"
            small = client.post("/embed", json={"inputs": "a cat"})
            assert small.status_code == 200
            assert not long.done()
            answered.set()
            assert long.result().status_code == 200
    assert long_batches[0] >= 4


ABANDONED = [
    ("/v2/embed_chunks", {"inputs": DOC}),
    ("/v2/embed", {"inputs": DOC, "long": "window"}),
    ("/embed_tokens", {"inputs": DOC, "long": "window"}),
    ("/v2/cka", {"inputs": [DOC, "a b", "c d", "e f"]}),
]


@pytest.mark.parametrize(("path", "body"), ABANDONED, ids=[p for p, _ in ABANDONED])
def test_work_whose_client_left_stops_at_the_next_batch(
    bundled: bertscope.Model,
    monkeypatch: pytest.MonkeyPatch,
    one_window_a_forward: None,
    path: str,
    body: dict[str, Any],
) -> None:
    """The long request's client hangs up during its 2nd batch: no 3rd batch runs."""
    settings = ServerSettings()
    app = create_app(bundled, settings=settings)
    batcher = app.state.service.batcher
    second, left = threading.Event(), threading.Event()
    plain, long_batches = type(bundled.engine).forward.__get__(bundled.engine), [0]
    abandon = batcher.abandon

    def noted(futures: Any) -> None:
        abandon(futures)
        left.set()

    def gated(*args: Any) -> Any:
        if threading.current_thread().name == "bertscope-worker" and _is_window_batch(args):
            long_batches[0] += 1
            if long_batches[0] == 2:
                second.set()
                assert left.wait(60), "the server did not see the client leave"
        return plain(*args)

    monkeypatch.setattr(batcher, "abandon", noted)
    monkeypatch.setattr(bundled.engine, "forward", gated)
    raw = json.dumps(body).encode()
    with serving_app(app, settings) as base, httpx.Client(base_url=base, timeout=60) as client:
        with _socket(base) as sock:
            sock.sendall(_head(len(raw), path) + raw)
            assert second.wait(120), "the long request never reached its 2nd batch"
        # each look is a request: the condition itself, no sleep; a worker that never stops the abandoned
        # work fails here after its 2nd batch ran on (the gate above lets it go), rather than hanging
        stopped, deadline = False, time.monotonic() + 120
        while not stopped and time.monotonic() < deadline:
            stopped = "bertscope_abandoned_work_stopped_total 1.0" in client.get("/metrics").text
        assert stopped, "the abandoned work was never counted as stopped"
    assert long_batches[0] == 2
