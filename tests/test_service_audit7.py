"""`bertscope serve` under hostile clients (audit 7): what a refusal costs, and refusals that name a fix.

The service runs as users run it (a real uvicorn on a loopback port, `test_server.serving`). Each test
counts the work done (chunks cut, texts tokenized) or waits on the event it checks, never on a clock.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import bertscope
import bertscope.chunk_embed as chunk_embed
from bertscope.server import ServerSettings, create_app
from bertscope.server.batching import QueueFull
from test_server import serving, serving_app

HOST = "127.0.0.1"  # every client of these tests: one address, one share of the queue
WAIT = 60  # seconds an event may take before the test fails (a broken server, not a slow one)


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[httpx.Client]:
    """The service on the bundled model, its answers held to 1,000 chunk vectors (384 wide)."""
    with (
        serving(bundled, max_answer_floats=384 * 1000) as base,
        httpx.Client(base_url=base, timeout=WAIT) as c,
    ):
        yield c


@pytest.fixture
def cut(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many chunk spans the service cut, counted as `plan_chunks` takes them."""
    taken = [0]
    real = chunk_embed.iter_chunk_spans

    def counted(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for span in real(*args, **kwargs):
            taken[0] += 1
            yield span

    monkeypatch.setattr(chunk_embed, "iter_chunk_spans", counted)
    return taken


def test_an_answer_over_the_limit_is_refused_as_its_chunks_pass_it_the_rest_uncut(
    client: httpx.Client, cut: list[int]
) -> None:
    # 20,000 sentences (200 KB, within every limit): planned whole before the 413, quadratically.
    refused = client.post("/v2/embed_chunks", json={"inputs": "Hi there. " * 20_000})
    assert refused.status_code == 413, refused.text[:300]
    assert refused.json()["detail"] == (
        "the answer would hold at least 393,216 numbers (1024 chunks x 384 wide), over the limit of 384,000 "
        "(--max-answer-floats); send fewer or shorter documents, or larger chunks that overlap less "
        "(chunk_overlap)"
    )
    assert cut[0] == 1024  # refused at the first count past the limit: 18,976 sentences never cut
    cut[0] = 0
    # Documents that pass it only together are refused between them; a plan's total, in its own words.
    refused = client.post("/v2/embed_chunks", json={"inputs": ["Hi there. " * 510] * 3})
    assert refused.status_code == 413 and "at least 391,680 numbers (1020 chunks x 384" in refused.text
    assert cut[0] == 1020  # the third document never cut
    refused = client.post("/v2/embed_chunks", json={"inputs": "Hi there. " * 1001})
    assert refused.status_code == 413
    assert refused.json()["detail"].startswith(
        "the answer would hold 385,135 numbers (1001 chunks x 384 wide, and 9,009 characters of chunk text)"
    )
    answered = client.post("/v2/embed_chunks", json={"inputs": "Hi there. " * 3})
    assert answered.status_code == 200 and len(answered.json()["items"][0]["chunks"]) == 3


def test_the_chunk_texts_an_answer_carries_count_against_its_limit(client: httpx.Client) -> None:
    """501 chunks of 1,000 word pieces sharing 999: 192,384 numbers of vectors, within the limit, and
    2.5 million characters of chunk text (each overlap sent again), at 12 characters a number over it."""
    body = {"inputs": "word " * 1500, "chunks": "tokens", "chunk_size": 1000, "chunk_overlap": 999}
    refused = client.post("/v2/embed_chunks", json=body)
    assert refused.status_code == 413, refused.text[:300]
    detail = refused.json()["detail"]
    assert detail.startswith("the answer would hold ") and "(501 chunks x 384 wide, and " in detail, detail
    assert "characters of chunk text), over the limit of 384,000 (--max-answer-floats)" in detail, detail
    assert detail.endswith("or larger chunks that overlap less (chunk_overlap)"), detail
    body["chunk_overlap"] = 0  # the same document in two chunks: answered
    answered = client.post("/v2/embed_chunks", json=body)
    assert answered.status_code == 200 and len(answered.json()["items"][0]["chunks"]) == 2


def test_a_plan_whose_client_left_stops_cutting(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cutting runs on a thread, which cannot be cancelled: it stops at its next count once the
    # request was cancelled (`left`), where it went on to the end of the body after its client left.
    app = create_app(bundled, settings=ServerSettings())
    held, release, done = threading.Event(), threading.Event(), threading.Event()
    taken = [0]
    real = chunk_embed.iter_chunk_spans

    def held_at_1500(*args: Any, **kwargs: Any) -> Iterator[Any]:
        try:
            for span in real(*args, **kwargs):
                taken[0] += 1
                if taken[0] == 1500:
                    held.set()
                    assert release.wait(WAIT), "the test never let the plan go on"
                yield span
        finally:
            done.set()

    monkeypatch.setattr(chunk_embed, "iter_chunk_spans", held_at_1500)
    abandoned = app.state.service.batcher.metrics.abandoned
    gone = threading.Event()
    monkeypatch.setattr(abandoned, "inc", lambda *a, **k: gone.set())  # the guard saw the client leave
    body = httpx.Request("POST", "/", json={"inputs": "Hi there. " * 20_000}).content
    with serving_app(app, ServerSettings()) as base:
        sock = socket.create_connection((HOST, int(base.rsplit(":", 1)[1])), timeout=WAIT)
        head = "POST /v2/embed_chunks HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        assert held.wait(WAIT), "the plan never started"
        sock.close()  # the client leaves while its document is being cut
        assert gone.wait(WAIT), "the request was not cancelled while its plan ran"
        release.set()
        assert done.wait(WAIT)
    assert taken[0] == 2048  # stopped at the next count: 17,952 sentences never cut


def test_a_client_with_its_share_waiting_is_refused_before_its_texts_are_tokenized(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch, cut: list[int]
) -> None:
    settings = ServerSettings(max_queue=4)  # a client's share: 2 jobs waiting
    app = create_app(bundled, settings=settings)
    svc = app.state.service
    prepared: list[Any] = []
    real_prepare = svc._prepare
    monkeypatch.setattr(svc, "_prepare", lambda *a: prepared.append(a) or real_prepare(*a))
    running, release = threading.Event(), threading.Event()
    spec: Any = "any spec"  # the queue's admission never reads it

    def hold() -> None:
        running.set()
        assert release.wait(WAIT)

    with serving_app(app, settings) as base, httpx.Client(base_url=base, timeout=WAIT) as client:
        jobs = [svc.batcher.call(hold, 1, client=HOST)]
        assert running.wait(WAIT)  # the worker is busy with it: the next two wait in the queue
        jobs += [svc.batcher.call(lambda: None, 1, client=HOST) for _ in range(2)]
        assert svc.batcher.queued_by(HOST) == (2, 2)
        for path, body in (("/embed", {"inputs": "a cat"}), ("/v2/embed", {"inputs": ["a", "b"]})):
            refused = client.post(path, json=body)
            assert refused.status_code == 429, refused.text[:300]
            # The answer the queue gives the request once tokenized: the same words, the same Retry-After.
            with pytest.raises(QueueFull) as queue_says:
                svc.batcher.sentences([(["a cat"], 3)], spec, client=HOST)
            assert refused.json()["detail"] == str(queue_says.value)
            assert refused.headers["retry-after"] == str(queue_says.value.retry_after)
        refused = client.post("/v2/embed_chunks", json={"inputs": "Hi there. " * 100})
        assert refused.status_code == 429 and "the queue is full for this client" in refused.json()["detail"]
        assert prepared == [] and cut[0] == 0  # nothing tokenized, nothing cut
        release.set()
        for job in jobs:
            job.result(WAIT)
        assert client.post("/embed", json={"inputs": "a cat"}).status_code == 200
        assert len(prepared) == 1


def test_static_refuses_no_items_as_every_route_refuses_no_texts(client: httpx.Client) -> None:
    for body in ({"inputs": []}, {"items": []}):
        refused = client.post("/static", json=body)
        assert refused.status_code == 422
        assert refused.json()["detail"].startswith("no texts given: pass at least one")
    assert client.post("/v2/embed", json={"inputs": []}).json()["detail"].startswith("no texts given")


@pytest.mark.parametrize("path", ["/v2/embed", "/static", "/v2/embed_chunks", "/v2/tokenize"])
def test_an_empty_body_says_to_send_one_json_object(client: httpx.Client, path: str) -> None:
    refused = client.post(path, content=b"", headers={"content-type": "application/json"})
    assert refused.status_code == 422
    assert refused.json()["detail"] == "body: empty; send one JSON object"


def test_an_unknown_path_names_where_the_routes_are(client: httpx.Client) -> None:
    for method, path in (("POST", "/x"), ("GET", "/v2/nothing")):
        missing = client.request(method, path)
        assert missing.status_code == 404
        assert missing.json()["detail"] == (
            f"no route {method} {path}; the routes are listed at /docs (and /openapi.json)"
        )
    assert client.get("/docs").status_code == 200  # where it points


def test_max_pooling_over_chunks_that_read_each_token_many_times_is_refused_before_any_forward(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # chunk_size 800 sharing 799 on ~900 pieces: 101 chunks x 800 pieces, each piece read ~90 times;
    # max pools chunk by chunk (chunk_size 10,000 sharing 9,999 on 20,000 pieces: 10^8 vectors on the one
    # worker), so it is bounded; mean pools any overlap from prefix sums and is answered.
    forwards: list[int] = []
    real = chunk_embed.iter_chunk_embeddings
    monkeypatch.setattr(
        chunk_embed, "iter_chunk_embeddings", lambda *a, **k: forwards.append(1) or real(*a, **k)
    )
    body = {"inputs": "Hi there. " * 300, "chunks": "tokens", "chunk_size": 800, "chunk_overlap": 799}
    refused = client.post("/v2/embed_chunks", json={**body, "pooling": "max"})
    assert refused.status_code == 413, refused.text[:300]
    assert refused.json()["detail"] == (
        "pooling='max' would read 80,800 token vectors (101 chunks x 800 word pieces on average), over the "
        "limit of 57,728 (64 per word piece of the documents); send a chunk_overlap further below "
        "chunk_size (or fewer overlapping spans), or pooling='mean', which pools any overlap in one pass"
    )
    assert forwards == []  # refused before the run
    answered = client.post("/v2/embed_chunks", json=body)
    assert answered.status_code == 200, answered.text[:300]
    chunks = answered.json()["items"][0]["chunks"]
    assert len(chunks) == 101 and {c["n_tokens"] for c in chunks} == {800}
    smaller = client.post("/v2/embed_chunks", json={**body, "chunk_overlap": 700, "pooling": "max"})
    assert smaller.status_code == 200 and forwards == [1, 1]


def test_chunks_embedded_alone_are_counted_as_they_run_and_refused_over_the_budget_before_any_forward(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    # chunk_size 10,000 sharing 9,999 on a 20,000-piece document: 10,001 chunks (an answer of 10,001 x
    # 384, within the limit), each run alone up to the model's window: 10,001 windows where the service
    # counted the document's 20,002 tokens; the run is refused before any forward, naming the sizes. The
    # answer limit is raised past the 333 million characters of chunk text the answer would carry (refused
    # on their own by default), so that the tokens run alone are what refuses.
    settings = ServerSettings(max_request_tokens=200_000, max_answer_floats=40_000_000)
    app = create_app(bundled, settings=settings)
    svc = app.state.service
    forwards: list[int] = []
    allowed = threading.Event()  # set once the refused request is answered: the next one may forward
    real = chunk_embed.iter_chunk_embeddings

    def forwarded(*args: Any, **kwargs: Any) -> Any:
        forwards.append(1)
        assert allowed.is_set(), "the chunks of 10,000 sharing 9,999 ran"  # before: 2.5M tokens, minutes
        return real(*args, **kwargs)

    monkeypatch.setattr(chunk_embed, "iter_chunk_embeddings", forwarded)
    queued: list[int | None] = []  # the tokens each run was queued with: its share of the worker
    on_worker = svc.on_worker

    async def counted(fn: Any, *, n_tokens: int | None = None) -> Any:
        queued.append(n_tokens)
        return await on_worker(fn, n_tokens=n_tokens)

    monkeypatch.setattr(svc, "on_worker", counted)
    body = {
        "inputs": "Hi there. " * 6666 + "Hi there",
        "chunks": "tokens",
        "chunk_size": 10_000,
        "chunk_overlap": 9_999,
    }
    with serving_app(app, settings) as base, httpx.Client(base_url=base, timeout=WAIT) as client:
        refused = client.post("/v2/embed_chunks", json={**body, "late": False})
        assert refused.status_code == 413, refused.text[:300]
        assert refused.json()["detail"] == (
            "late=false runs each of the 10,001 chunks alone (chunk_size 10000 with chunk_overlap 9999): "
            "2,560,256 tokens, where the documents hold 20,002, over the limit of 200,000 per request "
            "(--max-request-tokens); send a chunk_overlap further below chunk_size, a smaller chunk_size, "
            "or late=true, which runs each document once"
        )
        assert forwards == [] and queued == []  # refused before the run, nothing queued
        allowed.set()
        small = {"inputs": "Hi there. " * 300, "chunks": "tokens", "chunk_size": 100, "chunk_overlap": 50}
        answered = client.post("/v2/embed_chunks", json={**small, "late": False})
        assert answered.status_code == 200, answered.text[:300]
        chunks = answered.json()["items"][0]["chunks"]
        assert len(chunks) == 17 and {c["n_tokens"] for c in chunks[:-1]} == {100}  # the chunk's own pieces
        # queued as the chunks run (17 x up to 102, [CLS] and [SEP] too), not as the document's 902 tokens
        assert queued == [sum(c["n_tokens"] + 2 for c in chunks)] and queued[0] > 1.5 * 902
