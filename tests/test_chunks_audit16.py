"""Chunking's edges found by audit 16: a line of only invisible characters (a no-break, ideographic or
zero-width space) is a blank line and ends a paragraph; embed_chunks' options of the wrong type are
refused in one line naming them (not a TypeError, not late chunking for late='no'); a chunk with no
word piece is named by its number and document whether it runs late or alone."""

from __future__ import annotations

from typing import Any

import pytest

import bertscope
from bertscope.core.chunking import paragraph_spans
from bertscope.errors import InvalidInput, InvalidSpec


@pytest.mark.parametrize("blank", ["\u00a0", "\u3000", "\u200b", " \ufeff ", " \t"])
def test_a_line_a_reader_sees_nothing_on_ends_a_paragraph(blank: str) -> None:
    text = f"Para one.\n{blank}\nPara two."
    assert [text[s:e] for s, e in paragraph_spans(text)] == ["Para one.", "Para two."]
    joined = "Para one.\n\u00a0x\nPara two."  # a visible character: one paragraph
    assert len(paragraph_spans(joined)) == 1


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"chunks": "tokens", "chunk_size": "3"}, "chunk_size must be a whole number of at least 1"),
        ({"chunks": "tokens", "chunk_size": 2.5}, "chunk_size must be a whole number of at least 1"),
        ({"chunks": "tokens", "chunk_size": True}, "chunk_size must be a whole number of at least 1"),
        ({"chunks": "tokens", "chunk_size": 4, "chunk_overlap": 1.5}, "chunk_overlap must be a whole number"),
        ({"chunks": None}, "chunks=None: give 'sentence', 'paragraph' or 'tokens'"),
        ({"chunks": 5}, "chunks=5: give 'sentence', 'paragraph' or 'tokens'"),
        ({"late": "no"}, "late must be True or False, not 'no'"),
    ],
)
def test_options_of_the_wrong_type_are_refused_by_name(
    bundled: bertscope.Model, options: dict[str, Any], said: str
) -> None:
    with pytest.raises(InvalidSpec, match=said.replace("(", r"\(")):
        bundled.embed_chunks("a b c d e f", **options)


@pytest.mark.parametrize("late", [True, False])
def test_an_empty_chunk_is_named_by_document_and_number(bundled: bertscope.Model, late: bool) -> None:
    docs = ["one two three", "hello \u200b world"]
    spans = [[(0, 3), (4, 7), (8, 13)], [(0, 5), (6, 7), (8, 13)]]
    with pytest.raises(
        InvalidInput, match=r"^chunk 1 \(6, 7\) of document 1 holds no word piece the model sees"
    ):
        bundled.embed_chunks(docs, chunks=spans, late=late)
