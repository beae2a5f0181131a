"""The chunks corpus level (bertscope.io.chunk_level): rows equal embed_chunks, resume, search by chunk."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.errors import CorpusError, InvalidSpec
from bertscope.io.search import search
from test_io import LIGHT, _embed_in_process, stop_and_resume

DOCS = {
    "berlin": "Berlin is the capital of Germany. The city has 3.8 million people. It is known for its art.",
    "paris": "Paris is in France.\n\nIt has the Eiffel tower. Tourists climb it every day.",
    "bread": "Bread is baked from flour and water. It goes stale in a few days.",
}


def _jsonl(folder: Path, docs: dict[str, str]) -> Path:
    path = folder / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in docs.items()))
    return path


def _vectors(table: object) -> np.ndarray:
    return np.array(table.column("embedding").to_pylist(), dtype=np.float32)  # type: ignore[attr-defined]


@pytest.mark.parametrize("late", [True, False], ids=["late", "naive"])
def test_chunk_rows_equal_embed_chunks(tmp_path: Path, bundled: bertscope.Model, late: bool) -> None:
    out = tmp_path / "chunks.parquet"
    summary = bertscope.embed_corpus(
        _jsonl(tmp_path, DOCS),
        out,
        model=bundled,
        id_field="id",
        level="chunks",
        chunks="sentence",
        late=late,
    )
    table = pq.read_table(out)
    expected = bundled.embed_chunks(list(DOCS.values()), chunks="sentence", late=late)
    assert table.column("id").to_pylist() == [
        k for k, r in zip(DOCS, expected, strict=True) for _ in r.chunks
    ]
    assert table.column("position").to_pylist() == [i for r in expected for i in range(len(r))]
    assert list(zip(table.column("start").to_pylist(), table.column("end").to_pylist(), strict=True)) == [
        span for r in expected for span in r.spans
    ]
    assert table.column("text").to_pylist() == [c for r in expected for c in r.chunks]
    np.testing.assert_allclose(_vectors(table), np.concatenate([r.vectors for r in expected]), atol=1e-6)
    settings = json.loads(table.schema.metadata[b"bertscope"])
    assert settings["level"] == "chunks" and settings["late"] is late and settings["chunks"] == "sentence"
    assert settings["long"] == ("window" if late else "truncate")
    assert summary.embedded == 3 and summary.tokens == sum(int(r.n_tokens.sum()) for r in expected)


def test_npy_chunk_store_keeps_each_rows_document_and_span(tmp_path: Path, bundled: bertscope.Model) -> None:
    out = tmp_path / "chunks.npy"
    source = _jsonl(tmp_path, DOCS)
    bertscope.embed_corpus(source, out, model=bundled, id_field="id", level="chunks", chunks="paragraph")
    rows = [json.loads(line) for line in out.with_suffix(".rows.jsonl").read_text().splitlines()]
    expected = bundled.embed_chunks(list(DOCS.values()), chunks="paragraph")
    assert [(r["id"], r["position"], r["start"], r["end"]) for r in rows] == [
        (k, i, s, e) for k, r in zip(DOCS, expected, strict=True) for i, (s, e) in enumerate(r.spans)
    ]
    np.testing.assert_allclose(np.load(out), np.concatenate([r.vectors for r in expected]), atol=1e-6)


def test_similar_returns_chunks_with_their_document_and_span(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    out = tmp_path / "chunks.parquet"
    bertscope.embed_corpus(_jsonl(tmp_path, DOCS), out, model=bundled, id_field="id", level="chunks")
    hits = search("How many people live in Berlin?", out, model=bundled, k=3)
    assert (hits[0].id, hits[0].chunk) == ("berlin", 1)
    for hit in hits:
        assert hit.text == DOCS[hit.id][hit.start : hit.end]
    vectors = _vectors(pq.read_table(out))
    # late chunks pool no special token, and the store says so (mask_special): the query is pooled so too
    query = bundled.embed("How many people live in Berlin?", mask_special=True).vectors[0]
    np.testing.assert_allclose([h.score for h in hits], np.sort(vectors @ query)[::-1][:3], atol=1e-5)
    with pytest.raises(CorpusError, match="query text or vector"):
        search(None, out, item_id="berlin", model=bundled)


def test_bad_chunk_options_are_refused(tmp_path: Path, bundled: bertscope.Model) -> None:
    source = _jsonl(tmp_path, DOCS)
    with pytest.raises(InvalidSpec, match="pools token vectors"):
        bertscope.embed_corpus(source, tmp_path / "a.parquet", model=bundled, level="chunks", pooling="cls")
    with pytest.raises(InvalidSpec, match="unknown chunking"):
        bertscope.embed_corpus(source, tmp_path / "b.parquet", model=bundled, level="chunks", chunks="pages")
    with pytest.raises(CorpusError, match="write chunks rows to .parquet or .npy"):
        bertscope.embed_corpus(source, tmp_path / "c.db", model=bundled, level="chunks")


DOCS_IN_CORPUS = 600


@pytest.fixture(scope="module")
def doc_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """600 documents of 1-6 sentences of the tiny model's words: 12 parts, 9 to come after the kill."""
    rng = np.random.default_rng(0)
    words = "we sat on the bank of a river money interest rates the cat likes bread".split()
    folder = tmp_path_factory.mktemp("chunks")
    lines = []
    for _ in range(DOCS_IN_CORPUS):
        sentences = [" ".join(rng.choice(words, size=rng.integers(2, 12))) for _ in range(rng.integers(1, 7))]
        lines.append(". ".join(s.capitalize() for s in sentences) + ".")
    path = folder / "docs.txt"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_chunk_job_killed_with_sigkill_resumes_exactly(
    tmp_path: Path, doc_corpus: Path, tiny_dirs: dict[str, Path]
) -> None:
    common = ["-i", str(doc_corpus), "--model", str(tiny_dirs["bert"]), "--batch-size", "50", "-q"]
    common += ["--chunks", "sentence", "--late", *LIGHT]
    whole = tmp_path / "whole.parquet"
    _embed_in_process([*common, "-o", str(whole)])  # only the job that is killed needs its own process
    target = tmp_path / "resumed.parquet"
    stop_and_resume(common, target)
    assert pq.read_table(target).equals(pq.read_table(whole))
    assert pq.read_table(whole).column("position").to_pylist().count(0) == DOCS_IN_CORPUS
