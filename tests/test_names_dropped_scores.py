"""Audit 5 N2 and N3: one name for each count and score across the library, the CLI and the service.

- Tokens cut from a text or a chunk are `n_dropped` everywhere (`SentenceEmbeddings`, `ChunkEmbeddings`,
  /v2/embed_chunks' chunks); `truncated`, the old name, still reads the same numbers (a DeprecationWarning
  in the library; a field kept beside the new one, deprecated in the schema, on the service). A corpus
  store's column keeps its stored name `truncated`.
- Texts cut in a corpus job are `JobSummary.n_truncated`, as `SentenceEmbeddings.n_truncated`;
  `JobSummary.truncated` still reads it with a DeprecationWarning.
- `similarity --json` gives the matrix as `scores`, as POST /v2/similarity does (it was `cosine`);
  `similar --json` gives each hit's `score`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.server import create_app
from console import run_main

LONG = "word " * 400  # over the bundled model's 256 tokens
DOC = "Short one. Words " + " ".join(["word"] * 400) + "."  # its second sentence is a chunk over the window


def _old_name_warns(read: Callable[[], object], old: str) -> None:
    """`read` (a zero-argument callable reading an old name) warns once, naming the old name, at this file."""
    with pytest.warns(DeprecationWarning, match=rf"\.{old} is deprecated; use \.n_") as caught:
        read()
    assert [Path(w.filename).name for w in caught] == [Path(__file__).name]


def test_sentence_embeddings_truncated_is_n_dropped_under_its_old_name(bundled: bertscope.Model) -> None:
    with pytest.warns(bertscope.TruncatedTextsWarning):
        result = bundled.embed(["a cat", LONG])
    dropped = result.n_dropped.tolist()
    assert dropped[0] == 0 and dropped[1] > 0 and result.n_truncated == 1
    with pytest.warns(
        DeprecationWarning, match=r"^SentenceEmbeddings\.truncated is deprecated; use \.n_dropped"
    ):
        old = result.truncated
    assert old.tolist() == dropped
    _old_name_warns(lambda: result.truncated, "truncated")


def test_chunk_embeddings_n_dropped_and_the_old_truncated(bundled: bertscope.Model) -> None:
    naive = bundled.embed_chunks(DOC, late=False)
    with pytest.warns(bertscope.TruncatedTextsWarning):
        alone = bundled.embed([DOC[s:e] for s, e in naive.spans])
    assert naive.n_dropped.tolist() == alone.n_dropped.tolist()
    assert naive.n_dropped[0] == 0 and naive.n_dropped[1] > 0
    with pytest.warns(
        DeprecationWarning, match=r"^ChunkEmbeddings\.truncated is deprecated; use \.n_dropped"
    ):
        assert naive.truncated.tolist() == naive.n_dropped.tolist()
    _old_name_warns(lambda: naive.truncated, "truncated")
    chunks = naive.to_dict()["chunks"]
    assert [c["n_dropped"] for c in chunks] == naive.n_dropped.tolist()
    assert all("truncated" not in c for c in chunks)
    late = bundled.embed_chunks(DOC, late=True)
    assert late.n_dropped.tolist() == [0] * len(late)


def test_job_summary_counts_cut_texts_as_n_truncated(bundled: bertscope.Model, tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # no internal reader uses an old name
        summary = bertscope.embed_corpus(["a cat", LONG, "a dog"], out, model=bundled)
    assert summary.n_truncated == 1
    with pytest.warns(DeprecationWarning, match=r"^JobSummary\.truncated is deprecated; use \.n_truncated"):
        assert summary.truncated == 1
    _old_name_warns(lambda: summary.truncated, "truncated")
    assert "1 truncated" in summary.line()
    # the stored column keeps its name, and holds each text's n_dropped
    column = pq.read_table(out).column("truncated").to_pylist()
    with pytest.warns(bertscope.TruncatedTextsWarning):
        embedded = bundled.embed(["a cat", LONG, "a dog"])
    assert column == embedded.n_dropped.tolist()
    chunk_job = bertscope.embed_corpus(
        [DOC], tmp_path / "c.parquet", model=bundled, level="chunks", late=False
    )
    assert chunk_job.n_truncated == 1  # the chunk over the window


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    with TestClient(create_app(bundled)) as c:
        yield c


def test_the_service_sends_n_dropped_with_the_deprecated_truncated_beside_it(
    client: TestClient, bundled: bertscope.Model
) -> None:
    response = client.post("/v2/embed_chunks", json={"inputs": DOC, "late": False})
    assert response.status_code == 200, response.text
    chunks = response.json()["items"][0]["chunks"]
    expected = bundled.embed_chunks(DOC, late=False).n_dropped.tolist()
    assert [c["n_dropped"] for c in chunks] == expected and expected[1] > 0
    assert [c["truncated"] for c in chunks] == expected
    schema = client.get("/openapi.json").json()["components"]["schemas"]["ChunkItem"]
    assert "n_dropped" in schema["required"] and not schema["properties"]["n_dropped"].get("deprecated")
    assert schema["properties"]["truncated"]["deprecated"] is True


def test_similarity_json_says_scores_as_the_service(client: TestClient, bundled: bertscope.Model) -> None:
    ran = run_main("similarity", "a cat", "a dog", "a car", "--json")
    assert ran.code == 0, ran.stderr
    data = json.loads(ran.stdout)
    assert "cosine" not in data and data["texts"] == ["a cat", "a dog", "a car"]
    np.testing.assert_allclose(data["scores"], bundled.similarity(["a cat", "a dog", "a car"]), atol=1e-5)
    served = client.post("/v2/similarity", json={"source": "a cat", "sentences": ["a dog", "a car"]}).json()
    np.testing.assert_allclose(served["scores"], data["scores"][0][1:], atol=1e-5)
    ran = run_main("similarity", "a cat", "a dog", "--baseline", "--json")
    assert ran.code == 0
    assert set(json.loads(ran.stdout)) == {"model", "texts", "scores", "spec", "percentile", "baseline"}


def test_similar_json_gives_each_hit_a_score(bundled: bertscope.Model, tmp_path: Path) -> None:
    store = tmp_path / "s.parquet"
    bertscope.embed_corpus(["a cat sat", "the stock market fell"], store, model=bundled)
    ran = run_main("similar", "a cat", "--store", str(store), "-k", "1", "--json")
    assert ran.code == 0, ran.stderr
    (hit,) = json.loads(ran.stdout)
    assert hit["id"] == "1" and "cosine" not in hit
    expected = bundled.similarity(["a cat"], ["a cat sat"])[0][0]
    assert hit["score"] == pytest.approx(float(expected), abs=1e-5)
