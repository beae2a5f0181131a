"""A request over one batch gets its turns between another client's batches (audit 20d): its leading
texts that fit what is left of a batch run as a piece before the running request's next forward, the rest
at the next; each request's rows are the library's, in its own order. Before, only requests that fit one
batch cut in, and one of 1,212 tokens waited for all of another client's windowed document.

No clock: the first forward is held on an event while the second request is queued."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.core.spec import resolve
from bertscope.server import tickets
from bertscope.server.batching import Batcher
from bertscope.server.fair_queue import FairQueue
from bertscope.server.tickets import QueueFull

A, B = "10.0.0.1", "10.0.0.2"


def test_a_request_over_one_batch_runs_between_another_clients_forwards(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = bundled.engine
    spec = resolve(bundled).spec
    long_texts = [f"text number {i} of the long request, which takes several forwards" for i in range(12)]
    other = [f"the other client's text {i}, a little longer than the rest of them" for i in range(6)]
    want_a, want_b = (
        engine.fitted_sentences(engine.prepare(t, spec), spec).vectors for t in (long_texts, other)
    )
    tokens_a, tokens_b = engine.prepare(long_texts, spec), engine.prepare(other, spec)
    monkeypatch.setattr(engine, "max_batch", 4)  # A runs in 3 forwards of 4 texts
    entered, release = threading.Event(), threading.Event()
    plain = engine.forward
    sizes: list[int] = []

    def held(*args: Any, **kwargs: Any) -> Any:
        sizes.append(int(args[0].shape[0]))
        if not entered.is_set():
            entered.set()
            assert release.wait(60)
        return plain(*args, **kwargs)

    monkeypatch.setattr(engine, "forward", held)
    over = sum(map(len, tokens_b))
    batcher = Batcher(bundled, max_batch_tokens=over * 2 // 3, max_wait_ms=0, max_queue=64)  # B: over one
    batcher.start()
    first: Any
    second: Any
    try:
        [first] = batcher.sentences([(tokens_a, sum(map(len, tokens_a)))], spec, client=A)
        assert entered.wait(60)  # A's first forward is running
        [second] = batcher.sentences([(tokens_b, over)], spec, client=B)
        release.set()
        got_a, got_b = first.result(60), second.result(60)
    finally:
        batcher.stop()
    assert second.finished_at is not None and first.finished_at is not None
    assert second.finished_at < first.finished_at  # B's texts ran between A's forwards, not after them
    assert len(sizes) > 3  # A's 3 forwards, and B's between them
    assert np.allclose(got_a.vectors, want_a, atol=1e-5) and np.allclose(got_b.vectors, want_b, atol=1e-5)
    assert got_b.vectors.shape == (6, want_b.shape[1])  # in its order: its piece's rows, then the rest's
    assert batcher.queued == 0 and batcher._queued_jobs == batcher._queued_tokens == 0


def test_a_piece_leaves_the_queue_counting_only_the_rest_and_follows_its_request() -> None:
    model: Any = SimpleNamespace(engine=SimpleNamespace())
    batcher = Batcher(model, max_batch_tokens=100, max_wait_ms=0, max_queue=8)
    batcher.start_unless_stopped = lambda: None  # type: ignore[method-assign]  # no worker: the test takes
    texts: Any = [[0] * 30 for _ in range(5)]  # 150 tokens, over one batch of 100
    spec: Any = "one spec"
    [whole] = batcher.sentences([(texts, 150)], spec, client=B)
    with batcher._cond:
        assert batcher._small_waiting(frozenset({B})) == []  # not cut while a request of B's own runs
    with batcher._cond:
        [piece] = batcher._small_waiting(frozenset({A}))  # A's request runs: B gets a turn
    assert (len(piece.tokens), piece.n_tokens) == (3, 90)  # its leading texts that fit
    assert batcher.queued == 1 and batcher.queued_by(B) == (1, 60)  # the rest waits, counted as it is
    assert not piece.abandoned
    batcher.abandon([whole])  # B's client left: the rest leaves the queue, the piece stops at its boundary
    assert piece.abandoned and batcher.queued == 0 and batcher._queued_tokens == batcher._queued_jobs == 0


# Review of the turns (audit 20q): a piece took every turn's whole room, in the dict's order, which nothing
# turned while one request ran; a slice left its client's count under what it had waiting; a failed piece
# left its rest queued and cut; and a sliced request's TEI queue time ended at its last part.


_SPEC: Any = "one spec"


def _queue() -> FairQueue:
    return FairQueue(max_batch_tokens=100, max_queue=64, client_share=0.5, metrics=None)


def _turns(queue: FairQueue, n: int) -> list[str]:
    """The clients of each text run in `n` turns between client A's forwards, a letter a text."""
    seen = []
    for _ in range(n):
        with queue._cond:
            turn = queue._small_waiting(frozenset({A}))
        seen.append("".join(job.client for job in turn for _ in job.tokens))
    return seen


def test_a_small_request_runs_at_the_next_turn_beside_a_long_ones_pieces() -> None:
    queue = _queue()
    texts: Any = [[0] * 25 for _ in range(16)]  # 400 tokens a part, 4 turns' worth
    queue.sentences([(texts, 400)] * 3, _SPEC, client="b")
    small: Any = [[0] * 30]
    queue.sentences([(small, 30)], _SPEC, client="d")  # a third of a batch
    turns = _turns(queue, 2)
    assert turns == ["dbb", "bbbb"]  # d's whole at once, b's piece in what is left (was 12 turns of b's)


def test_two_long_requests_take_turns() -> None:
    queue = _queue()
    texts: Any = [[0] * 25 for _ in range(16)]
    queue.sentences([(texts, 400)] * 3, _SPEC, client="b")
    queue.sentences([(texts, 400)], _SPEC, client="c")
    assert _turns(queue, 4) == ["bbbb", "cccc", "bbbb", "cccc"]  # c waited for all 12 of b's


def test_a_third_clients_small_request_finishes_before_the_running_one(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = bundled.engine
    spec = resolve(bundled).spec
    long_a = [f"text number {i} of the long request, which takes several forwards" for i in range(12)]
    long_b = [f"the other client's text {i}, a little longer than the rest of them" for i in range(24)]
    tokens_a, tokens_b, tokens_d = (engine.prepare(t, spec) for t in (long_a, long_b, ["a small request"]))
    want_b, want_d = (engine.fitted_sentences(t, spec).vectors for t in (tokens_b, tokens_d))
    monkeypatch.setattr(engine, "max_batch", 4)  # A runs in 3 forwards of 4 texts
    entered, release = threading.Event(), threading.Event()
    plain = engine.forward

    def held(*args: Any, **kwargs: Any) -> Any:
        if not entered.is_set():
            entered.set()
            assert release.wait(60)
        return plain(*args, **kwargs)

    monkeypatch.setattr(engine, "forward", held)
    batch = sum(map(len, tokens_b[:6]))  # B's 2 parts of 12 texts are each 2 batches
    batcher = Batcher(bundled, max_batch_tokens=batch, max_wait_ms=0, max_queue=64)
    batcher.start()
    try:
        first: Any
        small: Any
        [first] = batcher.sentences([(tokens_a, sum(map(len, tokens_a)))], spec, client=A)
        assert entered.wait(60)  # A's first forward is running
        parts = [(tokens_b[i : i + 12], sum(map(len, tokens_b[i : i + 12]))) for i in (0, 12)]
        long = batcher.sentences(parts, spec, client=B)
        [small] = batcher.sentences([(tokens_d, sum(map(len, tokens_d)))], spec, client="10.0.0.3")
        release.set()
        first.result(60)
        got_b = np.concatenate([f.result(60).vectors for f in long])
        got_d = small.result(60)
    finally:
        batcher.stop()
    assert small.finished_at is not None and first.finished_at is not None
    assert small.finished_at < first.finished_at  # B's pieces took every turn's room: D ran after A
    assert np.allclose(got_d.vectors, want_d, atol=1e-5) and np.allclose(got_b, want_b, atol=1e-5)
    assert batcher.queued == 0 and batcher._queued_jobs == batcher._queued_tokens == 0


def test_a_slice_passes_its_count_to_the_clients_jobs_not_counted_in_full() -> None:
    queue = _queue()  # a share of 1,600 tokens
    texts: Any = [[0] * 50 for _ in range(16)]  # 800 tokens a part: the third counts nothing at first
    queue.sentences([(texts, 800)] * 3, _SPEC, client=B)
    assert [job.counted for job in queue._queues[B]] == [800, 800, 0]
    with queue._cond:
        [piece] = queue._small_waiting(frozenset({A}))
    assert piece.n_tokens == 100 and queue.queued_by(B) == (3, 1600)  # 2,300 wait: the share counts
    assert [job.counted for job in queue._queues[B]] == [700, 800, 100]
    with pytest.raises(QueueFull, match="would pass its share of 1,600"):
        queue.sentences([(texts[:1], 50)], _SPEC, client=B)  # was queued: 2,350 waiting on a share


def test_a_failed_piece_takes_the_rest_of_its_request_out_of_the_queue() -> None:
    queue = _queue()
    texts: Any = [[0] * 50 for _ in range(16)]
    whole: Any
    [whole] = queue.sentences([(texts, 800)], _SPEC, client=B)
    with queue._cond:
        [piece] = queue._small_waiting(frozenset({A}))
    assert piece.future.set_running_or_notify_cancel() and not piece.abandoned
    piece.future.set_exception(RuntimeError("boom"))
    assert queue.queued == 0 and queue.queued_by(B) == (0, 0)  # the rest was run and cut for nobody
    assert queue._queued_jobs == queue._queued_tokens == 0
    assert isinstance(whole.exception(), RuntimeError) and piece.abandoned
    with queue._cond:
        assert queue._small_waiting(frozenset({A})) == []


def test_a_sliced_requests_queue_time_ends_at_its_first_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(100))
    monkeypatch.setattr(tickets, "time", SimpleNamespace(monotonic=lambda: float(next(clock))))
    queue = _queue()
    texts: Any = [[0] * 50 for _ in range(4)]  # 200 tokens: a piece of 100, then the rest
    whole: Any
    [whole] = queue.sentences([(texts, 200)], _SPEC, client=B)
    with queue._cond:
        [piece] = queue._small_waiting(frozenset({A}))
    piece.future.set_running_or_notify_cancel()
    started = whole.started_at
    piece.future.set_result(None)
    with queue._cond:
        [rest] = queue._small_waiting(frozenset({A}))
    assert rest.future is whole and whole.set_running_or_notify_cancel()
    assert started is not None and whole.started_at == started  # was the rest's start: queue time grew
