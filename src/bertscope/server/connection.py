"""The service's HTTP connections: uvicorn's h11 protocol with a deadline on every request head.

    uvicorn.Server(uvicorn_config(app, host="127.0.0.1", port=8000, settings=settings)).run()

uvicorn closes a connection that stays idle after an answer (`timeout_keep_alive`), but any byte resets
that timer, and a new connection has none: a client that sends one header line every few seconds, or
connects and sends nothing, holds its connection for ever. Here the head of each request (the request
line and every header) must arrive within `--header-timeout` seconds of the connection opening or of
the last answer, as nginx's `client_header_timeout`; the connection is closed otherwise. The rest of a
body the service refused without reading is the lingering close's (below). The body itself is the
guard's (`guard.Guard`: its deadline, its size, the bytes buffered across requests).

Answers have a deadline too, as nginx's `send_timeout`: once the socket holds all it can of an answer
(the transport asks the writer to wait), the client must take some of it within `--send-timeout`
seconds, or the connection is dropped with what it still held. A client that asks for a 90 MB answer
and reads none of it holds those bytes for that long, not for ever.

A body costs what its bytes cost here too: h11 parses a chunked body a chunk at a time, inside the
protocol (a few microseconds each, every other client waiting), so a body sent as a byte a chunk costs
far more than its size. The chunks h11 hands over are counted as it parses them, and a body in too many
too small ones (the rule `bodies.reading` holds its pieces to) is answered 400 and its connection closed
at once, the rest of the buffer left unparsed. A request with both a Content-Length and a
Transfer-Encoding is refused as uvicorn refuses a request it cannot parse (its plain-text 400, and the
connection closed, its body unread), as RFC 9112 6.1 asks (h11 alone would take the chunked body).

Connections are capped (`--max-connections`, `capacity.default_max_connections`: half the open-file limit,
at most 4,096): one over the cap is answered a fixed 503 and closed as it opens, before a byte of it is
read or parsed, and counted (`bertscope_connections_refused_total`), so idle connections cannot take the
file descriptors the model and its open connections need.

A connection closed while its client may still be sending (one refused as it opens, whose request is
already in the socket; an answer sent before its body was read: a 413, a 415; pipelined requests behind
an answer that closes) lingers as nginx's `lingering_close` does: closed at once with unread bytes in the
socket, the kernel would answer a reset, which discards the answer before the client reads it. It is
half-closed instead (the answer and a FIN go out), and what the client still sends is read and dropped
until it closes, for at most `LINGER_S` seconds in all and `LINGER_IDLE_S` seconds without a byte
(nginx's `lingering_time` and `lingering_timeout`). A lingering connection no longer counts against
`--max-connections` or its address's share (a client refused again and again must not lock others out
by its refusals), and at most a quarter of the cap linger at once, one address at most its
`--connection-share` of them (past either, the longest lingering connection of the address over its
share, or of the address holding the most, is closed to make room: one address's refusals cannot keep
others' answers from being read), so lingering holds a bounded number of file descriptors for a bounded
time. Once the server is shutting down, a close lingers at most `STOPPING_LINGER_S` (uvicorn waits for
every connection to close, with no timeout).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from typing import TYPE_CHECKING, Any, cast

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol

from .bodies import dripped
from .capacity import default_max_connections, raise_open_file_limit
from .error_answers import error_response
from .validation import route_path

if TYPE_CHECKING:
    from fastapi import FastAPI

    from .metrics import Metrics
    from .settings import ServerSettings

__all__ = ["CONNECTION_ANSWERED", "HeadTimedH11Protocol", "uvicorn_config"]

# The status of an answer the connection sent itself, noted in the request's scope: the app's request ends
# as if its client left, and the guard logs and counts what was sent (`guard.Guard`), not a 499.
CONNECTION_ANSWERED = "bertscope.connection_answered"
# How long a connection closed while its client may still send lingers: nginx's `lingering_time` (30 s in
# all) and `lingering_timeout` (5 s without a byte). Bounded by time, not bytes: what is read is dropped
# (no memory), at most a quarter of the cap linger, and a client sending a body over the limit at full
# speed reads its 413 only once the server has taken the whole body (http.client writes it all before it
# reads); 30 s is 37 MB at 10 Mbit/s. One that stops sending is closed within 5 s.
LINGER_S = 30.0
LINGER_IDLE_S = 5.0
# A connection that starts lingering once the server is shutting down lingers at most this long: uvicorn
# waits for every connection to close, with no timeout of its own.
STOPPING_LINGER_S = 1.0
# The client's states in which it may still be sending: a body not read to its end, a request h11 refused.
_MAY_SEND = (h11.SEND_BODY, h11.ERROR)
# The order connections began lingering in: the longest lingering one is closed first to make room.
_LINGER_ORDER = itertools.count()


class _Dripped(Exception):
    """A body came in too many too small pieces: the message of its 400."""


class _CountedConnection(h11.Connection):
    """h11's connection, counting the pieces of each request body as they are parsed (`_Dripped` once they
    are too many and too small)."""

    pieces = 0
    size = 0

    def next_event(self) -> Any:
        """h11's next event; a new request starts the count again."""
        event = super().next_event()
        if type(event) is h11.Data:
            self.pieces += 1
            self.size += len(event.data)
            if (refused := dripped(self.pieces, self.size)) is not None:
                raise _Dripped(str(refused))
        elif type(event) is h11.Request:
            self.pieces = self.size = 0
            names = {name for name, _ in event.headers}
            if b"content-length" in names and b"transfer-encoding" in names:
                # RFC 9112 6.1: two framings of one body are how requests are smuggled past a proxy that
                # reads the other one; uvicorn answers its plain-text 400 and closes the connection.
                raise h11.RemoteProtocolError("both Content-Length and Transfer-Encoding", 400)
        return event


def busy_answer(max_connections: int, *, share: float | None = None) -> bytes:
    """The fixed 503 a connection over the cap gets as it opens (TEI's error body: its route is unread);
    with `share`, the one for a connection over its client address's share of the cap."""
    if share is None:
        error = (
            f"the service holds its most connections ({max_connections:,}, --max-connections); "
            "try again in a moment, or reuse a connection (keep-alive)"
        )
    else:
        error = (
            f"this client address holds its most connections ({peer_cap(max_connections, share):,}: "
            f"--connection-share {share:g} of --max-connections {max_connections:,}); close one, or reuse "
            "a connection (keep-alive), and try again"
        )
    body = json.dumps({"error": error, "error_type": "Overloaded"}).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nretry-after: 1\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def peer_cap(max_connections: int, share: float) -> int:
    """The connections one client address may hold: its share of the cap, at least one."""
    return max(1, int(max_connections * share))


class _LingeringTransport:
    """The connection's transport as uvicorn sees it: its close lingers while the client may still be
    sending (`HeadTimedH11Protocol.linger`), and it reads as closing from then on."""

    def __init__(self, transport: asyncio.Transport, protocol: HeadTimedH11Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    def close(self) -> None:
        """Linger where the client may still send or has bytes unread (and not yet lingering), else close."""
        conn = self._protocol.conn
        # pipelined requests behind an answer that closes are in h11's buffer (uvicorn stopped parsing them)
        unread = conn.their_state in _MAY_SEND or bool(conn.trailing_data[0])
        if unread and not self._protocol.lingering_now:
            self._protocol.linger()
        else:
            self._transport.close()

    def is_closing(self) -> bool:
        """Closing, or lingering: nothing more is written."""
        return self._protocol.lingering_now or self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class HeadTimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose next request head is not in within the deadline.

    The clock starts when the connection opens and after every answer, and stops when a request's
    head is complete (uvicorn starts a new request cycle); data in between does not reset it. A
    connection that opens with `max_connections` already open, or with `max_peer_connections` open from
    its client address (`peers` counts them, one Counter per server), is answered `busy` (`busy_peer`)
    and closed (lingering: `linger`).
    """

    head_timeout: float = 10.0
    send_timeout: float = 30.0
    max_connections: int | None = None
    max_peer_connections: int | None = None
    peers: Counter[str] | None = None
    metrics: Metrics | None = None
    busy: bytes = b""
    busy_peer: bytes = b""
    lingering: set[HeadTimedH11Protocol] | None = None  # this server's lingering connections
    max_lingering: int = 0
    max_peer_lingering: int | None = None  # one address's share of them (None: no share)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None
        self._waiting_after: Any = None  # the request cycle the awaited head comes after (None: the first)
        self._refused = False
        self._peer: str | None = None  # the client address counted in `peers` while this one is open
        self._linger_timer: asyncio.TimerHandle | None = None
        self._linger_until = 0.0  # the loop's time a lingering connection closes at the latest
        self._linger_heard = 0.0  # the loop's time it last read a byte
        self.lingering_now = False
        self._linger_peer: str | None = None  # the client address it lingers for (its slot's owner)
        self._linger_order = 0
        self._stopping = False  # the server is shutting down: a close lingers at most STOPPING_LINGER_S
        size = self.config.h11_max_incomplete_event_size
        self.conn = _CountedConnection(h11.SERVER) if size is None else _CountedConnection(h11.SERVER, size)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        """Start the clock for the first request's head; over the cap or its address's share of it, answer
        503 and close unread."""
        super().connection_made(transport)  # type: ignore[arg-type]
        self._raw = cast(asyncio.Transport, transport)
        self.transport = cast(asyncio.Transport, _LingeringTransport(self._raw, self))
        over_cap = self.max_connections is not None and self._open() > self.max_connections
        peer = self.client[0] if self.client else None
        over_share = (
            not over_cap
            and peer is not None
            and self.peers is not None
            and self.max_peer_connections is not None
            and self.peers[peer] >= self.max_peer_connections
        )
        self._refused = over_cap or over_share
        if self.metrics is not None:  # counted before the 503 goes out: its client may look at once
            self.metrics.count_connections(self._open() - self._refused, refused=self._refused)
        if self._refused:
            self._raw.write(self.busy_peer if over_share else self.busy)
            self.linger()  # its request may be in already: a plain close would reset the 503 away
            return
        if peer is not None and self.peers is not None:
            self.peers[peer] += 1
            self._peer = peer
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Feed uvicorn; stop the clock once a new request's head is complete. While lingering, drop it."""
        if self.lingering_now:
            self._linger_heard = self.loop.time()  # the idle clock restarts (`_linger_check`)
            return
        if self._refused:
            return
        super().data_received(data)
        self._disarm_if_started()

    def handle_events(self) -> None:
        """uvicorn's parsing, stopped at a body that comes in too many too small pieces (a 400)."""
        try:
            super().handle_events()
        except _Dripped as dripping:
            self._refuse_drip(str(dripping))

    def on_response_complete(self) -> None:
        """Start the clock for the next request's head (uvicorn may start a pipelined one at once)."""
        self._arm()
        super().on_response_complete()
        self._disarm_if_started()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the clocks with the connection."""
        self._disarm()
        self._stop_send_clock()
        self._release_peer()
        self._stop_linger()
        super().connection_lost(exc)
        if self.metrics is not None:
            self.metrics.count_connections(self._open())

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown; a close from now on lingers at most `STOPPING_LINGER_S`."""
        self._stopping = True
        super().shutdown()

    def linger(self) -> None:
        """Close as nginx's lingering close: half-close (what was written, then a FIN), then read and drop
        what the client still sends until it closes, `LINGER_S` seconds pass or `LINGER_IDLE_S` pass with
        no byte (`STOPPING_LINGER_S` once the server is shutting down). The connection stops counting
        against the cap and its address's share. At most `max_lingering` linger, one address at most
        `max_peer_lingering` of them: past either, the longest lingering connection of the address over
        its share, or of the address holding the most, is closed to make room (where the transport cannot
        half-close, this one is closed at once)."""
        lingering = self.lingering
        if (
            lingering is None
            or self.max_lingering < 1
            or self._raw.is_closing()
            or not self._raw.can_write_eof()
        ):
            self._raw.close()
            return
        peer = self.client[0] if self.client else None
        self._make_room(lingering, peer)
        self.lingering_now = True
        self._linger_peer = peer
        self._linger_order = next(_LINGER_ORDER)
        lingering.add(self)
        self._release_peer()
        self._disarm()
        self._raw.write_eof()  # the FIN follows what is written; the client reads the answer, then its end
        self._raw.resume_reading()  # uvicorn may have paused reading a body it had no room for
        self._linger_heard = self.loop.time()
        self._linger_until = self._linger_heard + (STOPPING_LINGER_S if self._stopping else LINGER_S)
        self._linger_timer = self.loop.call_at(
            min(self._linger_heard + LINGER_IDLE_S, self._linger_until), self._linger_check
        )

    def _make_room(self, lingering: set[HeadTimedH11Protocol], peer: str | None) -> None:
        """Close lingering connections until this one fits: a new answer is delivered, and one address
        cannot hold every slot and so keep others' answers from lingering (and being read)."""
        while True:
            mine = [other for other in lingering if other._linger_peer == peer]
            if self.max_peer_lingering is not None and len(mine) >= self.max_peer_lingering:
                held = mine  # over its own share: its own longest lingering goes
            elif len(lingering) >= self.max_lingering:
                counts = Counter(other._linger_peer for other in lingering)
                most = max(counts.values())
                held = [other for other in lingering if counts[other._linger_peer] == most]
            else:
                return
            min(held, key=lambda other: other._linger_order)._end_linger()

    def _end_linger(self) -> None:
        """Close a lingering connection now, its slot freed at once (its `connection_lost` comes later)."""
        self._stop_linger()
        self._raw.close()

    def _stop_linger(self) -> None:
        """Free this connection's lingering slot and stop its clock (none where it does not linger)."""
        if self.lingering is not None:
            self.lingering.discard(self)
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None

    def _linger_check(self) -> None:
        """Close a lingering connection idle for `LINGER_IDLE_S` or open for `LINGER_S`; else check again
        then (one timer, not one per read)."""
        due = min(self._linger_heard + LINGER_IDLE_S, self._linger_until)
        if due <= self.loop.time():
            self._linger_timer = None
            self._raw.close()
        else:
            self._linger_timer = self.loop.call_at(due, self._linger_check)

    def _open(self) -> int:
        """The connections that count against the cap: those open, less those lingering."""
        return len(self.connections) - (len(self.lingering) if self.lingering is not None else 0)

    def _release_peer(self) -> None:
        if self._peer is not None and self.peers is not None:
            self.peers[self._peer] -= 1
            if not self.peers[self._peer]:
                del self.peers[self._peer]
            self._peer = None

    def pause_writing(self) -> None:
        """The socket holds all it can: the client must take some within the send deadline."""
        super().pause_writing()
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.send_timeout, self._send_timed_out)

    def resume_writing(self) -> None:
        """The client took some: the clock stops until the socket is full again."""
        self._stop_send_clock()
        super().resume_writing()

    def _stop_send_clock(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _send_timed_out(self) -> None:
        self._send_timer = None
        if not self.transport.is_closing():
            self.logger.info("dropping a connection that took none of its answer for %g s", self.send_timeout)
        # abort, not close: close would keep the unsent bytes until the client takes them
        self.transport.abort()

    def _refuse_drip(self, message: str) -> None:
        """Answer 400 (unless an answer has begun) and close, the app's request cycle told the client left."""
        self.logger.info("closing a connection whose request body came in too many small pieces: %s", message)
        if self.cycle is not None and not self.cycle.response_started:
            self.cycle.disconnected = True  # the app's reading ends (ClientLeft) and nothing it sends is sent
            self.cycle.message_event.set()
        if self.conn.our_state is h11.SEND_RESPONSE and not self.transport.is_closing():
            answer = error_response(route_path(self.scope), 400, message, headers={"Connection": "close"})
            headers = [*self.server_state.default_headers, *answer.raw_headers]
            head = h11.Response(status_code=400, headers=headers, reason=STATUS_PHRASES[400])
            body = b"" if self.scope["method"] == "HEAD" else bytes(answer.body)
            for event in (head, h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event) or b"")
            if self.cycle is not None and not self.cycle.response_started:
                self.cycle.scope[CONNECTION_ANSWERED] = 400  # type: ignore[literal-required]
        self.transport.close()

    def _arm(self) -> None:
        self._disarm()
        self._waiting_after = self.cycle
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _disarm_if_started(self) -> None:
        if self._head_timer is not None and self.cycle is not self._waiting_after:
            self._disarm()

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.logger.info("closing a connection whose request head took over %g s", self.head_timeout)
            self._raw.close()  # no answer to keep from a reset: a head dripped slowly does not linger on


def uvicorn_config(
    app: FastAPI, *, host: str, port: int, settings: ServerSettings, log_level: str = "info"
) -> uvicorn.Config:
    """uvicorn's configuration for the service: h11 with the head deadline and connection cap of `settings`
    (run it with `capacity.Server`, which reads the cap's metrics from it)."""
    open_files = raise_open_file_limit()  # before the first connection: every one takes a descriptor
    cap = settings.max_connections or default_max_connections(open_files)
    share = settings.connection_share
    lingering = max(1, cap // 4)  # connections closing as nginx's lingering close, at most
    service = getattr(app.state, "service", None)
    fitted: dict[str, Any] = {
        "head_timeout": settings.header_timeout_s,
        "send_timeout": settings.send_timeout_s,
        "max_connections": cap,
        # 1: no share per address (every client behind one proxy's address)
        "max_peer_connections": None if share >= 1 else peer_cap(cap, share),
        "peers": Counter(),  # this server's own: the connections open per client address
        "lingering": set(),  # this server's own: the connections closing as nginx's lingering close
        "max_lingering": lingering,
        # an address's share of the lingering slots too, so its refusals cannot crowd out others' answers
        "max_peer_lingering": None if share >= 1 else peer_cap(lingering, share),
        "metrics": None if service is None else service.batcher.metrics,
        "busy": busy_answer(cap),
        "busy_peer": busy_answer(cap, share=share),
    }
    protocol = type("HeadTimedH11Protocol", (HeadTimedH11Protocol,), fitted)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=protocol,
        timeout_keep_alive=int(settings.keep_alive_s),
        lifespan="on",
    )
