"""The lingering close and the body checks, reviewed again (audit 25d's second review): one address
holding every lingering slot does not keep another's 413 from being read, a close begun once the server
is shutting down lingers at most a second, a head timeout closes without lingering, a body under a static
mount leaves the router's answer, and OpenAI's `param` names `input` for an empty list.

The connections are uvicorn's protocol objects over a transport that records what is done to it, driven
by hand: no socket, no clock, no sleep."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import h11
import pytest
import uvicorn
from fastapi.testclient import TestClient
from uvicorn.server import ServerState

import bertscope
from bertscope.server import ServerSettings, connection, create_app

_OVER = (
    b"POST /v2/embed HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 99999999\r\n\r\n"
)


class _Transport(asyncio.Transport):
    """A socket's transport that records what the protocol did to it."""

    def __init__(self, address: str) -> None:
        super().__init__()
        self.address = address
        self.written = b""
        self.closed = False
        self.half_closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": (self.address, 40_000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.half_closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A loop never run: its timers are scheduled, never fired."""
    made = asyncio.new_event_loop()
    yield made
    # the request cycles uvicorn started as tasks: cancelled, so none is left never awaited
    started = asyncio.all_tasks(made)
    for task in started:
        task.cancel()
    if started:
        made.run_until_complete(asyncio.wait(started))
    made.close()


def _protocol_class(bundled: bertscope.Model, **settings: Any) -> tuple[Any, uvicorn.Config, ServerState]:
    given = ServerSettings(**settings)
    config = connection.uvicorn_config(
        create_app(bundled, settings=given), host="127.0.0.1", port=0, settings=given
    )
    config.load()
    return config.http_protocol_class, config, ServerState()


def _open(kind: Any, config: uvicorn.Config, state: ServerState, loop: Any, address: str) -> Any:
    protocol = kind(config, state, {}, _loop=loop)
    transport = _Transport(address)
    protocol.connection_made(transport)
    return protocol, transport


def _refused_413(protocol: Any, transport: _Transport) -> None:
    """The app's 413, sent before the body is read (Connection: close), then uvicorn's close."""
    protocol.data_received(_OVER)
    assert protocol.cycle is not None
    head = h11.Response(status_code=413, headers=[("content-length", "0"), ("connection", "close")])
    transport.write(protocol.conn.send(head) or b"")
    transport.write(protocol.conn.send(h11.EndOfMessage()) or b"")
    protocol.transport.close()  # the client may still send its body: this lingers


def test_one_address_holding_every_lingering_slot_does_not_stop_anothers_413(
    bundled: bertscope.Model, loop: asyncio.AbstractEventLoop
) -> None:
    """Its 413s went on lingering for 30 s and the slots were full: another address's 413 was closed at
    once, its body unread, and the reset discarded the answer (http.client: ConnectionResetError)."""
    kind, config, state = _protocol_class(bundled, max_connections=8, connection_share=0.5)
    assert kind.max_lingering == 2 and kind.max_peer_lingering == 1
    hostile = [_open(kind, config, state, loop, "10.0.0.66") for _ in range(3)]
    for protocol, transport in hostile:
        _refused_413(protocol, transport)
    # the address lingers at most its share of the slots: each new linger closed its own oldest
    assert [transport.closed for _, transport in hostile] == [True, True, False]
    other, other_transport = _open(kind, config, state, loop, "10.0.0.7")
    _refused_413(other, other_transport)
    assert other.lingering_now and other in kind.lingering and not other_transport.closed
    assert other_transport.half_closed and other_transport.written.startswith(b"HTTP/1.1 413 ")
    # the slots full (the hostile one and this one): a third address makes room too
    third, third_transport = _open(kind, config, state, loop, "10.0.0.8")
    _refused_413(third, third_transport)
    assert third.lingering_now and not third_transport.closed
    assert len(kind.lingering) == kind.max_lingering
    assert hostile[2][1].closed  # the address holding the most (a tie: the longest lingering) went


def test_the_lingering_slots_fill_from_every_address_without_a_share(
    bundled: bertscope.Model, loop: asyncio.AbstractEventLoop
) -> None:
    """Behind a proxy (share 1) every client is one address: a full set still makes room for the new."""
    kind, config, state = _protocol_class(bundled, max_connections=8, connection_share=1.0)
    assert kind.max_peer_lingering is None
    opened = [_open(kind, config, state, loop, "10.0.0.1") for _ in range(3)]
    for protocol, transport in opened:
        _refused_413(protocol, transport)
    assert [transport.closed for _, transport in opened] == [True, False, False]
    assert opened[2][0].lingering_now


def test_a_lingering_close_begun_once_the_server_is_stopping_ends_within_a_second(
    bundled: bertscope.Model, loop: asyncio.AbstractEventLoop
) -> None:
    """uvicorn marks a busy request keep_alive=False on shutdown and waits, with no timeout, for its
    connection to close: the close lingered 30 s with a client dripping a byte a second."""
    kind, config, state = _protocol_class(bundled, max_connections=8)
    protocol, transport = _open(kind, config, state, loop, "10.0.0.1")
    protocol.data_received(_OVER)
    protocol.shutdown()  # the request is busy: uvicorn only marks it
    assert not transport.closed
    _refused_413(protocol, transport)
    assert protocol.lingering_now and transport.half_closed  # the answer is still read, not reset
    assert protocol._linger_until - protocol._linger_heard <= connection.STOPPING_LINGER_S <= 1.0
    loop_time = protocol._linger_heard
    assert protocol._linger_timer.when() <= loop_time + connection.STOPPING_LINGER_S
    # a byte keeps it no longer: the check at its end closes it
    protocol.data_received(b"x")
    original = loop.time
    loop.time = lambda: protocol._linger_until  # type: ignore[method-assign]
    try:
        protocol._linger_check()
    finally:
        loop.time = original  # type: ignore[method-assign]
    assert transport.closed


def test_a_head_timeout_closes_without_lingering(
    bundled: bertscope.Model, loop: asyncio.AbstractEventLoop
) -> None:
    """A head dripped past --header-timeout is closed outright: its bytes in h11's buffer would otherwise
    make the close linger, holding the connection up to 30 s more for the client that dripped it."""
    kind, config, state = _protocol_class(bundled, max_connections=8)
    protocol, transport = _open(kind, config, state, loop, "10.0.0.1")
    protocol.data_received(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    assert protocol._head_timer is not None
    protocol._head_timer.cancel()
    protocol._head_timed_out()  # the deadline's timer firing
    protocol.data_received(b"a")  # the client keeps dripping
    assert transport.closed and not transport.half_closed
    assert not protocol.lingering_now and protocol not in kind.lingering


@pytest.mark.parametrize("path", ["/docs/static/nothing-here", "/explorer/nothing-here"])
def test_a_utf16_body_under_a_static_mount_leaves_its_answer(bundled: bertscope.Model, path: str) -> None:
    """A mount matches its path for every method: it was taken as a route that reads the body, and a
    UTF-16 POST there was 400 'not UTF-8' where a UTF-8 one is the mount's own answer."""
    headers = {"content-type": "application/json"}
    with TestClient(create_app(bundled)) as client:
        plain = client.post(path, content=b'{"inputs": "a"}', headers=headers)
        wide = client.post(path, content='{"inputs": "a"}'.encode("utf-16"), headers=headers)
    assert plain.status_code != 400, plain.text
    assert wide.status_code == plain.status_code, wide.text


def test_an_empty_openai_input_names_it_in_param(bundled: bertscope.Model) -> None:
    """'no texts given: ...' was not led by 'input': param was null."""
    with TestClient(create_app(bundled)) as client:
        refused = client.post("/v1/embeddings", json={"input": []})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "input", refused.json()


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b'{"input": "a", "user": {"input": 1, "input": 2}}', "user"),  # was "input": a key of user's
        (b'{"input": "a", "user": [{"k": 1, "k": 2}]}', "user"),
        (b'{"input": "a", "input": "b"}', "input"),
    ],
)
def test_a_key_given_twice_is_named_by_the_field_holding_it(
    bundled: bertscope.Model, body: bytes, param: str
) -> None:
    with TestClient(create_app(bundled)) as client:
        refused = client.post("/v1/embeddings", content=body, headers={"content-type": "application/json"})
    assert refused.status_code in (400, 422), refused.text
    assert "duplicate field" in refused.json()["error"]["message"]
    assert refused.json()["error"]["param"] == param, refused.json()
