"""Token-id input to /v1/embeddings (issue 13): ids are embedded exactly as given, never decoded and re-read.

The reference is the plain Hugging Face forward on input_ids = opening specials + ids + closing specials,
pooled the way the route's default recipe (`resolve(model, EmbedOptions())`) says.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fastapi.testclient import TestClient
from transformers import AutoModel

import bertscope
from bertscope.core._enums import LongText, Pooling
from bertscope.core.spec import EmbedOptions, resolve
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.server import ServerSettings, create_app
from bertscope.server.settings import TokenIds
from prompted import with_prompts
from tiny_models import build_tiny_model

ATOL = 1e-5
ING, UNK, CLS, SEP = 2075, 100, 101, 102  # '##ing', '[UNK]', '[CLS]', '[SEP]' in the bundled vocabulary
LONG_TEXT = "the bread that the baker made this morning was warm and good " * 40


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    """The service on the bundled model, in process (its lifespan starts the worker)."""
    with TestClient(create_app(bundled, settings=ServerSettings(token_ids=TokenIds.MODEL))) as c:
        yield c


@pytest.fixture(scope="module")
def hf_bundled(bundled_path: Path) -> Any:
    """The bundled model as a plain transformers AutoModel."""
    return AutoModel.from_pretrained(str(bundled_path)).eval()


@pytest.fixture(scope="module")
def roberta(tmp_path_factory: pytest.TempPathFactory) -> tuple[bertscope.Model, Any]:
    """A tiny random RoBERTa (<s> ... </s>) through bertscope and as a plain AutoModel."""
    folder = build_tiny_model("roberta", tmp_path_factory.mktemp("ids") / "roberta")
    return bertscope.load(folder, device="cpu"), AutoModel.from_pretrained(str(folder)).eval()


def _reference(model: bertscope.Model, hf: Any, ids: Sequence[int]) -> np.ndarray:
    """The route's default recipe by hand: (d,) mean of the last layer over every token, normalized (as
    /v1/embeddings always answers, a model without a Normalize module too)."""
    spec = resolve(model, EmbedOptions()).spec
    # What the default resolves to on these models; the reference below does exactly that.
    assert spec.pooling is Pooling.MEAN and spec.layers == (model.n_layers,) and not spec.mask_special
    assert spec.long is LongText.TRUNCATE and not spec.prompt
    input_ids = torch.tensor([list(ids)])
    with torch.inference_mode():
        hidden = hf(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).last_hidden_state
    pooled = hidden.mean(dim=1)
    return F.normalize(pooled, dim=1)[0].numpy()


def _embed(client: TestClient, given: Any, **more: Any) -> dict[str, Any]:
    response = client.post("/v1/embeddings", json={"input": given, **more})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _vectors(answer: dict[str, Any]) -> np.ndarray:
    return np.array([row["embedding"] for row in answer["data"]], dtype=np.float32)


def test_a_lone_word_piece_and_unk_are_embedded_as_given(
    client: TestClient, bundled: bertscope.Model, hf_bundled: Any
) -> None:
    """[2075] is '##ing' alone and [100] is [UNK]: each goes in as sent, between [CLS] and [SEP]."""
    cases = [[ING], [UNK], [UNK, ING, 7852], [1045, UNK, 2066, ING]]
    answer = _embed(client, cases)
    got = _vectors(answer)
    for row, ids in zip(got, cases, strict=True):
        np.testing.assert_allclose(row, _reference(bundled, hf_bundled, [CLS, *ids, SEP]), atol=ATOL, rtol=0)
    assert answer["usage"]["prompt_tokens"] == sum(len(ids) + 2 for ids in cases)
    # Decoded and re-read, [2075] was '# # ing': a different input, and a vector far from this one.
    reread = _vectors(_embed(client, bundled.tokenizer.backend.decode([ING])))[0]
    assert float(reread @ got[0]) < 0.9


def test_ids_that_round_trip_equal_the_text_answer(client: TestClient, bundled: bertscope.Model) -> None:
    """Raw ids (as OpenAI clients send them), or with [CLS] ... [SEP] already on, answer as the text does."""
    texts = ["I like bread.", "Token ids, embedded as given!"]
    framed = [bundled.tokenize(t).ids for t in texts]
    raw = [ids[1:-1] for ids in framed]
    by_text = _embed(client, texts)
    for given in (raw, framed):
        by_ids = _embed(client, given)
        np.testing.assert_allclose(_vectors(by_ids), _vectors(by_text), atol=ATOL, rtol=0)
        assert by_ids["usage"] == by_text["usage"]
    one = _embed(client, raw[0])  # one list of ints is one input
    np.testing.assert_allclose(_vectors(one)[0], _vectors(by_text)[0], atol=ATOL, rtol=0)


def test_too_many_ids_follow_the_text_rule(client: TestClient, bundled: bertscope.Model) -> None:
    """Over max_tokens, ids follow the text's rule: OpenAI's 400 naming the limit, cut with truncate."""
    ids = bundled.tokenize(LONG_TEXT, long="window").ids[1:-1]
    assert len(ids) > bundled.max_tokens
    for given in ([ids], [LONG_TEXT]):
        refused = client.post("/v1/embeddings", json={"input": given})
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert f"maximum context length is {bundled.max_tokens} tokens" in error["message"]
        assert f"input 0 has {len(ids) + 2} tokens" in error["message"]
    by_ids, by_text = _embed(client, [ids], truncate=True), _embed(client, [LONG_TEXT], truncate=True)
    np.testing.assert_allclose(_vectors(by_ids), _vectors(by_text), atol=ATOL, rtol=0)
    assert by_ids["usage"]["prompt_tokens"] == by_text["usage"]["prompt_tokens"] == bundled.max_tokens


def test_engine_token_sentences_follow_the_specs_long_policy(bundled: bertscope.Model) -> None:
    """Pre-built Tokens through the engine: window and error behave as they do for the text."""
    ids = bundled.tokenize(LONG_TEXT, long="window").ids[1:-1]
    tokens = [bundled.tokenizer.from_ids(ids)]
    window = resolve(bundled, EmbedOptions(long="window")).spec
    got = bundled.engine.token_sentences(tokens, window)
    want = bundled.engine.sentences_once([LONG_TEXT], window)
    np.testing.assert_allclose(got.vectors, want.vectors, atol=ATOL, rtol=0)
    assert got.n_dropped.tolist() == [0]
    truncate = bundled.engine.token_sentences(tokens, resolve(bundled, EmbedOptions()).spec)
    assert truncate.n_dropped.tolist() == [len(ids) + 2 - bundled.max_tokens]
    with pytest.raises(bertscope.errors.InputTooLong, match="long='truncate'"):
        bundled.engine.token_sentences(tokens, resolve(bundled, EmbedOptions(long="error")).spec)
    with pytest.raises(InvalidSpec, match="prompt"):
        bundled.engine.token_sentences(tokens, resolve(bundled, EmbedOptions(prompt="query: ")).spec)


def test_from_ids_frames_with_the_tokenizers_own_specials(
    bundled: bertscope.Model, roberta: tuple[bertscope.Model, Any]
) -> None:
    """[CLS] ... [SEP] for BERT, <s> ... </s> for RoBERTa; specials already sent are not doubled."""
    bert = bundled.tokenizer.from_ids([ING, UNK])
    assert bert.tokens == ["[CLS]", "##ing", "[UNK]", "[SEP]"]
    assert bert.special_tokens_mask == [True, False, False, True] and bert.token_type_ids == [0, 0, 0, 0]
    assert bert.word_ids == [None, 0, 1, None] and bert.offsets == [(0, 0)] * 4
    assert bundled.tokenizer.from_ids([CLS, ING, SEP]).ids == bert.ids[:2] + [SEP]
    assert bundled.tokenizer.from_ids([CLS, ING]).ids == [CLS, ING, SEP]
    model, _ = roberta
    vocab = model.vocab
    rob = model.tokenizer.from_ids([vocab["##ing"], vocab["<unk>"]])
    assert rob.tokens == ["<s>", "##ing", "<unk>", "</s>"] and rob.special_tokens_mask == [
        True,
        False,
        False,
        True,
    ]
    with pytest.raises(InvalidInput, match="no token ids besides the specials"):
        model.tokenizer.from_ids([vocab["<s>"], vocab["</s>"]])


def test_roberta_ids_are_embedded_between_s_and_end(roberta: tuple[bertscope.Model, Any]) -> None:
    """The <s>/</s> path: a lone '##ing' and <unk> equal the plain forward on <s> + ids + </s>."""
    model, hf = roberta
    vocab = model.vocab
    cases = [[vocab["##ing"]], [vocab["<unk>"], vocab["##ing"], vocab["bread"]]]
    with TestClient(create_app(model, settings=ServerSettings(token_ids=TokenIds.MODEL))) as client:
        got = _vectors(_embed(client, cases))
        by_text = _vectors(_embed(client, ["the cat ate bread"]))
        raw = model.tokenize("the cat ate bread").ids[1:-1]
        np.testing.assert_allclose(_vectors(_embed(client, raw)), by_text, atol=ATOL, rtol=0)
    for row, ids in zip(got, cases, strict=True):
        framed = [vocab["<s>"], *ids, vocab["</s>"]]
        np.testing.assert_allclose(row, _reference(model, hf, framed), atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ([-1], ["input 0, position 0", "0..30521"]),
        ([5, 30522], ["input 0, position 1", "0..30521"]),
        ([[1045], [2066, -5]], ["input 1, position 1", "0..30521"]),
        ([True], ["input: item 0 is true, not a string"]),
        ([1045, "bread"], ["input: item 1 is a string ('bread'), not a token id"]),
        ([[1045], []], ["input 1 is an empty list"]),
        ([CLS, SEP], ["no token ids besides the specials"]),
    ],
)
def test_bad_ids_get_a_one_line_400(client: TestClient, given: Any, words: list[str]) -> None:
    response = client.post("/v1/embeddings", json={"input": given})
    assert response.status_code == 400, response.text  # OpenAI's status for an invalid request
    detail = response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail
    for word in words:
        assert word in detail


def test_ids_are_refused_where_text_would_get_a_default_prompt(bundled_path: Path, tmp_path: Path) -> None:
    """Text input gets the model's default prompt; ids cannot carry it exactly, so they are refused."""
    folder = with_prompts(bundled_path, tmp_path / "prompted", include_prompt=False, default="query")
    model = bertscope.load(folder, device="cpu")
    with TestClient(create_app(model, settings=ServerSettings(token_ids=TokenIds.MODEL))) as client:
        refused = client.post("/v1/embeddings", json={"input": [1045, 2066]})
        assert refused.status_code == 400 and "default prompt 'query'" in refused.json()["detail"]
        assert client.post("/v1/embeddings", json={"input": "i like"}).status_code == 200


def test_ids_with_a_prompt_name_asked_are_refused_naming_prompt_name(
    bundled_path: Path, tmp_path: Path
) -> None:
    """A model with prompts and no default: ids with prompt_name were refused as if the model put its
    'default prompt' before every text, which it does not; the client's prompt_name is the cause."""
    folder = with_prompts(bundled_path, tmp_path / "prompted", include_prompt=False, default=None)
    model = bertscope.load(folder, device="cpu")
    with TestClient(create_app(model, settings=ServerSettings(token_ids=TokenIds.MODEL))) as client:
        refused = client.post("/embed", json={"inputs": [1045, 2066], "prompt_name": "query"})
        assert refused.status_code == 422, refused.text
        told = refused.json()["error"]
        assert (
            told.startswith("prompt_name 'query' puts 'query: ' before the text")
            and "leave prompt_name out" in told
        )
        assert "default" not in told
        assert client.post("/embed", json={"inputs": [1045, 2066]}).status_code == 200
