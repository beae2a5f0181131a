"""The explorer's routes and files as an auditor found them (audit 21): errors under /explorer/ naming
the real path, every method a path takes, the batch's names, the one-text route's refusals."""

from __future__ import annotations

from collections.abc import Iterator

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
