"""One concept, one name on the service too: /embed_tokens takes `"level": "words"`, the name the command
line (`embed --level words`) and the corpus jobs (`level="words"`) give the word level; `"words": true`,
its older spelling, still works, and a body with both is refused in one line naming the one to keep."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

import bertscope
from bertscope.server.schemas import ONE_LEVEL
from test_server import serving

TEXT = "I like eating bread"


@pytest.fixture(scope="module")
def http(bundled: bertscope.Model) -> Iterator[httpx.Client]:
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:
        yield client


def _ok(http: httpx.Client, body: dict[str, Any]) -> Any:
    response = http.post("/embed_tokens", json=body)
    assert response.status_code == 200, response.text
    return response.json()["items"][0]


def _refused(http: httpx.Client, body: dict[str, Any]) -> str:
    response = http.post("/embed_tokens", json=body)
    assert response.status_code == 422, response.text
    detail = str(response.json()["detail"])
    assert "\n" not in detail
    return detail


def test_level_words_answers_as_the_older_words_true(http: httpx.Client, bundled: bertscope.Model) -> None:
    by_level = _ok(http, {"inputs": TEXT, "layers": "0,6", "level": "words"})
    assert _ok(http, {"inputs": TEXT, "layers": "0,6", "words": True}) == by_level
    assert by_level["words"]["words"] == ["I", "like", "eating", "bread"]
    want = bundled.embed_words(TEXT, layers="0,6")[0]
    np.testing.assert_allclose(np.array(by_level["words"]["vectors"]), want.vectors, atol=1e-5)
    # the level's names in the library's spellings; tokens (the default) carries no words
    assert _ok(http, {"inputs": TEXT, "level": "WORDS"})["words"]["words"] == by_level["words"]["words"]
    tokens = _ok(http, {"inputs": TEXT, "level": "tokens"})
    assert "words" not in tokens and tokens == _ok(http, {"inputs": TEXT})


@pytest.mark.parametrize(
    "given",
    [
        {"level": "words", "words": True},
        {"level": "tokens", "words": True},
        {"level": "words", "words": False},
        {"level": "tokens", "words": False},  # the same answer, still two names for one field
    ],
)
def test_both_spellings_at_once_are_refused(http: httpx.Client, given: dict[str, Any]) -> None:
    assert _refused(http, {"inputs": TEXT, **given}) == ONE_LEVEL
    assert ONE_LEVEL == (
        '"level" and "words" both given: "words": true is the older spelling of "level": "words"; '
        'send "level" only'
    )


def test_a_pair_is_refused_in_the_spelling_sent(http: httpx.Client) -> None:
    pair = [["a cat", "a dog"]]
    assert _refused(http, {"inputs": pair, "level": "words"}).startswith('"level": "words" takes texts, not')
    assert _refused(http, {"inputs": pair, "words": True}).startswith('"words": true takes texts, not')
    assert _ok(http, {"inputs": pair, "level": "tokens"})["pair"] == "a dog"


def test_a_level_this_route_does_not_answer_lists_the_two_it_does(http: httpx.Client) -> None:
    said = _refused(http, {"inputs": TEXT, "level": "sentence"})
    assert said.startswith("level: Input should be 'tokens' or 'words'"), said


def test_the_schema_says_the_same(http: httpx.Client) -> None:
    """The served OpenAPI document: level's two names, words marked deprecated, and the bodies refused
    above left out of what the schema takes."""
    doc = http.get("/openapi.json").json()
    schema = doc["components"]["schemas"]["TokensRequest"]
    words = schema["properties"]["words"]
    assert words.get("deprecated") is True and "level" in words["description"]
    jsonschema_rs = pytest.importorskip("jsonschema_rs")
    check = jsonschema_rs.validator_for(
        {"$ref": "#/components/schemas/TokensRequest", "components": doc["components"]}
    )
    assert check.is_valid({"inputs": TEXT, "level": "words"}) and check.is_valid(
        {"inputs": TEXT, "words": True}
    )
    assert not check.is_valid({"inputs": TEXT, "level": "sentence"})
    assert not check.is_valid({"inputs": TEXT, "level": "tokens", "words": False})
    assert not check.is_valid({"inputs": [["a", "b"]], "level": "words"})
    assert check.is_valid({"inputs": [["a", "b"]], "level": "tokens"})
