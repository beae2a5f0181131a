"""TEI's timing headers (audit 18a-2): TEI's inference routes and /v1/embeddings say x-compute-type,
x-compute-time, x-compute-characters, x-compute-tokens, x-total-time, x-tokenization-time, x-queue-time
and x-inference-time, in TEI's units (whole milliseconds), measured on the request's own path."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import create_app
from bertscope.server.tickets import Ticket
from bertscope.server.timing import RequestTimes, characters, record_jobs

TIMES = ("x-compute-time", "x-total-time", "x-tokenization-time", "x-queue-time", "x-inference-time")
HEADERS = ("x-compute-type", "x-compute-characters", "x-compute-tokens", *TIMES)


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    """The service on the bundled model, in process."""
    with TestClient(create_app(bundled)) as c:
        yield c


def stamped(client: TestClient, path: str, body: dict[str, Any]) -> dict[str, int | str]:
    """The timing headers of a 200 answer, times as ints."""
    r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    said = {name: r.headers[name] for name in HEADERS}
    for name in TIMES:
        assert said[name].isdigit(), (name, said[name])  # whole milliseconds, as TEI's as_millis
    times = {name: int(said[name]) for name in TIMES}
    # every part lies inside the request's time
    assert all(times[name] <= times["x-total-time"] for name in TIMES)
    assert times["x-compute-time"] == times["x-total-time"]
    return {**said, **times}


def test_embed_says_its_characters_tokens_and_device(client: TestClient, bundled: bertscope.Model) -> None:
    texts = ["Hello world", "a longer text, with some more pieces"]
    tokens = sum(len(t) for t in bundled.tokenize(texts))
    for path in ("/embed", "/"):
        said = stamped(client, path, {"inputs": texts})
        assert said["x-compute-type"] == "cpu"
        assert said["x-compute-characters"] == str(sum(map(len, texts)))
        assert said["x-compute-tokens"] == str(tokens)


def test_the_other_inference_routes_say_them_too(client: TestClient, bundled: bertscope.Model) -> None:
    said = stamped(client, "/embed_all", {"inputs": "Hello world"})
    assert said["x-compute-tokens"] == str(len(bundled.tokenize("Hello world")))
    said = stamped(client, "/similarity", {"inputs": {"source_sentence": "a cat", "sentences": ["a dog"]}})
    assert said["x-compute-characters"] == "10"
    said = stamped(client, "/v1/embeddings", {"input": ["Hello world"], "model": "m"})
    assert said["x-compute-tokens"] == str(len(bundled.tokenize("Hello world")))


def test_token_ids_count_one_character_an_id_as_tei() -> None:
    assert characters([[101, 7592, 102], [2088]]) == 4
    assert characters([["a b", "cd"], "efg"]) == 8


def test_tokenize_has_no_timing_headers_as_tei(client: TestClient) -> None:
    r = client.post("/tokenize", json={"inputs": "Hello world"})
    assert r.status_code == 200
    assert "x-compute-time" not in r.headers


def test_the_worker_stamps_when_it_took_and_finished_each_job(client: TestClient) -> None:
    svc = client.app.state.service  # type: ignore[attr-defined]
    ticket = svc.batcher.call(lambda: 1, None, "test")
    assert ticket.result(timeout=30) == 1
    assert ticket.started_at is not None and ticket.finished_at is not None
    assert ticket.queued_at <= ticket.started_at <= ticket.finished_at


def test_queue_and_inference_are_the_mean_over_the_request_jobs() -> None:
    contextvars.copy_context().run(_mean_over_jobs)  # the request's times stay in a context of its own


def _mean_over_jobs() -> None:
    times = RequestTimes.begin()
    tickets = [Ticket(), Ticket()]
    stamps = [(0.0, 0.25, 1.0), (0.0, 0.75, 2.5)]  # binary fractions: exact sums
    for ticket, (queued, started, finished) in zip(tickets, stamps, strict=True):
        ticket.queued_at, ticket.started_at, ticket.finished_at = queued, started, finished
    record_jobs(tickets)
    said = times.headers(characters=1, tokens=3, compute_type="gpu")
    assert said["x-queue-time"] == "500"  # (250 + 750) / 2 ms
    assert said["x-inference-time"] == "1250"  # (750 + 1750) / 2 ms
    assert said["x-compute-type"] == "gpu"
