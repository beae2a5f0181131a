"""TEI's routes answer in TEI's shapes (router/src/http/types.rs), with the library's own numbers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import create_app
from prompted import PROMPTS, with_prompts

ATOL = 1e-5
TEXTS = ["I like eating bread", "The banana bread was horrible"]


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    """The service on the bundled model, in process."""
    with TestClient(create_app(bundled)) as c:
        yield c


def ok(client: TestClient, path: str, body: dict[str, Any]) -> Any:
    """POST and the decoded answer, failing on anything but 200."""
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_embed_answers_bare_arrays(client: TestClient, bundled: bertscope.Model) -> None:
    want = bundled.embed(TEXTS).vectors
    for path in ("/", "/embed"):
        np.testing.assert_allclose(ok(client, path, {"inputs": TEXTS}), want, atol=ATOL)
        one = ok(client, path, {"inputs": TEXTS[0]})
        assert len(one) == 1 and len(one[0]) == want.shape[1]
    raw = bundled.embed(TEXTS, normalize=False).vectors
    np.testing.assert_allclose(ok(client, "/embed", {"inputs": TEXTS, "normalize": False}), raw, atol=ATOL)
    # dimensions: the first N, unit length again when normalize (TEI's Matryoshka cut).
    cut = ok(client, "/embed", {"inputs": TEXTS, "dimensions": 16})
    np.testing.assert_allclose(
        cut, want[:, :16] / np.linalg.norm(want[:, :16], axis=1, keepdims=True), atol=ATOL
    )
    cut_raw = ok(client, "/embed", {"inputs": TEXTS, "dimensions": 16, "normalize": False})
    np.testing.assert_allclose(cut_raw, raw[:, :16], atol=ATOL)
    long = "bread " * 400
    assert client.post("/embed", json={"inputs": long}).status_code == 422
    np.testing.assert_allclose(
        ok(client, "/embed", {"inputs": long, "truncate": True}), bundled.embed(long).vectors, atol=ATOL
    )


def test_embed_all_similarity_tokenize_decode_info(client: TestClient, bundled: bertscope.Model) -> None:
    tokens = bundled.embed_tokens(TEXTS, layers=-1)
    every = ok(client, "/embed_all", {"inputs": TEXTS})
    assert [len(t) for t in every] == [len(t.tokens) for t in tokens]
    for got, want in zip(every, tokens, strict=True):
        np.testing.assert_allclose(got, want.vectors, atol=ATOL)
    scores = ok(client, "/similarity", {"inputs": {"source_sentence": TEXTS[0], "sentences": TEXTS}})
    np.testing.assert_allclose(scores, bundled.similarity(TEXTS[:1], TEXTS)[0], atol=ATOL)
    # TEI's offsets count UTF-8 bytes: "é" is two, so "bread" starts at byte 6 of "café bread".
    pieces = ok(client, "/tokenize", {"inputs": "café bread"})[0]
    assert pieces[0] == {"id": 101, "text": "[CLS]", "special": True, "start": None, "stop": None}
    assert pieces[-2] == {"id": 7852, "text": "bread", "special": False, "start": 6, "stop": 11}
    bare = ok(client, "/tokenize", {"inputs": ["a cat"], "add_special_tokens": False})
    assert [p["text"] for p in bare[0]] == ["a", "cat"]
    ids = [101, 1045, 2066, 7852, 102]
    assert ok(client, "/decode", {"ids": ids}) == ["i like bread"]
    assert (
        ok(client, "/decode", {"ids": [ids, ids], "skip_special_tokens": False})
        == ["[CLS] i like bread [SEP]"] * 2
    )
    info = client.get("/info").json()
    assert info["model_type"] == {"embedding": {"pooling": "mean"}}
    assert (info["max_input_length"], info["max_client_batch_size"], info["model_dtype"]) == (
        256,
        256,
        "float32",
    )
    assert set(info) >= {
        "model_id",
        "max_batch_tokens",
        "max_concurrent_requests",
        "version",
        "auto_truncate",
    }


def test_prompts_go_before_the_text_as_tei_puts_them(bundled_path: Path, tmp_path: Path) -> None:
    model = bertscope.load(
        with_prompts(bundled_path, tmp_path / "m", include_prompt=True, default="passage"), device="cpu"
    )
    query = model.embed(TEXTS, prompt_name="query").vectors
    passage = model.embed(TEXTS).vectors
    with TestClient(create_app(model)) as c:
        np.testing.assert_allclose(
            ok(c, "/embed", {"inputs": TEXTS, "prompt_name": "query"}), query, atol=ATOL
        )
        np.testing.assert_allclose(ok(c, "/embed", {"inputs": TEXTS}), passage, atol=ATOL)
        # /embed_all and /tokenize: the prompt's tokens come first (once), offsets into prompt + text;
        # the rows are the plain forward of prompt + text, the default prompt's or the one named.
        for name, body in (("passage", {}), ("query", {"prompt_name": "query"})):
            rows = ok(c, "/embed_all", {"inputs": TEXTS[0], **body})[0]
            np.testing.assert_allclose(rows, _hf_rows(bundled_path, PROMPTS[name] + TEXTS[0]), atol=ATOL)
            assert len(rows) == len(ok(c, "/tokenize", {"inputs": TEXTS[0], **body})[0])
        pieces = ok(c, "/tokenize", {"inputs": "a cat", "prompt_name": "query"})[0]
        assert [p["text"] for p in pieces] == ["[CLS]", "query", ":", "a", "cat", "[SEP]"]
        assert (pieces[3]["start"], pieces[4]["stop"]) == (len("query: "), len("query: a cat"))
        unknown = c.post("/tokenize", json={"inputs": "a", "prompt_name": "qeury"})
        assert unknown.status_code == 422 and unknown.json()["error_type"] == "Validation"
        assert "unknown prompt name 'qeury'" in unknown.json()["error"]


def _hf_rows(folder: Path, text: str) -> np.ndarray:
    """The last layer's token vectors of `text` alone through plain transformers: (tokens, d)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        return model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0].numpy()
