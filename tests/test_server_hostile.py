"""The service under hostile bodies: every answer bounded before it is made, a refusal cheap, and the event
loop free while a large answer is written.

Every test waits on a condition (an answer, an event), never on a clock; sizes are checked by the
answer or by the work counted, never by the process's memory.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
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
        refused = client.post("/v2/tokenize", json={"inputs": [1] * 20_000})
    assert refused.status_code == 422
    assert len(refused.content) < 3000, len(refused.content)
    answer = refused.json()
    assert answer["n_errors"] == 40_001  # not a text, and each of 20,000 items neither a text nor a pair
    assert len(answer["errors"]) == 5
    assert "inputs.str: Input should be a valid string" in answer["detail"]
    assert "40,001 errors in all, 5 named" in answer["detail"]


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
    dumps, here = json.dumps, threading.current_thread()

    def holding(obj: Any, *args: Any, **kwargs: Any) -> str:
        health = isinstance(obj, dict) and "status" in obj
        if threading.current_thread() is not here and not health and not held:
            held["saw_health"] = False
            writing.set()
            held["saw_health"] = health_answered.wait(30)
        return dumps(obj, *args, **kwargs)

    sent, headers = json.dumps(body).encode(), {"content-type": "application/json"}
    with httpx.Client(base_url=url, timeout=120) as client, ThreadPoolExecutor(1) as pool:
        monkeypatch.setattr(json, "dumps", holding)
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


def test_big_bodies_are_tokenized_one_at_a_time(bundled: bertscope.Model, monkeypatch: Any) -> None:
    """Tokenizing a text whole holds about a kilobyte a token until it is cut (long="truncate"): requests
    past `_BIG_CHARACTERS` take turns, so together they hold one's memory; a small one passes beside them."""
    from bertscope.server import service as service_module

    svc = create_app(bundled, settings=ServerSettings()).state.service
    release, lock = threading.Event(), threading.Lock()
    inside: list[str] = []  # the requests tokenizing now
    most = [0]

    def held(items: list[Any], spec: Any) -> list[Any]:
        with lock:
            inside.append(items[0][:5])
            most[0] = max(most[0], len(inside))
        if len(items[0]) > service_module._BIG_CHARACTERS:
            release.wait(timeout=60)
        with lock:
            inside.pop()
        return []

    monkeypatch.setattr(bundled.engine, "prepare", held)
    big, spec = "word " * (service_module._BIG_CHARACTERS // 5 + 1), bundled.spec()
    gate = svc.big_tokenizing
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(svc._prepare, big, spec) for _ in range(3)]
        with gate.changed:
            assert gate.changed.wait_for(lambda: gate.waiting == 2, timeout=60)  # one inside, two wait
        assert most[0] == 1
        svc._prepare("a short text", spec)  # under the gate's size: not held up
        assert most[0] == 2
        release.set()
        for future in futures:
            future.result(timeout=60)
    assert gate.waiting == 0 and most[0] == 2
