"""A chunked body dripped a byte a chunk is refused at the connection (audit finding 3): h11 parses each
chunk inside the protocol, so the connection counts them as they are parsed and answers 400 once a body
has more than 1024 of them averaging under 64 bytes (`bodies.reading`'s rule), the rest left unparsed.
Ordinary chunked uploads are read whole.

Every test waits on a condition (an answer, a closed socket, a metric), never on a clock.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import bertscope
from test_server import serving
from test_server_limits import _socket, _until_closed, _wait_held

BODY = json.dumps({"inputs": "a cat sat on the mat " * 400}).encode()  # ~8,400 bytes


@pytest.fixture(scope="module")
def base(bundled: bertscope.Model) -> Iterator[str]:
    """The service, a body's deadline long enough that only the connection's count can refuse a drip."""
    with serving(bundled, body_timeout_s=600) as url:
        yield url


def _chunked_head(path: str = "/v2/tokenize", *, close: bool = False) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Transfer-Encoding: chunked\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n"
    ).encode()


def _chunks(body: bytes, size: int) -> bytes:
    """`body` as chunks of `size` bytes, and the last (empty) chunk."""
    pieces = (body[at : at + size] for at in range(0, len(body), size))
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


def _answers(raw: bytes) -> list[tuple[int, dict[str, Any]]]:
    """The status and JSON body of each answer in `raw` (answers with a Content-Length, one after another)."""
    found = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        fields = dict(line.lower().split(": ", 1) for line in lines[1:])
        length = int(fields["content-length"])
        found.append((int(lines[0].split()[1]), json.loads(rest[:length])))
        raw = rest[length:]
    return found


def _refused_as_a_drip(raw: bytes) -> dict[str, Any]:
    assert raw.startswith(b"HTTP/1.1 400 "), raw[:300]
    assert b"\r\nconnection: close\r\n" in raw.partition(b"\r\n\r\n")[0].lower()
    [(status, answer)] = _answers(raw)
    detail = answer["detail"]
    assert "send the body in larger chunks" in detail and "\n" not in detail, detail
    return answer


@pytest.mark.parametrize("path", ["/v2/tokenize", "/v1/embeddings"])
def test_a_body_dripped_a_byte_a_chunk_is_answered_400_before_it_ends(base: str, path: str) -> None:
    with _socket(base) as sock:
        # 2,000 one-byte chunks and no last chunk: the body has not ended, and the deadline is 600 s.
        sock.sendall(_chunked_head(path) + b"1\r\nx\r\n" * 2000)
        answer = _refused_as_a_drip(_until_closed(sock))
    # Counted as h11 parsed them: the 1,025th chunk is refused; the 975 behind it were never parsed.
    said = "request body: 1,025 bytes arrived in 1,025 pieces (about 1 byte each)"
    assert answer["detail"].startswith(said), answer["detail"]
    if path.startswith("/v1/"):  # the app's own error shape for the path
        assert answer["error"]["type"] == "invalid_request_error"
    with httpx.Client(base_url=base, timeout=60) as http:
        assert http.get("/health").status_code == 200
        _wait_held(http, 0)  # the app's reading ended and gave its bytes back


def _send_until_refused(sock: socket.socket, wire: bytes) -> int:
    """Send `wire` a slice at a time until the server stops taking it; the bytes it took."""
    sent = 0
    try:
        while sent < len(wire):
            sent += sock.send(wire[sent : sent + 65536])
    except OSError:  # reset or broken pipe: the server closed with the rest unread
        pass
    return sent


def _until_closed_or_reset(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def test_a_large_drip_is_refused_and_its_answer_read_whole(base: str) -> None:
    wire = _chunked_head() + b"1\r\nx\r\n" * 4_000_000  # 24 MB on the wire, no last chunk
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)  # the client holds little itself
        sock.settimeout(60)
        sock.connect(("127.0.0.1", int(base.rsplit(":", 1)[1])))
        _send_until_refused(sock, wire)
        # The refusal comes at the first pieces; the connection then closes lingering (as nginx's, 30 s
        # at most, 5 s idle: server/connection.py), reading and dropping the rest unbuffered, so the
        # answer reaches the client whole where a close with bytes unread had the kernel reset it away.
        _refused_as_a_drip(_until_closed_or_reset(sock))
    with httpx.Client(base_url=base, timeout=60) as http:
        _wait_held(http, 0)  # nothing of the drip is held once its connection is gone


def _tokenized(raw: bytes) -> dict[str, Any]:
    [(status, answer)] = _answers(raw)
    assert status == 200, answer
    return answer


def test_chunked_uploads_in_ordinary_chunks_are_read_whole(base: str) -> None:
    with httpx.Client(base_url=base, timeout=60) as http:
        whole = http.post("/v2/tokenize", content=BODY, headers={"content-type": "application/json"})
        assert whole.status_code == 200, whole.text[:300]
        for size in (16384, 100):  # httpx sends a generator's pieces as chunks
            pieces = (BODY[at : at + size] for at in range(0, len(BODY), size))
            chunked = http.post("/v2/tokenize", content=pieces, headers={"content-type": "application/json"})
            assert chunked.status_code == 200 and chunked.json() == whole.json(), chunked.text[:300]
    # Many chunks of 100 bytes, and a few of one byte: neither is a drip.
    many = json.dumps({"inputs": "a cat " * 34000}).encode()  # ~204,000 bytes: 2,040 chunks of 100
    for body, size in ((many, 100), (b'{"inputs": "a cat"}', 1)):
        with _socket(base) as sock:
            sock.sendall(_chunked_head(close=True) + _chunks(body, size))
            assert _tokenized(_until_closed(sock))["items"]


def test_the_count_starts_again_with_each_request_on_a_connection(base: str) -> None:
    small = json.dumps({"inputs": "a cat " * 140}).encode()  # 854 one-byte chunks a request
    assert 800 < len(small) < 1024  # under the count alone; three of them are over it together
    pipelined = (_chunked_head() + _chunks(small, 1)) * 2 + _chunked_head(close=True) + _chunks(small, 1)
    with _socket(base) as sock:
        sock.sendall(pipelined)
        answers = _answers(_until_closed(sock))
    assert [status for status, _ in answers] == [200, 200, 200], answers
