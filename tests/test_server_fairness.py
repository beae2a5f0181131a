"""The service shared fairly between clients, and memory taken before work, not after.

The queue: each client (peer address) has a share of its jobs and tokens, a newcomer's small request
always finds room, and batches are formed round-robin over clients, as full as before (the Batcher
driven directly, with fake clients and a fake engine: no timing, no sleeps). The answers' budget: an
answer is reserved before the model or the tokenizer runs, so a refusal costs no forward and no
tokenization (counted), and one client holds at most its share of it. A big tokenization's Encodings
become compact arrays with the same answer.
"""

from __future__ import annotations

import math
from concurrent.futures import Future
from functools import partial
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

import bertscope
from bertscope.core.results import SentenceEmbeddings
from bertscope.errors import InvalidSpec
from bertscope.server.app import create_app
from bertscope.server.batching import Batcher, QueueFull
from bertscope.server.guard import Guard
from bertscope.server.service import CompactEncoding
from bertscope.server.settings import ServerSettings
from bertscope.server.tei import _simple
from test_server_hostile import _forwards

ME, OTHER, THIRD = "10.0.0.1", "10.0.0.2", "10.0.0.3"


class _Engine:
    """A fake engine: records each batch's jobs (their labels) and answers zero vectors."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def forward(self, *args: Any) -> None:
        raise AssertionError("the fake engine runs no forward")

    def fitted_sentences(self, tokens: list[Any], spec: Any, on_batch: Any = None) -> SentenceEmbeddings:
        self.batches.append(list(tokens))
        n = len(tokens)
        zeros = np.zeros(n, dtype=np.int64)
        return SentenceEmbeddings(vectors=np.zeros((n, 2), np.float32), n_tokens=zeros, n_dropped=zeros)


def _batcher(*, max_batch_tokens: int = 100, max_queue: int = 8) -> tuple[Batcher, _Engine]:
    engine = _Engine()
    model: Any = SimpleNamespace(engine=engine)
    batcher = Batcher(model, max_batch_tokens=max_batch_tokens, max_wait_ms=0, max_queue=max_queue)
    # No worker: the first job would start one (start_unless_stopped), and it would take queued jobs while
    # the test counts them (a test failed so, one run in many). These tests form the batches themselves.
    batcher.start_unless_stopped = lambda: None  # type: ignore[method-assign]
    return batcher, engine


def _sentences(batcher: Batcher, label: str, n_tokens: int, client: str) -> Future[Any]:
    spec: Any = "one spec"  # any hashable value groups the jobs: the fake engine never reads it
    return batcher.sentences([([label], n_tokens)], spec, client=client)[0]  # type: ignore[list-item]


def _call(batcher: Batcher, n_tokens: int, client: str) -> Future[Any]:
    return batcher.call(lambda: None, n_tokens, client=client)


def test_one_client_cannot_fill_the_queue_another_clients_request_goes_in() -> None:
    batcher, _ = _batcher()  # 3,200 tokens of queue, 1,600 a client; 8 jobs, 4 a client
    assert (batcher.max_queue_tokens, batcher.share_tokens, batcher.share_jobs) == (3200, 1600, 4)
    _call(batcher, 800, ME)
    _call(batcher, 800, ME)
    with pytest.raises(QueueFull, match="this client's queued requests hold 1,600 tokens of work"):
        _call(batcher, 4, ME)  # its share is used up: its own small one waits
    _call(batcher, 4, OTHER)  # the queue is half empty: the other client's goes in
    _call(batcher, 1400, OTHER)
    assert batcher.queued_by(ME) == (2, 1600) and batcher.queued_by(OTHER) == (2, 1404)
    jobs, _ = _batcher()
    for _ in range(4):  # jobs are shared too: 4 of 8 a client
        _call(jobs, 0, ME)
    with pytest.raises(QueueFull, match="the queue is full for this client: it has 4 jobs waiting"):
        _call(jobs, 0, ME)
    _call(jobs, 0, OTHER)


def test_a_newcomers_small_request_finds_room_when_others_filled_the_queue() -> None:
    batcher, _ = _batcher()
    _call(batcher, 1600, ME)
    _call(batcher, 1500, OTHER)  # 3,100 queued: all but the batch kept for a newcomer
    with pytest.raises(QueueFull, match="the queue holds 3,100 tokens of work, and 4 more would pass 3,100"):
        _call(batcher, 4, OTHER)  # a client with work queued does not get the newcomer's room
    with pytest.raises(QueueFull, match="would pass 3,100"):
        _call(batcher, 101, THIRD)  # more than a batch: not a small request
    _call(batcher, 100, THIRD)  # one batch's worth from a client with nothing queued: room kept for it
    with pytest.raises(QueueFull):
        _call(batcher, 1, THIRD)  # now it has something queued


def test_a_request_counts_at_most_a_share_so_the_same_rule_takes_any_size() -> None:
    # The audit's case: 65,536 tokens were taken by an empty queue, 32,768 refused behind 4 tokens.
    for big in (32_768, 65_536):
        batcher, _ = _batcher(max_batch_tokens=1024, max_queue=256)
        _call(batcher, 4, ME)
        _sentences(batcher, "the whole queue or more", big, OTHER)  # counts as a client's share, 16,384
        assert batcher.queued_by(OTHER) == (1, 16_384) and batcher.queued == 2
        with pytest.raises(
            QueueFull, match="the queue holds 16,388 tokens of work, and 16,000 more would pass 31,744"
        ):
            _sentences(batcher, "no room left for it now", 16_000, THIRD)


def test_retry_after_is_sized_for_the_request_refused() -> None:
    batcher, _ = _batcher()
    batcher._tokens_per_second = 100.0  # as measured by the worker on earlier batches
    _call(batcher, 1500, ME)
    with pytest.raises(QueueFull) as own:
        _call(batcher, 400, ME)
    assert own.value.retry_after == 3  # the 300 past its share, at 100 tokens/s (one client waiting)
    _call(batcher, 1500, OTHER)  # 3,000 queued, of the 3,100 a client with work queued may fill
    with pytest.raises(QueueFull) as shared:
        _call(batcher, 1000, OTHER)
    assert shared.value.retry_after == 18  # the 900 past its share, with two clients taking turns
    with pytest.raises(QueueFull) as full:
        _call(batcher, 1000, THIRD)
    assert full.value.retry_after == 9  # 900 tokens must leave the queue first
    batcher._tokens_per_second = 1.0
    with pytest.raises(QueueFull) as slow:
        _call(batcher, 1000, THIRD)
    assert slow.value.retry_after == 60  # capped at a minute


def test_clients_are_served_round_robin_not_oldest_first() -> None:
    batcher, _ = _batcher()
    ran: list[str] = []
    asked = [("a1", ME), ("a2", ME), ("a3", ME), ("b1", OTHER), ("b2", OTHER), ("c1", THIRD)]
    futures = [batcher.call(partial(ran.append, name), 1, client=who) for name, who in asked]
    batcher.start()
    try:
        for future in futures:
            future.result(60)
    finally:
        batcher.stop()
    assert ran == ["a1", "b1", "c1", "a2", "b2", "a3"]


def _batches(asked: list[tuple[str, int, str]]) -> list[list[str]]:
    """The batches the worker forms of sentence jobs (label, tokens, client) queued before it starts."""
    batcher, engine = _batcher(max_batch_tokens=1000, max_queue=64)
    futures = [_sentences(batcher, label, n, who) for label, n, who in asked]
    batcher.start()
    try:
        for future in futures:
            future.result(60)
    finally:
        batcher.stop()
    return engine.batches


def test_batches_stay_full_and_take_each_client_in_turn() -> None:
    alone = [(f"a{i}", 300, ME) for i in range(6)]
    assert _batches(alone) == [["a0", "a1", "a2"], ["a3", "a4", "a5"]]  # one client: as oldest first
    two = [(f"a{i}", 300, ME) for i in range(4)] + [(f"b{i}", 300, OTHER) for i in range(2)]
    # Oldest first would be [a0 a1 a2] [a3 b0 b1]: the second client waited for the first one's batch.
    assert _batches(two) == [["a0", "b0", "a1"], ["b1", "a2", "a3"]]
    small = [(f"a{i}", 100, ME) for i in range(10)] + [(f"b{i}", 100, OTHER) for i in range(10)]
    got = _batches(small)
    assert got[0] == [name for i in range(5) for name in (f"a{i}", f"b{i}")] and len(got) == 2


def _guard(app: Any) -> Guard:
    """The app's guard (the middleware stack is built on the first request)."""
    layer = app.middleware_stack
    while not isinstance(layer, Guard):
        layer = layer.app
    return layer


_TEXTS = ["a cat sat on the mat by the door"] * 10  # /embed_all: about 110 tokens x 384 numbers


def test_an_answer_the_budget_cannot_take_is_refused_before_any_forward(bundled: bertscope.Model) -> None:
    app = create_app(bundled, settings=ServerSettings(max_buffered_bytes=1 << 20))
    with TestClient(app, client=(ME, 1)) as client:
        assert client.get("/health").status_code == 200
        answers = _guard(app).answers
        answers.take(900_000, alone_fits=True, peer=OTHER)  # another client's answer nobody reads
        before = _forwards(client)
        refused = client.post("/embed_all", json={"inputs": _TEXTS})
        assert refused.status_code == 503, refused.text
        assert "answers waiting for their clients" in refused.json()["error"]
        assert int(refused.headers["retry-after"]) >= 1
        assert _forwards(client) == before  # refused before the model ran
        assert answers.held == 900_000  # nothing of the refused request is held
        answers.give_back(900_000, peer=OTHER)
        answered = client.post("/embed_all", json={"inputs": _TEXTS})
        assert answered.status_code == 200 and _forwards(client) > before
        assert answers.held == 0  # the reservation ended with its request


def test_one_client_holds_at_most_its_share_of_the_answers(bundled: bertscope.Model) -> None:
    app = create_app(bundled, settings=ServerSettings(max_buffered_bytes=1 << 20))
    with TestClient(app, client=(ME, 1)) as client:
        assert client.get("/health").status_code == 200
        answers = _guard(app).answers
        answers.take(400_000, alone_fits=True, peer=ME)  # one of its answers, unread
        before = _forwards(client)
        refused = client.post("/embed_all", json={"inputs": _TEXTS})
        assert refused.status_code == 503 and f"this client ({ME})" in refused.json()["error"]
        assert _forwards(client) == before
        # Another client's same request: the budget has room, and its share is untouched.
        assert (
            TestClient(app, client=(OTHER, 1)).post("/embed_all", json={"inputs": _TEXTS}).status_code == 200
        )
        answers.give_back(400_000, peer=ME)


def test_a_big_tokenize_the_budget_cannot_answer_is_refused_before_it_is_tokenized(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app(bundled, settings=ServerSettings(max_buffered_bytes=1 << 20))
    svc = app.state.service
    gated: list[int] = []
    real = svc.gated

    def counted(items: list[Any], tokenize: Any) -> Any:
        gated.append(len(items))
        return real(items, tokenize)

    monkeypatch.setattr(svc, "gated", counted)
    body = {"inputs": "," * 300_000}  # past the big-request gate; 1.5M numbers, 12 MB counted held
    with TestClient(app, client=(ME, 1)) as client:
        assert client.get("/health").status_code == 200
        answers = _guard(app).answers
        answers.take(100_000, alone_fits=True, peer=OTHER)
        for path, asked in (("/tokenize", body), ("/v2/tokenize", {**body, "long": "window"})):
            refused = client.post(path, json=asked)
            assert refused.status_code == 503, refused.text[:300]
            assert "answers waiting for their clients" in refused.json()["detail"]
        assert gated == []  # neither was tokenized whole
        answers.give_back(100_000, peer=OTHER)
        answered = client.post("/tokenize", json=body)  # alone, one answer may pass the share
        assert answered.status_code == 200 and len(answered.json()[0]) == 300_002 and gated == [1]


def test_a_big_tokenization_keeps_compact_arrays_and_answers_the_same(bundled: bertscope.Model) -> None:
    text = "héllo wörld, [SEP] 🙂 naïve café. " * 8_000  # past the gate's 262,144 characters
    backend = bundled.tokenizer.backend
    app = create_app(bundled)
    svc = app.state.service
    made, count = svc.tokenized([text], "window", 5, "fix", lambda: backend.encode_batch([text]))
    assert isinstance(made[0], CompactEncoding) and count == len(made[0])
    small, _ = svc.tokenized(["a cat"], "window", 5, "fix", lambda: backend.encode_batch(["a cat"]))
    assert not isinstance(small[0], CompactEncoding)  # small ones are left as they are
    expected = [list(_simple(text, enc)) for enc in backend.encode_batch([text])]
    assert [list(_simple(text, made[0]))] == expected
    with TestClient(app) as client:
        answered = client.post("/tokenize", json={"inputs": text})
    assert answered.status_code == 200 and answered.json() == expected


def test_the_service_queues_each_request_as_its_clients(bundled: bertscope.Model) -> None:
    app = create_app(bundled)
    svc = app.state.service
    seen: list[str] = []
    real = svc.batcher.sentences

    def spy(parts: Any, spec: Any, client: str = "") -> Any:
        seen.append(client)
        return real(parts, spec, client)

    svc.batcher.sentences = spy
    with TestClient(app, client=(ME, 1)) as client:
        assert client.post("/embed", json={"inputs": "a cat"}).status_code == 200
    assert seen == [ME]
    assert math.isclose(svc.batcher.client_share, 0.5)  # the default: half the queue a client
    quarter = create_app(bundled, settings=ServerSettings(queue_share=0.25)).state.service.batcher
    assert (quarter.share_jobs, quarter.share_tokens) == (64, quarter.max_queue_tokens // 4)
    with pytest.raises(InvalidSpec, match="queue_share is 0: give a share of the queue above 0"):
        ServerSettings(queue_share=0)


_SPEC: Any = "one spec"  # any hashable value groups the jobs: the fake engine never reads it


def test_a_queue_of_one_job_takes_any_request_when_empty(bundled: bertscope.Model) -> None:
    # Review finding 3: --max-queue 1 kept its one job for a newcomer, so every other request was a 429.
    batcher, _ = _batcher(max_queue=1)
    parts: Any = [(["a"], 50), (["b"], 50)]
    batcher.sentences(parts, _SPEC, client=ME)  # two jobs, one batch each: counts as one
    with pytest.raises(QueueFull, match=r"the queue is full \(1 jobs waiting of 1\)"):
        _call(batcher, 4, OTHER)  # the one job is taken: nothing is kept for a newcomer
    assert (batcher.share_jobs, batcher.newcomer_jobs, batcher.request_jobs) == (1, 0, 1)
    big, _ = _batcher(max_queue=1)
    _call(big, 150, ME)  # more than a batch, on an empty queue
    app = create_app(bundled, settings=ServerSettings(max_queue=1))
    with TestClient(app) as client:
        answered = client.post("/v2/embed", json={"inputs": ["a cat sat on the mat"] * 200})
        assert answered.status_code == 200, answered.text[:300]


def test_with_no_share_per_client_a_request_of_the_whole_queue_goes_in_when_empty() -> None:
    # A share of 1 (every client behind one proxy) is more than the room beside the newcomer's.
    engine = _Engine()
    model: Any = SimpleNamespace(engine=engine)
    batcher = Batcher(model, max_batch_tokens=100, max_wait_ms=0, max_queue=32, client_share=1.0)
    parts: Any = [([str(i)], 100) for i in range(40)]
    batcher.sentences(parts, _SPEC, client=ME)
    assert batcher.queued_by(ME) == (30, 3100) and batcher.queued == 40
    _call(batcher, 100, OTHER)  # the newcomer's room is still there
    assert (batcher.request_jobs, batcher.request_tokens) == (30, 3100)  # 2 jobs, 100 tokens kept


def test_the_rest_of_a_long_request_counts_once_its_first_jobs_have_left() -> None:
    # Review finding 4: the jobs past a share counted nothing, even after the counted ones had run.
    batcher, _ = _batcher(max_queue=8)  # a share of 4 jobs
    parts: Any = [([str(i)], 10) for i in range(8)]
    batcher.sentences(parts, _SPEC, client=ME)
    assert batcher.queued_by(ME) == (4, 80)
    with batcher._cond:
        for _ in range(4):
            batcher._pop(ME)  # the worker takes its 4 oldest, the counted ones
    assert batcher.queued_by(ME) == (4, 40)  # the 4 still waiting count now
    with pytest.raises(QueueFull, match="the queue is full for this client: it has 4 jobs waiting"):
        batcher.sentences(parts[:4], _SPEC, client=ME)  # was taken: 8 of 8 jobs its own
    batcher.sentences(parts[:3], _SPEC, client=OTHER)
    assert batcher.queued == 7 and batcher.queued_by(OTHER) == (3, 30)
    with batcher._cond:
        taken = batcher._small_waiting()  # between batches: each client's in turn, 100 tokens
    assert len(taken) == 7 and batcher.queued == 0 and batcher._queued_jobs == batcher._queued_tokens == 0
    # Tokens likewise: a request past the token share counts its rest once its first job has left.
    tokens, _ = _batcher(max_queue=8)  # a share of 1,600 tokens
    long: Any = [(["a"], 1000), (["b"], 1000)]
    futures = tokens.sentences(long, _SPEC, client=ME)
    assert tokens.queued_by(ME) == (2, 1600)
    with tokens._cond:
        tokens._pop(ME)
    assert tokens.queued_by(ME) == (1, 1000)
    tokens.abandon(futures)  # the client left: nothing of it counts
    assert tokens.queued_by(ME) == (0, 0) and tokens._queued_jobs == tokens._queued_tokens == 0


def test_a_whole_answer_reserved_before_its_work_is_counted_once() -> None:
    """The guard writes a large whole answer in parts, holding its bytes in the answers' budget; an answer
    reserved before the work (`answers.reserve`) is that hold already, not a second one beside it. Counted
    twice, 320 kB reserved plus the 250 kB body passed this client's 500 kB share, and the answer made was
    dropped for a 503."""
    from fastapi import FastAPI
    from fastapi.responses import Response

    from bertscope.server.answers import Reservations, reserve
    from bertscope.server.guard import Guard
    from bertscope.server.metrics import Metrics

    app = FastAPI()

    @app.post("/made")
    def made() -> Response:
        reserve(40_000)  # 320,000 bytes at 8 a number, reserved before the work
        return Response(b"[" + b"0," * 125_000 + b"0]", media_type="application/json")  # 250 kB, whole

    settings = ServerSettings(max_buffered_bytes=1_000_000, max_buffered_share=0.5)
    metrics = Metrics()
    app.add_middleware(Reservations)
    app.add_middleware(Guard, settings=settings, metrics=metrics, endpoints=frozenset({"/made"}))
    with TestClient(app) as client:
        answered = client.post("/made", content=b"{}", headers={"Content-Type": "application/json"})
    assert answered.status_code == 200, answered.text[:300]
    assert len(answered.content) == 250_003
