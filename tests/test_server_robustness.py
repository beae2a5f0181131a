"""The service under bad input and misuse (issue 13): JSON answers always, keys compared as sent."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app as cli_app
from bertscope.server import ServerSettings
from test_server import serving

SURROGATE_BODIES = [
    ("/v2/embed", {"inputs": ["fine", "\ud800"]}),
    ("/embed_tokens", {"inputs": "\ud800"}),
    ("/v1/embeddings", {"input": "\ud800"}),
    ("/v2/tokenize", {"inputs": "\ud800"}),
    ("/static", {"items": ["\ud800"]}),
    ("/anatomy", {"text": "\ud800"}),
    ("/v2/similarity", {"source": "\ud800", "sentences": ["a"]}),
    ("/explain", {"a": "fine", "b": "\ud800"}),
    ("/attention", {"text": "\ud800"}),
]


def test_a_lone_surrogate_is_a_json_422_and_the_connection_stays_usable(bundled: bertscope.Model) -> None:
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:
        for path, body in SURROGATE_BODIES:
            # json.dumps escapes the surrogate as \\ud800, as a client's JSON library would.
            response = client.post(
                path, content=json.dumps(body), headers={"content-type": "application/json"}
            )
            # TEI's serde_json refuses a lone surrogate escape as a syntax error (400), as OpenAI would.
            assert response.status_code == (400 if path == "/v1/embeddings" else 422), (path, response.text)
            assert "surrogate" in response.json()["detail"], path
            assert client.post("/v2/tokenize", json={"inputs": "still here"}).status_code == 200


def test_deeply_nested_valid_json_is_a_400_naming_the_nesting(bundled: bertscope.Model) -> None:
    """10,000 nested arrays are valid JSON that Python's parser gives up on: the answer says so, not
    "not UTF-8 JSON"; bytes that do not decode still get that line."""
    nested = "[" * 10_000 + "]" * 10_000
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:
        for path in ("/v2/embed", "/embed", "/v1/embeddings"):
            response = client.post(path, content=nested, headers={"content-type": "application/json"})
            assert response.status_code == 400, (path, response.text)
            assert "nested too deeply" in response.text and "UTF-8" not in response.text, path
        garbled = client.post("/v2/embed", content=b"\xff\xfe", headers={"content-type": "application/json"})
        assert garbled.status_code in (400, 422) and "nested" not in garbled.text


def test_an_unexpected_error_answers_json_500(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:

        def broken() -> None:
            raise RuntimeError("boom")

        monkeypatch.setattr(bundled, "info", broken)
        response = client.get("/v2/info")
        assert response.status_code == 500
        assert response.headers["content-type"].startswith("application/json")
        assert "internal error (RuntimeError)" in response.json()["detail"]
        monkeypatch.undo()
        assert client.get("/v2/info").status_code == 200


def test_api_keys_are_compared_as_sent(bundled: bertscope.Model) -> None:
    key = "clé-secrète"
    with serving(bundled, api_key=key) as base, httpx.Client(base_url=base, timeout=60) as client:
        body = {"inputs": "a cat"}
        assert client.post("/v2/tokenize", json=body).status_code == 401
        assert client.post("/v2/tokenize", json=body, headers={"X-API-Key": key.encode()}).status_code == 200
        bearer = {"Authorization": b"Bearer " + key.encode(), "X-API-Key": "wrong"}
        assert client.post("/v2/tokenize", json=body, headers=bearer).status_code == 200
        wrong = {"Authorization": "Bearer wrong", "X-API-Key": "also-wrong"}
        assert client.post("/v2/tokenize", json=body, headers=wrong).status_code == 401


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


def test_requests_that_would_cost_too_much_are_refused_before_any_work(bundled: bertscope.Model) -> None:
    with (
        serving(bundled, max_answer_floats=100_000) as base,
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        big = client.post(
            "/embed_tokens",
            json={"inputs": ["a cat sat on the mat"] * 8, "layers": "all", "combine": "concat"},
        )
        assert big.status_code == 413 and "--max-answer-floats" in big.json()["detail"]
        small = client.post("/embed_tokens", json={"inputs": "a cat", "layers": "-1"})
        assert small.status_code == 200
        wide = client.post("/v1/embeddings", json={"input": "a cat", "dimensions": 385})
        assert wide.status_code == 400 and "more than the model's 384" in wide.json()["detail"]
        coerced = client.post("/v2/embed", json={"inputs": "a cat", "layers": True, "normalize": 1})
        assert coerced.status_code == 422  # JSON true is not layer 1, 1 is not True
        for raw in (b"\xff\xfe", b"\x80"):  # bytes FastAPI cannot decode: 400 or 422, and a word on the fix
            bad = client.post("/v2/embed", content=raw, headers={"content-type": "application/json"})
            assert bad.status_code in (400, 422) and "JSON" in bad.json()["detail"], bad.text


def test_a_slow_body_gets_408_and_a_full_queue_an_honest_retry_after(bundled: bertscope.Model) -> None:
    import socket
    from urllib.parse import urlparse

    from bertscope.server.batching import Batcher, QueueFull

    with serving(bundled, body_timeout_s=0.5) as base:
        address = urlparse(base)
        with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
            head = b"POST /v2/embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            sock.sendall(head + b"Content-Length: 100\r\n\r\n{")
            received = b""
            # The server answers on its own once the deadline passes; headers and body may come apart.
            while b"did not arrive" not in received and (chunk := sock.recv(65536)):
                received += chunk
            answer = received.decode()
        assert answer.startswith("HTTP/1.1 408") and "did not arrive within 0.5 s" in answer

    batcher = Batcher(bundled, max_batch_tokens=100, max_wait_ms=0, max_queue=10)
    batcher._tokens_per_second = 50.0  # as measured by the worker on earlier batches
    text, another = bundled.engine.prepare(["a text", "another"], bundled.spec())
    batcher.sentences([([text], 3000)], bundled.spec())  # 3000 tokens waiting (no worker runs)
    with pytest.raises(QueueFull, match="tokens of work") as full:
        batcher.sentences([([another], 500)], bundled.spec())
    # Sized for this request: the 3000 count as one client's share (1600 of 3200), and the 500 past it
    # run at 50 tokens/s before there is room for them.
    assert full.value.retry_after == 10
    batcher.stop()


def test_static_neighbours_are_bounded_per_request(bundled: bertscope.Model) -> None:
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:
        many = client.post("/static", json={"inputs": ["bread"] * 20, "k": 1000})
        assert many.status_code == 413 and "neighbours" in many.json()["detail"]
        assert client.post("/static", json={"inputs": ["bread"], "k": 5}).status_code == 200


def test_anatomy_takes_one_text_or_one_pair_not_a_list(bundled: bertscope.Model) -> None:
    """Found by the fuzzer: a list of four texts reached the route and crashed it (500)."""
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:
        four = client.post("/anatomy", json={"inputs": ["a", "b", "c", "d"]})
        assert four.status_code == 422 and "inputs has 4 texts: a pair is [A, B]" in four.json()["detail"]
        pair = client.post("/anatomy", json={"inputs": ["How are you?", "Fine."]})
        assert pair.status_code == 200 and pair.json()["pair"] == "Fine."


def _metric(client: httpx.Client, name: str) -> float:
    """One unlabelled Prometheus value from /metrics (answered on the event loop, never queued)."""
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def _until(condition: Any, what: str, timeout: float = 60.0) -> None:
    """Poll `condition` until it holds; fail naming `what` after `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"


def _send_and_leave(base: str, body: dict[str, Any]) -> Any:
    """Open a raw connection, send a whole POST /embed, and return the socket (close it to leave)."""
    import socket
    from urllib.parse import urlparse

    address = urlparse(base)
    sock = socket.create_connection((address.hostname, address.port), timeout=30)
    payload = json.dumps(body).encode()
    head = (
        "POST /v2/embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    sock.sendall(head.encode() + payload)
    return sock


def _hold_first_call(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, record: Any) -> tuple[Any, Any]:
    """Patch owner.name to `record` each call's args and hold the first call until `release` is set."""
    import threading

    entered, release = threading.Event(), threading.Event()
    real = getattr(owner, name)

    def held(*args: Any, **kwargs: Any) -> Any:
        first = not entered.is_set()
        record(args)
        if first:
            entered.set()
            assert release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, held)
    return entered, release


def test_requests_whose_clients_left_are_taken_out_of_the_queue(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five clients queue behind a busy worker and hang up: none of their texts is embedded."""
    import threading

    embedded: list[str] = []
    entered, release = _hold_first_call(
        monkeypatch, bundled.engine, "fitted_sentences", lambda args: embedded.extend(t.text for t in args[0])
    )
    lines: list[logging.LogRecord] = []
    access = logging.getLogger("uvicorn.access")
    catcher = logging.Handler()
    catcher.emit = lines.append  # type: ignore[method-assign]
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:
        access.addHandler(catcher)
        monkeypatch.setattr(access, "level", logging.INFO)
        holder = threading.Thread(
            target=client.post, args=("/v2/embed",), kwargs={"json": {"inputs": "hold the worker"}}
        )
        holder.start()
        assert entered.wait(60)
        sockets = [_send_and_leave(base, {"inputs": [f"left {i}", f"gone {i}"]}) for i in range(5)]
        _until(lambda: _metric(client, "bertscope_queue_size") == 5, "5 queued requests")
        for sock in sockets:
            sock.close()
        _until(lambda: _metric(client, "bertscope_requests_abandoned_total") == 5, "5 abandoned requests")
        assert _metric(client, "bertscope_queue_size") == 0
        assert _metric(client, "bertscope_abandoned_texts_skipped_total") == 10
        release.set()
        holder.join(60)
        after = client.post("/v2/embed", json={"inputs": "still served"})
        assert after.status_code == 200
        assert embedded == ["hold the worker", "still served"]
        assert (
            'bertscope_requests_total{endpoint="/v2/embed",status="499"} 5.0' in client.get("/metrics").text
        )
        access.removeHandler(catcher)
    left = [r.getMessage() for r in lines if r.args and r.args[-1] == 499]  # type: ignore[index]
    assert len(left) == 5 and all('"POST /v2/embed HTTP/1.1" 499' in line for line in left), left


def test_a_running_request_whose_client_left_stops_after_the_forward_in_progress(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 texts in 16 forwards of 4: the client hangs up during the first, and no second one runs."""
    forwards: list[int] = []
    monkeypatch.setattr(bundled.engine, "max_batch", 4)
    entered, release = _hold_first_call(
        monkeypatch, bundled.engine, "forward", lambda args: forwards.append(len(args[0]))
    )
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:
        sock = _send_and_leave(base, {"inputs": [f"text number {i}" for i in range(64)]})
        assert entered.wait(60)
        sock.close()
        _until(lambda: _metric(client, "bertscope_requests_abandoned_total") == 1, "the abandoned request")
        release.set()
        _until(lambda: _metric(client, "bertscope_abandoned_texts_skipped_total") == 60, "60 skipped texts")
        assert forwards == [4]
        monkeypatch.setattr(bundled.engine, "max_batch", 512)
        assert client.post("/v2/embed", json={"inputs": ["a", "b"]}).status_code == 200
        assert len(forwards) == 2
