"""The OpenAPI schema fitted per service (server/openapi.py) says exactly what the server takes."""

from __future__ import annotations

import sys
import unicodedata
from typing import Any

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.core.layers import parse_layers
from bertscope.core.tokens import text_problem
from bertscope.errors import InvalidSpec
from bertscope.server import ServerSettings, create_app
from bertscope.server.settings import TokenIds


def _doc(model: bertscope.Model, **settings: Any) -> dict[str, Any]:
    with TestClient(create_app(model, settings=ServerSettings(**settings))) as client:
        response = client.get("/openapi.json")
    assert response.status_code == 200
    doc: dict[str, Any] = response.json()
    return doc


@pytest.fixture(scope="module")
def doc(bundled: bertscope.Model) -> dict[str, Any]:
    """The served document with the bundled model and --max-inputs 8."""
    return _doc(bundled, max_inputs=8)


def _validator(doc: dict[str, Any], schema: dict[str, Any]) -> Any:
    jsonschema_rs = pytest.importorskip("jsonschema_rs")
    return jsonschema_rs.validator_for({**schema, "components": doc["components"]})


def test_a_text_is_valid_in_the_schema_exactly_when_the_server_takes_it(doc: dict[str, Any]) -> None:
    text = _validator(doc, {"$ref": "#/components/schemas/Text"})
    differ = []
    for point in range(sys.maxunicode + 1):
        if 0xD800 <= point <= 0xDFFF:
            continue  # lone surrogates are no JSON text; the server refuses them by name
        char = chr(point)
        if text.is_valid(char) != (text_problem(char) is None):
            differ.append(char)
    # The validator may know a newer Unicode than this Python: only characters Python has unassigned differ.
    assert all(unicodedata.category(c) == "Cn" for c in differ), [hex(ord(c)) for c in differ[:10]]
    for taken in ("a", " \u200b x", "\U0001f600", "\u0301", "[CLS]"):
        assert text.is_valid(taken) and text_problem(taken) is None
    for refused in ("", " ", "\t\n", "\x00", "\u200b\u200d", "\U000c42e6"):
        assert not text.is_valid(refused) and text_problem(refused) is not None


def test_the_layer_specs_in_the_schema_are_the_models_own(
    doc: dict[str, Any], bundled: bertscope.Model
) -> None:
    layers = doc["components"]["schemas"]["EmbedRequest"]["properties"]["layers"]
    valid = _validator(doc, layers)
    strings, integers, lists = (option for option in layers["anyOf"] if option.get("type") != "null")
    count = bundled.n_layers + 1
    for spec in strings["enum"]:
        assert parse_layers(spec, bundled.n_layers)
    assert (integers["minimum"], integers["maximum"]) == (-count, count - 1)
    for spec in (7, -8, "7", "7:", "3:1", [0, 0], [6, -1], [], True):
        assert not valid.is_valid(spec), spec
        with pytest.raises(InvalidSpec):
            parse_layers(spec, bundled.n_layers)
    for spec in (-1, "all", "-4:", "1:4", [0, 6], [-7, 6], None):
        assert valid.is_valid(spec), spec
    assert lists["maxItems"] == count


def test_list_sizes_follow_the_services_max_inputs_and_auto_split(bundled: bertscope.Model) -> None:
    def max_items(doc: dict[str, Any], name: str, field: str) -> Any:
        options = doc["components"]["schemas"][name]["properties"][field]
        listed = next(o for o in options.get("anyOf", [options]) if o.get("type") == "array")
        return listed.get("maxItems")

    limited, split = _doc(bundled, max_inputs=8), _doc(bundled, max_inputs=8, auto_split=True)
    assert max_items(limited, "TokenizeRequest", "inputs") == 8
    assert max_items(limited, "EmbedRequest", "inputs") == 8
    assert max_items(limited, "SimilarityRequest", "sentences") == 7  # the source is one of the eight
    assert max_items(split, "TokenizeRequest", "inputs") == 8  # /tokenize is never split
    assert max_items(split, "EmbedRequest", "inputs") is None


def test_names_and_combinations_the_server_refuses_are_left_out(
    doc: dict[str, Any], bundled: bertscope.Model
) -> None:
    schemas = doc["components"]["schemas"]
    embed = _validator(doc, {"$ref": "#/components/schemas/EmbedRequest"})
    assert embed.is_valid({"inputs": "bread", "pooling": "first_last_avg"})
    assert not embed.is_valid({"inputs": "bread", "pooling": "first_last_avg", "layers": -1})
    assert not embed.is_valid({"inputs": "bread", "post": "whitening"})  # none is loaded
    assert not embed.is_valid({"inputs": "bread", "prompt_name": "query"})  # the model has no prompts
    assert not embed.is_valid({"inputs": []})
    explain = _validator(doc, {"$ref": "#/components/schemas/ExplainRequest"})
    assert not explain.is_valid({"a": "x", "b": "y", "pooling": "cls", "exact": True})
    assert schemas["Pooling"]["enum"] == [p.value for p in bertscope.Pooling]  # this model has a pooler
    refusing = _validator(doc, {"$ref": "#/components/schemas/OpenAIRequest"})
    assert not refusing.is_valid({"input": [7852]})  # token ids are refused unless --token-ids model
    model_ids = _doc(bundled, max_inputs=8, token_ids=TokenIds.MODEL)
    ids = _validator(model_ids, {"$ref": "#/components/schemas/OpenAIRequest"})
    cls, sep = bundled.tokenizer.backend.encode("", add_special_tokens=True).ids
    for taken in ([7852], [cls, 7852, sep], [cls, cls], [[7852], [sep, sep]]):
        assert ids.is_valid({"input": taken}), taken
    for refused in ([cls], [sep], [cls, sep], [], [30522], [[7852], [cls, sep]]):
        assert not ids.is_valid({"input": refused}), refused
