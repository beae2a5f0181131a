"""The big-request gate: one request's big texts tokenized at a time, clients served in turn.

Requests whose texts pass `service._BIG_CHARACTERS` take turns (`Service.tokenizing`). A request waits
for its turn here, on the event loop, holding no thread: the thread pool that serves `/info` and builds
answers stays free however many wait. The turn goes round the clients waiting (by address,
`answers.current_client`, as `FairQueue` serves jobs), each client's oldest request first, so one
client's backlog never stands in front of another's request. A client may have `per_client` requests
waiting; one more is refused (`QueueFull`: 429 with Retry-After), as the queue refuses past a share.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import deque

from .fair_queue import oldest_in_round
from .tickets import QueueFull

__all__ = ["FairGate"]


class FairGate:
    """One holder at a time; waiters served round-robin by client, each client's oldest first.

    Used from the event loop only. `changed` is notified on every change of `waiting` or `held`, so a
    test on another thread waits on the condition it checks, never on a clock.
    """

    def __init__(self, per_client: int, *, what: str = "requests") -> None:
        if per_client < 1:
            raise ValueError(f"per_client: {per_client} is not at least 1")
        self.per_client = per_client
        self.what = what  # what waits here, as a refusal names it
        self.changed = threading.Condition()
        self.waiting = 0  # requests waiting for their turn, all clients together
        self.held = False
        # Each client's waiters, oldest first; the dict's order is the round's (next to serve first).
        self._queues: dict[str, deque[asyncio.Future[None]]] = {}
        self._holder = ""  # the client whose request holds the turn
        self._since = 0.0  # when the turn held now began
        self._mean_hold = 0.0  # seconds a turn lasts, on average lately (for Retry-After)

    def waiting_for(self, client: str) -> int:
        """Requests `client` has waiting."""
        return len(self._queues.get(client, ()))

    async def enter(self, client: str) -> None:
        """Wait for the turn (on the event loop); QueueFull when `client` already has `per_client`
        requests waiting. A request cancelled while it waits leaves the line, holding nothing."""
        if not self.held and not self._queues:
            self._take(client)
            return
        if self.waiting_for(client) >= self.per_client:
            raise QueueFull(
                f"this client has {self.per_client} {self.what} waiting, the most one client may; "
                "retry after the Retry-After seconds",
                self._retry_after(),
            )
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(client, deque()).append(turn)
        self._changed(waiting=1)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.leave()  # the turn came as the request was cancelled: pass it on
            else:
                self._drop(client, turn)
            raise

    def leave(self) -> None:
        """End the turn held now: the next client in the round takes it (its oldest request)."""
        if self._since:
            took = time.monotonic() - self._since
            self._mean_hold = took if not self._mean_hold else 0.8 * self._mean_hold + 0.2 * took
        if self._holder in self._queues:  # the client that just had its turn goes after the others
            self._queues[self._holder] = self._queues.pop(self._holder)
        while self._queues:
            client = next(iter(self._queues))
            turn = oldest_in_round(self._queues, client)
            self._changed(waiting=-1)
            if not turn.done():  # a cancelled waiter is skipped
                turn.set_result(None)
                self._holder, self._since = client, time.monotonic()
                return
        self.held = False
        self._holder, self._since = "", 0.0
        self._changed()

    def _take(self, client: str) -> None:
        self.held = True
        self._holder, self._since = client, time.monotonic()
        self._changed()

    def _drop(self, client: str, turn: asyncio.Future[None]) -> None:
        queue = self._queues.get(client)
        if queue is None or turn not in queue:
            return  # `leave` skipped it already
        queue.remove(turn)
        if not queue:
            del self._queues[client]
        self._changed(waiting=-1)

    def _changed(self, *, waiting: int = 0) -> None:
        with self.changed:
            self.waiting += waiting
            self.changed.notify_all()

    def _retry_after(self) -> int:
        """Seconds until the turns before this client's next one are likely done (1..60)."""
        rounds = self.waiting + 1
        return max(1, min(60, math.ceil(self._mean_hold * rounds)))
