"""An app whose lifespan never runs still answers: mounted in another app (Starlette runs only the outer
app's lifespan) or driven by a test client used without `with`. Its worker starts with the first job;
before, every route that queues work waited forever."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from bertscope.model import Model
from bertscope.server import create_app

# A generous bound for a request on a loaded 2-core machine (they take well under a second): the test
# fails, rather than hangs, where the worker never starts.
_ANSWER_WITHIN_S = 120.0


def _answered(call: Callable[[], Any]) -> Any:
    """`call()`'s result, or a failure when it has not returned within _ANSWER_WITHIN_S."""
    result: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            result.append(call())
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()  # a daemon: a hung request cannot hold pytest
    assert done.wait(_ANSWER_WITHIN_S), "the request was never answered: no worker took its job"
    assert result, "the request raised"
    return result[0]


@pytest.fixture
def mounted(bundled: Model) -> Any:
    """A client of an outer app that mounts bertscope's at /bertscope (Starlette runs no lifespan of a
    mounted app); the inner worker stopped after."""
    inner = create_app(bundled)
    outer = FastAPI()
    outer.mount("/bertscope", inner)
    # Without `with`: each request runs in a portal of its own, so a request no worker answers leaves
    # only its daemon thread behind (a client's `with` would wait for it on closing, and hang the test).
    yield TestClient(outer)
    inner.state.service.batcher.stop()
    assert not inner.state.service.batcher.alive


def test_a_mounted_app_embeds_as_the_model_does(mounted: TestClient, bundled: Model) -> None:
    texts = ["a cat sat on the mat", "rain again"]
    answer = _answered(lambda: mounted.post("/bertscope/v2/embed", json={"inputs": texts}))
    assert answer.status_code == 200, answer.text
    expected = np.asarray(bundled.embed(texts).vectors)
    np.testing.assert_allclose(np.asarray(answer.json()["vectors"]), expected, atol=1e-6)


@pytest.mark.parametrize(
    "path, body",
    [
        ("/embed", {"inputs": ["a cat"]}),
        ("/attention", {"inputs": ["a cat", "a dog"], "layer": -1, "mean_heads": True}),
        ("/v1/embeddings", {"input": ["a cat"], "model": "any"}),
    ],
)
def test_every_queued_route_answers_without_the_lifespan(
    mounted: TestClient, path: str, body: dict[str, Any]
) -> None:
    answer = _answered(lambda: mounted.post(f"/bertscope{path}", json=body))
    assert answer.status_code == 200, answer.text


def test_the_lifespan_still_starts_and_stops_the_worker(bundled: Model) -> None:
    """With the lifespan (uvicorn, `with TestClient(app)`) the worker runs from its start, once, and a
    request after its stop is refused, not answered by a worker started again."""
    app = create_app(bundled)
    batcher = app.state.service.batcher
    with TestClient(app) as client:
        assert batcher.alive
        thread = batcher._thread
        assert _answered(lambda: client.post("/embed", json={"inputs": ["a cat"]})).status_code == 200
        assert batcher._thread is thread  # the first job found it running: no second worker
    assert not batcher.alive
    answer = _answered(lambda: TestClient(app).post("/embed", json={"inputs": ["a cat"]}))
    assert answer.status_code == 503 and not batcher.alive


@pytest.mark.parametrize("path", ["/health", "/ping"])
def test_a_mounted_app_is_healthy_before_its_first_job(mounted: TestClient, path: str) -> None:
    """A readiness probe sends no traffic to an app it finds unhealthy, so a worker started only by a
    job would never start: the health check starts it too."""
    answer = _answered(lambda: mounted.get(f"/bertscope{path}"))
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    "path, body, keys",
    [
        ("/v1/embeddings", {"input": 5, "model": "any"}, {"error"}),  # OpenAI's error object
        ("/embed", {"inputs": 5}, {"error", "error_type"}),  # TEI's
        ("/v2/embed", {"inputs": ["a cat"], "layer": 3}, {"detail", "errors"}),  # bertscope's own
    ],
)
def test_a_mounted_app_answers_errors_in_each_routes_own_shape(
    mounted: TestClient, bundled: Model, path: str, body: dict[str, Any], keys: set[str]
) -> None:
    """Under a prefix each route still answers its own API's error shape, as the same app at the root."""
    at_root = create_app(bundled)
    with TestClient(at_root) as root_client:
        expected = root_client.post(path, json=body)
    answer = _answered(lambda: mounted.post(f"/bertscope{path}", json=body))
    assert (answer.status_code, answer.json()) == (expected.status_code, expected.json())
    assert keys <= set(answer.json())


def test_a_mounted_apps_metrics_name_its_routes(mounted: TestClient) -> None:
    assert (
        _answered(lambda: mounted.post("/bertscope/v2/embed", json={"inputs": ["a cat"]})).status_code == 200
    )
    metrics = _answered(lambda: mounted.get("/bertscope/metrics")).text
    assert 'endpoint="/v2/embed"' in metrics


def test_a_mounted_app_with_a_key_keeps_its_probes_open(bundled: Model) -> None:
    """/health and TEI's /ping answer without the key, under a prefix as at the root; the routes ask it."""
    from bertscope.server import ServerSettings

    inner = create_app(bundled, settings=ServerSettings(api_key="s3cret"))
    outer = FastAPI()
    outer.mount("/bertscope", inner)
    client = TestClient(outer)
    try:
        for path in ("/health", "/ping"):
            assert _answered(lambda path=path: client.get(f"/bertscope{path}")).status_code == 200
        refused = _answered(lambda: client.post("/bertscope/v2/embed", json={"inputs": ["a"]}))
        assert refused.status_code == 401 and "API key" in refused.json()["detail"]
    finally:
        inner.state.service.batcher.stop()


def test_a_mounted_explorer_page_asks_for_its_files_and_routes_under_the_prefix(mounted: TestClient) -> None:
    page = _answered(lambda: mounted.get("/bertscope/"))
    assert page.status_code == 200 and 'src="explorer/app.js"' in page.text  # relative to the page
    script = _answered(lambda: mounted.get("/bertscope/explorer/app.js"))
    assert script.status_code == 200 and 'fetch("." + path' in script.text
    assert _answered(lambda: mounted.get("/bertscope/explorer/style.css")).status_code == 200
