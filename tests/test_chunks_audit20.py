"""Chunks' edges found by audit 20: a corpus job's `late` of the wrong type is refused as embed_chunks
refuses it (late="no" ran late chunking and stored "no"); an empty chunk past the first group of 64
documents is named by its own document, and an empty document is a "document" as in embed_chunks'
other refusals; a bare (A, B) tuple is refused; a zero-width space, BOM or word joiner after a sentence's
mark ends it as a space does; the long-documents page lists every pooling late chunks take; a token a
prompt shares with the document's first word counts for its chunk."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.chunk_embed import plan_chunks
from bertscope.core.chunking import sentence_spans
from bertscope.core.pooling import POOLINGS
from bertscope.core.tokens import named_as
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.io.level_table import CorpusOptions, make_level
from bertscope.io.levels import LevelOptions
from bertscope.io.readers import Record

TEXTS = ["Berlin is big. It has parks.", "Tokyo has trains. Many of them."]


@pytest.mark.parametrize("late", ["no", "false", 0, None])
def test_a_corpus_job_refuses_late_of_the_wrong_type_before_any_work(
    bundled: bertscope.Model, tmp_path: Path, late: Any
) -> None:
    """late="no" ran late chunking and stored late: "no"; 0 and None ran naive and stored 0 and None."""
    out = tmp_path / "chunks.parquet"
    with pytest.raises(InvalidSpec, match=rf"^late must be True or False, not {late!r}$"):
        bertscope.embed_corpus(TEXTS, out, model=bundled, level="chunks", late=late, progress=False)
    assert not out.exists()
    with pytest.raises(InvalidSpec, match=r"^late must be True or False"):
        CorpusOptions.of(level="chunks", late=late)
    # options built directly, as the command line and the Ray runner build them
    with pytest.raises(InvalidSpec, match=r"^late must be True or False"):
        make_level(bundled, CorpusOptions(level=LevelOptions(level="chunks", late=late)))


def test_a_corpus_job_stores_late_as_a_bool(bundled: bertscope.Model, tmp_path: Path) -> None:
    out = tmp_path / "chunks.parquet"
    bertscope.embed_corpus(TEXTS, out, model=bundled, level="chunks", late=np.bool_(False), progress=False)
    stored = json.loads(pq.read_schema(out).metadata[b"bertscope"])
    assert stored["late"] is False and stored["long"] == "truncate"


@pytest.mark.parametrize("late", [True, False])
def test_an_empty_chunk_past_the_first_group_names_its_own_document(
    bundled: bertscope.Model, late: bool
) -> None:
    """Past 64 documents (one group) the refusal named the document by its number in its group: 5."""
    docs = ["hi there"] * 69 + ["x \u0301 y"]
    spans = [[(0, 2)]] * 69 + [[(0, 1), (2, 3), (4, 5)]]
    with pytest.raises(InvalidInput, match=r"^chunk 1 \(2, 3\) of document 69 holds no word piece"):
        bundled.embed_chunks(docs, chunks=spans, late=late)


def test_the_corpus_job_names_an_empty_chunk_as_its_other_refusals_do(bundled: bertscope.Model) -> None:
    """The chunk level names its texts as the job does ("text 69"), the empty chunk's too."""
    level = make_level(bundled, CorpusOptions.of(level="chunks", chunks="sentence"))
    records = [Record(str(i), "hi there", i + 1) for i in range(69)] + [Record("69", "x \u0301 y", 70)]
    # spans as a caller's: the level's own chunkings join a chunk with no word piece to its neighbour
    spans = {"hi there": [(0, 2)], "x \u0301 y": [(0, 1), (2, 3), (4, 5)]}
    with patch("bertscope.io.chunk_level.chunk_spans", lambda text, *_, **__: spans[text]):
        with pytest.raises(InvalidInput, match=r"^chunk 1 \(2, 3\) of text 69 holds no word piece"):
            level.embed(records)


def test_embed_chunks_names_an_empty_document_a_document(bundled: bertscope.Model) -> None:
    """check_texts said "text 1 is empty" where every other refusal of embed_chunks says "document 1"."""
    with pytest.raises(InvalidInput, match=r"^document 1 is empty"):
        bundled.embed_chunks(["fine", " "])
    with named_as(lambda kind, i: f"the {kind} of id {i + 1!r}"):  # the command line's naming, kept
        with pytest.raises(InvalidInput, match=r"^the document of id 2 is empty"):
            bundled.embed_chunks(["fine", " "])


def test_an_empty_chunk_alone_is_named_through_the_callers_naming(bundled: bertscope.Model) -> None:
    """The engine's "text N" of a chunk embedded alone is read back as document and chunk under the
    command line's naming too (it said the naming's name of text N, its Nth chunk, in raw words)."""
    docs = ["hi there", "x \u0301 y"]
    with named_as(lambda kind, i: f"the {kind} of id {i + 1!r}"):
        with pytest.raises(InvalidInput, match=r"^chunk 1 \(2, 3\) of the document of id 2 holds no word"):
            bundled.embed_chunks(docs, chunks=[[(0, 2)], [(0, 1), (2, 3), (4, 5)]], late=False)


def test_a_bare_tuple_of_two_texts_is_refused_as_embed_refuses_it(bundled: bertscope.Model) -> None:
    """("How are you?", "Fine, thanks.") was read as two documents where embed refuses it as ambiguous."""
    given = ("How are you?", "Fine, thanks.")
    with pytest.raises(
        InvalidInput, match=r"^a bare tuple \('How are you\?', 'Fine, thanks.'\) reads two ways"
    ):
        bundled.embed(given)
    with pytest.raises(
        InvalidInput, match=r"^a bare tuple .* reads two ways.* chunks take no pairs: pass the list"
    ):
        bundled.embed_chunks(given)
    assert len(bundled.embed_chunks(list(given))) == 2
    assert len(bundled.embed_chunks(("One.", "Two.", "Three."))) == 3  # no pair: three documents


@pytest.mark.parametrize(
    "gap", ["\u200b\n", "\u200b ", "\ufeff ", "\u2060", "\u200b", " \u200b", "\u00a0", "\u2066 "]
)
def test_a_zero_width_space_after_the_mark_ends_a_sentence(gap: str) -> None:
    """'Hello world.\u200b\nNext' was one sentence: the character after the mark had to be whitespace."""
    text = f"Hello world.{gap}Next line here."
    assert [text[s:e] for s, e in sentence_spans(text)] == ["Hello world.", "Next line here."]


@pytest.mark.parametrize(
    "text", ["See e.g.\u200b that one.", "Dr.\u200b Smith came.", "Done.\u200b\u200b next."]
)
def test_past_a_zero_width_space_abbreviations_and_lowercase_still_read_on(text: str) -> None:
    assert sentence_spans(text) == [(0, len(text))]


def test_the_page_lists_every_pooling_late_chunks_take() -> None:
    """docs/long-documents.md listed mean, max and mean_sqrt_len; first_last_avg is taken too."""
    page = (Path(__file__).parents[1] / "docs" / "long-documents.md").read_text(encoding="utf-8")
    said = page[page.index("- Late chunks pool with") :].split("\n- ")[0]
    assert {pooling.value for pooling in POOLINGS} <= set(re.findall(r"`(\w+)`", said))


def test_a_token_the_prompt_shares_with_the_first_word_counts_for_its_chunk(bundled: bertscope.Model) -> None:
    """prompt="pre" before "fix is": "prefix" starts in the prompt and was left out of chunk 0 in silence
    (and spans [(0, 3), ...] were refused as holding no word piece); it counts as embed counts it."""
    doc = "fix is good. Next one."
    late = bundled.embed_chunks(doc, chunks="sentence", prompt="pre")
    whole = bundled.embed_tokens("pre" + doc)[0]
    assert whole.tokens[1:5] == ["prefix", "is", "good", "."]
    assert late.n_tokens.tolist() == [4, 3]
    expected = whole.vectors[1:5].mean(axis=0)
    np.testing.assert_allclose(late.vectors[0], expected / np.linalg.norm(expected), atol=1e-5)
    spans = bundled.embed_chunks(doc, chunks=[(0, 3), (4, 6)], prompt="pre", pooling="max")
    assert spans.n_tokens.tolist() == [1, 1]
    # the plan's bounds read the same rows (max pools chunk by chunk: its reads are the chunks' lengths)
    plan = plan_chunks(bundled, doc, chunks=[(0, 3), (4, 6)], prompt="pre", pooling="max")
    assert plan.rows_read_one_by_one(bundled.engine) == 2
