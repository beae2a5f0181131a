"""The service's errors in a client's words (server/validation.py, server/wording.py): a wrongly shaped
union field in one line naming the item and what is allowed, library fixes in the route's JSON fields,
strategy names in the library's spellings, and /v1/embeddings refusing bertscope's fields by name."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

import bertscope
from bertscope.server.error_answers import TEI_PATHS
from bertscope.server.feature_schemas import CkaRequest
from bertscope.server.openai_schemas import ELSEWHERE
from bertscope.server.schemas import EmbedRequest
from bertscope.server.tei import TEIEmbedRequest, TEISimilarityRequest
from bertscope.server.wording import as_fields
from test_server import serving

LONG = "word " * 300
# What pydantic's union errors name: a member's type, never a field a client sends.
INTERNALS = re.compile(r"list\[|union\[|function-before|str-enum|\.str:|Input should be a valid list")


@pytest.fixture(scope="module")
def http(bundled: bertscope.Model) -> Iterator[httpx.Client]:
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:
        yield client


def _refused(http: httpx.Client, path: str, body: dict[str, Any]) -> str:
    """The 422's detail (OpenAI's 400 on /v1/), checked against the route's error body (TEI's, OpenAI's)."""
    response = http.post(path, json=body)
    assert response.status_code == (400 if path.startswith("/v1/") else 422), response.text
    answer = response.json()
    if path in TEI_PATHS:
        assert answer["error"] == answer["detail"] and answer["error_type"] == "Validation"
    elif path.startswith("/v1/"):
        assert answer["error"]["message"] == answer["detail"]
    return str(answer["detail"])


SHAPES = [
    (
        "/embed",
        {"inputs": ["a", 3]},
        "inputs: item 1 is a number (3), not a string: give a text, a list of texts, a list of token ids "
        "or a list of lists of token ids",
    ),
    ("/embed", {"inputs": None}, "inputs is null: give a text, a list of texts, a list of token ids or"),
    ("/embed", {"inputs": 5}, "inputs is a number (5): give a text, a list of texts"),
    ("/embed", {"inputs": {"a": 1}}, "inputs is an object: give a text"),
    ("/v2/embed", {"inputs": [["a", "b", "c"]]}, "inputs: item 0 has 3 texts: a pair is [A, B]"),
    (
        "/v2/embed",
        {"inputs": ["a", 3]},
        "inputs: item 1 is a number (3), not a string or a pair [A, B]: give a text or a list of texts "
        "and pairs [A, B]",
    ),
    ("/v2/embed", {"inputs": [["a", 3]]}, "inputs: item 0, position 1 is a number (3), not a string"),
    ("/embed_all", {"inputs": [[101, 102]]}, "inputs: item 0 is a list, not a string: give a text or a"),
    ("/v1/embeddings", {"input": [[1, "a"]]}, "input: item 0, position 1 is a string ('a'), not a token id"),
    ("/decode", {"ids": [1, "a"]}, "ids: item 1 is a string ('a'), not a token id: give a list of"),
    ("/anatomy", {"text": ["a", "b", "c"]}, "text has 3 texts: a pair is [A, B]"),
    ("/static", {"inputs": [1.5]}, "inputs: item 0 is a number with a fraction (1.5), not a string or"),
    ("/v2/embed", {"inputs": "a", "layers": [1, "x"]}, "layers: item 1 is a string ('x'), not a layer"),
    # an unknown chunking name: the library's line, tests/test_chunks_audit25.py
    ("/v2/embed_chunks", {"inputs": "a b", "chunks": [[0, 1, 2]]}, "chunks: item 0 has 3 items: a span"),
    ("/v2/tokenize", {"inputs": [1, 2, 3]}, "inputs: item 0 (the first of 3 wrong items) is a number (1)"),
    ("/attention", {"text": "a", "long": "window"}, "long: Input should be 'truncate' or 'error'"),
]


@pytest.mark.parametrize(("path", "body", "says"), SHAPES, ids=[f"{p}:{b}" for p, b, _ in SHAPES])
def test_a_wrongly_shaped_field_is_one_line_naming_the_item_and_what_is_allowed(
    http: httpx.Client, path: str, body: dict[str, Any], says: str
) -> None:
    detail = _refused(http, path, body)
    assert detail.startswith(says), detail
    assert not INTERNALS.search(detail), detail
    assert ";" not in detail, detail  # one line for the field, not one per union member


def test_a_union_field_beside_other_bad_fields_keeps_theirs(http: httpx.Client) -> None:
    detail = _refused(http, "/v2/embed", {"inputs": ["a", 3], "pooling": "avg", "extra": 1})
    parts = detail.split("; ")
    assert parts[0].startswith("pooling: Input should be 'cls'"), detail
    assert parts[1].startswith("inputs: item 1 is a number (3)"), detail
    assert parts[2] == "extra: Extra inputs are not permitted", detail


# Requests that reach the library's messages with keyword fixes, each with what its route should say.
LIBRARY = [
    ("/v2/embed", {"inputs": "a", "stride": 3}, 'stride applies to "long": "window"'),
    ("/embed_tokens", {"inputs": "a", "stride": 3}, 'add "long": "window", or leave stride out'),
    ("/v2/similarity", {"source": "a", "sentences": ["b"], "stride": 2}, 'not "long": "truncate"'),
    ("/explain", {"a": "a", "b": "b", "stride": 2}, '"long": "window"'),
    ("/v2/embed", {"inputs": "a", "combine": "stack", "layers": "-2:"}, '"combine": "stack" keeps'),
    (
        "/v2/embed",
        {"inputs": "a", "pooling": "pooler", "layers": "-2:", "combine": "concat"},
        '"combine": "mean" or "sum"',
    ),
    (
        "/v2/embed",
        {"inputs": "a", "pooling": "pooler", "layers": "-2:"},
        '("pooling": "cls"), or leave "layers" out',
    ),
    ("/v2/embed_chunks", {"inputs": "a b. c d.", "pooling": "cls"}, '"pooling": "cls" reads one token'),
    ("/v2/embed_chunks", {"inputs": "a b. c d.", "combine": "stack", "layers": "-2:"}, '"combine": "stack"'),
    (
        "/v2/embed_chunks",
        {"inputs": "a b. c d.", "long": "truncate"},
        '"long": "window" (the default for late chunks) or "error", or "late": false',
    ),
    (
        "/v2/embed_chunks",
        {"inputs": "a b", "chunks": "tokens", "chunk_size": 2, "chunk_overlap": 2},
        'got "chunk_size": 2, "chunk_overlap": 2',
    ),
    ("/embed_tokens", {"inputs": [["a", "b"]], "words": True}, '"words": true takes texts'),
    ("/static", {"inputs": ["zzqqxx"]}, 'send "as_words": true for the mean of its pieces'),
    ("/static", {"inputs": [5], "as_words": True}, 'with "as_words": true every item is a string'),
    ("/static", {"inputs": ["a", 5], "word": True}, '5 is not a word; with "word": true every item'),
    ("/v2/embed", {"inputs": "a", "prompt_name": "query"}, 'Use one of them, or leave "prompt_name" out'),
    ("/v2/similarity", {"source": "a", "sentences": ["b"], "prompt_name": "q"}, 'leave "prompt_name" out'),
    ("/explain", {"a": "a", "b": "b", "prompt_name": "q"}, 'leave "prompt_name" out'),
    ("/v2/embed_chunks", {"inputs": "a b", "prompt_name": "q"}, 'leave "prompt_name" out'),
    ("/embed", {"inputs": "a", "prompt_name": "query"}, 'leave "prompt_name" out'),
    ("/embed_all", {"inputs": "a", "prompt_name": "query"}, 'leave "prompt_name" out'),
    ("/tokenize", {"inputs": "a", "prompt_name": "query"}, 'leave "prompt_name" out'),
    (
        "/similarity",
        {"inputs": {"source_sentence": "a", "sentences": ["b"]}, "parameters": {"prompt_name": "q"}},
        'leave "prompt_name" (in "parameters") out',
    ),
    ("/v2/embed", {"inputs": LONG, "long": "error"}, 'send "long": "truncate"'),
    ("/embed", {"inputs": LONG}, 'send "truncate": true'),
    (
        "/similarity",
        {"inputs": {"source_sentence": LONG, "sentences": ["b"]}},
        '"parameters": {"truncate": true}',
    ),
    ("/anatomy", {"text": LONG, "long": "error"}, 'send "long": "truncate"'),
    ("/v1/embeddings", {"input": "a", "normalize": False}, "send it to /v2/embed or TEI's /embed"),
    ("/v1/embeddings", {"input": [[101, 102]]}, "token ids are refused"),
    ("/embed", {"inputs": [40, 1093]}, "start bertscope serve with --token-ids model"),
]
# A Python keyword form (`long='window'`, `late=False`, `prompt=`) or call (`static_word('x')`); advice
# to a client's own Python (the openai client's extra_body=, LangChain's keyword) is a client's words.
KEYWORD = re.compile(r"(?<![\w\"])(?!extra_body=|check_embedding_ctx_length=)[a-z_]+=|\b[a-z_]+\('")
# `bertscope serve`'s own flags name the operator's settings; a library or CLI flag must not survive.
FLAG = re.compile(r"--(?!token-ids\b|max-[\w-]+|auto-split\b)[a-z][\w-]*")


@pytest.mark.parametrize(("path", "body", "says"), LIBRARY, ids=[f"{p}:{list(b)}" for p, b, _ in LIBRARY])
def test_library_fixes_are_said_in_the_routes_fields(
    http: httpx.Client, path: str, body: dict[str, Any], says: str
) -> None:
    response = http.post(path, json=body)
    assert response.status_code in (400, 422), response.text
    detail = response.json()["detail"]
    assert says in detail, detail
    assert not KEYWORD.search(detail), detail
    assert not FLAG.search(detail), detail


def test_a_suggestion_of_a_field_the_route_lacks_is_dropped() -> None:
    too_long = "text 0 is long; use long='truncate' (drops the end) or long='window' (overlapping windows)"
    # TEI's routes cut with truncate, and have no windows: the window's clause goes.
    assert as_fields(too_long, TEIEmbedRequest) == 'text 0 is long; use "truncate": true (drops the end)'
    assert as_fields(too_long, TEISimilarityRequest).endswith(
        'use "parameters": {"truncate": true} (drops the end)'
    )
    chunks = "use long='window', or late=False to embed each chunk alone; then retry"
    assert as_fields(chunks, EmbedRequest) == 'use "long": "window"; then retry'
    prompt = "unknown prompt name 'q'. Use one of them, or give the text with prompt="
    assert (
        as_fields(prompt, EmbedRequest)
        == "unknown prompt name 'q'. Use one of them, or leave \"prompt_name\" out"
    )
    note = "few rows; --debiased (debiased=True) corrects it, or give more texts"
    assert as_fields(note, CkaRequest) == 'few rows; "debiased": true corrects it, or give more texts'
    client_side = "send text (LangChain OpenAIEmbeddings: check_embedding_ctx_length=False)"
    assert as_fields(client_side, EmbedRequest) == client_side


def test_cka_note_names_the_field(http: httpx.Client) -> None:
    answer = http.post("/v2/cka", json={"inputs": ["a b", "c d", "e f", "g h"]})
    assert answer.status_code == 200, answer.text
    note = answer.json()["note"]
    assert '"debiased": true corrects it' in note and "--debiased" not in note, note


SPELLINGS = [
    ("/v2/embed", {"inputs": "a cat"}, {"pooling": "MEAN", "combine": "Mean", "long": "TRUNCATE"}),
    ("/v2/embed", {"inputs": "a cat"}, {"pooling": " Mean-Sqrt-Len "}),
    ("/v2/embed_chunks", {"inputs": "A cat. A dog."}, {"chunks": "Sentence", "long": "Window"}),
    ("/embed_tokens", {"inputs": "a cat", "words": True}, {"subword": "FIRST-LAST"}),
    ("/v2/tokenize", {"inputs": "a cat"}, {"long": "Window"}),
    ("/attention", {"text": "a cat"}, {"long": "Error"}),
    ("/v2/cka", {"inputs": ["a b", "c d", "e f", "g h"]}, {"level": "SENTENCE"}),
]


@pytest.mark.parametrize(("path", "body", "names"), SPELLINGS, ids=[f"{p}:{n}" for p, _, n in SPELLINGS])
def test_strategy_names_take_the_librarys_spellings(
    http: httpx.Client, path: str, body: dict[str, Any], names: dict[str, str]
) -> None:
    plain = {k: v.strip().lower().replace("-", "_") for k, v in names.items()}
    spelled = http.post(path, json={**body, **names})
    written = http.post(path, json={**body, **plain})
    assert spelled.status_code == written.status_code == 200, spelled.text
    assert spelled.json() == written.json()


def test_the_document_lists_the_names_as_written_and_a_wrong_name_lists_them(http: httpx.Client) -> None:
    schemas = http.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["Pooling"]["enum"] == [
        "cls",
        "pooler",
        "mean",
        "max",
        "mean_sqrt_len",
        "first_last_avg",
        "auto",
    ]
    detail = _refused(http, "/v2/embed", {"inputs": "a", "pooling": "avg"})
    assert detail.startswith("pooling: Input should be 'cls', 'pooler', 'mean'"), detail
    vectors = [
        http.post("/v2/embed", json={"inputs": "a", "pooling": p}).json()["vectors"] for p in ("MEAN", "cls")
    ]
    assert not np.allclose(vectors[0], vectors[1])  # the spelling chose mean, not a default


@pytest.mark.parametrize("field", sorted(ELSEWHERE))
def test_v1_embeddings_refuses_bertscopes_fields_that_change_vectors_by_name(
    http: httpx.Client, field: str
) -> None:
    detail = _refused(http, "/v1/embeddings", {"input": "a", field: "x"})
    assert detail.startswith(f"{field}: /v1/embeddings does not take it"), detail
    assert ELSEWHERE[field][0] in detail


def test_v1_embeddings_ignores_fields_no_route_of_bertscope_knows(http: httpx.Client) -> None:
    answer = http.post("/v1/embeddings", json={"input": "a", "user": "u", "extra_body": {}, "seed": 1})
    assert answer.status_code == 200, answer.text
    both = _refused(http, "/v1/embeddings", {"input": "a", "pooling": "cls", "layers": "-2", "foo": 1})
    assert both.startswith("pooling, layers: /v1/embeddings does not take them") and "foo" not in both
