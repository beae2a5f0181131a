"""More items than --max-inputs: the refusal names the route's own field, and the fix that works on that
route (--auto-split only where it splits a request); /v1/ answers OpenAI's 400, TEI's routes 422."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import ServerSettings, create_app

LIMIT = 4
OVER = LIMIT + 1
SPLIT = "start bertscope serve with --auto-split or a higher --max-inputs"
NO_SPLIT = "start bertscope serve with a higher --max-inputs"
CASES = [
    # path, body, status, field, whether --auto-split takes it
    ("/embed", {"inputs": ["a"] * OVER}, 422, "inputs", True),
    ("/v2/embed", {"inputs": ["a"] * OVER}, 413, "inputs", True),
    ("/v1/embeddings", {"input": ["a"] * OVER}, 400, "input", True),
    ("/v2/similarity", {"source": "a", "sentences": ["b"] * LIMIT}, 413, "source and sentences", True),
    ("/tokenize", {"inputs": ["a"] * OVER}, 422, "inputs", False),
    ("/decode", {"ids": [[101]] * OVER}, 422, "ids", False),
    ("/embed_all", {"inputs": ["a"] * OVER}, 422, "inputs", False),
    ("/v2/tokenize", {"inputs": ["a"] * OVER}, 413, "inputs", False),
    ("/embed_tokens", {"inputs": ["a"] * OVER}, 413, "inputs", False),
    (
        "/v2/similarity",
        {"source": "a", "sentences": ["b"], "reference": ["c"] * OVER},
        413,
        "reference",
        False,
    ),
]


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "auto-split"])
def served(request: Any, bundled: bertscope.Model) -> Iterator[tuple[TestClient, bool]]:
    settings = ServerSettings(max_inputs=LIMIT, auto_split=request.param)
    with TestClient(create_app(bundled, settings=settings)) as client:
        yield client, request.param


@pytest.mark.parametrize(("path", "body", "status", "field", "splits"), CASES, ids=[c[0] for c in CASES])
def test_too_many_inputs_name_the_field_and_a_fix_that_works_there(
    served: tuple[TestClient, bool], path: str, body: dict[str, Any], status: int, field: str, splits: bool
) -> None:
    client, auto_split = served
    answer = client.post(path, json=body)
    if splits and auto_split:
        assert answer.status_code == 200, answer.text[:300]
        return
    assert answer.status_code == status, answer.text[:300]
    detail = answer.json()["detail"]
    assert detail.startswith(f"{field}: {OVER} in one request, over the limit of {LIMIT} per request")
    assert detail.endswith(SPLIT if splits else NO_SPLIT), detail
    if path.startswith("/v1/"):  # OpenAI's invalid request, which its client raises as BadRequestError
        error = answer.json()["error"]
        assert error["type"] == "invalid_request_error" and error["message"] == detail
