"""A new user's audit, each finding held: a body sent as text/plain is named by its content type (415,
as TEI's axum answers), `serve --port 0` takes a free port and says which, `vocab add` says which words
were added and which were already one piece, and the library's shape and name errors are bertscope's
errors listing the valid choices (pooling=None is the default pooling)."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import bertscope
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.server.error_answers import TEI_PATHS
from bertscope.vocab import new_words
from console import run_main
from test_server import serving

BODY = json.dumps({"inputs": "a cat sat"})
# The words every refusal of a body sent as something other than JSON says: the header, and the fix.
FIX = "send Content-Type: application/json"


@pytest.fixture(scope="module")
def http(bundled: bertscope.Model) -> Iterator[httpx.Client]:
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:
        yield client


def _post(http: httpx.Client, path: str, body: str, content_type: str | None) -> httpx.Response:
    headers = {} if content_type is None else {"content-type": content_type}
    request = http.build_request("POST", path, content=body.encode(), headers=headers)
    if content_type is None:
        request.headers.pop("content-type", None)
    return http.send(request)


@pytest.mark.parametrize("path", ["/embed", "/", "/embed_all", "/tokenize", "/v2/embed", "/v1/embeddings"])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_a_json_body_sent_as_another_type_is_named_by_its_type(
    http: httpx.Client, path: str, content_type: str
) -> None:
    """It was 422 "body: Input should be a valid dictionary": the JSON was fine, the header was not
    (curl's -d sends application/x-www-form-urlencoded)."""
    body = BODY if path != "/v1/embeddings" else json.dumps({"input": "a cat sat"})
    response = _post(http, path, body, content_type)
    assert response.status_code == 415, response.text
    answer = response.json()
    assert answer["detail"] == f"body: sent with Content-Type {content_type!r}, not JSON; {FIX}"
    if path in TEI_PATHS:
        assert answer["error"] == answer["detail"] and answer["error_type"] == "Validation"
    elif path.startswith("/v1/"):
        assert answer["error"]["message"] == answer["detail"] and answer["error"]["code"] is None


def test_tei_routes_name_the_type_before_reading_the_body(http: httpx.Client) -> None:
    """axum's Json checks the content type first: a body that is not JSON either is still a 415, not TEI's
    400 for a syntax error."""
    response = _post(http, "/embed", "inputs=a cat", "text/plain; charset=utf-8")
    assert response.status_code == 415 and FIX in response.json()["detail"], response.text
    assert _post(http, "/embed", "inputs=a cat", "application/json").status_code == 400


@pytest.mark.parametrize("path", ["/embed", "/v2/embed"])
def test_a_body_with_no_content_type_is_named_too(http: httpx.Client, path: str) -> None:
    """FastAPI (strict_content_type) and TEI's axum read no body without one: the 422 said nothing of why."""
    response = _post(http, path, BODY, None)
    assert response.status_code == 415, response.text
    assert response.json()["detail"] == f"body: sent with no Content-Type; {FIX}"


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "Application/JSON", "application/x+json"],
)
def test_json_is_read_as_json(http: httpx.Client, content_type: str) -> None:
    for path in ("/embed", "/v2/embed"):
        response = _post(http, path, BODY, content_type)
        assert response.status_code == 200, (path, response.text)


def test_the_openapi_document_names_the_415(http: httpx.Client) -> None:
    embed = http.get("/openapi.json").json()["paths"]["/v2/embed"]["post"]["responses"]
    assert "Content-Type: application/json" in embed["415"]["description"]


def test_serve_port_0_binds_a_free_port_and_says_which(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was refused ("Input should be greater than or equal to 1") while explore --port 0 took one."""

    import bertscope.cli.serve as serve
    from bertscope.server import capacity

    bound: list[int] = []

    class Bound:
        """uvicorn.Server that records the socket it is handed instead of serving on it."""

        def __init__(self, config: Any) -> None:
            pass

        def run(self, *, sockets: list[socket.socket]) -> None:
            bound.append(sockets[0].getsockname()[1])
            sockets[0].close()

    monkeypatch.setattr(serve, "load_model", lambda *a, **k: bundled)
    monkeypatch.setattr(capacity, "Server", Bound)  # serve's uvicorn.Server, with its connection cap
    ran = run_main("serve", "--port", "0")
    assert ran.code == 0, ran
    said = re.search(r"serving .* on http://127\.0\.0\.1:(\d+) ", ran.stderr)
    assert said is not None, ran.stderr
    assert bound and int(said[1]) == bound[0] != 0


def test_vocab_add_says_which_words_were_added(
    bundled: bertscope.Model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mRNA` is one piece already (`mrna`): it was listed as if added while the vocabulary grew by 1."""
    import bertscope.cli.pictures as pictures

    monkeypatch.setattr(pictures, "load_model", lambda *a, **k: bundled)
    ran = run_main("vocab", "add", "covid19", "mRNA", "-o", str(tmp_path / "x"), "--json")
    assert ran.code == 0, ran
    said = json.loads(ran.stdout)
    assert said["added"] == ["covid19"] and said["already_one_piece"] == ["mRNA"]
    assert said["vocab_size"] == said["vocab_size_before"] + 1 == len(bundled.vocab) + 1
    assert [w["added"] for w in said["words"]] == [True, False]
    table = run_main("vocab", "add", "covid19", "mRNA", "-o", str(tmp_path / "y"))
    assert table.code == 0, table
    assert "added 1 of 2: covid19; not added, already one piece: mRNA" in table.stdout
    assert "no: already one piece" in table.stdout and "30,522 -> 30,523" in table.stdout


def test_new_words_are_those_not_yet_one_piece(bundled: bertscope.Model) -> None:
    assert new_words(bundled, ["covid19", "mRNA", "bank"]) == ["covid19"]
    with pytest.raises(
        InvalidInput, match="'two words' is several words: a new token is one word without spaces"
    ):
        new_words(bundled, ["two words"])


def test_cos_sim_of_two_widths_is_a_bertscope_error() -> None:
    with pytest.raises(InvalidInput, match=r"cos_sim: a's vectors have 3 numbers and b's 4 .*one width"):
        bertscope.cos_sim(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(InvalidInput, match=r"pairwise_cos_sim: a is \(2, 3\) and b is \(2, 4\).*one shape"):
        bertscope.pairwise_cos_sim(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(InvalidInput, match=r"a is \(2, 3\) and b is \(3, 3\)"):
        bertscope.pairwise_cos_sim(np.ones((2, 3)), np.ones((3, 3)))
    # what worked still works: a vector against rows, one row against several
    assert bertscope.cos_sim(np.ones(3), np.ones((2, 3))).shape == (1, 2)
    np.testing.assert_allclose(
        bertscope.pairwise_cos_sim(np.ones((1, 3)), np.ones((2, 3))), [1, 1], rtol=1e-6
    )


def test_an_unknown_enum_name_lists_the_choices_and_stays_a_value_error() -> None:
    names = "cls, pooler, mean, max, mean_sqrt_len, first_last_avg, auto"
    with pytest.raises(InvalidSpec, match=f"^'x' is not a valid Pooling; choose one of: {names}$") as caught:
        bertscope.Pooling("x")
    assert isinstance(caught.value, ValueError)
    with pytest.raises(InvalidSpec, match="choose one of: mean, sum, concat, stack"):
        bertscope.Combine("median")
    assert bertscope.Pooling("mean") is bertscope.Pooling.MEAN
    with pytest.raises(InvalidSpec, match=f"^unknown pooling 'x'; choose one of: {names}$"):
        bertscope.Pooling.parse("x", what="pooling")


def test_pooling_none_is_the_default_pooling(bundled: bertscope.Model) -> None:
    """None was "unknown pooling None"; the signature's default is auto (the model's own pooling)."""
    texts = ["a cat sat on the mat", "stocks fell"]
    given = bundled.embed(texts, pooling=None)
    assert given.spec == bundled.embed(texts).spec and given.spec["pooling"] == "mean"
    np.testing.assert_array_equal(given.vectors, bundled.embed(texts).vectors)


def test_combine_and_long_none_are_their_defaults(bundled: bertscope.Model) -> None:
    """As pooling=None: combine=None and long=None were refused as unknown names."""
    texts = ["a cat sat on the mat", "stocks fell"]
    for option in ("combine", "long"):
        given = bundled.embed(texts, layers="-2,-1", **{option: None})
        left_out = bundled.embed(texts, layers="-2,-1")
        assert given.spec == left_out.spec, option
        np.testing.assert_array_equal(given.vectors, left_out.vectors)
        tokens = bundled.embed_tokens(texts, **{option: None})
        np.testing.assert_array_equal(tokens[0].vectors, bundled.embed_tokens(texts)[0].vectors)
