"""One concept, one name on the service too: /embed_tokens takes `"level": "words"`, the name the command
line (`embed --level words`) and the corpus jobs (`level="words"`) give the word level; /static takes
`"as_words": true`, as `static --as-words` (a `word` is a value on /occurrences, as `similar --word bank`);
/v2/embed_chunks takes `"chunk_size"`/`"chunk_overlap"`, as the corpus jobs, `embed --chunk-size` and the
library's `embed_chunks(chunk_size=)`; /attention takes `"inputs"`, as /anatomy and every other route.
Their older spellings (`"words": true`, `"word": true`, `"size"`, `"overlap"`, `"text"`) still work, and a
body with both is refused in one line naming the one to keep."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

import bertscope
from bertscope.server.feature_schemas import ONE_CHUNK_OVERLAP, ONE_CHUNK_SIZE
from bertscope.server.schemas import ONE_AS_WORDS, ONE_LEVEL
from test_server import serving

TEXT = "I like eating bread"


@pytest.fixture(scope="module")
def http(bundled: bertscope.Model) -> Iterator[httpx.Client]:
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:
        yield client


def _validator(doc: dict[str, Any], request: str) -> Any:
    """A JSON Schema validator for one request body of the served OpenAPI document."""
    import jsonschema_rs

    return jsonschema_rs.validator_for(
        {"$ref": f"#/components/schemas/{request}", "components": doc["components"]}
    )


def _ok(http: httpx.Client, body: dict[str, Any], route: str = "/embed_tokens") -> Any:
    response = http.post(route, json=body)
    assert response.status_code == 200, response.text
    return response.json()["items"][0]


def _refused(http: httpx.Client, body: dict[str, Any], route: str = "/embed_tokens") -> str:
    response = http.post(route, json=body)
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
    check = _validator(doc, "TokensRequest")
    assert check.is_valid({"inputs": TEXT, "level": "words"}) and check.is_valid(
        {"inputs": TEXT, "words": True}
    )
    assert not check.is_valid({"inputs": TEXT, "level": "sentence"})
    assert not check.is_valid({"inputs": TEXT, "level": "tokens", "words": False})
    assert not check.is_valid({"inputs": [["a", "b"]], "level": "words"})
    assert check.is_valid({"inputs": [["a", "b"]], "level": "tokens"})


def test_static_as_words_answers_as_the_older_word_true(http: httpx.Client, bundled: bertscope.Model) -> None:
    by_name = _ok(http, {"inputs": "breadmaker", "as_words": True, "k": 2}, "/static")
    assert _ok(http, {"inputs": "breadmaker", "word": True, "k": 2}, "/static") == by_name
    assert by_name["pieces"] == ["bread", "##maker"] and len(by_name["neighbors"]) == 2
    want = bundled.static_word("breadmaker").vector
    np.testing.assert_allclose(np.array(by_name["vector"]), want, atol=1e-6)
    # false by either name reads word pieces: "breadmaker" is not one
    for off in ({"as_words": False}, {"word": False}, {}):
        said = _refused(http, {"inputs": "breadmaker", **off}, "/static")
        assert said.endswith('send "as_words": true for the mean of its pieces'), said


@pytest.mark.parametrize(
    "given",
    [
        {"as_words": True, "word": True},
        {"as_words": True, "word": False},
        {"as_words": False, "word": True},
        {"as_words": False, "word": False},  # the same answer, still two names for one field
    ],
)
def test_static_both_spellings_at_once_are_refused(http: httpx.Client, given: dict[str, Any]) -> None:
    assert _refused(http, {"inputs": "bread", **given}, "/static") == ONE_AS_WORDS
    assert ONE_AS_WORDS == (
        '"as_words" and "word" both given: "word": true is the older spelling of "as_words": true; '
        'send "as_words" only'
    )


def test_static_refuses_an_id_in_the_spelling_sent(http: httpx.Client) -> None:
    for name in ("as_words", "word"):
        said = _refused(http, {"inputs": ["bread", 7852], name: True}, "/static")
        assert said == f'7852 is not a word; with "{name}": true every item is a string', said
    assert _ok(http, {"inputs": [7852]}, "/static")["token"] == "bread"


def test_the_static_schema_says_the_same(http: httpx.Client) -> None:
    """/static's request in the served document: as_words, word marked deprecated, and the bodies refused
    above left out of what the schema takes."""
    doc = http.get("/openapi.json").json()
    schema = doc["components"]["schemas"]["StaticRequest"]
    word = schema["properties"]["word"]
    assert word.get("deprecated") is True and "as_words" in word["description"]
    assert "deprecated" not in schema["properties"]["as_words"]
    check = _validator(doc, "StaticRequest")
    assert check.is_valid({"inputs": "bread", "as_words": True}) and check.is_valid(
        {"inputs": "bread", "word": True}
    )
    assert not check.is_valid({"inputs": "bread", "as_words": False, "word": False})
    assert not check.is_valid({"inputs": [7852], "as_words": True})
    assert not check.is_valid({"inputs": [7852], "word": True})
    assert check.is_valid({"inputs": [7852]})


def test_static_calls_the_library_by_its_one_name(http: httpx.Client) -> None:
    """The route hands the library as_words=, its name there too: neither spelling sent sets off
    lookup's DeprecationWarning for word= (the server runs in this process, so it would be caught)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in ("as_words", "word"):
            assert _ok(http, {"inputs": "breadmaker", name: True}, "/static")["pieces"] == [
                "bread",
                "##maker",
            ]
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning)], caught


DOC = "Late chunking keeps context. Each chunk sees the whole document, and its pieces are pooled."


def _chunks(http: httpx.Client, body: dict[str, Any]) -> Any:
    response = http.post("/v2/embed_chunks", json={"inputs": DOC, "chunks": "tokens", **body})
    assert response.status_code == 200, response.text
    return response.json()["items"][0]


def test_embed_chunks_chunk_size_answers_as_the_older_size(
    http: httpx.Client, bundled: bertscope.Model
) -> None:
    by_name = _chunks(http, {"chunk_size": 6, "chunk_overlap": 2})
    assert by_name["spec"]["chunk_size"] == 6 and by_name["spec"]["chunk_overlap"] == 2
    assert [[c["start"], c["end"]] for c in by_name["chunks"]] == [
        list(span) for span in bundled.embed_chunks(DOC, chunks="tokens", chunk_size=6, chunk_overlap=2).spans
    ]
    assert _chunks(http, {"size": 6, "overlap": 2}) == by_name
    assert _chunks(http, {"size": 6, "chunk_overlap": 2}) == by_name  # each field by either of its names
    assert _chunks(http, {"chunk_size": 6, "overlap": 2}) == by_name
    said = _refused(http, {"inputs": DOC, "chunks": "tokens", "size": 2, "overlap": 2}, "/v2/embed_chunks")
    assert 'got "chunk_size": 2, "chunk_overlap": 2' in said, said


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"chunk_size": 6, "size": 6}, ONE_CHUNK_SIZE),
        ({"chunk_size": 128, "size": 6}, ONE_CHUNK_SIZE),  # one at its default: still two names for one field
        ({"chunk_overlap": 0, "overlap": 0}, ONE_CHUNK_OVERLAP),
        ({"chunk_overlap": 1, "overlap": 2, "chunk_size": 6}, ONE_CHUNK_OVERLAP),
    ],
)
def test_embed_chunks_both_spellings_at_once_are_refused(
    http: httpx.Client, given: dict[str, Any], said: str
) -> None:
    assert _refused(http, {"inputs": DOC, "chunks": "tokens", **given}, "/v2/embed_chunks") == said
    assert ONE_CHUNK_SIZE == (
        '"chunk_size" and "size" both given: "size" is the older spelling of "chunk_size"; send '
        '"chunk_size" only'
    )


def test_the_chunks_schema_marks_the_old_spellings_deprecated(http: httpx.Client) -> None:
    doc = http.get("/openapi.json").json()
    schema = doc["components"]["schemas"]["ChunksRequest"]
    for name, old in (("chunk_size", "size"), ("chunk_overlap", "overlap")):
        assert (
            schema["properties"][old].get("deprecated") is True
            and name in schema["properties"][old]["description"]
        )
        assert "deprecated" not in schema["properties"][name]
    check = _validator(doc, "ChunksRequest")
    assert check.is_valid({"inputs": DOC, "chunk_size": 6, "chunk_overlap": 2})
    assert check.is_valid({"inputs": DOC, "size": 6, "overlap": 2})
    # Both spellings at once are refused (above) but left out of the schema: with the route's other
    # refused combinations, schemathesis could not generate from it (server/openapi.py).
    assert check.is_valid({"inputs": DOC, "chunk_size": 6, "size": 6})


def test_attention_takes_inputs_as_anatomy_and_text_still(http: httpx.Client) -> None:
    """/attention's text is `inputs`, as on /anatomy (and every route); `text`, its old name, still works."""
    answers = []
    for name in ("inputs", "text"):
        response = http.post("/attention", json={name: ["How are you?", "Fine."], "layer": 1, "head": 0})
        assert response.status_code == 200, response.text
        answers.append(response.json())
    assert answers[0] == answers[1] and answers[0]["tokens"][-1] == "[SEP]"
    for route in ("/attention", "/anatomy"):  # both names at once: the same refusal on both routes
        said = _refused(http, {"inputs": "a cat", "text": "a cat"}, route)
        assert (
            said == '"inputs" and "text" both given: "text" is the older name of "inputs"; send "inputs" only'
        )
    doc = http.get("/openapi.json").json()
    for name in ("AttentionRequest", "AnatomyRequest"):
        schema = doc["components"]["schemas"][name]
        assert schema["required"] == ["inputs"] and "text" not in schema["properties"]
        assert "`text`" in schema["properties"]["inputs"]["description"]


@pytest.mark.parametrize(
    ("route", "old", "body"),
    [
        ("/static", "items", {"inputs": "bread", "items": "cake"}),
        ("/anatomy", "text", {"inputs": "a cat", "text": "a dog"}),
        ("/attention", "text", {"inputs": "a cat", "text": "a dog", "layer": 1}),
    ],
)
def test_inputs_beside_its_old_name_is_refused_in_those_words(
    http: httpx.Client, route: str, old: str, body: dict[str, Any]
) -> None:
    """Each name alone is read; both said only '<old>: Extra inputs are not permitted'."""
    assert _refused(http, body, route) == (
        f'"inputs" and "{old}" both given: "{old}" is the older name of "inputs"; send "inputs" only'
    )
    alone = http.post(route, json={k: v for k, v in body.items() if k != "inputs"} | {old: body[old]})
    assert alone.status_code == 200, alone.text
