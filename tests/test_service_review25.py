"""The service's hostile-client fixes, reviewed (audit 25d's review): a body far over the limit reads its
413 (the lingering close bounded by time, not bytes), pipelined requests behind an answer that closes are
lingered through, an allowed host is read as the Host header is, a UTF-16 body does not hide 404 or 405,
and OpenAI's `param` names `input` for every error of its texts.

Every test waits on an answer or a closed socket, never on a clock."""

from __future__ import annotations

import http.client
import socket
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app as cli_app
from bertscope.server import connection, create_app
from bertscope.server.hosts import guard_loopback
from test_server_audit18_connections import everything, served

_GET = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def test_a_body_far_over_the_limit_reads_its_413(bundled: bertscope.Model) -> None:
    """http.client writes the whole body before it reads: the lingering close stopped reading after 1 MiB
    and closed, and the rest of the body met a reset (BrokenPipeError), the 413 unread."""
    with served(bundled, max_body_bytes=1_000_000) as (port, _):
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            client.request(
                "POST", "/v2/embed", body=b"x" * 12_000_000, headers={"Content-Type": "application/json"}
            )
            answer = client.getresponse()
            assert answer.status == 413, answer.read()
            assert answer.getheader("connection") == "close"
        finally:
            client.close()


def test_requests_pipelined_behind_an_answer_that_closes_are_lingered_through(
    bundled: bertscope.Model,
) -> None:
    """A complete request answered 401 (Connection: close: it had a body) with 20,000 GETs pipelined behind
    it: they were unread as the connection closed, and the reset discarded the 401."""
    request = (
        b"POST /v2/embed HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b'Content-Length: 14\r\n\r\n{"inputs":"a"}'
    )
    with (
        served(bundled, api_key="secret", header_timeout_s=300.0) as (port, _),
        socket.create_connection(("127.0.0.1", port), timeout=60) as sock,
    ):
        sock.sendall(request + _GET * 20_000)
        answer = everything(sock)  # no ConnectionResetError: the server read the GETs, then closed
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:300]
    assert answer.count(b"HTTP/1.1 ") == 1


class _Clock:
    """A loop's clock and timers, moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0
        self.due: float | None = None

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: object) -> str:
        self.due = when
        return "timer"


def test_a_lingering_connection_closes_when_idle_or_when_its_time_is_up() -> None:
    """Bounded by time as nginx's lingering_time (in all) and lingering_timeout (without a byte)."""
    clock = _Clock()
    closed: list[bool] = []
    lingering = SimpleNamespace(
        loop=clock,
        _raw=SimpleNamespace(close=lambda: closed.append(True)),
        _linger_heard=clock.now,
        _linger_until=clock.now + connection.LINGER_S,
        _linger_timer=None,
        _linger_check=None,
    )
    lingering._linger_check = lambda: connection.HeadTimedH11Protocol._linger_check(lingering)  # type: ignore[arg-type]
    # bytes keep coming: checked again at the next idle bound, open until the total bound
    step = connection.LINGER_IDLE_S * 0.75
    while clock.now + step < lingering._linger_until:
        lingering._linger_heard = clock.now  # a byte came
        clock.now += step
        lingering._linger_check()
        assert not closed and clock.due is not None and clock.due > clock.now
    clock.now = lingering._linger_until
    lingering._linger_check()
    assert closed == [True]
    # no byte for the idle bound: closed then
    closed.clear()
    lingering._linger_heard, lingering._linger_until = clock.now, clock.now + connection.LINGER_S
    clock.now += connection.LINGER_IDLE_S
    lingering._linger_check()
    assert closed == [True]
    assert connection.LINGER_S >= 30 and connection.LINGER_IDLE_S >= 5  # nginx's: a slow uplink's body


@pytest.mark.parametrize(
    ("allow", "host"),
    [
        ("api.example.com.", "api.example.com."),  # was refused: the header's dot was dropped, not the name's
        ("api.example.com.", "api.example.com"),
        ("API.example.com", "api.example.com:443"),
        ("api.example.com:8080", "api.example.com:8080"),  # never matched: the port stayed in the name
        ("[fd00::1]", "[fd00::1]:80"),  # never matched: the brackets stayed
        ("fd00:0::1", "[FD00::1]"),
    ],
)
def test_an_allowed_host_is_read_as_the_host_header_is(
    bundled: bertscope.Model, allow: str, host: str
) -> None:
    app = create_app(bundled)
    guard_loopback(app, "127.0.0.1", allow=[allow])
    with TestClient(app) as client:
        answered = client.get("/health", headers={"Host": host})
        foreign = client.get("/health", headers={"Host": "evil.com"})
    assert answered.status_code == 200, answered.text
    assert foreign.status_code == 400


@pytest.mark.parametrize("allow", ["api.example.com/x", "a b", "127.0.0.1:80@evil.com"])
def test_an_allowed_host_no_header_could_carry_is_refused_at_startup(allow: str) -> None:
    # a --post that is not there is refused later, still before the model loads: the name must be refused
    # before it (and the test can never start a server)
    given = ["serve", "--allow-host", allow, "--post", "p=/nonexistent/post.json", "--port", "0"]
    result = CliRunner().invoke(cli_app, given)
    assert result.exit_code != 0
    said = str(result.exception or result.output)
    assert f"--allow-host {allow!r} is no host name" in said, said


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("POST", "/nope", 404), ("GET", "/v2/embed", 405), ("GET", "/health", 200), ("POST", "/health", 405)],
)
def test_a_utf16_body_no_route_reads_leaves_the_routers_answer(
    bundled: bertscope.Model, method: str, path: str, status: int
) -> None:
    """The UTF-8 check ran before routing: every path and method answered 400 'body: not UTF-8 JSON'."""
    with TestClient(create_app(bundled)) as client:
        body = '{"inputs": "a cat"}'.encode("utf-16")
        answered = client.request(method, path, content=body, headers={"content-type": "application/json"})
        read = client.post("/v2/embed", content=body, headers={"content-type": "application/json"})
    assert answered.status_code == status, answered.text
    assert read.status_code == 400 and "not UTF-8 JSON" in read.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"input": ""}',
        b'{"input": [""]}',
        b'{"input": "  "}',  # "text 0 is empty: ..."
        b'{"input": null}',  # "input is null: ..."
        b'{"input": {}}',  # "input is an object: ..."
        b'{"input": "a", "input": "b"}',  # "body: duplicate field `input`: ..."
    ],
)
def test_every_error_of_openais_input_names_it_in_param(bundled: bertscope.Model, body: bytes) -> None:
    """These said param null: only a message led by 'input:' named it."""
    with TestClient(create_app(bundled)) as client:
        refused = client.post("/v1/embeddings", content=body, headers={"content-type": "application/json"})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "input", refused.json()
