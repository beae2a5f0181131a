"""The explorer's routes and files as an auditor found them (audit 21): errors under /explorer/ naming
the real path, every method a path takes, the batch's names, the one-text route's refusals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import bertscope


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    from bertscope.server import create_app

    with TestClient(create_app(bundled)) as served:
        yield served


def test_a_missing_explorer_file_names_its_own_path_and_the_docs(client: TestClient) -> None:
    """The mount's root_path (/explorer) was taken for the service's: the path lost its /explorer and the
    docs link gained it (/explorer/docs, a 404), and /explorer/ was read as TEI's POST /."""
    missing = client.get("/explorer/x.js")
    assert missing.status_code == 404
    assert missing.json() == {
        "detail": "no route GET /explorer/x.js; the routes are listed at /docs (and /openapi.json)"
    }
    folder = client.get("/explorer/no/such/")
    assert folder.status_code == 404 and set(folder.json()) == {"detail"}
    assert folder.json()["detail"].startswith("no route GET /explorer/no/such/;")
    put = client.put("/explorer/app.js")
    assert put.status_code == 405 and put.headers["allow"] == "GET, HEAD"
    assert put.json() == {"detail": "method PUT is not allowed on /explorer/app.js; send it as GET"}


def test_a_mounted_service_names_its_own_docs(bundled: bertscope.Model) -> None:
    from bertscope.server import create_app

    with TestClient(create_app(bundled), root_path="/bertscope") as mounted:
        missing = mounted.get("/bertscope/explorer/x.js")
    assert missing.json()["detail"] == (
        "no route GET /explorer/x.js; the routes are listed at /bertscope/docs (and /bertscope/openapi.json)"
    )


def test_the_page_path_allows_get_and_post(client: TestClient) -> None:
    """TEI's POST / came before the page's GET /: the router's 405 named POST alone."""
    refused = client.delete("/")
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD, POST"
    assert refused.json()["detail"] == "method DELETE is not allowed on /; send it as GET or POST"
    assert client.head("/").status_code == 200  # HEAD, as the Allow header says
    one = client.get("/embed")  # a path with one route keeps its one method
    assert one.headers["allow"] == "POST" and one.json()["detail"].endswith("send it as POST")


def test_explore_batch_names_the_batch_as_model_batch_does(
    client: TestClient, bundled: bertscope.Model
) -> None:
    """/explore/batch said `ids` (Model.batch: input_ids), had no token_type_ids and no `model`."""
    texts = ["I like bread", "Hi"]
    found = client.post("/explore/batch", json={"inputs": texts}).json()
    expected = bundled.batch(texts)
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        assert found[name] == expected[name].tolist(), name
    assert found["ids"] == found["input_ids"]  # the older name, kept beside it
    assert found["model"] == client.get("/info").json()["model_id"]
    assert client.get("/explore/posts").json() == {"model": found["model"], "posts": []}


def test_explore_batch_has_no_token_types_where_the_family_has_none(tmp_path: Path) -> None:
    from bertscope.server import create_app
    from tiny_models import build_tiny_model

    model = bertscope.load(build_tiny_model("distilbert", tmp_path / "distilbert"), device="cpu")
    with TestClient(create_app(model)) as served:
        found = served.post("/explore/batch", json={"inputs": ["a cat", "a"]}).json()
    assert found["token_type_ids"] is None
    assert found["input_ids"] == model.batch(["a cat", "a"])["input_ids"].tolist()


@pytest.mark.parametrize("path", ["/explorer/index.html", "/explorer/"])
def test_the_page_is_served_at_the_root_only(client: TestClient, path: str) -> None:
    """/explorer/index.html served the page, its relative links then under /explorer/explorer/ (404s)."""
    moved = client.get(path, follow_redirects=False)
    assert moved.status_code == 307 and moved.headers["location"] == "/"
    assert client.get(path).text == client.get("/").text


def test_explore_layers_refuses_a_list_or_an_empty_text_naming_inputs(client: TestClient) -> None:
    """A list said only "Input should be a valid string"; an empty text "text 0 is empty" of a route that
    takes one text."""
    listed = client.post("/explore/layers", json={"inputs": ["a", "b"]})
    assert listed.status_code == 422
    assert listed.json()["detail"] == "inputs: give one text (a string), not a list; /v2/embed takes several"
    empty = client.post("/explore/layers", json={"inputs": "  "})
    assert empty.status_code == 422
    assert empty.json()["detail"] == "inputs is empty: every text needs a non-space character"
