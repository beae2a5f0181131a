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
from bertscope.server.batching import Batcher

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
