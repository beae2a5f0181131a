"""Connections (audit 20d): one client address holds at most its share of --max-connections (its idle
connections cannot lock the others out); a request with both Content-Length and Transfer-Encoding is
refused and its connection closed (RFC 9112 6.1: request smuggling).

Every test waits on an answer or a closed socket, never on a clock."""

from __future__ import annotations

import socket

import pytest

import bertscope
from bertscope.errors import InvalidSpec
from bertscope.server import ServerSettings
from test_server_audit18_connections import everything, served


def connect(port: int, address: str) -> socket.socket:
    """A connection to the service from the loopback `address` (127.0.0.0/8 is all this machine's)."""
    return socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(address, 0))


HEALTH = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def test_one_address_holds_at_most_its_share_of_the_connections(bundled: bertscope.Model) -> None:
    with served(bundled, max_connections=4, connection_share=0.5) as (port, app):
        held = [connect(port, "127.0.0.50") for _ in range(2)]  # its share: 2 of 4
        try:
            with connect(port, "127.0.0.50") as third:
                answer = everything(third)  # answered and closed as it opened (it sent nothing)
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503 "), answer[:200]
            assert b"retry-after: 1" in head.lower()
            assert b"--connection-share 0.5 of --max-connections 4" in body, body
            assert b'"error_type": "Overloaded"' in body
            metrics = app.state.service.batcher.metrics.registry
            assert metrics.get_sample_value("bertscope_connections_refused_total") == 1
            # another address still gets in, under the cap the first one's share left it
            with connect(port, "127.0.0.51") as other:
                other.sendall(HEALTH)
                assert everything(other).startswith(b"HTTP/1.1 200 ")
            # a connection given back is the address's to use again
            held.pop().close()
            while metrics.get_sample_value("bertscope_connections_open") != 1:
                pass  # the server has seen it close (the look is the condition itself, no sleep)
            with connect(port, "127.0.0.50") as again:
                again.sendall(HEALTH)
                assert everything(again).startswith(b"HTTP/1.1 200 ")
        finally:
            for sock in held:
                sock.close()


def test_a_share_of_one_is_no_share(bundled: bertscope.Model) -> None:
    with served(bundled, max_connections=3, connection_share=1.0) as (port, _):
        held = [connect(port, "127.0.0.50") for _ in range(2)]
        try:
            with connect(port, "127.0.0.50") as third:
                third.sendall(HEALTH)
                assert everything(third).startswith(b"HTTP/1.1 200 ")
        finally:
            for sock in held:
                sock.close()


@pytest.mark.parametrize("share", [0.0, 1.5])
def test_a_share_outside_0_to_1_is_refused(share: float) -> None:
    with pytest.raises(InvalidSpec, match="connection_share"):
        ServerSettings(connection_share=share)


SMUGGLED = (
    b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
)


def test_content_length_beside_transfer_encoding_is_refused_and_closed(bundled: bertscope.Model) -> None:
    with served(bundled) as (port, _), connect(port, "127.0.0.1") as sock:
        sock.sendall(SMUGGLED)  # a chunked empty body, then a second request a Content-Length reader misses
        answer = everything(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), answer[:300]
    assert b"connection: close" in head.lower()
    assert b"Invalid HTTP request received." in body  # uvicorn's own refusal (chunked), as the docs say
    assert answer.count(b"HTTP/1.1 ") == 1  # the request behind it was never read
