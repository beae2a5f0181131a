"""The service's one inference worker: a bounded queue of jobs, cross-request batches, Prometheus metrics.

One thread owns the model. It takes the oldest queued job, then more while they fit in `max_batch_tokens`
and arrive within `max_wait_ms` of the first (it waits only while other requests are being checked),
groups the sentence jobs that share a resolved `EmbedSpec`, and embeds each group's tokens (made once,
when the request was checked) with one `Engine.fitted_sentences` call (the engine's own token budget
splits it into forwards); each job's rows go back through its future. Any other model work (token
vectors, anatomy, static rows) runs on the same thread as a `call` job, alone, so the model is never used
by two threads.

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
a counted job leaves the queue, its count passes to that client's oldest job not counted in full, so
the rest of a long request counts once its first jobs have run (`_uncount`), and one client never has
more than its share waiting.
A refusal's Retry-After is the time the worker needs, at its measured rate, to free the room this
request lacks (its client's turn coming round once per other client waiting), 1 to 60 seconds.

Batches are formed round-robin over the clients with work queued, not oldest first: the next batch
starts with the next client's oldest job, and is filled with each client's oldest job in turn while
they fit; one client alone is served oldest first, its batches as full as before.

Fair at every batch boundary: before each forward of a running job (the engine's `forward`, which
every route's model work goes through, is wrapped while the worker runs), the worker first runs the small
jobs waiting (known to fit one batch, `max_batch_tokens` of them at most), then goes on. A long document
is thus cut into its batches with other clients' work between them, so a small request waits about
one batch, not a whole document; long jobs keep their order among themselves (the small go first
because they finish in one step, and the long are cut up anyway).

Work nobody waits for is not done: a request whose client left calls `abandon`, which takes its queued
jobs out of the queue, and stops a running job (any route's, and a group of sentence jobs once every
job in it is abandoned) at its next batch boundary.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.results import SentenceEmbeddings
from ..core.spec import EmbedSpec
from ..core.tokens import Tokens
from .metrics import Metrics
from .tickets import Abandoned, QueueFull, ShuttingDown, Ticket

if TYPE_CHECKING:
    from ..model import Model

__all__ = ["CLIENT_SHARE", "Abandoned", "Batcher", "Metrics", "QueueFull", "ShuttingDown", "Ticket"]

# The share of the queue's jobs and tokens one client may have waiting at once (`Batcher.client_share`).
CLIENT_SHARE = 0.5


@dataclass
class _Job:
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


@dataclass
class _Group:
    """Sentence jobs run as one engine call: abandoned once every job in it is."""

    jobs: list[_Job]

    @property
    def abandoned(self) -> bool:
        return all(job.future.abandoned for job in self.jobs)


# The worker thread's running jobs, outermost first: a batch boundary of the outermost may run others.
_running = threading.local()


class _Boundary:
    """`engine.forward` wrapped while a worker runs: each forward on a worker thread first passes
    its batch boundary (`Batcher._boundary`); any other thread's forward runs as it is."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.had_own = "forward" in vars(engine)
        self.plain = engine.forward
        engine.forward = self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        batcher: Batcher | None = getattr(_running, "batcher", None)
        if batcher is None or getattr(_running, "inside", False):
            return self.plain(*args, **kwargs)  # not a worker, or an outer wrapper passed the boundary
        batcher._boundary(args[0], args[2])
        _running.inside = True
        try:
            return self.plain(*args, **kwargs)
        finally:
            _running.inside = False

    def remove(self) -> None:
        """Put the engine's forward back, unless another wrapper went on after this one."""
        if vars(self.engine).get("forward") is self:
            if self.had_own:
                self.engine.forward = self.plain
            else:
                del self.engine.forward


class Batcher:
    """A bounded job queue, shared fairly by clients, in front of one worker thread that owns the model."""

    def __init__(
        self,
        model: Model,
        *,
        max_batch_tokens: int,
        max_wait_ms: float,
        max_queue: int,
        batching: bool = True,
        metrics: Metrics | None = None,
        client_share: float = CLIENT_SHARE,
    ) -> None:
        if not 0 < client_share <= 1:
            raise ValueError(f"client_share: {client_share} is not a fraction in (0, 1]")
        self.model = model
        self.max_batch_tokens = max_batch_tokens
        self.max_wait = max_wait_ms / 1000.0
        self.max_queue = max_queue
        self.batching = batching
        self.metrics = metrics or Metrics()
        # Each client's jobs, oldest first; the dict's order is the round-robin's (next to serve first).
        self._queues: dict[str, deque[_Job]] = {}
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
        # Jobs and tokens queued as counted against the limits (`_Job.counted`), in all and per client.
        self._queued_jobs = 0
        self._queued_tokens = 0
        self._client_jobs: Counter[str] = Counter()
        self._client_tokens: Counter[str] = Counter()
        self._tokens_per_second: float | None = None
        self._cond = threading.Condition()
        self._stopping = False
        self._arriving = 0
        self._thread: threading.Thread | None = None
        self._boundary_hook: _Boundary | None = None

    # Client side (any thread) -------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker thread."""
        self._boundary_hook = _Boundary(self.model.engine)
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="bertscope-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the worker after the batch it is running; jobs still queued fail with ShuttingDown."""
        with self._cond:
            self._stopping = True
            left = [job for queue in self._queues.values() for job in queue]
            self._queues = {}
            self._queued_jobs = self._queued_tokens = 0
            self._client_jobs.clear()
            self._client_tokens.clear()
            self._cond.notify_all()
        for job in left:
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(ShuttingDown("the server is shutting down"))
        if self._thread is not None:
            self._thread.join(timeout)
        if self._boundary_hook is not None:
            self._boundary_hook.remove()
            self._boundary_hook = None

    @property
    def alive(self) -> bool:
        """Whether the worker thread runs."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def queued(self) -> int:
        """Jobs waiting (not counting the batch being run)."""
        with self._cond:  # the worker changes the dict of queues; the condition's lock is reentrant
            return sum(map(len, self._queues.values()))

    def queued_by(self, client: str) -> tuple[int, int]:
        """(jobs, tokens) `client` has queued, as counted against its share."""
        with self._cond:
            return self._client_jobs[client], self._client_tokens[client]

    @contextmanager
    def arriving(self) -> Iterator[None]:
        """Mark a request as on its way to the queue (being checked), so a batch waits for it."""
        with self._cond:
            self._arriving += 1
        try:
            yield
        finally:
            with self._cond:
                self._arriving -= 1
                self._cond.notify()

    def sentences(
        self, parts: Sequence[tuple[Sequence[Tokens], int]], spec: EmbedSpec, client: str = ""
    ) -> list[Future[Any]]:
        """Queue (fitted tokens, n_tokens) parts, all or none, for sentence vectors; one future per part."""
        jobs = [_Job(Ticket(), n_tokens=n, tokens=tokens, spec=spec, client=client) for tokens, n in parts]
        return self._put(jobs, client)

    def call(self, fn: Callable[[], Any], n_tokens: int | None = None, client: str = "") -> Future[Any]:
        """Queue `fn` to run on the worker thread, alone; its result or exception comes back.

        `n_tokens`, the tokens it runs when known, lets it run between another job's batches when it
        fits one batch, and counts in the queue's tokens.
        """
        known = n_tokens is not None
        job = _Job(Ticket(), n_tokens=n_tokens or 0, call=fn, known=known, client=client)
        return self._put([job], client)[0]

    def abandon(self, futures: Sequence[Future[Any]]) -> None:
        """Nobody waits for these any more: drop the queued ones, and flag the running ones to stop."""
        dropped: list[_Job] = []
        with self._cond:
            for future in futures:
                if not future.cancel() and isinstance(future, Ticket) and not future.done():
                    future.abandoned = True  # running: its group stops after the forward in progress
            for client, queue in list(self._queues.items()):
                gone = [job for job in queue if job.future.cancelled()]
                if gone:
                    dropped += gone
                    self._queues[client] = deque(job for job in queue if not job.future.cancelled())
                    for job in gone:
                        self._uncount(job)
                    if not self._queues[client]:
                        del self._queues[client]
            if dropped:
                self.metrics.queue_size.set(self.queued)
        self.metrics.skipped_texts.inc(sum(len(job.tokens) for job in dropped))

    def _put(self, jobs: list[_Job], client: str) -> list[Future[Any]]:
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

    def _admit(self, jobs: list[_Job], client: str) -> None:
        """QueueFull, with a Retry-After sized for this request, unless `jobs` fit their client's share
        and the room left (a newcomer's small request may use the room kept for it)."""
        n = min(len(jobs), self.request_jobs)
        tokens = min(sum(job.n_tokens for job in jobs), self.request_tokens)
        mine_jobs, mine_tokens = self._client_jobs[client], self._client_tokens[client]
        newcomer = not mine_jobs and not mine_tokens and len(jobs) == 1 and tokens <= self.max_batch_tokens
        room_jobs = self.max_queue - (0 if newcomer else self.newcomer_jobs)
        room_tokens = self.max_queue_tokens - (0 if newcomer else self.max_batch_tokens)
        clients = len(self._queues)
        if mine_jobs + n > self.share_jobs:
            excess = mine_jobs + n - self.share_jobs
            raise QueueFull(
                f"the queue is full for this client: it has {mine_jobs} jobs waiting, and {n} more would "
                f"pass its share of {self.share_jobs} (a share of --max-queue {self.max_queue}); retry after "
                "the Retry-After seconds",
                self._retry_after(self._tokens_of(excess, mine_tokens, mine_jobs) * clients),
            )
        if mine_tokens + tokens > self.share_tokens:
            raise QueueFull(
                f"this client's queued requests hold {mine_tokens} tokens of work, and {tokens} more would "
                f"pass its share of {self.share_tokens} (of the queue's {self.max_queue_tokens}); retry "
                "after the Retry-After seconds",
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
                f"the queue holds {self._queued_tokens} tokens of work, and {tokens} more would pass "
                f"{room_tokens}; retry after the Retry-After seconds",
                self._retry_after(self._queued_tokens + tokens - room_tokens),
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

    def _uncount(self, job: _Job) -> None:
        """`job` has left the queue (call it once the client's queue is without it): what it counted
        passes to its client's oldest jobs still queued that are not counted in full, so the rest of a
        request longer than a share counts once its first jobs are gone."""
        client = job.client
        jobs, tokens = int(job.counts), job.counted
        self._queued_tokens -= tokens
        self._queued_jobs -= jobs
        self._client_tokens[client] -= tokens
        self._client_jobs[client] -= jobs
        for other in self._queues.get(client, ()):
            if not jobs and not tokens:
                break
            if other is job:
                continue
            more_jobs = int(jobs > 0 and not other.counts)
            more_tokens = min(tokens, other.n_tokens - other.counted)
            if more_jobs or more_tokens:
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

    def _pop(self, client: str) -> _Job:
        """`client`'s oldest job, out of the queue; the client goes to the end of the round."""
        queue = self._queues.pop(client)
        job = queue.popleft()
        if queue:
            self._queues[client] = queue
        self._uncount(job)
        return job

    # Worker side --------------------------------------------------------------------------------

    def _loop(self) -> None:
        _running.batcher, _running.jobs = self, []
        while True:
            batch = self._collect()
            if batch is None:
                return
            self.metrics.batch_requests.observe(len(batch))
            start = time.perf_counter()
            self._run(batch)
            self.metrics.busy.inc(time.perf_counter() - start)

    def _collect(self) -> list[_Job] | None:
        """The next batch: the next client's oldest job, then each client's oldest in turn while they fit
        the token budget and the wait."""
        with self._cond:
            while not self._queues and not self._stopping:
                self._cond.wait()
            if self._stopping:
                return None
            first = self._pop(next(iter(self._queues)))
            batch, tokens = [first], first.n_tokens
            if first.call is None and self.batching:
                deadline = first.enqueued + self.max_wait
                while tokens < self.max_batch_tokens and not self._stopping:
                    if not self._queues:
                        if not self._arriving:
                            break
                        left = deadline - time.monotonic()
                        if left <= 0 or not self._cond.wait(left):
                            break
                        continue
                    fits = next(
                        (
                            client
                            for client, queue in self._queues.items()
                            if queue[0].call is None and tokens + queue[0].n_tokens <= self.max_batch_tokens
                        ),
                        None,
                    )
                    if fits is None:
                        break
                    nxt = self._pop(fits)
                    batch.append(nxt)
                    tokens += nxt.n_tokens
            self.metrics.queue_size.set(self.queued)
            return batch

    def _run(self, batch: list[_Job]) -> None:
        # A client that went away cancelled its future: its job is skipped, not computed.
        live = [job for job in batch if job.future.set_running_or_notify_cancel()]
        groups: dict[EmbedSpec, list[_Job]] = {}
        running: list[Any] = _running.jobs
        for job in live:
            if job.call is not None:
                running.append(job)
                try:
                    _settle(job.future, job.call)
                finally:
                    running.pop()
            else:
                assert job.spec is not None
                groups.setdefault(job.spec, []).append(job)
        for spec, jobs in groups.items():
            running.append(_Group(jobs))
            try:
                self._embed_group(spec, jobs)
            finally:
                running.pop()

    def _boundary(self, ids: Any, mask: Any) -> None:
        """Before a forward on the worker: stop an abandoned job; between the outermost job's batches,
        run the small jobs waiting first. Calls' forwards are counted here (groups count their own)."""
        running: list[Any] = _running.jobs
        if not running:
            return
        current = running[-1]
        if current.abandoned:
            self.metrics.stopped.inc()
            raise Abandoned("the request waiting on this work has gone away")
        if len(running) == 1:
            waiting = self._small_waiting()
            if waiting:
                self.metrics.batch_requests.observe(len(waiting))
                self._run(waiting)
                if current.abandoned:
                    self.metrics.stopped.inc()
                    raise Abandoned("the request waiting on this work has gone away")
        if isinstance(current, _Job):
            self.metrics.on_forward(int(ids.shape[0]), int(mask.sum()))

    def _small_waiting(self) -> list[_Job]:
        """Queued jobs that each fit one batch, within one batch's tokens together: each client's oldest
        that fits in turn, round-robin."""
        with self._cond:
            taken: list[_Job] = []
            tokens = 0
            left = {
                client: deque(job for job in queue if job.known) for client, queue in self._queues.items()
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
            if taken:
                chosen = {id(job) for job in taken}
                for client, queue in list(self._queues.items()):
                    kept = deque(job for job in queue if id(job) not in chosen)
                    if kept:
                        self._queues[client] = kept
                    else:
                        del self._queues[client]
                for job in taken:
                    self._uncount(job)
                self.metrics.queue_size.set(self.queued)
        return taken

    def _embed_group(self, spec: EmbedSpec, jobs: list[_Job]) -> None:
        tokens = [tok for job in jobs for tok in job.tokens]
        forwarded = [0]

        def on_forward(n_texts: int, n_tokens: int) -> None:
            self.metrics.on_forward(n_texts, n_tokens)
            forwarded[0] += n_texts

        start = time.perf_counter()
        try:
            result = self.model.engine.fitted_sentences(tokens, spec, on_batch=on_forward)
            rate = sum(job.n_tokens for job in jobs) / max(time.perf_counter() - start, 1e-6)
            with self._cond:  # a moving average, so Retry-After follows the load
                old = self._tokens_per_second
                self._tokens_per_second = rate if old is None else 0.8 * old + 0.2 * rate
        except Abandoned as exc:
            for job in jobs:
                job.future.set_exception(exc)
            self.metrics.skipped_texts.inc(max(0, len(tokens) - forwarded[0]))
            return
        except Exception as exc:
            if len(jobs) == 1:
                jobs[0].future.set_exception(exc)
                return
            # Whatever failed belongs to one request: run each alone so the others still get answers.
            for job in jobs:
                _settle(job.future, lambda job=job: self._embed_one(job))  # type: ignore[misc]
            return
        first = 0
        for job in jobs:
            stop = first + len(job.tokens)
            job.future.set_result(_rows(result, first, stop))
            first = stop

    def _embed_one(self, job: _Job) -> SentenceEmbeddings:
        assert job.spec is not None
        engine = self.model.engine
        return engine.fitted_sentences(list(job.tokens), job.spec, on_batch=self.metrics.on_forward)


def _settle(future: Future[Any], fn: Callable[[], Any]) -> None:
    try:
        future.set_result(fn())
    except Exception as exc:  # the future carries it to the request that asked
        future.set_exception(exc)


def _rows(result: SentenceEmbeddings, start: int, stop: int) -> SentenceEmbeddings:
    return SentenceEmbeddings(
        vectors=result.vectors[start:stop],
        n_tokens=result.n_tokens[start:stop],
        n_dropped=result.n_dropped[start:stop],
        spec=result.spec,
    )
