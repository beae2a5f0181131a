"""The service's one inference worker: a bounded queue of jobs, cross-request batches, Prometheus metrics.

One thread owns the model. It takes the oldest queued job, then more while they fit in `max_batch_tokens`
and arrive within `max_wait_ms` of the first (it waits only while other requests are being checked),
groups the sentence jobs that share a resolved `EmbedSpec`, and embeds each group's tokens (made once,
when the request was checked) with one `Engine.fitted_sentences` call (the engine's own token budget
splits it into forwards); each job's rows go back through its future. Any other model work (token
vectors, anatomy, static rows) runs on the same thread as a `call` job, alone, so the model is never used
by two threads.

Fair between clients: each job carries its client (the peer address, `answers.current_client`), and the
queue (`fair_queue.FairQueue`) admits a request within its client's share and the room left.

Batches are formed round-robin over the clients with work queued, not oldest first: the next batch
starts with the next client's oldest job, and is filled with each client's oldest job in turn while
they fit; one client alone is served oldest first, its batches as full as before.

Fair at every batch boundary: before each forward of a running job (the engine's `forward`, which
every route's model work goes through, is wrapped while the worker runs), the worker first gives the
jobs waiting a turn, `max_batch_tokens` of them at most (`FairQueue._small_waiting`): those that fit it
whole, each client's in turn, then, in the room left, of a client with no job running whose oldest job
is sentences over it, its leading texts as a piece; then it goes on. Each client served goes to the end
of the round, so two long requests take turns, and neither takes a small one's. A long document is thus
cut into its batches with other clients' work between them, so a request waits about one batch, not a
whole document, even one over a batch; long jobs that cannot be cut there (calls, a first text over the
room) keep their order among themselves (they are cut up anyway).

Work nobody waits for is not done: a request whose client left calls `abandon`, which takes its queued
jobs out of the queue, and stops a running job (any route's, and a group of sentence jobs once every
job in it is abandoned) at its next batch boundary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.results import SentenceEmbeddings
from ..core.spec import EmbedSpec
from .fair_queue import CLIENT_SHARE, FairQueue, Job
from .metrics import Metrics
from .tickets import Abandoned, QueueFull, ShuttingDown, Ticket

if TYPE_CHECKING:
    from ..model import Model

__all__ = ["Abandoned", "Batcher", "Metrics", "QueueFull", "ShuttingDown", "Ticket"]


@dataclass
class _Group:
    """Sentence jobs run as one engine call: abandoned once every job in it is."""

    jobs: list[Job]

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


class Batcher(FairQueue):
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
        super().__init__(
            max_batch_tokens=max_batch_tokens, max_queue=max_queue, client_share=client_share, metrics=metrics
        )
        self.model = model
        self.max_wait = max_wait_ms / 1000.0
        self.batching = batching
        self._arriving = 0
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()
        self._boundary_hook: _Boundary | None = None

    # The worker's start and stop, requests on their way (any thread) ----------------------------

    def start(self) -> None:
        """Start the worker thread (the app's lifespan does; a no-op while it runs)."""
        with self._starting:
            if self.alive:
                return
            self._boundary_hook = _Boundary(self.model.engine)
            self._stopping = False
            self._thread = threading.Thread(target=self._loop, name="bertscope-worker", daemon=True)
            self._thread.start()

    def start_unless_stopped(self) -> None:
        """Start the worker if it never started (a worker the lifespan stopped stays stopped).

        An app whose lifespan never ran (mounted in another app, which runs only its own; a test client
        used without `with`) would queue jobs no worker takes, each request waiting forever, and answer
        its health check 503 for ever: the first job or health check starts the worker instead."""
        if self._thread is None and not self._stopping:
            self.start()  # under its lock, a no-op for every caller but the first

    def _put(self, jobs: list[Job], client: str) -> list[Future[Any]]:
        self.start_unless_stopped()  # after the lifespan stopped it, the queue refuses (ShuttingDown)
        return super()._put(jobs, client)

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

    def _collect(self) -> list[Job] | None:
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

    def _run(self, batch: list[Job]) -> None:
        # A client that went away cancelled its future: its job is skipped, not computed.
        live = [job for job in batch if job.future.set_running_or_notify_cancel()]
        groups: dict[EmbedSpec, list[Job]] = {}
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
            jobs = current.jobs if isinstance(current, _Group) else [current]
            waiting = self._small_waiting(frozenset(job.client for job in jobs))
            if waiting:
                self.metrics.batch_requests.observe(len(waiting))
                self._run(waiting)
                if current.abandoned:
                    self.metrics.stopped.inc()
                    raise Abandoned("the request waiting on this work has gone away")
        if isinstance(current, Job):
            self.metrics.on_forward(int(ids.shape[0]), int(mask.sum()))

    def _embed_group(self, spec: EmbedSpec, jobs: list[Job]) -> None:
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

    def _embed_one(self, job: Job) -> SentenceEmbeddings:
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
