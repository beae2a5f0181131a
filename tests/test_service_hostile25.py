"""The service under hostile clients (audit 25d): a refused connection's 503 is read, not reset away (a
lingering close); an answer given before its body is read closes the connection; a UTF-16 or UTF-32 body
is a 400 on every route; OpenAI's errors name their field in `param`; the Host header is parsed strictly.

Every test waits on an answer or a closed socket, never on a clock."""

from __future__ import annotations

import socket

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import ServerSettings, create_app
from test_server_audit18_connections import capped, everything, served

JSON = {"content-type": "application/json"}
BODY = b'{"inputs": "a cat"}'


def _post(path: str, body: bytes, *, length: int | None = None, extra: bytes = b"") -> bytes:
    size = len(body) if length is None else length
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n".encode()
        + extra
        + b"\r\n"
        + body
    )


def test_a_refused_connection_whose_request_is_in_reads_its_503(bundled: bertscope.Model) -> None:
    """It was reset: the request's bytes unread in the socket as the server closed it made the kernel send
    a reset, which discarded the 503 (http.client: BrokenPipeError, httpx: ReadError)."""
    with capped(bundled, 2) as (port, app):
        held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(2)]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as third:
                # a body larger than the socket takes at once: most of it arrives after the 503 is sent
                third.sendall(_post("/embed", b'{"inputs": "' + b"a" * 300_000 + b'"}'))
                answer = everything(third)  # no ConnectionResetError: the server read what came, then closed
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503 "), answer[:200]
            assert b"retry-after: 1" in head.lower()
            assert b'"error_type": "Overloaded"' in body and body.endswith(b"}")
            metrics = app.state.service.batcher.metrics.registry
            assert metrics.get_sample_value("bertscope_connections_refused_total") == 1
            held[0].sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert everything(held[0]).startswith(b"HTTP/1.1 200 ")
        finally:
            for sock in held:
                sock.close()


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (_post("/embed", b"", length=99_999_999_999), b"413"),  # declared over --max-body-bytes, none sent
        (_post("/v2/embed", b"", length=5_000_000), b"413"),
        (_post("/embed", b"\x1f\x8b" + b"0" * 20, extra=b"Content-Encoding: gzip\r\n"), b"415"),
    ],
    ids=["413-tei", "413-own", "415-encoding"],
)
def test_an_answer_before_the_body_is_read_closes_the_connection(
    bundled: bertscope.Model, request_bytes: bytes, status: bytes
) -> None:
    """The 413 kept the connection open (no Connection: close) until --header-timeout, reading and dropping
    whatever body came; nginx closes it. The test's header timeout is far above its run: only the close
    ends `everything`, and the answer must say it."""
    with (
        served(bundled, header_timeout_s=300.0) as (port, _),
        socket.create_connection(("127.0.0.1", port), timeout=60) as sock,
    ):
        sock.sendall(request_bytes)
        answer = everything(sock)
    head = answer.partition(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"http/1.1 " + status), answer[:300]
    assert b"connection: close" in head
    assert answer.count(b"HTTP/1.1 ") == 1


def test_a_wrong_key_with_a_body_closes_and_without_keeps_the_connection(bundled: bertscope.Model) -> None:
    with TestClient(create_app(bundled, settings=ServerSettings(api_key="secret"))) as client:
        with_body = client.post("/embed", content=BODY, headers=JSON)
        bare = client.get("/info")
    assert with_body.status_code == 401 and with_body.headers["connection"] == "close"
    assert bare.status_code == 401 and "connection" not in bare.headers


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-16-be", "utf-32-le"])
@pytest.mark.parametrize("path", ["/v2/embed", "/v2/tokenize", "/embed", "/v1/embeddings"])
def test_a_utf16_or_utf32_body_is_a_400_on_every_route(
    bundled: bertscope.Model, encoding: str, path: str
) -> None:
    """bertscope's own routes answered 200: FastAPI's json.loads reads UTF-16 and UTF-32 bytes."""
    field = "input" if path == "/v1/embeddings" else "inputs"
    with TestClient(create_app(bundled)) as client:
        refused = client.post(path, content=f'{{"{field}": "a cat"}}'.encode(encoding), headers=JSON)
        assert refused.status_code == 400, refused.text
        assert refused.json()["detail"] == "body: not UTF-8 JSON; send a JSON object encoded as UTF-8"
        assert client.post(path, content=f'{{"{field}": "a cat"}}'.encode(), headers=JSON).status_code == 200


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": ["x"], "encoding_format": "base65"}, "encoding_format"),
        ({"input": "a", "dimensions": 100_000}, "dimensions"),
        ({"input": "a", "dimensions": 0}, "dimensions"),
        ({"model": "m"}, "input"),
        ({"input": [[]]}, "input"),
        ({"input": "a", "normalize": False}, "normalize"),
        ({"input": "word " * 2_000}, "input"),  # over the model's context
        ([1], None),  # no field is at fault: the body is no object
    ],
)
def test_openai_errors_name_their_field_in_param(
    bundled: bertscope.Model, body: object, param: object
) -> None:
    """It was always null; OpenAI names the offending field and its client shows it as `e.param`."""
    with TestClient(create_app(bundled)) as client:
        refused = client.post("/v1/embeddings", json=body)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == param, refused.json()


def test_an_openai_error_of_no_field_keeps_param_null(bundled: bertscope.Model) -> None:
    with TestClient(create_app(bundled, settings=ServerSettings(api_key="secret"))) as client:
        refused = client.post("/v1/embeddings", json={"input": "a"})
        garbled = client.post(
            "/v1/embeddings", content=b'{"input": ', headers={"X-API-Key": "secret", **JSON}
        )
    assert refused.status_code == 401 and refused.json()["error"]["param"] is None
    assert garbled.status_code == 400 and garbled.json()["error"]["param"] is None


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:80@evil.com", 400),  # was answered: everything before the last ':' was the name
        ("localhost:abc", 400),
        ("127.0.0.1:80:90", 400),
        ("evil.com#@localhost", 400),
        ("localhost..", 400),
        ("[::1]x", 400),
        ("localhost.", 200),  # was refused: one trailing dot is the same name written absolute
        ("localhost.:8080", 200),
        ("LOCALHOST:8080", 200),
        ("[::1]:8080", 200),
        ("127.0.0.1", 200),
    ],
)
def test_the_host_header_is_parsed_strictly(bundled: bertscope.Model, host: str, status: int) -> None:
    from bertscope.server.hosts import guard_loopback

    app = create_app(bundled)
    guard_loopback(app, "127.0.0.1")
    with TestClient(app) as client:
        answered = client.get("/health", headers={"Host": host})
    assert answered.status_code == status, answered.text
    if status == 400:
        assert "the Host header names" in answered.json()["detail"]


def test_a_lingering_connection_does_not_count_against_the_cap(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection closing as nginx's lingering close holds no place under --max-connections: refusals
    and 413s of one client cannot lock others out while their connections linger. The server's side of
    the lingering connection is checked still open (lingering) while the third is answered: a test that
    ran after it closed would prove nothing."""
    from bertscope.server import connection

    lingered: list[connection.HeadTimedH11Protocol] = []
    linger = connection.HeadTimedH11Protocol.linger

    def noted(protocol: connection.HeadTimedH11Protocol) -> None:
        lingered.append(protocol)
        linger(protocol)

    monkeypatch.setattr(connection.HeadTimedH11Protocol, "linger", noted)
    # neither the linger's bounds nor the head timeout can end it during the test
    monkeypatch.setattr(connection, "LINGER_S", 600.0)
    monkeypatch.setattr(connection, "LINGER_IDLE_S", 600.0)
    with served(bundled, max_connections=2, connection_share=1.0, header_timeout_s=300.0) as (port, _):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as held:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as lingering:
                lingering.sendall(_post("/embed", b"", length=99_999_999_999))
                assert everything(lingering).startswith(b"HTTP/1.1 413 ")  # its end came: it lingers
                with socket.create_connection(("127.0.0.1", port), timeout=30) as third:
                    third.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                    assert everything(third).startswith(b"HTTP/1.1 200 ")
                (protocol,) = lingered
                # still open on the server's side, lingering, as the third was answered
                assert protocol.lingering is not None and protocol in protocol.lingering
            held.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert everything(held).startswith(b"HTTP/1.1 200 ")


def test_a_foreign_host_with_a_body_closes_the_connection(bundled: bertscope.Model) -> None:
    """The Host refusal comes before the body is read: like the 413, it closes rather than read it."""
    from bertscope.server.hosts import guard_loopback

    app = create_app(bundled)
    guard_loopback(app, "127.0.0.1")
    with TestClient(app) as client:
        with_body = client.post("/v2/embed", content=BODY, headers={"Host": "evil.com", **JSON})
        bare = client.get("/health", headers={"Host": "evil.com"})
    assert with_body.status_code == 400 and with_body.headers["connection"] == "close"
    assert bare.status_code == 400 and "connection" not in bare.headers
