"""One concept, one name (audit 5 N3, N4, N5): the number of layers is `n_layers` (transformers'
num_hidden_layers; `layers` elsewhere is a layer spec) in `ModelInfo`, `bertscope info` and /v2/info;
token type ids are transformers' `token_type_ids` (one piece's: `token_type_id`) in `Tokens`, /attention,
`bertscope tokens --json` and /v2/tokenize; the attention matrix is `attention` in `bertscope attention
--json` as on /attention; a /static neighbour's cosine is its `score`, as every hit's. The old names
still give the same values: a library attribute with a DeprecationWarning, a service field beside the
new one (deprecated in the schema). /v2/info lists the model's prompts too."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import bertscope
from bertscope.core.folder import FolderView
from console import run_main
from prompted import PROMPTS, with_prompts
from test_server import serving

PAIR = ("How are you?", "Fine.")


@pytest.fixture(scope="module")
def http(bundled: bertscope.Model) -> Iterator[httpx.Client]:
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def schemas(http: httpx.Client) -> dict[str, Any]:
    return http.get("/openapi.json").json()["components"]["schemas"]  # type: ignore[no-any-return]


def _post(http: httpx.Client, route: str, body: dict[str, Any]) -> Any:
    response = http.post(route, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def _cli_json(*args: str) -> Any:
    ran = run_main(*args, "--json")
    assert ran.code == 0, ran
    return json.loads(ran.stdout)


def _deprecated_beside(schema: dict[str, Any], old: str, new: str) -> None:
    """`old` is a property marked deprecated that names `new`; `new` is not deprecated."""
    properties = schema["properties"]
    assert properties[old].get("deprecated") is True and new in properties[old]["description"]
    assert "deprecated" not in properties[new]


# The number of layers -------------------------------------------------------------------------------


def test_model_info_counts_layers_as_n_layers(bundled: bertscope.Model) -> None:
    info = bundled.info()
    assert info.n_layers == 6 == bundled.n_layers
    assert "n_layers" in info.to_dict() and "layers" not in info.to_dict()
    with pytest.warns(DeprecationWarning, match=r"ModelInfo\.layers is deprecated; use \.n_layers") as said:
        assert info.layers == 6
    assert said[0].filename == __file__  # the warning points at the line that read it


def test_the_light_folder_info_says_n_layers(bundled_path: Path, bundled: bertscope.Model) -> None:
    view = FolderView.open(str(bundled_path))
    assert view is not None
    light = view.info()
    assert light is not None and light["n_layers"] == 6 and "layers" not in light


def test_info_command_says_n_layers() -> None:
    found = _cli_json("info")
    assert found["n_layers"] == 6 and "layers" not in found
    ran = run_main("info")
    assert ran.code == 0 and any(line.split()[:2] == ["n_layers", "6"] for line in ran.stdout.splitlines())


def test_v2_info_says_n_layers_and_keeps_layers(http: httpx.Client, schemas: dict[str, Any]) -> None:
    info = http.get("/v2/info").json()
    assert info["n_layers"] == info["layers"] == 6
    assert info["prompts"] == {}  # the bundled model ships none
    _deprecated_beside(schemas["ServiceInfo"], "layers", "n_layers")
    assert schemas["ServiceInfo"]["properties"]["prompts"]["type"] == "object"
    assert {"n_layers", "layers", "prompts"} <= set(schemas["ServiceInfo"]["required"])


def test_v2_info_lists_the_models_prompts(bundled_path: Path, tmp_path: Path) -> None:
    folder = with_prompts(bundled_path, tmp_path / "prompted", include_prompt=True, default="query")
    model = bertscope.load(folder, device="cpu")
    with serving(model) as base, httpx.Client(base_url=base, timeout=60) as client:
        info = client.get("/v2/info").json()
    assert info["prompts"] == PROMPTS == model.prompts.prompts


# Token type ids -------------------------------------------------------------------------------------


def test_tokens_say_token_type_ids(bundled: bertscope.Model) -> None:
    (tok,) = bundled.tokenize([PAIR])
    assert tok.token_type_ids == [0, 0, 0, 0, 0, 0, 1, 1, 1]
    with pytest.warns(
        DeprecationWarning, match=r"Tokens\.type_ids is deprecated; use \.token_type_ids"
    ) as said:
        assert tok.type_ids == tok.token_type_ids
    assert said[0].filename == __file__
    records = tok.as_records()
    assert [r["token_type_id"] for r in records] == tok.token_type_ids
    assert not any("type_id" in r for r in records)


def test_library_paths_read_token_type_ids_without_a_warning(bundled: bertscope.Model) -> None:
    """Windows, the engine's rows, the anatomy (and its dict) and attention read the new name: none warns."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        (tok,) = bundled.tokenize([PAIR])
        assert tok.windows(6, 2)[-1].token_type_ids[-2:] == [1, 1]
        assert bundled.embed([PAIR]).vectors.shape == (1, 384)
        assert bundled.anatomy([PAIR])[0].to_dict()["token_type_ids"] == tok.token_type_ids
        assert bundled.attentions(PAIR).shape == (6, 12, 9, 9)


def test_tokens_command_says_token_type_id() -> None:
    (item,) = _cli_json("tokens", PAIR[0], "--pair", PAIR[1])["items"]
    assert [r["token_type_id"] for r in item["tokens"]] == [0, 0, 0, 0, 0, 0, 1, 1, 1]
    assert not any("type_id" in r for r in item["tokens"])


def test_v2_tokenize_says_token_type_id_and_keeps_type_id(
    http: httpx.Client, schemas: dict[str, Any]
) -> None:
    (item,) = _post(http, "/v2/tokenize", {"inputs": [list(PAIR)]})["items"]
    assert [r["token_type_id"] for r in item["tokens"]] == [0, 0, 0, 0, 0, 0, 1, 1, 1]
    assert all(r["type_id"] == r["token_type_id"] for r in item["tokens"])
    (one,) = _post(http, "/v2/tokenize", {"inputs": PAIR[0]})["items"]
    assert not any("token_type_id" in r or "type_id" in r for r in one["tokens"])  # one text: no pair fields
    _deprecated_beside(schemas["PieceRecord"], "type_id", "token_type_id")


def test_attention_route_says_token_type_ids_and_keeps_type_ids(
    http: httpx.Client, schemas: dict[str, Any], bundled: bertscope.Model
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = _post(http, "/attention", {"inputs": list(PAIR), "layer": 6, "head": 0})
    assert found["token_type_ids"] == found["type_ids"] == bundled.tokenize([PAIR])[0].token_type_ids
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning)], caught
    _deprecated_beside(schemas["AttentionResponse"], "type_ids", "token_type_ids")


# The attention matrix -------------------------------------------------------------------------------


def test_attention_command_says_attention_as_the_route(http: httpx.Client) -> None:
    found = _cli_json("attention", PAIR[0], "--pair", PAIR[1], "--layer", "6", "--head", "0")
    served = _post(http, "/attention", {"inputs": list(PAIR), "layer": 6, "head": 0})
    assert set(found) == set(served) - {"type_ids"}  # the route's deprecated old name of token_type_ids
    for key in set(found) - {"attention"}:
        assert found[key] == served[key], key
    assert len(found["attention"]) == len(served["attention"]) == 9
    for mine, theirs in zip(found["attention"], served["attention"], strict=True):
        assert mine == pytest.approx(theirs, abs=1e-5)


# A neighbour's score --------------------------------------------------------------------------------


def test_static_neighbours_say_score_and_keep_cosine(
    http: httpx.Client, schemas: dict[str, Any], bundled: bertscope.Model
) -> None:
    (item,) = _post(http, "/static", {"inputs": "bread", "top_k": 3})["items"]
    want = bundled.static_neighbors("bread", top_k=3)
    assert [n["token"] for n in item["neighbors"]] == [n.token for n in want]
    assert [n["score"] for n in item["neighbors"]] == pytest.approx([n.score for n in want], abs=1e-6)
    assert all(n["cosine"] == n["score"] for n in item["neighbors"])
    _deprecated_beside(schemas["Neighbour"], "cosine", "score")
