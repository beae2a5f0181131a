"""What a job handed to the inference worker can end in: its future (a `Ticket`), a full queue, a stopped
worker, or work stopped because everyone waiting on it left."""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

__all__ = ["Abandoned", "QueueFull", "ShuttingDown", "Ticket"]


class QueueFull(Exception):
    """The queue has no room for this request now; the client should retry after `retry_after` seconds."""

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ShuttingDown(Exception):
    """The worker stopped before this job ran."""


class Abandoned(Exception):
    """Every request waiting on this work has gone away, so the worker stopped doing it."""


class Ticket(Future[Any]):
    """A job's future that also knows when the request waiting on it has gone away while it runs, and
    when it was queued, taken by the worker and done (monotonic seconds: TEI's queue and inference times)."""

    abandoned = False

    def __init__(self) -> None:
        super().__init__()
        self.queued_at = time.monotonic()
        self.started_at: float | None = None
        self.finished_at: float | None = None

    def set_running_or_notify_cancel(self) -> bool:
        """Future's; the worker takes the job now (unless it was cancelled)."""
        running = super().set_running_or_notify_cancel()
        if running:
            self.started_at = time.monotonic()
        return running

    def set_result(self, result: Any) -> None:
        """Future's; the job is done now."""
        self.finished_at = time.monotonic()
        super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        """Future's; the job is done now."""
        self.finished_at = time.monotonic()
        super().set_exception(exception)
