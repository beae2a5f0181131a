"""Long documents and chunking, as the twenty-fifth audit found them: n_tokens of chunks embedded alone
counted [CLS] and [SEP] where late chunks' did not, refusals of the caller's spans named no document
and called a reversed or empty span out of range, and the service's unknown chunking name read as if
no name were taken."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.core.chunking import check_spans
from bertscope.server import create_app
from console import run_main

DOC = "Short one. Two here."


@pytest.mark.parametrize("options", [{}, {"mask_special": True}, {"prompt": "query: "}], ids=str)
def test_n_tokens_counts_a_chunks_own_pieces_late_or_not(bundled: bertscope.Model, options: Any) -> None:
    late = bundled.embed_chunks(DOC, **options)
    alone = bundled.embed_chunks(DOC, late=False, **options)
    assert late.n_tokens.tolist() == alone.n_tokens.tolist() == [3, 3]  # "short one ." "two here ."


def test_n_tokens_of_a_truncated_chunk_is_what_was_pooled(bundled: bertscope.Model) -> None:
    words = "word " * 300
    with pytest.warns(bertscope.TruncatedTextsWarning):
        alone = bundled.embed_chunks(words, chunks=[(0, len(words) - 1)], late=False)
    kept = bundled.max_tokens - 2  # the window less [CLS] and [SEP]
    assert alone.n_tokens.tolist() == [kept] and alone.n_dropped.tolist() == [300 - kept]


def test_a_naive_store_counts_as_a_late_one(tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "a", "text": "Short one. Two here."}\n', encoding="utf-8")
    counts = []
    for flag in ("--late", "--naive"):
        out = tmp_path / f"c{flag}.parquet"
        ran = run_main("embed", "-i", str(docs), "--id-field", "id", "-o", str(out), "--chunks", "sentence",
                       flag, "-q")  # fmt: skip
        assert ran.code == 0, ran.stderr
        counts.append(pq.read_table(out).column("n_tokens").to_pylist())
    assert counts == [[3, 3], [3, 3]]


@pytest.mark.parametrize(
    ("spans", "says"),
    [
        ([(0, 99)], "chunk span 0 (0, 99) of document 1 is out of range: the text has 3 characters"),
        ([(0, 1), (0, 3)], "chunk span 1 (0, 3) of document 1 overlaps or precedes span 0 (0, 1)"),
        ([(1, 2)], "chunk span 0 (1, 2) of document 1 holds only whitespace"),
        ([(2, 1)], "chunk span 0 (2, 1) of document 1 is reversed: a span's start must be before its end"),
        ([(1, 1)], "chunk span 0 (1, 1) of document 1 is empty: a span's start must be before its end"),
    ],
    ids=["range", "overlap", "whitespace", "reversed", "empty"],
)
def test_a_refused_span_names_its_document(bundled: bertscope.Model, spans: Any, says: str) -> None:
    with pytest.raises(bertscope.InvalidInput) as refused:
        bundled.embed_chunks(["hello world", "x y"], chunks=[[(0, 5)], spans])
    assert str(refused.value).startswith(says), refused.value


def test_a_reversed_span_is_not_called_out_of_range() -> None:
    for span, what in (((5, 2), "reversed"), ((3, 3), "empty")):
        with pytest.raises(
            bertscope.InvalidInput, match=rf"^chunk span 0 \({span[0]}, {span[1]}\) is {what}"
        ):
            check_spans("hello world", [span])


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[Any]:
    with TestClient(create_app(bundled)) as c:
        yield c


def test_the_service_names_the_document_of_a_refused_span(client: Any) -> None:
    body = {"inputs": ["hello world", "x y"], "chunks": [[[0, 5]], [[0, 99]]]}
    answer = client.post("/v2/embed_chunks", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"].startswith("chunk span 0 (0, 99) of document 1 is out of range"), (
        answer.text
    )


def test_the_service_says_an_unknown_chunking_as_the_library_does(client: Any) -> None:
    answer = client.post("/v2/embed_chunks", json={"inputs": "hello world", "chunks": "words"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == (
        "chunks: unknown chunking 'words'; choose one of: sentence, paragraph, tokens"
    ), answer.text
    spelled = client.post("/v2/embed_chunks", json={"inputs": "hello world. Bye.", "chunks": "SENTENCE"})
    assert spelled.status_code == 200 and len(spelled.json()["items"][0]["chunks"]) == 2, spelled.text


def test_n_tokens_in_the_services_answer_excludes_specials(client: Any) -> None:
    answer = client.post("/v2/embed_chunks", json={"inputs": DOC, "late": False}).json()
    assert [c["n_tokens"] for c in answer["items"][0]["chunks"]] == [3, 3]
    assert np.isfinite(answer["items"][0]["chunks"][0]["vector"]).all()
