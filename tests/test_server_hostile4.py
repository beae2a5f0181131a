"""The service under hostile clients, fourth part: bodies take the budget as their bytes arrive (a
Content-Length alone takes nothing), one client address holds at most its share, a body dripped a few
bytes a piece is refused, bodies JSON or TEI cannot read get a one-line 400 (no 500, no traceback),
OpenAI's statuses and codes on /v1/, errors that name their fix, and freed heap handed back once a
request's answer is free.

Every test waits on a condition (an answer, a closed socket, a metric), never on a clock.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import ServerSettings, answers, bodies, create_app
from test_server import serving
from test_server_limits import _head, _held, _socket, _until_closed, _wait_held

JSON = {"content-type": "application/json"}
HUGE = "1" + "0" * 5000  # an integer of 5,001 digits: over Python's 4,300


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    with TestClient(create_app(bundled, settings=ServerSettings())) as made:
        yield made


def _one_line(response: httpx.Response, status: int, says: str) -> dict[str, Any]:
    assert response.status_code == status, response.text[:300]
    answer: dict[str, Any] = response.json()
    assert says in answer["detail"] and "\n" not in answer["detail"], answer["detail"][:300]
    return answer


# Finding 2: a declared length is a promise, not bytes.


def test_a_declared_length_takes_no_budget_until_its_bytes_arrive(bundled: bertscope.Model) -> None:
    settings = {"max_body_bytes": 4096, "max_buffered_bytes": 6000, "body_timeout_s": 600}
    with serving(bundled, **settings) as base, httpx.Client(base_url=base, timeout=60) as http:
        stalled = [_socket(base) for _ in range(16)]
        try:
            for sock in stalled:  # 16 x 4,000 bytes declared: ten times the budget, one byte sent each
                sock.sendall(_head(4000) + b"{")
            _wait_held(http, 16)  # the bytes that arrived, not 64,000 declared
            assert http.post("/v2/tokenize", json={"inputs": "a cat"}).status_code == 200
            assert _held(http) == 16
        finally:
            for sock in stalled:
                sock.close()
        _wait_held(http, 0)


def test_reading_holds_the_bytes_that_arrived_not_the_length_declared() -> None:
    async def run() -> tuple[int, bytes, int]:
        budget = bodies.BodyBudget(10_000)
        gate = asyncio.Event()
        sent = iter([b'{"inputs": ', b'"a cat"}'])

        async def receive() -> dict[str, Any]:
            piece = next(sent)
            if piece.startswith(b'"'):
                await gate.wait()  # the rest has not arrived yet
            return {"type": "http.request", "body": piece, "more_body": not piece.startswith(b'"')}

        async def read() -> bytes:
            async with bodies.reading(receive, 4000, settings=ServerSettings(), budget=budget) as body:
                return body

        task = asyncio.ensure_future(read())
        while budget.held == 0:  # the first piece is in
            await asyncio.sleep(0)
        waiting = budget.held
        gate.set()
        return waiting, await task, budget.held

    waiting, body, after = asyncio.run(run())
    assert (waiting, body, after) == (11, b'{"inputs": "a cat"}', 0)


def test_one_client_address_holds_at_most_its_share_of_the_budget(bundled: bertscope.Model) -> None:
    big = json.dumps({"inputs": "a " * 1900}).encode()  # ~3,800 bytes of one valid request
    settings = {
        "max_body_bytes": 4096,
        "max_buffered_bytes": 8000,
        "max_buffered_share": 0.5,
        "body_timeout_s": 600,
    }
    with serving(bundled, **settings) as base, httpx.Client(base_url=base, timeout=60) as http:
        with _socket(base) as stalled:
            stalled.sendall(_head(len(big)) + big[:-1])  # all but its last byte, and it stalls
            _wait_held(http, len(big) - 1)
            refused = http.post("/v2/tokenize", content=big, headers=JSON)  # the same address again
            answer = _one_line(refused, 503, "this client (127.0.0.1) holds")
            assert "--max-buffered-share" in answer["detail"]
            assert refused.headers["retry-after"] == "600"  # a hold lasts up to --body-timeout
            # Another address has the rest of the budget (127.0.0.2 is loopback too).
            other = httpx.HTTPTransport(local_address="127.0.0.2")
            with httpx.Client(base_url=base, timeout=60, transport=other) as neighbour:
                assert neighbour.post("/v2/tokenize", content=big, headers=JSON).status_code == 200
        _wait_held(http, 0)


def test_a_body_over_a_clients_share_but_within_max_body_bytes_is_taken(bundled: bertscope.Model) -> None:
    # Review finding 5: a share below --max-body-bytes refused such a body forever, on an idle service.
    settings = ServerSettings(max_body_bytes=4000, max_buffered_bytes=4000)  # a share of 2,000 bytes
    with TestClient(create_app(bundled, settings=settings)) as client:
        answered = client.post("/v2/embed", json={"inputs": ["word " * 600]})  # about 3,000 bytes
        assert answered.status_code == 200, answered.text[:300]


def test_a_clients_share_holds_one_whole_body_and_no_more() -> None:
    async def run() -> str:
        budget = bodies.BodyBudget(4000, share=0.5)  # a share of 2,000 bytes, less than one body
        settings = ServerSettings(max_body_bytes=3000, max_buffered_bytes=4000)

        def sending(size: int) -> Any:
            async def receive() -> dict[str, Any]:
                return {"type": "http.request", "body": b"x" * size, "more_body": False}

            return receive

        async with bodies.reading(sending(3000), None, settings=settings, budget=budget, peer="A") as body:
            assert len(body) == 3000 and budget.per_peer == {"A": 3000}
            with pytest.raises(bodies.BodyRefused) as refused:  # one whole body is all A may hold
                async with bodies.reading(sending(500), None, settings=settings, budget=budget, peer="A"):
                    pass
            async with bodies.reading(sending(500), None, settings=settings, budget=budget, peer="B"):
                assert budget.held == 3500 and budget.per_peer == {"A": 3000, "B": 500}
        assert budget.held == 0 and budget.per_peer == {}
        return str(refused.value)

    said = asyncio.run(run())
    assert "this client (A) holds 3,000 bytes" in said and "its share, 3,000 bytes (one whole body" in said


def test_a_share_outside_zero_to_one_is_refused_naming_it() -> None:
    for share in (0.0, 1.5):
        with pytest.raises(bertscope.InvalidSpec, match="max_buffered_share is"):
            ServerSettings(max_buffered_share=share)


# Finding 3: reading costs what the bytes cost.


def _dripping(pieces: list[bytes]) -> Any:
    sent = iter(enumerate(pieces, 1))

    async def receive() -> dict[str, Any]:
        count, piece = next(sent)
        return {"type": "http.request", "body": piece, "more_body": count < len(pieces)}

    return receive


def _read(pieces: list[bytes]) -> bytes:
    async def run() -> bytes:
        budget = bodies.BodyBudget(1 << 20)
        receive = _dripping(pieces)
        async with bodies.reading(receive, None, settings=ServerSettings(), budget=budget) as body:
            return body

    return asyncio.run(run())


def test_a_body_dripped_a_few_bytes_a_piece_is_refused_naming_the_fix() -> None:
    with pytest.raises(bodies.BodyRefused) as refused:
        _read([b"x"] * 5000)
    assert refused.value.status == 400 and refused.value.headers == {"Connection": "close"}
    assert "send the body in larger chunks" in str(refused.value) and "\n" not in str(refused.value)
    # Pieces of a reasonable size, many of them, are read whole; so are a few tiny ones.
    assert _read([b"y" * 100] * 2000) == b"y" * 200_000
    assert _read([b"z"] * 100) == b"z" * 100


def test_a_body_is_read_under_one_deadline_not_a_timer_per_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_wait_for(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("asyncio.wait_for per piece")

    monkeypatch.setattr(asyncio, "wait_for", no_wait_for)
    assert _read([b"w" * 64] * 300) == b"w" * 64 * 300


def test_a_stalled_body_is_answered_408_naming_the_fix(bundled: bertscope.Model) -> None:
    with serving(bundled, body_timeout_s=0.2) as base, _socket(base) as sock:
        sock.sendall(_head(100) + b'{"inputs": "a ')  # and then nothing
        answer = _until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert (
        b"did not arrive within 0.2 s; send the whole body within --body-timeout seconds, or raise" in answer
    )


# Finding 7: integers Python will not read.

DIGITS = [
    ("/embed", {"inputs": "a", "dimensions": HUGE}),
    ("/decode", {"ids": [HUGE]}),
    ("/v1/embeddings", {"input": "a", "foo": HUGE}),
    ("/v2/embed", {"inputs": "a", "stride": HUGE}),
    ("/static", {"items": "bread", "k": HUGE}),
]


@pytest.mark.parametrize(("path", "body"), DIGITS, ids=[p for p, _ in DIGITS])
def test_an_integer_of_too_many_digits_is_a_one_line_400(
    client: TestClient, caplog: pytest.LogCaptureFixture, path: str, body: dict[str, Any]
) -> None:
    raw = json.dumps(body).replace(f'"{HUGE}"', HUGE).encode()  # the number bare, not a string
    with caplog.at_level(logging.WARNING, logger="bertscope"):
        refused = client.post(path, content=raw, headers=JSON)
    answer = _one_line(refused, 400, "a number has more than 4300 digits")
    assert "send a smaller number" in answer["detail"] and "UTF-8" not in answer["detail"]
    if not path.startswith(("/v1/", "/v2/", "/static")):  # TEI's routes: a 400 is Empty only for empty input
        assert answer["error_type"] == "Validation"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.mark.parametrize("path", ["/v2/embed", "/embed"])
def test_only_a_body_that_is_not_utf8_is_called_not_utf8(client: TestClient, path: str) -> None:
    refused = client.post(path, content=b'{"inputs": "caf\xe9"}', headers=JSON)
    _one_line(refused, 400, "not UTF-8 JSON")


# Finding 11: what serde_json refuses, TEI's routes refuse.

NOT_JSON = [
    ("/v1/embeddings", b'{"input": "a", "foo": Infinity}', "Infinity is not JSON"),
    ("/embed", b'{"inputs": "a", "dimensions": NaN}', "NaN is not JSON"),
    ("/embed", b'{"inputs": "a", "dimensions": -Infinity}', "-Infinity is not JSON"),
    ("/embed", b'{"inputs": "a\\ud800b"}', "lone surrogate escape (\\ud800)"),
    ("/tokenize", b'{"inputs": ["a", "\\udc00"]}', "lone surrogate escape (\\udc00)"),
    ("/v1/embeddings", b'{"input": "\\ud83d"}', "lone surrogate escape (\\ud83d)"),
]


@pytest.mark.parametrize(("path", "body", "says"), NOT_JSON, ids=[s for _, _, s in NOT_JSON])
def test_tei_routes_refuse_what_serde_json_refuses(
    client: TestClient, path: str, body: bytes, says: str
) -> None:
    answer = _one_line(client.post(path, content=body, headers=JSON), 400, says)
    assert "send" in answer["detail"]


def test_a_surrogate_pair_and_an_escaped_backslash_are_taken(client: TestClient) -> None:
    pair = client.post("/tokenize", content=b'{"inputs": "a \\ud83d\\ude00"}', headers=JSON)
    assert pair.status_code == 200, pair.text[:300]
    text = client.post("/tokenize", content=b'{"inputs": "a \\\\ud800"}', headers=JSON)  # the text \ud800
    assert text.status_code == 200, text.text[:300]


# Finding 12: OpenAI's statuses and codes on /v1/.

OPENAI_INVALID = [
    {"input": []},
    {"input": "a", "encoding_format": "float16"},
    {"input": "a", "dimensions": True},
    {"input": "a", "dimensions": 999},
]


@pytest.mark.parametrize("body", OPENAI_INVALID, ids=[json.dumps(b) for b in OPENAI_INVALID])
def test_v1_answers_an_invalid_request_400_with_a_string_or_null_code(
    client: TestClient, body: dict[str, Any]
) -> None:
    answer = client.post("/v1/embeddings", json=body)
    assert answer.status_code == 400, answer.text[:300]
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] is None, error


def test_v1_codes_are_openais_strings(bundled: bertscope.Model, client: TestClient) -> None:
    long = client.post("/v1/embeddings", json={"input": "bread " * 400})
    assert long.status_code == 400 and long.json()["error"]["code"] == "context_length_exceeded"
    with TestClient(create_app(bundled, settings=ServerSettings(api_key="secret"))) as keyed:
        refused = keyed.post("/v1/embeddings", json={"input": "a"})
    error = refused.json()["error"]
    assert refused.status_code == 401 and (error["type"], error["code"]) == (
        "invalid_request_error",  # as OpenAI sends "Incorrect API key provided" (audit 18a-9)
        "invalid_api_key",
    )


# Finding 13: errors that name their fix.


def test_a_wrong_method_is_told_the_method_to_use(client: TestClient) -> None:
    answer = _one_line(client.get("/embed"), 405, "method GET is not allowed on /embed; send it as POST")
    assert answer["error_type"] == "Validation"
    _one_line(client.put("/v2/embed", json={}), 405, "send it as POST")


@pytest.mark.parametrize("path", ["/embed", "/v2/embed", "/v1/embeddings"])
def test_a_compressed_body_is_refused_415_naming_its_encoding(client: TestClient, path: str) -> None:
    body = gzip.compress(json.dumps({"inputs": "a cat", "input": "a cat"}).encode())
    refused = client.post(path, content=body, headers={**JSON, "content-encoding": "gzip"})
    _one_line(refused, 415, "Content-Encoding: gzip, which the service does not read; send it uncompressed")
    plain = client.post(
        path, content=b'{"inputs": "a cat"}', headers={**JSON, "content-encoding": "identity"}
    )
    assert plain.status_code != 415


# Finding 8: freed heap handed back once the answer is free, not while it is still held.


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[tuple[int, int]], threading.Event]]:
    """Each hand-back of freed heap, as (arrays of answers still alive, arrays made), and an event set
    at the first; the threshold lowered so any answer's bytes pass it."""
    arrays: list[weakref.ref[np.ndarray]] = []
    made = answers.Rows.__init__

    def tracked(self: answers.Rows, array: Any, **kwargs: Any) -> None:
        made(self, array, **kwargs)
        arrays.append(weakref.ref(self.array))

    released: list[tuple[int, int]] = []
    first = threading.Event()

    def release() -> None:
        released.append((sum(ref() is not None for ref in arrays), len(arrays)))
        first.set()

    monkeypatch.setattr(answers.Rows, "__init__", tracked)
    monkeypatch.setattr(bodies, "_TRIM_AFTER", 1024)
    monkeypatch.setattr(bodies, "release_freed_memory", release)
    yield released, first


def test_freed_heap_is_handed_back_after_an_answer_is_free(
    bundled: bertscope.Model, trims: tuple[list[tuple[int, int]], threading.Event]
) -> None:
    released, first = trims
    with TestClient(create_app(bundled, settings=ServerSettings(max_inputs=1024))) as local:
        streamed = local.post("/v2/embed", json={"inputs": [f"text {i}" for i in range(500)]})
        assert streamed.status_code == 200 and len(streamed.json()["vectors"]) == 500
    assert first.is_set() and released[0] == (0, 1)  # the answer's array was free by then


def test_an_answer_abandoned_mid_stream_lets_go_of_its_arrays() -> None:
    """A client gone mid-answer: the parts not yet written (and the arrays behind them) are dropped at once,
    even while the answer object itself stays referenced (by the cancelled task's traceback)."""
    import asyncio
    import gc
    import weakref

    import numpy as np

    from bertscope.server.answers import StreamedAnswer

    class Arrays:
        def __init__(self) -> None:
            self.data = np.zeros(1 << 20, dtype=np.float32)

    arrays = Arrays()
    watched = weakref.ref(arrays)

    def parts(held: Arrays) -> Iterator[bytes]:
        for _ in range(4):
            yield held.data[:8].tobytes()

    rest = parts(arrays)
    del arrays
    streamed = StreamedAnswer(next(rest), rest, held=1)
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            raise OSError("the client went away")

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    with pytest.raises(OSError, match="went away"):
        asyncio.run(streamed({"type": "http", "path": "/embed_all"}, receive, send))
    del rest
    gc.collect()
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert watched() is None  # the answer object is still here; its arrays are not
