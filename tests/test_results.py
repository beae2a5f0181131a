"""Each result's own JSON-able dict, and the same dict from the CLI's --json and from the service."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.static import lookup
from test_server import serving

TEXTS = ["I like eating bread", "The banana bread was horrible"]


def cli_json(*args: str) -> Any:
    """Run a CLI command in-process with --json and decode its stdout, less what only the command line
    adds to embed's answer: the texts and their ids (a line's number in -i FILE), which the service's
    caller already has in the order it sent them."""
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    found = json.loads(result.stdout)
    if args[0] == "embed" and "ids" in found:
        assert found.pop("ids") == [str(n) for n in range(1, len(found.pop("texts")) + 1)]
    for n, item in enumerate(found.get("items", []) if args[0] == "embed" else [], 1):
        assert item.pop("id") == str(n)
    return found


def assert_same(got: Any, want: Any, where: str = "") -> None:
    """Equal keys everywhere and equal values, floats within 1e-6."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), (where, sorted(got), sorted(want))
        for key in want:
            assert_same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, abs=1e-6), where
    else:
        assert got == want, where


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[httpx.Client]:
    with serving(bundled) as base, httpx.Client(base_url=base, timeout=120) as c:
        yield c


def ask(client: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert isinstance(answer.pop("model"), str)
    return answer  # type: ignore[no-any-return]


def test_every_result_dict_is_plain_json(bundled: bertscope.Model) -> None:
    results: list[Any] = [
        bundled.embed(TEXTS, layers="0,6", combine="concat"),
        bundled.embed_tokens(TEXTS[0])[0],
        bundled.embed_words(TEXTS[0])[0],
        bundled.tokenize(TEXTS[0]),
        bundled.anatomy(TEXTS[0]),
        bundled.static_word("breadmaker"),
        bundled.static_neighbors("bread", k=2)[0],
        bundled.info(),
    ]
    for result in results:
        data = result.to_dict()
        assert json.loads(json.dumps(data)) == data, type(result).__name__  # no NumPy, no tuples
    sentence = results[0].to_dict()
    assert sentence["spec"]["layers"] == [0, 6] and sentence["n_dropped"] == [0, 0]
    assert sentence["dimension"] == 768 and np.array(sentence["vectors"]).shape == (2, 768)
    anatomy = results[4].to_dict()
    assert list(anatomy["steps"]) == list(bertscope.anatomy.STEPS) and anatomy["steps"]["projected"] is None


def test_cli_json_equals_the_services_answer(client: httpx.Client) -> None:
    options = ["--layers", "-2", "--pooling", "mean", "--mask-special"]
    body = {"inputs": TEXTS, "layers": "-2", "pooling": "mean", "mask_special": True}
    served = ask(client, "/v2/embed", body)
    assert served.pop("dim") == served["dimension"]  # the deprecated name the service still sends
    assert_same(cli_json("embed", *TEXTS, *options), served)
    assert_same(
        cli_json("embed", *TEXTS, "--tokens", "--layers", "0,6"),
        ask(client, "/embed_tokens", {"inputs": TEXTS, "layers": "0,6"}),
    )
    pair = ["How are you?", "Fine, thanks."]
    served_pair = ask(client, "/embed_tokens", {"inputs": [pair]})
    assert served_pair["items"][0]["sequence_ids"][:2] == [None, 0], (
        "the service keeps which text each indexes"
    )
    assert_same(cli_json("embed", pair[0], "--pair", pair[1], "--tokens"), served_pair)
    served = ask(client, "/embed_tokens", {"inputs": TEXTS, "words": True, "subword": "first"})
    words = cli_json("embed", *TEXTS, "--words", "--subword", "first")
    assert_same(words["items"], [item["words"] for item in served["items"]])
    assert_same(words["spec"], served["spec"])
    tokenized = ask(client, "/v2/tokenize", {"inputs": TEXTS})
    assert tokenized.pop("max_tokens") == 256
    # the command line numbers its texts (`id`: a file's line, or 1, 2, ... for arguments), as embed's token
    # JSON does; the service's items are its inputs in order
    printed = cli_json("tokens", *TEXTS)
    assert [item.pop("id") for item in printed["items"]] == [str(n) for n in range(1, len(TEXTS) + 1)]
    assert_same(printed, tokenized)
    assert_same(
        cli_json("static", "bread", "cake", "-k", "3"),
        _score_named(ask(client, "/static", {"inputs": ["bread", "cake"], "k": 3})),
    )
    assert_same(
        cli_json("static", "breadmaker", "--as-words", "-k", "2"),
        _score_named(ask(client, "/static", {"inputs": "breadmaker", "as_words": True, "k": 2})),
    )
    assert_same(cli_json("anatomy", "I am Sinan"), ask(client, "/anatomy", {"inputs": "I am Sinan"}))
    info = client.get("/v2/info").json()
    assert info.pop("layers") == info["n_layers"] and info["prompts"] == {}  # layers: the service's own
    mine = cli_json("info")
    assert mine["default_prompt_name"] is None and mine["similarity_fn_name"] == "cosine"
    assert_same(mine, {k: v for k, v in info.items() if k not in ("model", "version", "limits")})


def _score_named(answer: dict[str, Any]) -> dict[str, Any]:
    """A /static answer with each neighbour's deprecated `cosine` dropped, once it equals `score`, so its
    neighbours are compared with `static --json`'s on `score` (token, id, score), as every hit's is named."""
    items = answer["items"] if "items" in answer else [answer]
    for item in items:
        for neighbour in item.get("neighbors") or []:
            assert neighbour.pop("cosine") == neighbour["score"]
    return answer


def test_the_service_reports_the_fingerprint_its_stores_carry(
    client: httpx.Client, bundled: bertscope.Model
) -> None:
    from bertscope.core.fingerprint_facts import store_fingerprint

    served = client.get("/v2/info").json()["fingerprint"]
    assert served == store_fingerprint(bundled) and set(served) == {"id", "settings", "files"}
    tei = client.get("/info").json()
    assert tei.pop("fingerprint") == served  # one key beside TEI's own, which stay as TEI has them
    assert set(tei) == {
        "model_id", "model_sha", "model_dtype", "served_model_name", "model_type", "max_concurrent_requests",
        "max_input_length", "max_batch_tokens", "max_batch_requests", "max_client_batch_size",
        "auto_truncate", "tokenization_workers", "version", "sha", "docker_label",
    }  # fmt: skip


def test_old_body_names_still_work(client: httpx.Client, bundled: bertscope.Model) -> None:
    assert ask(client, "/static", {"items": ["bread"]}) == ask(client, "/static", {"inputs": ["bread"]})
    assert ask(client, "/anatomy", {"text": "I am Sinan"})["tokens"][1] == "i"
    assert ask(client, "/static", {"inputs": "bread"})["items"] == [lookup(bundled, "bread")]


def test_token_vectors_of_a_pair_say_which_text_each_token_indexes(bundled: bertscope.Model) -> None:
    """Offsets and word ids restart at 0 in B: `sequence_ids` places each token in its own text."""
    a, b = "How are you?", "Fine, thanks."
    data = cli_json("embed", a, "--pair", b, "--tokens")["items"][0]
    assert data["text"] == a and data["pair"] == b
    tokens = bundled.tokenize([(a, b)])[0]
    assert data["sequence_ids"] == [r.get("sequence") for r in tokens.as_records()]
    assert data["sequence_ids"][0] is None and {0, 1} <= set(data["sequence_ids"])
    for token, seq, (start, end) in zip(data["tokens"], data["sequence_ids"], data["offsets"], strict=True):
        if seq is not None:  # each piece's characters, read in the text its sequence id names
            assert ((a, b)[seq][start:end]).lower() == token.removeprefix("##")
    found = bundled.embed_tokens([(a, b), a])
    assert found[0].sequence_ids == found[0].to_dict()["sequence_ids"] == data["sequence_ids"]
    assert found[1].sequence_ids is None and "sequence_ids" not in found[1].to_dict()  # one text: as before
