"""Request bodies: read whole before the app sees them, within a size, a deadline and one shared budget.

    async with reading(receive, declared, settings=settings, budget=budget, peer=host) as body:
        ...  # the app runs on `body`; its bytes count against the budget until the block ends

Each body must arrive within --body-timeout seconds (408, and the connection is closed: a client that
stalls mid-body cannot hold it) and be at most --max-body-bytes (413). All bodies held at once, across
connections, share --max-buffered-bytes, and one client address may hold at most its share of it
(`max_buffered_share`), never less than one whole body (--max-body-bytes, within --max-buffered-bytes):
a body that would pass either is refused with 503 and Retry-After. A body takes
its bytes from the budget as they arrive, declared or chunked alike: a Content-Length is a promise, not
bytes, so 300 headers declaring 4 MiB each hold (and allocate) nothing. Reading costs what the bytes
cost: one deadline for the whole body (not a timer per piece), and a body that comes in many pieces of a
few bytes each is refused (400, send it in larger chunks). Freed heap is handed back to the system once
a request ends with no body and no answer held (`release_when_idle`), when their memory is really free.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from ..core.memory import release_freed_memory

if TYPE_CHECKING:
    from prometheus_client import Gauge


class BodyLimits(Protocol):
    """The limits a body is read under (settings.ServerSettings has them)."""

    @property
    def max_body_bytes(self) -> int:
        """The largest body taken, in bytes."""

    @property
    def body_timeout_s(self) -> float:
        """How long a body may take to arrive."""


__all__ = ["PEER", "BodyBudget", "BodyRefused", "ClientLeft", "dripped", "reading", "release_when_idle"]

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]

# Hand freed heap back once this much body and answer memory has been given back since the last time.
_TRIM_AFTER = 8 * 1024 * 1024
# A body in more pieces than this, averaging fewer bytes than _SMALL_PIECE, is refused: each piece costs
# the server a fixed amount of work, so a body dripped a byte at a time costs far more than its size.
_MANY_PIECES = 1024
_SMALL_PIECE = 64
# The client address of the request being served (set by the guard): a budget's share is per address.
PEER: ContextVar[str | None] = ContextVar("bertscope_peer", default=None)


class ClientLeft(Exception):
    """The client closed the connection before the answer; there is nobody to answer."""


class BodyRefused(Exception):
    """A body the service will not read: `status`, the message, the headers of the answer."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class BodyBudget:
    """The bytes of request bodies (or answers) held at once across every connection, under one cap, and
    under `share` of it for each client address (`PEER`, or the `peer` given).

    A refusal's Retry-After is `retry_after` seconds: about how long the holds it waits on can last
    (--body-timeout for bodies, --send-timeout for answers)."""

    def __init__(
        self,
        cap: int,
        gauge: Gauge | None = None,
        *,
        what: str = "request bodies in flight",
        one: str = "body",
        share: float = 1.0,
        retry_after: float = 1.0,
    ) -> None:
        self.cap = cap
        self.held = 0
        self.share = share
        self.per_peer: dict[str, int] = {}
        self.freed = 0
        self._gauge = gauge
        self._what, self._one = what, one
        self._retry = str(max(1, math.ceil(retry_after)))

    def take(self, size: int, *, alone_fits: bool = False, peer: str | None = None, least: int = 0) -> None:
        """Hold `size` more bytes, or raise BodyRefused (503) when that would pass the cap or the peer's
        share of it (`alone_fits`: unless nothing else is held, by anyone or by that peer). The peer's
        share is never below `least` (within the cap): one whole body, which a smaller share would refuse
        forever, even on an idle service."""
        if not size:
            return
        if self.held + size > self.cap and not (alone_fits and self.held == 0):
            raise self._refused(
                f"the service holds {self.held:,} bytes of {self._what}, and this {self._one}'s "
                f"{size:,} more would pass {self.cap:,} (--max-buffered-bytes)"
            )
        peer = peer if peer is not None else PEER.get()
        share = int(self.cap * self.share)
        most = min(self.cap, max(share, least))
        if peer is not None and self.share < 1.0:
            mine = self.per_peer.get(peer, 0)
            if mine + size > most and not (alone_fits and mine == 0):
                of = (
                    f"{self.share:g} of --max-buffered-bytes, --max-buffered-share"
                    if most == share
                    else f"one whole body, --max-body-bytes, over {self.share:g} of --max-buffered-bytes, "
                    "--max-buffered-share"
                )
                raise self._refused(
                    f"this client ({peer}) holds {mine:,} bytes of {self._what}, and this "
                    f"{self._one}'s {size:,} more would pass its share, {most:,} bytes ({of})"
                )
            self.per_peer[peer] = mine + size
        self.held += size
        self._show()

    def give_back(self, size: int, *, peer: str | None = None) -> None:
        """Release `size` bytes taken (by `peer`, or the `PEER` of the request); `release_when_idle`
        hands the freed heap back once the request has ended."""
        if not size:
            return
        self.held -= size
        self.freed += size
        peer = peer if peer is not None else PEER.get()
        if peer is not None and peer in self.per_peer:
            left = self.per_peer[peer] - size
            if left > 0:
                self.per_peer[peer] = left
            else:
                del self.per_peer[peer]
        self._show()

    def _refused(self, why: str) -> BodyRefused:
        return BodyRefused(
            503,
            f"{why}; retry after the Retry-After seconds, about as long as a hold can last",
            {"Retry-After": self._retry},
        )

    def _show(self) -> None:
        if self._gauge is not None:
            self._gauge.set(self.held)


def release_when_idle(*budgets: BodyBudget) -> None:
    """Hand freed heap back to the system when none of `budgets` holds anything and, together, they have
    given back enough since the last time. Called as a request ends: by then the body, the answer and
    what was made from them (arrays, encodings) are free, which they are not while a budget gives back."""
    if any(budget.held for budget in budgets) or sum(budget.freed for budget in budgets) < _TRIM_AFTER:
        return
    for budget in budgets:
        budget.freed = 0
    release_freed_memory()


def _deadline(seconds: float) -> AbstractAsyncContextManager[Any]:
    """One timer for a whole block (asyncio.timeout), not one per awaited event (asyncio.wait_for)."""
    if sys.version_info >= (3, 11):
        return asyncio.timeout(seconds)
    return _deadline_310(seconds)


@asynccontextmanager
async def _deadline_310(seconds: float) -> AsyncIterator[None]:
    task = asyncio.current_task()
    assert task is not None
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    timer = asyncio.get_running_loop().call_later(seconds, expire)
    try:
        yield
    except asyncio.CancelledError:
        if expired:
            raise asyncio.TimeoutError from None
        raise
    finally:
        timer.cancel()


@asynccontextmanager
async def reading(
    receive: Receive,
    declared: int | None,
    *,
    settings: BodyLimits,
    budget: BodyBudget,
    peer: str | None = None,
) -> AsyncIterator[bytes]:
    """The whole body (its bytes held in `budget`, for `peer`, while the block runs), or BodyRefused /
    ClientLeft. Bytes are taken from the budget and kept as they arrive; none are reserved for a length
    declared and not yet sent."""
    limit = settings.max_body_bytes
    if declared is not None and declared > limit:
        raise _too_large(declared, limit)
    held = 0
    try:
        pieces: list[bytes] = []
        size = events = 0
        try:
            async with _deadline(settings.body_timeout_s):
                more = True
                while more:
                    event = await receive()
                    if event["type"] != "http.request":
                        raise ClientLeft
                    chunk = event.get("body", b"")
                    if size + len(chunk) > limit:
                        raise _too_large(size + len(chunk), limit)
                    budget.take(len(chunk), peer=peer, least=limit)  # a share holds one whole body
                    held += len(chunk)
                    if chunk:
                        pieces.append(chunk)
                    size += len(chunk)
                    events += 1
                    more = event.get("more_body", False)
                    if more and (refused := dripped(events, size)) is not None:
                        raise refused
        except asyncio.TimeoutError:  # TimeoutError itself from Python 3.11 on
            message = (
                f"the request body did not arrive within {settings.body_timeout_s:g} s; send the whole "
                "body within --body-timeout seconds, or raise --body-timeout"
            )
            raise BodyRefused(408, message, {"Connection": "close"}) from None
        body = b"".join(pieces)  # one piece: that piece itself, not a copy
        del pieces
        yield body
    finally:
        budget.give_back(held, peer=peer)


def dripped(events: int, size: int) -> BodyRefused | None:
    """The 400 for a body of `size` bytes in `events` pieces so far when they are too many and too small
    (the connection refuses h11's chunks by the same rule: `connection.HeadTimedH11Protocol`), else None."""
    if events <= _MANY_PIECES or size >= events * _SMALL_PIECE:
        return None
    # The connection is closed: the rest of the drip is not parsed a piece at a time either.
    return BodyRefused(
        400,
        f"request body: {size:,} bytes arrived in {events:,} pieces (about {size // events} byte"
        f"{'' if size // events == 1 else 's'} each); send "
        f"the body in larger chunks (at least {_SMALL_PIECE} bytes each, or whole)",
        {"Connection": "close"},
    )


def _too_large(size: int, limit: int) -> BodyRefused:
    # Answered without reading the rest: the connection closes, lingering (`connection.HeadTimedH11Protocol`:
    # what still comes is read and dropped, unbuffered, until the client closes or 30 s pass).
    return BodyRefused(
        413,
        f"request body of {size:,}+ bytes is over the limit of {limit:,} bytes (--max-body-bytes); send "
        "fewer or shorter texts per request, or start bertscope serve with a higher --max-body-bytes",
    )
