"""TEI's timing headers: how long a request took and where it spent it (tokenizing, queued, the forward).

    times = RequestTimes.begin()            # at the route's start: TEI's start_time, the body parsed
    res = await svc.sentences(texts, spec)  # `tokenizing` and `record_jobs` add to it on the way
    stamp = times.headers(characters=characters(inputs), tokens=int(res.n_tokens.sum()), compute_type="cpu")
    response.headers.update(stamp)          # measured before the answer is written, as TEI's

The headers are TEI's (`impl From<ResponseMetadata> for HeaderMap`, router/src/lib.rs), in its units:
whole milliseconds, rounded down. x-compute-time and x-total-time are both the time since the route
started; x-queue-time and x-inference-time the mean over the request's jobs (TEI's: over its inputs,
each its own job) of the wait for the worker and of the worker's run; x-tokenization-time the time the
request spent tokenizing (its texts in one call, where TEI's is the mean of each input's own).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tickets import Ticket

__all__ = ["RequestTimes", "characters", "record_jobs", "tokenizing"]


@dataclass
class RequestTimes:
    """One request's times, in seconds (monotonic clock): tokenization, and queue and inference summed
    over its `jobs`."""

    start: float = field(default_factory=time.monotonic)
    tokenization: float = 0.0
    queue: float = 0.0
    inference: float = 0.0
    jobs: int = 0

    @classmethod
    def begin(cls) -> RequestTimes:
        """Start the current request's times (the work it awaits records into them)."""
        times = cls()
        _current.set(times)
        return times

    def headers(self, *, characters: int, tokens: int, compute_type: str) -> dict[str, str]:
        """TEI's x-compute-* and x-*-time headers (milliseconds) for the request as it stands now."""
        total = _ms(time.monotonic() - self.start)
        jobs = max(self.jobs, 1)
        return {
            "x-compute-type": compute_type,
            "x-compute-time": total,
            "x-compute-characters": str(characters),
            "x-compute-tokens": str(tokens),
            "x-total-time": total,
            "x-tokenization-time": _ms(self.tokenization),
            "x-queue-time": _ms(self.queue / jobs),
            "x-inference-time": _ms(self.inference / jobs),
        }


_current: ContextVar[RequestTimes | None] = ContextVar("bertscope_request_times", default=None)


def _ms(seconds: float) -> str:
    return str(int(max(seconds, 0.0) * 1000))  # Rust's Duration::as_millis: whole milliseconds, down


@contextmanager
def tokenizing() -> Iterator[None]:
    """Count the time inside as the current request's tokenization (nothing outside a timed request)."""
    start = time.monotonic()
    try:
        yield
    finally:
        if (times := _current.get()) is not None:
            times.tokenization += time.monotonic() - start


def record_jobs(tickets: Iterable[Ticket]) -> None:
    """Add the worker's jobs, done, to the current request's queue and inference times."""
    if (times := _current.get()) is None:
        return
    for ticket in tickets:
        if ticket.started_at is not None and ticket.finished_at is not None:
            times.queue += ticket.started_at - ticket.queued_at
            times.inference += ticket.finished_at - ticket.started_at
            times.jobs += 1


def characters(inputs: Any) -> int:
    """TEI's x-compute-characters of a request's inputs: a text's characters (both of a pair), an id
    list's ids."""
    if isinstance(inputs, str):
        return len(inputs)
    if isinstance(inputs, int):
        return 1
    if isinstance(inputs, (list, tuple)):
        return sum(characters(item) for item in inputs)
    return 0
