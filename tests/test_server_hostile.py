"""The service under hostile bodies: every answer bounded before it is made, a refusal cheap, and the event
loop free while a large answer is written.

Every test waits on a condition (an answer, an event), never on a clock; sizes are checked by the
answer or by the work counted, never by the process's memory.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import ServerSettings, bounds, create_app
from test_server import serving


def _client(model: bertscope.Model, **settings: Any) -> TestClient:
    return TestClient(create_app(model, settings=ServerSettings(**settings)))


def _forwards(client: TestClient) -> float:
    """Forwards the worker has run, from /metrics."""
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("bertscope_forward_texts_count "):
            return float(line.split()[1])
    raise AssertionError("no bertscope_forward_texts_count in /metrics")


# /v2/tokenize's records hold 6 values a token, /tokenize's 5: 3,000 numbers are 500 and 600 tokens.
TOKENIZE_OVER = [
    ("/v2/tokenize", {"inputs": "word " * 2000, "long": "window"}),  # 2,002 tokens, counted in pieces
    ("/v2/tokenize", {"inputs": [","] * 201}),  # 603 tokens in 201 characters: counted exactly
    ("/tokenize", {"inputs": "word " * 2000}),
    ("/tokenize", {"inputs": [","] * 201}),
]


@pytest.mark.parametrize(
    ("path", "body"), TOKENIZE_OVER, ids=[f"{p}-{i}" for i, (p, _) in enumerate(TOKENIZE_OVER)]
)
def test_a_tokenize_answer_is_bounded_by_max_answer_floats(
    bundled: bertscope.Model, path: str, body: dict[str, Any]
) -> None:
    with _client(bundled, max_answer_floats=3000) as client:
        refused = client.post(path, json=body)
        assert refused.status_code == 413, refused.text[:300]
        assert "(--max-answer-floats)" in refused.json()["detail"]
        assert len(refused.content) < 2000
        within = client.post(
            path, json={"inputs": "word " * 50, **({"long": "window"} if "v2" in path else {})}
        )
        assert within.status_code == 200, within.text[:300]


def test_an_answer_within_the_bound_is_the_tokens_themselves(bundled: bertscope.Model) -> None:
    text = "word " * 400  # more characters than the bound's tokens: counted in pieces, then tokenized whole
    with _client(bundled, max_answer_floats=6 * 500) as client:
        answer = client.post("/v2/tokenize", json={"inputs": text, "long": "window"})
    assert answer.status_code == 200, answer.text[:300]
    assert answer.json()["items"] == [bundled.tokenize(text, long="window").to_dict()]


def test_explain_refuses_a_contribution_matrix_over_max_answer_floats(bundled: bertscope.Model) -> None:
    text = "word " * 150  # 152 tokens: 304 in all, but a 152 x 152 matrix of 23,104 numbers
    with _client(bundled, max_answer_floats=10_000) as client:
        before = _forwards(client)
        refused = client.post("/explain", json={"a": text, "b": text})
        assert refused.status_code == 413, refused.text[:300]
        assert "152 x 152" in refused.json()["detail"] and "(--max-answer-floats)" in refused.json()["detail"]
        assert _forwards(client) == before
        assert client.post("/explain", json={"a": "word " * 90, "b": "word " * 90}).status_code == 200


def test_a_similarity_reference_is_held_to_the_token_budget(bundled: bertscope.Model) -> None:
    reference = ["word " * 140, "bread " * 140, "cat " * 140]  # 426 tokens, over a budget of 300
    with _client(bundled, max_request_tokens=300) as client:
        before = _forwards(client)
        refused = client.post(
            "/v2/similarity", json={"source": "a", "sentences": ["b"], "reference": reference}
        )
        assert refused.status_code == 413, refused.text[:300]
        assert "(--max-request-tokens)" in refused.json()["detail"]
        assert _forwards(client) == before + 1  # the source and sentences' one forward, no fit


def test_a_body_of_many_bad_items_is_a_short_422_that_counts_them(bundled: bertscope.Model) -> None:
    with _client(bundled) as client:
        # 2,000 items: 4,001 errors, whose list in full would be ~100 times the 3,000 bytes allowed
        refused = client.post("/v2/tokenize", json={"inputs": [1] * 2_000})
    assert refused.status_code == 422
    assert len(refused.content) < 3000, len(refused.content)
    answer = refused.json()
    assert answer["n_errors"] == 4_001  # not a text, and each of 2,000 items neither a text nor a pair
    assert len(answer["errors"]) == 5
    assert answer["detail"].startswith("inputs: item 0 (the first of 2,000 wrong items) is a number (1)")


@pytest.fixture
def counted(bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Characters the cheap count read, and texts tokenized whole (a `Tokens` each)."""
    seen = {"counted": 0, "whole": 0}
    count, encode = bounds._count, bundled.tokenizer.encode

    def counting(backend: Any, group: list[str]) -> int:
        seen["counted"] += sum(map(len, group))
        return count(backend, group)

    def whole(texts: Any) -> Any:
        seen["whole"] += len(texts)
        return encode(texts)

    monkeypatch.setattr(bounds, "_count", counting)
    monkeypatch.setattr(bundled.tokenizer, "encode", whole)
    return seen


BIG = "word " * 200_000  # 1 MB, 200,002 tokens read whole


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v2/embed", {"inputs": BIG, "long": "window"}),
        ("/embed_tokens", {"inputs": BIG, "long": "window"}),
        ("/explain", {"a": BIG, "b": "a", "long": "window"}),
    ],
    ids=["v2-embed", "embed-tokens", "explain"],
)
def test_a_text_over_the_budget_is_refused_before_it_is_tokenized_whole(
    bundled: bertscope.Model, counted: dict[str, int], path: str, body: dict[str, Any]
) -> None:
    with _client(bundled, max_request_tokens=300) as client:
        refused = client.post(path, json=body)
    assert refused.status_code == 413, refused.text[:300]
    detail = refused.json()["detail"]
    # /embed_tokens' answer would pass --max-answer-floats too: either limit refuses it first
    assert "at least" in detail and ("(--max-request-tokens)" in detail or "(--max-answer-floats)" in detail)
    assert counted["whole"] == 0
    assert 0 < counted["counted"] < len(BIG) // 2  # the count stopped soon after it passed the limit


def test_a_text_within_the_budget_gets_the_same_vector_after_the_count(
    bundled: bertscope.Model, counted: dict[str, int]
) -> None:
    text = "word " * 250  # 1,250 characters, over a budget of 300 tokens: counted first; 252 tokens
    with _client(bundled, max_request_tokens=300) as client:
        answer = client.post("/v2/embed", json={"inputs": text, "long": "window"})
    assert answer.status_code == 200, answer.text[:300]
    assert counted["counted"] == len(text) and counted["whole"] == 1
    expected = bundled.embed([text], long="window").vectors
    assert np.allclose(np.array(answer.json()["vectors"]), expected, atol=1e-6)


@pytest.fixture(scope="module")
def url(bundled: bertscope.Model) -> Iterator[str]:
    with serving(bundled) as base:
        yield base


LARGE = [
    ("/embed_tokens", {"inputs": "word " * 20}),  # 22 tokens x 384
    ("/embed_all", {"inputs": "word " * 20}),
    ("/explain", {"a": "word " * 70, "b": "bread " * 70}),  # a 72 x 72 matrix
]


@pytest.mark.parametrize(("path", "body"), LARGE, ids=[p for p, _ in LARGE])
def test_health_answers_while_a_large_answer_is_written(
    url: str, monkeypatch: pytest.MonkeyPatch, path: str, body: dict[str, Any]
) -> None:
    """The answer's JSON is held until /health has answered: only an answer written off the event loop
    lets /health through (on the loop, /health waits until the hold gives up)."""
    writing, health_answered = threading.Event(), threading.Event()
    held: dict[str, bool] = {}
    here = threading.current_thread()

    def holding(dumps: Callable[..., Any]) -> Callable[..., Any]:
        def held_dumps(obj: Any, *args: Any, **kwargs: Any) -> Any:
            health = isinstance(obj, dict) and "status" in obj
            if threading.current_thread() is not here and not health and not held:
                held["saw_health"] = False
                writing.set()
                held["saw_health"] = health_answered.wait(30)
            return dumps(obj, *args, **kwargs)

        return held_dumps

    sent, headers = json.dumps(body).encode(), {"content-type": "application/json"}
    with httpx.Client(base_url=url, timeout=120) as client, ThreadPoolExecutor(1) as pool:
        monkeypatch.setattr(json, "dumps", holding(json.dumps))
        monkeypatch.setattr(orjson, "dumps", holding(orjson.dumps))  # float32 rows (audit 18a-10)
        large = pool.submit(client.post, path, content=sent, headers=headers)
        assert writing.wait(60), "the large answer was never written"
        assert client.get("/health").status_code == 200
        health_answered.set()
        assert large.result().status_code == 200
        monkeypatch.undo()
    assert held["saw_health"], "/health waited for the large answer's JSON"


@pytest.mark.parametrize(
    "content",
    [
        {"vectors": [[0.1 * i + j for i in range(2500)] for j in range(3)], "model": "m", "n": 3},
        [{"id": i, "text": f"tök {i} \u2028", "start": i, "stop": None} for i in range(3000)],
        {"nested": {"deeper": [[[1, 2], [3]], []], "empty": {}}, "list": [], "unicode": "ça \U0001f600"},
        [[{"a": 1}], [{"b": [1.5, -0.0, 1e300]}]],
        [1, [2, 3], {"x": [4.25]}],
        "a string",
        None,
    ],
)
def test_an_answer_written_in_parts_is_the_bytes_json_response_writes(content: object) -> None:
    from fastapi.responses import JSONResponse

    from bertscope.server.answers import render

    assert render(content) == JSONResponse(content).body


def test_an_answer_written_in_parts_refuses_nan_as_json_response_does() -> None:
    from bertscope.server.answers import render

    with pytest.raises(ValueError):
        render({"vectors": [[0.0] * 2000 + [float("nan")]]})


def test_a_float64_past_float32s_range_is_refused_not_written_as_null() -> None:
    """Rows written as float32 were checked before the conversion: 1e39 became infinity after it, which
    orjson writes as null (a silently wrong answer; review of d10c768)."""
    from bertscope.server.answers import Rows, render

    with pytest.raises(ValueError):
        render({"vectors": Rows(np.array([[0.5, 1e39]]), dtype=np.float32)})
    within = Rows(np.array([[0.5, 1e30]]), dtype=np.float32)
    assert render({"vectors": within}) == b'{"vectors":[[0.5,1e+30]]}'


def test_big_bodies_are_tokenized_one_at_a_time(bundled: bertscope.Model, monkeypatch: Any) -> None:
    """Tokenizing a text whole holds about a kilobyte a token until it is cut (long="truncate"): requests
    past `_BIG_CHARACTERS` take turns (waiting on the event loop), on one thread (the allocator keeps a
    thread's freed memory for that thread), so together they hold one's memory; a small one passes beside
    them."""
    from bertscope.server import service as service_module

    svc = create_app(bundled, settings=ServerSettings()).state.service
    gate = svc.big_tokenizing
    release = threading.Event()
    inside: list[str] = []  # the requests tokenizing now
    most = [0]
    threads: set[str] = set()  # where the big ones were tokenized

    def held(items: list[Any], spec: Any) -> list[Any]:
        with gate.changed:  # the gate's own condition: the test waits on both counts at once
            inside.append(items[0][:5])
            most[0] = max(most[0], len(inside))
            gate.changed.notify_all()
        if len(items[0]) > service_module._BIG_CHARACTERS:
            threads.add(threading.current_thread().name)
            release.wait(timeout=60)
        with gate.changed:
            inside.pop()
        return []

    monkeypatch.setattr(bundled.engine, "prepare", held)
    big, spec = "word " * (service_module._BIG_CHARACTERS // 5 + 1), bundled.spec()
    loop = asyncio.new_event_loop()  # the server's loop: big requests wait for their turn on it
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()

    def prepared(texts: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(svc.tokenizing(texts, svc._prepare, texts, spec), loop)

    try:
        futures = [prepared(big) for _ in range(3)]
        with gate.changed:  # one inside, two waiting
            assert gate.changed.wait_for(lambda: gate.waiting == 2 and len(inside) == 1, timeout=60)
        assert most[0] == 1
        prepared("a short text").result(timeout=60)  # under the gate's size: not held up
        assert most[0] == 2
        release.set()
        for future in futures:
            future.result(timeout=60)
    finally:
        release.set()
        loop.call_soon_threadsafe(loop.stop)
        runner.join(60)
        loop.close()
    assert gate.waiting == 0 and not gate.held and most[0] == 2
    assert len(threads) == 1 and threads.pop().startswith("bertscope-big-tokenize"), threads


def _worker_jobs(client: TestClient) -> float:
    """Jobs the worker has taken, from /metrics: a request refused before the worker adds none."""
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("bertscope_batch_requests_sum "):
            return float(line.split()[1])
    raise AssertionError("no bertscope_batch_requests_sum in /metrics")


LONG = " ".join(["bread"] * 600)  # 602 tokens, cut to the bundled model's 256
# Over 100,000 numbers from the tokens cut to 256: 7 layers x 256 x 258 cosines and norms; 6 layers x
# 12 heads x 256 x 256 weights; 7 steps x 256 tokens x 384; the batch's 2 texts x 256 padded x 3 values
# pass a bound of 1,000 that its 259 real tokens x 3 would not.
EXPLORED = [
    ("/explore/layers", {"inputs": LONG}, {"inputs": LONG[:120]}, 100_000),
    ("/attention", {"inputs": LONG}, {"inputs": LONG, "layer": 2, "head": 3}, 100_000),
    ("/anatomy", {"inputs": LONG}, {"inputs": LONG[:120]}, 100_000),
    ("/explore/batch", {"inputs": [LONG, "hi"]}, {"inputs": [LONG[:120], "hi"]}, 1_000),
]


@pytest.mark.parametrize(("path", "over", "within", "bound"), EXPLORED, ids=[p for p, *_ in EXPLORED])
def test_explorer_answers_are_bounded_by_max_answer_floats(
    bundled: bertscope.Model, path: str, over: dict[str, Any], within: dict[str, Any], bound: int
) -> None:
    with _client(bundled, max_answer_floats=bound) as client:
        before = _worker_jobs(client)
        refused = client.post(path, json=over)
        assert refused.status_code == 413, refused.text[:300]
        assert "(--max-answer-floats)" in refused.json()["detail"]
        assert _worker_jobs(client) == before  # refused before any work on the worker
        answered = client.post(path, json=within)  # 20 words, or one layer's one head of the long text
        assert answered.status_code == 200, answered.text[:300]


BIG_BODIES = [
    ("/explore/layers", {}),
    ("/explore/batch", {}),
    ("/anatomy", {}),
    ("/attention", {"layer": 1, "head": 0}),
    ("/embed_tokens", {"long": "truncate"}),
]


@pytest.mark.parametrize(("path", "options"), BIG_BODIES, ids=[p for p, _ in BIG_BODIES])
def test_big_bodies_to_the_explorer_routes_take_turns_tokenizing(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch, path: str, options: dict[str, Any]
) -> None:
    """Each route tokenizes through the big-request gate: with one big request held inside the tokenizer,
    a second waits at the gate instead of tokenizing beside it."""
    from bertscope.server import service as service_module
    from test_server import serving_app

    settings = ServerSettings()
    app = create_app(bundled, settings=settings)
    gate = app.state.service.big_tokenizing
    release, inside, threads = threading.Event(), [0], []
    # Every route tokenizes through encode_fitted (a text cut at the limit is read a piece at a time
    # inside it, so encode itself sees only the pieces): hold the big request there.
    encode_fitted = bundled.tokenizer.encode_fitted

    def held(texts: Any, *args: Any, **kwargs: Any) -> Any:
        if sum(len(t) for t in texts if isinstance(t, str)) > service_module._BIG_CHARACTERS:
            with gate.changed:
                inside[0] += 1
                threads.append(threading.current_thread().name)
                gate.changed.notify_all()
            release.wait(timeout=60)
        return encode_fitted(texts, *args, **kwargs)

    monkeypatch.setattr(bundled.tokenizer, "encode_fitted", held)
    big = "word " * (service_module._BIG_CHARACTERS // 5 + 1)
    body = {"inputs": [big, "hi"] if path == "/explore/batch" else big, **options}
    with (
        serving_app(app, settings) as base,
        httpx.Client(base_url=base, timeout=120) as client,
        ThreadPoolExecutor(2) as pool,
    ):
        try:
            first = pool.submit(client.post, path, json=body)
            with gate.changed:
                assert gate.changed.wait_for(lambda: inside[0] == 1, timeout=60)
            second = pool.submit(client.post, path, json=body)
            with gate.changed:
                assert gate.changed.wait_for(lambda: gate.waiting == 1 or inside[0] == 2, timeout=60)
                assert (inside[0], gate.waiting) == (1, 1)  # one tokenizing, the other waiting its turn
            assert threads[0].startswith("bertscope-big-tokenize")  # on the gate's one thread
        finally:
            release.set()  # a failed check lets the held requests go
        assert first.result().status_code == 200, first.result().text[:300]
        assert second.result().status_code == 200, second.result().text[:300]
    assert gate.waiting == 0
