"""Long documents and chunking, as the eleventh audit found them: invisible chunks, long='error' naming
the document, sizes the service ignored, silent cuts, strides past the window, combining marks, the
recorded mask_special, the command line's table titles and spans with fractions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.core.chunking import check_spans, paragraph_spans, sentence_spans
from bertscope.errors import InvalidSpec
from console import run_main

DOC = "Berlin is big. It is old."


@pytest.mark.parametrize(
    ("doc", "chunks", "expected"),
    [
        ("First para.\n\n\u200b\n\nSecond para.", "paragraph", ["First para.", "Second para."]),
        ("Done. \ufeff", "sentence", ["Done."]),
        ("Done here. \u2060 Next one.", "sentence", ["Done here.", "Next one."]),
        ("Done. \u0301", "sentence", ["Done. \u0301"]),  # a lone accent the uncased model drops: joined
    ],
    ids=["zero-width-paragraph", "bom", "word-joiner", "lone-mark"],
)
def test_a_chunk_the_model_sees_nothing_of_is_left_out_or_joined(
    bundled: bertscope.Model, doc: str, chunks: str, expected: list[str]
) -> None:
    for late in (True, False):
        result = bundled.embed_chunks(doc, chunks=chunks, late=late)
        assert result.chunks == expected and (result.n_tokens > 0).all()


def test_invisible_characters_are_trimmed_as_whitespace_is() -> None:
    assert paragraph_spans("A.\n\n\u200b\ufeff\n\nB.") == [(0, 2), (8, 10)]  # no tokenizer: trimmed alone
    assert sentence_spans("\ufeffA b. \u200b") == [(1, 5)]


def test_a_chunk_corpus_job_keeps_a_document_with_an_invisible_sentence(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    source = tmp_path / "zw.txt"
    source.write_text(f"{DOC}\nDone here. \u200b\nThird doc.\n\u200b\n", encoding="utf-8")
    out = tmp_path / "zw.parquet"
    summary = bertscope.embed_corpus(source, out, model=bundled, level="chunks", skip_bad=True)
    table = pq.read_table(out)
    assert table.column("id").to_pylist() == ["1", "1", "2", "3"]
    assert table.column("text").to_pylist() == ["Berlin is big.", "It is old.", "Done here.", "Third doc."]
    assert summary.rejected == 1 and "zw.txt:4" in out.with_name("zw.parquet.rejects").read_text()


def test_long_error_names_the_document_and_only_fixes_that_work(bundled: bertscope.Model) -> None:
    long_doc = "word " * 300
    with pytest.raises(bertscope.InputTooLong) as late:
        bundled.embed_chunks(["Short doc."] * 65 + [long_doc], long="error")
    assert str(late.value).startswith("document 65 has 302 tokens") and "truncate" not in str(late.value)
    with pytest.raises(bertscope.InputTooLong) as naive:
        bundled.embed_chunks(["One. Two. Three.", "Fine. " + long_doc + "end."], late=False, long="error")
    assert str(naive.value).startswith("chunk 0 (0, 1510) of document 1 has 306 tokens")
    assert "long='truncate'" in str(naive.value)
    code, _, said = run_main(
        "embed", "Short.", "Fine. " + long_doc, "--chunks", "sentence", "--long", "error"
    )
    assert (
        code == 1 and "document 2 has 304 tokens" in said
    )  # as its table prints it and "--long window" in said
    assert "--long truncate" not in said


def test_the_service_refuses_chunk_sizes_it_would_ignore(bundled: bertscope.Model) -> None:
    from fastapi.testclient import TestClient

    from bertscope.server import create_app

    with TestClient(create_app(bundled)) as client:
        refused = client.post("/v2/embed_chunks", json={"inputs": DOC, "chunk_size": 5})
        old_name = client.post("/v2/embed_chunks", json={"inputs": DOC, "overlap": 1, "chunks": "paragraph"})
        tokens = client.post("/v2/embed_chunks", json={"inputs": DOC, "chunk_size": 5, "chunks": "tokens"})
        flat = client.post("/v2/embed_chunks", json={"inputs": [DOC, DOC], "chunks": [[0, 3], [4, 7]]})
    assert refused.status_code == 422 and "chunk_size" in refused.json()["detail"]
    assert old_name.status_code == 422 and "chunk_overlap" in old_name.json()["detail"]
    assert tokens.status_code == 200
    assert flat.status_code == 422 and "is one span" in flat.json()["detail"]


def test_chunks_embedded_alone_are_never_cut_in_silence(bundled: bertscope.Model) -> None:
    with pytest.warns(bertscope.TruncatedTextsWarning, match="late chunking"):
        result = bundled.embed_chunks("word " * 400, chunks="tokens", chunk_size=1000, late=False)
    assert result.n_dropped.tolist() == [146]
    code, _, warned = run_main(
        "embed", "word " * 400, "--chunks", "tokens", "--chunk-size", "1000", "--naive"
    )
    assert code == 0 and warned.count("truncated") == 1  # the command's own line, not the library's too


def test_a_stride_past_the_window_is_refused_before_any_work(bundled: bertscope.Model) -> None:
    for call in (
        lambda: bundled.embed_chunks("a b c.", stride=100000),
        lambda: bundled.embed("a b c.", long="window", stride=100000),
    ):
        with pytest.raises(bertscope.InvalidSpec, match="between 1 and 254"):
            call()
    assert bundled.embed("a b c.", long="window", stride=254).spec["stride"] == 254
    code, _, said = run_main("embed", "short one.", "--chunks", "sentence", "--stride", "100000")
    assert code == 1 and "between 1 and 254" in said


def test_token_chunks_keep_the_marks_after_their_last_character(
    bundled: bertscope.Model, tiny_models: dict[str, bertscope.Model]
) -> None:
    doc = "Cafe\u0301 re\u0301sume\u0301"
    for model in (bundled, tiny_models["roberta"]):
        spans = model.embed_chunks(doc, chunks="tokens", chunk_size=1).spans
        covered = {i for start, end in spans for i in range(start, end)}
        assert covered >= {i for i, char in enumerate(doc) if not char.isspace()}
    assert bundled.embed_chunks(doc, chunks="tokens", chunk_size=1).chunks == [
        "Cafe\u0301",
        "re\u0301sume\u0301",
    ]


def test_late_chunks_record_the_specials_they_leave_out(bundled: bertscope.Model) -> None:
    doc = "Berlin is the capital of Germany."
    late = bundled.embed_chunks(doc, chunks=[(0, len(doc))])
    assert late.spec["mask_special"] is True
    np.testing.assert_allclose(late.vectors, bundled.embed(doc, mask_special=True).vectors, atol=1e-5)
    assert bundled.embed_chunks(doc, late=False).spec["mask_special"] is False  # alone: as asked


def test_the_command_lines_chunk_tables_are_titled_by_the_texts_id(tmp_path: Path) -> None:
    source = tmp_path / "two.txt"
    source.write_text(f"\n{DOC}\n")
    code, table, _ = run_main("embed", "-i", str(source), "--chunks", "sentence")
    assert code == 0 and "document 2" in table and "document 0" not in table


def test_spans_with_fractions_are_refused_not_cut(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InvalidInput, match="whole numbers"):
        bundled.embed_chunks("abc def", chunks=[(0.5, 2.7)])
    assert check_spans("abc def", [(0, 3.0), (np.int64(4), 7)]) == [(0, 3), (4, 7)]
    with pytest.raises(bertscope.InvalidInput, match="a number: give a list of"):
        check_spans("abc def", [0, 3])  # type: ignore[list-item]


def test_a_chunks_number_is_chunk_everywhere_with_number_kept_by_the_service(
    bundled: bertscope.Model,
) -> None:
    from fastapi.testclient import TestClient

    from bertscope.server import create_app

    result = bundled.embed_chunks(DOC)
    assert [c["chunk"] for c in result.to_dict()["chunks"]] == [0, 1]
    assert "number" not in result.to_dict()["chunks"][0]  # a dict's keys are renamed outright
    code, printed, _ = run_main("embed", DOC, "--chunks", "sentence", "--json")
    assert code == 0 and '"chunk": 1' in printed and '"number"' not in printed
    with TestClient(create_app(bundled)) as client:
        answer = client.post("/v2/embed_chunks", json={"inputs": DOC}).json()
    assert [(c["chunk"], c["number"]) for c in answer["items"][0]["chunks"]] == [(0, 0), (1, 1)]


def test_a_late_chunk_corpus_job_refuses_truncate_as_embed_chunks_does(tmp_path: Path) -> None:
    """embed_corpus(level='chunks', long='truncate') ran windows and recorded long 'window' in silence;
    it is refused as Model.embed_chunks refuses it, and without long the job windows as before."""
    source = tmp_path / "c.txt"
    source.write_text("Berlin is big. It is old.\nParis is bright.\n")
    with pytest.raises(InvalidSpec, match="late chunking needs every token"):
        bertscope.embed_corpus(source, tmp_path / "t.parquet", level="chunks", chunks="sentence",
                               long="truncate", progress=False)  # fmt: skip
    assert not (tmp_path / "t.parquet").exists()
    from bertscope.io.stores import open_store

    bertscope.embed_corpus(source, tmp_path / "w.parquet", level="chunks", chunks="sentence", progress=False)
    assert open_store(tmp_path / "w.parquet").settings["long"] == "window"
