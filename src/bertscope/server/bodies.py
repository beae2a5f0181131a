"""Request bodies: read whole before the app sees them, within a size, a deadline and one shared budget.

    async with reading(receive, declared, settings=settings, budget=budget) as body:
        ...  # the app runs on `body`; its bytes count against the budget until the block ends

Each body must arrive within --body-timeout seconds (408, and the connection is closed: a client that
stalls mid-body cannot hold it) and be at most --max-body-bytes (413). All bodies held at once, across
connections, share --max-buffered-bytes: a body that would pass it is refused with 503 and Retry-After
before it is read (its declared length is taken up front, so 300 stalled 4 MiB uploads hold at most the
budget, not 1.2 GB). A declared body is read into one buffer of its size, which goes back to the system
whole when freed; once no body is held, the heap's freed pages are handed back too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

from ..core.memory import release_freed_memory

if TYPE_CHECKING:
    from prometheus_client import Gauge


class BodyLimits(Protocol):
    """The limits a body is read under (guard.ServerSettings has them)."""

    @property
    def max_body_bytes(self) -> int:
        """The largest body taken, in bytes."""

    @property
    def body_timeout_s(self) -> float:
        """How long a body may take to arrive."""


__all__ = ["BodyBudget", "BodyRefused", "ClientLeft", "reading"]

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]

# Hand freed heap back once this much body memory has been given back since the last time.
_TRIM_AFTER = 8 * 1024 * 1024


class ClientLeft(Exception):
    """The client closed the connection before the answer; there is nobody to answer."""


class BodyRefused(Exception):
    """A body the service will not read: `status`, the message, the headers of the answer."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class BodyBudget:
    """The bytes of request bodies held at once across every connection, under one cap."""

    def __init__(
        self, cap: int, gauge: Gauge | None = None, *, what: str = "request bodies", one: str = "body"
    ) -> None:
        self.cap = cap
        self.held = 0
        self._gauge = gauge
        self._freed = 0
        self._what, self._one = what, one

    def take(self, size: int, *, alone_fits: bool = False) -> None:
        """Hold `size` more bytes, or raise BodyRefused (503) when that would pass the cap (`alone_fits`:
        unless nothing else is held)."""
        if size and self.held + size > self.cap and not (alone_fits and self.held == 0):
            raise BodyRefused(
                503,
                f"the service holds {self.held} bytes of {self._what} in flight, and this {self._one}'s "
                f"{size} more would pass {self.cap} (--max-buffered-bytes); retry after the Retry-After "
                "seconds",
                {"Retry-After": "1"},
            )
        self.held += size
        self._show()

    def give_back(self, size: int) -> None:
        """Release `size` bytes; with none held, hand the freed heap back to the system."""
        self.held -= size
        self._freed += size
        self._show()
        if self.held == 0 and self._freed >= _TRIM_AFTER:
            self._freed = 0
            release_freed_memory()

    def _show(self) -> None:
        if self._gauge is not None:
            self._gauge.set(self.held)


@asynccontextmanager
async def reading(
    receive: Receive, declared: int | None, *, settings: BodyLimits, budget: BodyBudget
) -> AsyncIterator[bytes]:
    """The whole body (its bytes held in `budget` while the block runs), or BodyRefused / ClientLeft."""
    limit = settings.max_body_bytes
    if declared is not None and declared > limit:
        raise _too_large(declared, limit)
    held = 0
    try:
        if declared is not None:
            budget.take(declared)
            held = declared
        buffer = bytearray(declared or 0)
        size, more = 0, True
        deadline = time.monotonic() + settings.body_timeout_s
        while more:
            try:
                event = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:  # TimeoutError itself from Python 3.11 on
                message = f"the request body did not arrive within {settings.body_timeout_s:g} s"
                raise BodyRefused(408, message, {"Connection": "close"}) from None
            if event["type"] != "http.request":
                raise ClientLeft
            chunk = event.get("body", b"")
            if size + len(chunk) > limit:
                raise _too_large(size + len(chunk), limit)
            if declared is None:  # chunked: held as it comes
                budget.take(len(chunk))
                held += len(chunk)
                buffer += chunk
            else:
                buffer[size : size + len(chunk)] = chunk
            size += len(chunk)
            more = event.get("more_body", False)
        body = bytes(memoryview(buffer)[:size])
        del buffer
        yield body
    finally:
        budget.give_back(held)


def _too_large(size: int, limit: int) -> BodyRefused:
    # Answered without reading the rest: uvicorn discards it unbuffered, within --header-timeout.
    return BodyRefused(
        413, f"request body of {size}+ bytes is over the limit of {limit} bytes (--max-body-bytes)"
    )
