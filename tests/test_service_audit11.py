"""The service audit of round 11: TEI's /embed_all puts the prompt in once (and embed_tokens takes
prompt_name, as embed does), /explain reads prompt_name, /occurrences counts its context before any
forward, /static bounds its answer and its refusals, TEI's /embed refuses dimensions before any work, and
/v1/embeddings answers unit vectors always."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import ServerSettings, create_app
from prompted import PROMPTS, with_prompts

ATOL = 1e-5
TEXT = "a cat sat on the mat"


@pytest.fixture(scope="module")
def prompted(bundled_path: Path, tmp_path_factory: pytest.TempPathFactory) -> bertscope.Model:
    """The bundled model with prompts, `passage` its default."""
    folder = tmp_path_factory.mktemp("prompted") / "m"
    return bertscope.load(with_prompts(bundled_path, folder, include_prompt=True, default="passage"))


@pytest.fixture(scope="module")
def hf(prompted: bertscope.Model) -> Any:
    """The last layer's token vectors of a text alone through plain transformers: (tokens, d)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    folder = prompted.info().path
    tokenizer = AutoTokenizer.from_pretrained(folder)
    module = AutoModel.from_pretrained(folder).eval()

    def rows(text: str) -> np.ndarray:
        with torch.no_grad():
            return module(**tokenizer(text, return_tensors="pt")).last_hidden_state[0].numpy()

    return rows


def ok(client: TestClient, path: str, body: dict[str, Any]) -> Any:
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_embed_all_and_embed_tokens_put_the_prompt_in_once(prompted: bertscope.Model, hf: Any) -> None:
    """/embed_all answered 12 rows, 'passage: query: ...', where /tokenize said 10; embed_tokens refused
    prompt_name as ignored while it put the default prompt in."""
    for name in ("passage", "query"):
        asked = {} if name == "passage" else {"prompt_name": name}
        want = hf(PROMPTS[name] + TEXT)
        tokens = prompted.embed_tokens(TEXT, layers=-1, **asked)[0]
        assert tokens.tokens[:3] == ["[CLS]", name, ":"] and len(tokens.tokens) == len(want)
        np.testing.assert_allclose(tokens.vectors, want, atol=ATOL)
        words = prompted.embed_words(TEXT, **asked)[0]
        assert words.words[:2] == [name, ":"]
    with TestClient(create_app(prompted)) as c:
        for name in ("passage", "query"):
            body = {"inputs": TEXT} if name == "passage" else {"inputs": TEXT, "prompt_name": name}
            rows = ok(c, "/embed_all", body)[0]
            assert len(rows) == len(ok(c, "/tokenize", body)[0]) == 10
            np.testing.assert_allclose(rows, hf(PROMPTS[name] + TEXT), atol=ATOL)


def test_explain_reads_prompt_name(prompted: bertscope.Model) -> None:
    """/explain resolved prompt_name and then explained with the default prompt: one score for all."""
    a, b = TEXT, "the stock market fell"
    with TestClient(create_app(prompted)) as c:
        for name in (None, "query", "instruct"):
            body = {"a": a, "b": b} | ({"prompt_name": name} if name else {})
            got = ok(c, "/explain", body)
            want = prompted.explain(a, b, prompt_name=name)
            assert got["score"] == pytest.approx(want.score, abs=1e-6)
            assert got["spec"]["prompt_name"] == (name or "passage")
    assert prompted.explain(a, b, prompt_name="instruct").score != pytest.approx(prompted.explain(a, b).score)


@pytest.fixture(scope="module")
def window_store(tmp_path_factory: pytest.TempPathFactory, bundled: bertscope.Model) -> Path:
    """Token rows read whole (long="window"), as the audit's store."""
    out = tmp_path_factory.mktemp("occ") / "tokens.parquet"
    texts = ["we sat on the bank of the river", "the bank raised its rates"]
    bertscope.embed_corpus(texts, out, model=bundled, level="tokens", long="window")
    return out


def test_occurrences_counts_its_context_before_any_forward(
    bundled: bertscope.Model, window_store: Path
) -> None:
    """A 2,400-token context ran past --max-request-tokens (200 where /v2/embed is 413), and a context
    without the word was echoed back whole in the 422."""
    context = "the bank of the river " * 480
    settings = ServerSettings(stores=(("b", str(window_store)),), max_request_tokens=300)
    with TestClient(create_app(bundled, settings=settings)) as c:
        assert c.post("/v2/embed", json={"inputs": context, "long": "window"}).status_code == 413
        over = c.post("/occurrences", json={"store": "b", "word": "bank", "context": context})
        assert over.status_code == 413 and "--max-request-tokens" in over.json()["detail"]
        hits = ok(c, "/occurrences", {"store": "b", "word": "bank", "context": "the river bank"})["hits"]
        assert hits and hits[0]["id"] == "1"  # the river's bank first
        lone = "moneys" * 1000  # one word of 6,000 characters: one [UNK] token, under the budget
        absent = c.post("/occurrences", json={"store": "b", "word": "bank", "context": lone})
        assert absent.status_code == 422 and "does not contain" in absent.json()["detail"]
        assert len(absent.content) < 400 and "6,000 characters" in absent.json()["detail"]


def test_static_bounds_its_answer_and_its_refusals(bundled: bertscope.Model) -> None:
    """/static counted items x (top_k + 1) numbers, none of a vector's or a word's pieces: past
    --max-answer-floats it answered 200, and a long item's refusal listed every piece."""
    settings = ServerSettings(max_answer_floats=2000)
    with TestClient(create_app(bundled, settings=settings)) as c:
        assert c.post("/tokenize", json={"inputs": "," * 3000}).status_code == 413
        words = c.post("/static", json={"inputs": ["," * 3000] * 2, "as_words": True})
        assert words.status_code == 413 and "--max-answer-floats" in words.json()["detail"]
        rows = c.post("/static", json={"inputs": ["bread"] * 6})  # 6 rows of 384 numbers
        assert rows.status_code == 413 and "6 items" in rows.json()["detail"]
        two = ok(c, "/static", {"inputs": ["bread", "breadmaker"], "as_words": True})["items"]
        assert two[1]["pieces"] == ["bread", "##maker"]
    with TestClient(create_app(bundled)) as c:
        long = c.post("/static", json={"inputs": ["a," * 20_000]})
        assert long.status_code == 422 and len(long.content) < 400
        assert "40,000 characters) is no word piece in the vocabulary" in long.json()["detail"]
        unknown = c.post("/static", json={"inputs": ["\u2603 " * 20_000], "as_words": True})
        assert unknown.status_code == 422 and len(unknown.content) < 2000
        assert "... (40,000 characters) is not in this model's vocabulary" in unknown.json()["detail"]


@pytest.fixture(scope="module")
def without_normalize(bundled_path: Path, tmp_path_factory: pytest.TempPathFactory) -> bertscope.Model:
    """The bundled model with no Normalize module in its modules.json (links to its other files)."""
    folder = tmp_path_factory.mktemp("nonorm")
    for entry in bundled_path.iterdir():
        if entry.name != "modules.json":
            (folder / entry.name).symlink_to(entry)
    modules = json.loads((bundled_path / "modules.json").read_text())
    kept = [m for m in modules if not m["type"].endswith("Normalize")]
    assert len(kept) < len(modules)
    (folder / "modules.json").write_text(json.dumps(kept))
    return bertscope.load(str(folder))


def test_v1_embeddings_are_unit_length_as_tei_and_openai_answer(without_normalize: bertscope.Model) -> None:
    """Without `dimensions` the model's raw vectors came back (norms 6.4, 8.0); with its full width, unit
    ones: the same request gave two answers."""
    texts = ["a cat sat", "stocks fell"]
    raw = without_normalize.embed(texts).vectors
    assert np.linalg.norm(raw, axis=1).min() > 2
    with TestClient(create_app(without_normalize)) as c:
        for extra in ({}, {"dimensions": 384}, {"dimensions": 16}):
            body = {"input": texts, "encoding_format": "float", **extra}
            got = np.array([d["embedding"] for d in ok(c, "/v1/embeddings", body)["data"]])
            cut = raw[:, : extra.get("dimensions", 384)]
            np.testing.assert_allclose(got, cut / np.linalg.norm(cut, axis=1, keepdims=True), atol=ATOL)


def test_tei_embed_refuses_dimensions_over_the_width_before_any_work(bundled: bertscope.Model) -> None:
    """/embed checked dimensions after the forward: a text too long was refused for its length first."""
    with TestClient(create_app(bundled)) as c:
        over = c.post("/embed", json={"inputs": "bread " * 400, "dimensions": 999})
        assert (
            over.status_code == 422 and "dimensions: 999 is more than the model's 384" in over.json()["error"]
        )
