"""The inference worker's queue, shared fairly by clients: admission, each client's share, Retry-After.

Fair between clients: each job carries its client (the peer address, `answers.current_client`). The
queue is bounded in jobs (`max_queue`) and tokens (`max_queue_tokens`), and a request is admitted when
  - it fits its client's share of both (`client_share`, half by default), counting what that client has
    queued already;
  - it fits what is left of both, less the room kept for a newcomer's small request (`max_batch_tokens`
    tokens and `newcomer_jobs` jobs, none where the queue holds one job): a request that fits one batch
    from a client with nothing queued may use that room, so one busy client never makes another's small
    request wait for a 429;
  - a request counts at most a client's share, and at most what the queue holds beside the newcomer's
    room (`request_jobs`, `request_tokens`; the worker cuts a longer one into batches anyway), so one
    larger than the share goes in whenever its client has nothing queued and half the queue is free; no
    request is ever too big for an empty queue, and none is refused behind a few tokens that an empty
    queue would have taken.
A client's counted jobs and tokens stay what it really has waiting, up to what its requests count: when
a counted job leaves the queue, or a piece is taken out of one to run between another's batches, its
count passes to that client's oldest job not counted in full, so the rest of a long request counts once
its first jobs have run (`_pass_on`), and one client never has more than its share waiting.
A refusal's Retry-After is the time the worker needs, at its measured rate, to free the room this
request lacks (its client's turn coming round once per other client waiting), 1 to 60 seconds.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..core.results import SentenceEmbeddings
from ..core.spec import EmbedSpec
from ..core.tokens import Tokens
from .metrics import Metrics
from .tickets import QueueFull, ShuttingDown, Ticket

__all__ = ["CLIENT_SHARE", "FairQueue", "Job", "SentenceTicket", "oldest_in_round"]

T = TypeVar("T")

# The share of the queue's jobs and tokens one client may have waiting at once (`Batcher.client_share`).
CLIENT_SHARE = 0.5


class SentenceTicket(Ticket):
    """A sentence job's future, whose leading texts may run first as pieces between another job's batches
    (`FairQueue._slice`): their rows (`before`) lead the rows the rest of the job ends with."""

    def __init__(self) -> None:
        super().__init__()
        self.before: list[SentenceEmbeddings] = []

    def set_running_or_notify_cancel(self) -> bool:
        """Future's; False where a piece's failure has already ended it (the rest is not run). A job whose
        first piece ran started then: TEI's queue time ends there, not at its last part."""
        if self.done():
            return False
        started = self.started_at
        running = super().set_running_or_notify_cancel()
        if started is not None:
            self.started_at = started
        return running

    def set_result(self, result: Any) -> None:
        """Future's, with the pieces' rows first."""
        super().set_result(SentenceEmbeddings.joined([*self.before, result]) if self.before else result)


class _Piece(Ticket):
    """The future of a job's leading texts run ahead of the rest: its rows and failure are the job's."""

    def __init__(self, whole: SentenceTicket, drop_rest: Callable[[], None]) -> None:
        super().__init__()
        self.whole = whole
        self.drop_rest = drop_rest

    @property
    def abandoned(self) -> bool:  # type: ignore[override]
        """Nothing more of the job is wanted: its request has gone away (its queued rest was cancelled, or
        its running one flagged), or it has ended (another piece of it failed)."""
        return self.whole.done() or self.whole.abandoned

    def set_running_or_notify_cancel(self) -> bool:
        """Future's; the job's start is its first piece's."""
        running = super().set_running_or_notify_cancel()
        if running and self.whole.started_at is None:
            self.whole.started_at = self.started_at
        return running

    def set_result(self, result: Any) -> None:
        """Future's; the rows wait for the rest of the job."""
        super().set_result(result)
        self.whole.before.append(result)

    def set_exception(self, exception: BaseException | None) -> None:
        """Future's; the job fails with it, and its rest leaves the queue (it would be run for nobody)."""
        super().set_exception(exception)
        if not self.whole.done():
            self.whole.set_exception(exception)
        self.drop_rest()


@dataclass
class Job:
    """One piece of work for the worker: a part's tokens for sentence vectors, or a call; its client."""

    future: Ticket
    n_tokens: int = 0
    tokens: Sequence[Tokens] = ()
    spec: EmbedSpec | None = None
    call: Callable[[], Any] | None = None
    enqueued: float = field(default_factory=time.monotonic)
    # A call's tokens when known (it may run between another job's batches when they fit one batch).
    known: bool = True
    # Who asked (the peer address): the queue's shares and the round-robin go by it.
    client: str = ""
    # What it counts for in the queue's limits (a request counts at most a client's share), set by `_put`.
    counted: int = 0
    counts: bool = True

    @property
    def abandoned(self) -> bool:
        return self.future.abandoned


class FairQueue:
    """Each client's queued jobs, and what they count against the queue's limits and the client's share;
    the worker (`batching.Batcher`) takes its jobs from here, under the same condition's lock."""

    def __init__(
        self, *, max_batch_tokens: int, max_queue: int, client_share: float, metrics: Metrics | None
    ) -> None:
        if not 0 < client_share <= 1:
            raise ValueError(f"client_share: {client_share} is not a fraction in (0, 1]")
        self.max_batch_tokens = max_batch_tokens
        self.max_queue = max_queue
        self.metrics = metrics or Metrics()
        # Each client's jobs, oldest first; the dict's order is the round-robin's (next to serve first).
        self._queues: dict[str, deque[Job]] = {}
        # The queue is bounded by work too: 256 long texts are not 256 short ones.
        self.max_queue_tokens = max_batch_tokens * 32
        self.client_share = client_share
        # What one client may have queued at once, and the room kept for a newcomer's small request.
        self.share_jobs = max(1, int(max_queue * client_share))
        self.share_tokens = max(max_batch_tokens, int(self.max_queue_tokens * client_share))
        # A sixteenth of the jobs, at least one, but never the whole queue (--max-queue 1 keeps none).
        self.newcomer_jobs = min(max(1, max_queue // 16), max_queue - 1)
        # What one request counts at most: its client's share, within the room an empty queue gives a
        # client that is not a newcomer (so no request is too big for an empty queue).
        self.request_jobs = max(1, min(self.share_jobs, max_queue - self.newcomer_jobs))
        self.request_tokens = min(self.share_tokens, self.max_queue_tokens - max_batch_tokens)
        # Jobs and tokens queued as counted against the limits (`Job.counted`), in all and per client.
        self._queued_jobs = 0
        self._queued_tokens = 0
        self._client_jobs: Counter[str] = Counter()
        self._client_tokens: Counter[str] = Counter()
        self._tokens_per_second: float | None = None
        self._cond = threading.Condition()
        # Set while the worker stops (`Batcher.stop`): nothing more is queued.
        self._stopping = False

    @property
    def queued(self) -> int:
        """Jobs waiting (not counting the batch being run)."""
        with self._cond:  # the worker changes the dict of queues; the condition's lock is reentrant
            return sum(map(len, self._queues.values()))

    def queued_by(self, client: str) -> tuple[int, int]:
        """(jobs, tokens) `client` has queued, as counted against its share."""
        with self._cond:
            return self._client_jobs[client], self._client_tokens[client]

    def sentences(
        self, parts: Sequence[tuple[Sequence[Tokens], int]], spec: EmbedSpec, client: str = ""
    ) -> list[Future[Any]]:
        """Queue (fitted tokens, n_tokens) parts, all or none, for sentence vectors; one future per part."""
        jobs = [
            Job(SentenceTicket(), n_tokens=n, tokens=tokens, spec=spec, client=client) for tokens, n in parts
        ]
        return self._put(jobs, client)

    def call(self, fn: Callable[[], Any], n_tokens: int | None = None, client: str = "") -> Future[Any]:
        """Queue `fn` to run on the worker thread, alone; its result or exception comes back.

        `n_tokens`, the tokens it runs when known, lets it run between another job's batches when it
        fits one batch, and counts in the queue's tokens.
        """
        known = n_tokens is not None
        job = Job(Ticket(), n_tokens=n_tokens or 0, call=fn, known=known, client=client)
        return self._put([job], client)[0]

    def abandon(self, futures: Sequence[Future[Any]]) -> None:
        """Nobody waits for these any more: drop the queued ones, and flag the running ones to stop."""
        with self._cond:
            for future in futures:
                if not future.cancel() and isinstance(future, Ticket) and not future.done():
                    future.abandoned = True  # running: its group stops after the forward in progress
            self._drop_done()

    def _drop_done(self) -> None:
        """Take the queued jobs whose future is done (cancelled, or failed in a piece) out of the queue."""
        dropped: list[Job] = []
        with self._cond:
            for client, queue in list(self._queues.items()):
                gone = [job for job in queue if job.future.done()]
                if gone:
                    dropped += gone
                    self._queues[client] = deque(job for job in queue if not job.future.done())
                    for job in gone:
                        self._uncount(job)
                    if not self._queues[client]:
                        del self._queues[client]
            if dropped:
                self.metrics.queue_size.set(self.queued)
        self.metrics.skipped_texts.inc(sum(len(job.tokens) for job in dropped))

    def _put(self, jobs: list[Job], client: str) -> list[Future[Any]]:
        with self._cond:
            if self._stopping:
                raise ShuttingDown("the server is shutting down")
            self._admit(jobs, client)
            # A request counts at most a client's share (`request_jobs`), its first jobs first.
            jobs_left, tokens_left = self.request_jobs, self.request_tokens
            for job in jobs:
                job.counted, job.counts = min(job.n_tokens, tokens_left), jobs_left > 0
                tokens_left -= job.counted
                jobs_left -= job.counts
                self._queued_tokens += job.counted
                self._queued_jobs += job.counts
                self._client_tokens[client] += job.counted
                self._client_jobs[client] += job.counts
            self._queues.setdefault(client, deque()).extend(jobs)
            self.metrics.queue_size.set(self.queued)
            self._cond.notify()
        return [job.future for job in jobs]

    def _admit(self, jobs: list[Job], client: str) -> None:
        """QueueFull, with a Retry-After sized for this request, unless `jobs` fit their client's share
        and the room left (a newcomer's small request may use the room kept for it)."""
        n = min(len(jobs), self.request_jobs)
        tokens = min(sum(job.n_tokens for job in jobs), self.request_tokens)
        mine_jobs, mine_tokens = self._client_jobs[client], self._client_tokens[client]
        newcomer = not mine_jobs and not mine_tokens and len(jobs) == 1 and tokens <= self.max_batch_tokens
        room_jobs = self.max_queue - (0 if newcomer else self.newcomer_jobs)
        room_tokens = self.max_queue_tokens - (0 if newcomer else self.max_batch_tokens)
        clients = len(self._queues)
        self._refuse_share_jobs(n, client)
        if mine_tokens + tokens > self.share_tokens:
            raise QueueFull(
                f"this client's queued requests hold {mine_tokens:,} tokens of work, and {tokens:,} more "
                f"would pass its share of {self.share_tokens:,} (of the queue's {self.max_queue_tokens:,}); "
                "retry after the Retry-After seconds",
                self._retry_after((mine_tokens + tokens - self.share_tokens) * clients),
            )
        if self._queued_jobs + n > room_jobs:
            excess = self._queued_jobs + n - room_jobs
            raise QueueFull(
                f"the queue is full ({self._queued_jobs} jobs waiting of {self.max_queue}); retry after "
                "the Retry-After seconds",
                self._retry_after(self._tokens_of(excess, self._queued_tokens, self._queued_jobs)),
            )
        if self._queued_tokens + tokens > room_tokens:
            raise QueueFull(
                f"the queue holds {self._queued_tokens:,} tokens of work, and {tokens:,} more would pass "
                f"{room_tokens:,}; retry after the Retry-After seconds",
                self._retry_after(self._queued_tokens + tokens - room_tokens),
            )

    def refuse_share_full(self, n_jobs: int, client: str) -> None:
        """QueueFull, the very answer `_put` would give now (its message and Retry-After), when `client`
        already has its share of the queue's jobs waiting and a request of `n_jobs` jobs would pass it.

        Its first rule, and the one rule that needs no tokens: a caller checks it before tokenizing the
        request, so a client that floods the queue is refused at the cost of a look-up. The other rules
        name the request's tokens in their answer, and wait for its count.
        """
        with self._cond:
            if not self._stopping:  # a stopping queue answers 503 at `_put`, as before
                self._refuse_share_jobs(min(n_jobs, self.request_jobs), client)

    def _refuse_share_jobs(self, n: int, client: str) -> None:
        """QueueFull when `n` jobs more pass `client`'s share of the queue's jobs (under the lock)."""
        mine_jobs, mine_tokens = self._client_jobs[client], self._client_tokens[client]
        if mine_jobs + n > self.share_jobs:
            excess = mine_jobs + n - self.share_jobs
            raise QueueFull(
                f"the queue is full for this client: it has {mine_jobs} jobs waiting, and {n} more would "
                f"pass its share of {self.share_jobs} (a share of --max-queue {self.max_queue}); retry after "
                "the Retry-After seconds",
                self._retry_after(self._tokens_of(excess, mine_tokens, mine_jobs) * len(self._queues)),
            )

    @staticmethod
    def _tokens_of(jobs: int, tokens: int, of_jobs: int) -> int:
        """The tokens `jobs` of `of_jobs` jobs holding `tokens` run, on average (at least one each)."""
        return max(jobs, math.ceil(tokens * jobs / max(1, of_jobs)))

    def _retry_after(self, tokens: int) -> int:
        """Seconds the worker takes to run `tokens`, at the rate it has been going (1..60)."""
        if not self._tokens_per_second:
            return 1
        return max(1, min(60, math.ceil(tokens / self._tokens_per_second)))

    def _uncount(self, job: Job) -> None:
        """`job` has left the queue (call it once the client's queue is without it): what it counted
        passes to its client's oldest jobs still queued that are not counted in full, so the rest of a
        request longer than a share counts once its first jobs are gone."""
        self._queued_tokens -= job.counted
        self._queued_jobs -= job.counts
        self._client_tokens[job.client] -= job.counted
        self._client_jobs[job.client] -= job.counts
        self._pass_on(job.client, int(job.counts), job.counted)

    def _pass_on(self, client: str, jobs: int, tokens: int) -> None:
        """Count up to `jobs` jobs and `tokens` tokens that `client` no longer has waiting (a job left, or
        a piece was taken out of one) for its oldest queued jobs not counted in full."""
        for other in self._queues.get(client, ()):
            if not jobs and not tokens:
                break
            more_jobs = int(jobs > 0 and not other.counts)
            more_tokens = min(tokens, other.n_tokens - other.counted)
            other.counts = other.counts or bool(more_jobs)
            other.counted += more_tokens
            jobs -= more_jobs
            tokens -= more_tokens
            self._queued_jobs += more_jobs
            self._queued_tokens += more_tokens
            self._client_jobs[client] += more_jobs
            self._client_tokens[client] += more_tokens
        if not self._client_jobs[client] and not self._client_tokens[client]:
            del self._client_jobs[client], self._client_tokens[client]

    def _pop(self, client: str) -> Job:
        """`client`'s oldest job, out of the queue; the client goes to the end of the round."""
        job = oldest_in_round(self._queues, client)
        self._uncount(job)
        return job

    def _small_waiting(self, running: frozenset[str] = frozenset()) -> list[Job]:
        """The queued jobs' turn between a running job's batches, within one batch's tokens: each client's
        oldest job that fits whole, in turn (round-robin); then, in the room left, of each client not in
        `running` whose oldest job is sentences over it, its leading texts as a piece (`_slice`), the rest
        at a later turn. Every client served goes to the end of the round, so the next turn starts with
        the others: two long requests take turns, and neither takes a small one's."""
        with self._cond:
            taken: list[Job] = []
            tokens = 0
            left = {
                client: deque(job for job in queue if job.known and not job.future.done())
                for client, queue in self._queues.items()
            }
            while left:
                for client in list(left):
                    candidates = left[client]
                    while candidates and tokens + candidates[0].n_tokens > self.max_batch_tokens:
                        candidates.popleft()
                    if not candidates:
                        del left[client]
                        continue
                    job = candidates.popleft()
                    taken.append(job)
                    tokens += job.n_tokens
            chosen = {id(job) for job in taken}
            for client, queue in list(self._queues.items()):
                kept = deque(job for job in queue if id(job) not in chosen)
                if kept:
                    self._queues[client] = kept
                else:
                    del self._queues[client]
            for job in taken:
                self._uncount(job)
                if job.client in self._queues:  # served: to the end of the round
                    self._queues[job.client] = self._queues.pop(job.client)
            pieces: list[Job] = []
            for client in list(self._queues):
                piece = None if client in running else self._slice(self._queues[client][0], tokens)
                if piece is not None:
                    pieces.append(piece)
                    tokens += piece.n_tokens
                    self._queues[client] = self._queues.pop(client)  # served: to the end of the round
            if taken or pieces:
                self.metrics.queue_size.set(self.queued)
        return taken + pieces

    def _slice(self, job: Job, used: int) -> Job | None:
        """The leading texts of sentence `job` that fit the batch beside `used` tokens, taken out of it as
        a piece (its rows go to the job's future), or None where the job fits whole, its first text does
        not fit, or it has ended; the tokens the piece takes leave the job's count, and pass to the
        client's jobs not counted in full (as `_uncount`'s do)."""
        room = self.max_batch_tokens - used
        if job.call is not None or not isinstance(job.future, SentenceTicket) or job.future.done():
            return None
        if job.n_tokens <= room:
            return None
        k, size = 0, 0
        while k < len(job.tokens) - 1 and size + len(job.tokens[k]) <= room:
            size += len(job.tokens[k])
            k += 1
        if not k:
            return None
        piece = Job(
            _Piece(job.future, self._drop_done),
            n_tokens=size,
            tokens=job.tokens[:k],
            spec=job.spec,
            client=job.client,
        )
        piece.counted, piece.counts = 0, False  # never queued
        job.tokens, job.n_tokens = job.tokens[k:], job.n_tokens - size
        freed = job.counted - min(job.counted, job.n_tokens)
        job.counted -= freed
        self._queued_tokens -= freed
        self._client_tokens[job.client] -= freed
        self._pass_on(job.client, 0, freed)
        return piece


def oldest_in_round(queues: dict[str, deque[T]], client: str) -> T:
    """`client`'s oldest item, taken out of `queues` (each client's items oldest first, the dict's order
    the round's); the client goes to the end of the round, or out of it when it has no more."""
    queue = queues.pop(client)
    item = queue.popleft()
    if queue:
        queues[client] = queue
    return item
