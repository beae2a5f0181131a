"""How many connections the service holds: the open-file limit, the connection cap, the accept loop's errors.

    limit = raise_open_file_limit()          # the soft RLIMIT_NOFILE raised to the hard one, where it can be
    cap = default_max_connections(limit)     # half of it, at most 4,096: --max-connections' default
    Server(uvicorn_config(...)).run(...)     # uvicorn's server: "out of file descriptors" once a minute

Every connection takes a file descriptor; a process out of them cannot accept the next, and asyncio logs a
traceback for every failed accept (one a second, for as long as it lasts), burying the log. The cap
(`connection.HeadTimedH11Protocol`) keeps the connections well under the limit, so the descriptors the
model, its files and its threads need stay free; what still fails to accept is said in one line a minute.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import uvicorn

if TYPE_CHECKING:
    import socket

    from .metrics import Metrics

__all__ = ["AcceptErrors", "Server", "default_max_connections", "raise_open_file_limit"]

_ACCEPT_FAILED = "socket.accept() out of system resource"  # asyncio's message (selector_events)
_MOST_CONNECTIONS = 4096
_FEWEST_CONNECTIONS = 16
_UNLIMITED_TO = 65536  # the soft limit asked where the hard one is unlimited (macOS refuses RLIM_INFINITY)

logger = logging.getLogger("uvicorn.error")


def raise_open_file_limit() -> int | None:
    """The process's soft open-file limit, raised to its hard limit where that is allowed (None: no limit
    is known on this system)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = _UNLIMITED_TO if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):  # a sandbox may refuse; the limit stays as it was
            pass
    return None if soft == resource.RLIM_INFINITY else int(soft)


def default_max_connections(open_files: int | None) -> int:
    """--max-connections' default: half the open-file limit (the rest for the model, its files and
    threads), at least 16, at most 4,096."""
    if open_files is None:
        return _MOST_CONNECTIONS
    return max(_FEWEST_CONNECTIONS, min(_MOST_CONNECTIONS, open_files // 2))


class AcceptErrors:
    """A loop exception handler: the accept loop's failures (no file descriptor free) said in one line once
    an `every` seconds, with their count, and counted in the metrics; anything else to asyncio's default."""

    def __init__(
        self,
        metrics: Metrics | None = None,
        *,
        every: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.metrics = metrics
        self.every = every
        self.clock = clock
        self.unsaid = 0
        self.said_at = -math.inf

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Handle one error the loop reports."""
        if context.get("message") != _ACCEPT_FAILED:
            loop.default_exception_handler(context)
            return
        self.unsaid += 1
        if self.metrics is not None:
            self.metrics.accept_errors.inc()
        now = self.clock()
        if now - self.said_at >= self.every:
            logger.warning(
                "cannot accept connections: %s (%d failed accepts since last said; asyncio retries each "
                "second); lower --max-connections or raise the open-file limit (ulimit -n)",
                context.get("exception"),
                self.unsaid,
            )
            self.said_at = now
            self.unsaid = 0


class Server(uvicorn.Server):
    """uvicorn's server with `AcceptErrors` as its loop's exception handler, counting in the metrics of
    the protocol `connection.uvicorn_config` fitted."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.accept_errors = AcceptErrors(getattr(config.http, "metrics", None))

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's serve, on a loop that says a failed accept in one line a minute."""
        asyncio.get_running_loop().set_exception_handler(self.accept_errors)
        await super().serve(sockets)
