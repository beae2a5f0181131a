"""Chunk spans (bertscope.core.chunking) and chunk vectors, late and naive (bertscope.chunk_embed)."""

from __future__ import annotations

import numpy as np
import pytest

import bertscope
from bertscope.core.chunking import chunk_spans, paragraph_spans, sentence_spans
from tiny_models import build_tiny_model

DOC = (
    "Berlin is the capital of Germany. The city has 3.8 million people. Mr. Smith moved there in 2019!\n\n"
    "  Paris is in France.  It has the Eiffel tower... Is it tall? Yes.\n"
    "\n\nThe U.S. has no Eiffel tower."
)


def _covered_once(text: str, spans: list[tuple[int, int]]) -> None:
    """Every non-space character is in exactly one span; spans are ordered, trimmed and non-empty."""
    count = np.zeros(len(text), dtype=int)
    for start, end in spans:
        count[start:end] += 1
        assert text[start:end] == text[start:end].strip() and text[start:end]
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)
    for char, n in zip(text, count, strict=True):
        assert n == (0 if char.isspace() else 1) or (char.isspace() and n == 1)


def test_sentences_cover_the_text_exactly() -> None:
    spans = sentence_spans(DOC)
    _covered_once(DOC, spans)
    assert [DOC[s:e] for s, e in spans] == [
        "Berlin is the capital of Germany.",
        "The city has 3.8 million people.",
        "Mr. Smith moved there in 2019!",
        "Paris is in France.",
        "It has the Eiffel tower...",
        "Is it tall?",
        "Yes.",
        "The U.S. has no Eiffel tower.",
    ]


def test_paragraphs_cover_the_text_exactly() -> None:
    spans = paragraph_spans(DOC)
    _covered_once(DOC, spans)
    assert len(spans) == 3 and DOC[spans[1][0] :].startswith("Paris")


def test_token_chunks_have_size_and_overlap(bundled: bertscope.Model) -> None:
    spans = chunk_spans(DOC, "tokens", tokenizer=bundled.tokenizer, chunk_size=8, chunk_overlap=3)
    tokens = bundled.tokenize(DOC)
    pieces = [o for o, special in zip(tokens.offsets, tokens.special_tokens_mask, strict=True) if not special]
    starts = [s for s, _ in pieces]
    ends = [e for _, e in pieces]
    assert [starts.index(s) for s, _ in spans] == list(range(0, len(pieces) - 3, 5))
    assert all(ends.index(e) - starts.index(s) + 1 <= 8 for s, e in spans)
    assert spans[-1][1] == ends[-1]  # the last piece is covered
    covered = np.zeros(len(DOC), dtype=bool)
    for s, e in spans:
        covered[s:e] = True
    assert all(covered[i] for i, c in enumerate(DOC) if not c.isspace())


@pytest.fixture(scope="module")
def byte_level(tmp_path_factory: pytest.TempPathFactory) -> bertscope.Model:
    """A tiny BERT with a byte-level BPE tokenizer: an emoji or a CJK character is several pieces."""
    folder = build_tiny_model("bert", tmp_path_factory.mktemp("bl") / "bert", byte_level=True)
    return bertscope.load(str(folder), device="cpu")


@pytest.mark.parametrize("size", [1, 2, 3])
def test_token_chunks_never_split_a_character_of_byte_pieces(byte_level: bertscope.Model, size: int) -> None:
    doc = "\U0001f600 \u6771\u4eac caf\u00e9"  # emoji, two kanji (3 byte pieces each), a space piece
    tokens = byte_level.tokenize(doc)
    pieces = [o for o, special in zip(tokens.offsets, tokens.special_tokens_mask, strict=True) if not special]
    assert pieces.count((0, 1)) == 4 and (1, 2) in pieces and doc[1:2] == " "  # what the cases rest on
    spans = chunk_spans(doc, "tokens", tokenizer=byte_level.tokenizer, chunk_size=size)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))  # in order, disjoint
    assert all(doc[s:e].strip() for s, e in spans)  # no chunk of only whitespace
    owners = [[n for n, (s, e) in enumerate(spans) if ps < e and pe > s] for ps, pe in pieces]
    assert all(len(owner) == 1 for owner in owners)  # every piece in exactly one chunk
    units = [
        {span for span, owner in zip(pieces, owners, strict=True) if owner == [n]} for n in range(len(spans))
    ]
    characters = [len({(s, e) for s, e in unit if doc[s:e].strip()}) for unit in units]
    assert all(1 <= c <= size for c in characters)  # at most `size` tokens, a character's pieces one
    result = byte_level.embed_chunks(doc, chunks="tokens", chunk_size=size)
    assert result.spans == spans and int(result.n_tokens.sum()) == len(pieces)


def test_user_spans_are_checked() -> None:
    assert chunk_spans(DOC, [(0, 6), (7, 9)]) == [(0, 6), (7, 9)]
    with pytest.raises(bertscope.InvalidInput, match="out of range"):
        chunk_spans(DOC, [(0, 6), (7, len(DOC) + 1)])
    with pytest.raises(bertscope.InvalidInput, match="overlaps"):
        chunk_spans(DOC, [(0, 10), (5, 20)])
    with pytest.raises(bertscope.InvalidInput, match="is empty"):
        chunk_spans(DOC, [(5, 5)])
    with pytest.raises(bertscope.InvalidInput, match="whitespace"):
        chunk_spans(DOC, [(DOC.index("\n\n"), DOC.index("\n\n") + 2)])
    with pytest.raises(bertscope.InvalidSpec, match="sentence, paragraph, tokens"):
        chunk_spans(DOC, "pages")


def test_late_chunks_equal_pooling_the_documents_token_vectors(bundled: bertscope.Model) -> None:
    result = bundled.embed_chunks(DOC, chunks="sentence", late=True)
    tokens = bundled.embed_tokens(DOC)[0]  # one window: the plain forward's token vectors
    assert len(tokens.tokens) < bundled.max_tokens
    for (start, end), vector, chunk in zip(result.spans, result.vectors, result.chunks, strict=True):
        rows = [
            i
            for i, (s, e) in enumerate(tokens.offsets)
            if not tokens.special_tokens_mask[i] and s < end and e > start
        ]
        expected = tokens.vectors[rows].mean(axis=0)
        np.testing.assert_allclose(vector, expected / np.linalg.norm(expected), atol=1e-5)
        assert chunk == DOC[start:end]
    assert result.spec["late"] is True and result.spec["chunks"] == "sentence"


def test_naive_chunks_equal_embedding_each_chunk_alone(bundled: bertscope.Model) -> None:
    result = bundled.embed_chunks(DOC, chunks="paragraph", late=False)
    np.testing.assert_allclose(result.vectors, bundled.embed(result.chunks).vectors, atol=1e-6)


def test_late_chunks_carry_the_documents_context(bundled: bertscope.Model) -> None:
    # "The city" only knows it is Berlin from the sentence before it.
    query = bundled.embed("How many people live in Berlin?").vectors[0]
    late = bundled.embed_chunks(DOC, late=True).vectors[1] @ query
    naive = bundled.embed_chunks(DOC, late=False).vectors[1] @ query
    assert late > naive + 0.1


def test_late_chunks_of_a_long_document_use_every_window(bundled: bertscope.Model) -> None:
    doc = " ".join(f"Sentence number {i} talks about topic {i}." for i in range(80))
    result = bundled.embed_chunks(doc, late=True)
    tokens = bundled.embed_tokens(doc, long="window")[0]  # windows stitched
    assert len(result) == 80 and len(tokens.tokens) > 2 * bundled.max_tokens
    assert result.n_dropped.sum() == 0
    start, end = result.spans[-1]
    rows = [
        i
        for i, (s, e) in enumerate(tokens.offsets)
        if not tokens.special_tokens_mask[i] and s < end and e > start
    ]
    expected = tokens.vectors[rows].mean(axis=0)
    np.testing.assert_allclose(result.vectors[-1], expected / np.linalg.norm(expected), atol=1e-5)
    with pytest.raises(bertscope.InvalidSpec, match="every token"):
        bundled.embed_chunks(doc, late=True, long="truncate")


def test_naive_chunk_longer_than_the_window_is_truncated_and_reported(bundled: bertscope.Model) -> None:
    doc = "Short one. Words " + " ".join(["word"] * 400) + "."
    with pytest.warns(bertscope.TruncatedTextsWarning, match="1 of 2"):
        result = bundled.embed_chunks(doc, late=False)
    assert result.n_dropped[0] == 0 and result.n_dropped[1] > 0
    with pytest.raises(bertscope.InputTooLong):
        bundled.embed_chunks(doc, late=False, long="error")


def test_several_documents_and_their_spans(bundled: bertscope.Model) -> None:
    docs = ["A cat. A dog.", "One long sentence about trees and leaves."]
    results = bundled.embed_chunks(docs, chunks=[[(0, 6), (7, 13)], [(4, 8)]], late=True)
    assert [r.chunks for r in results] == [["A cat.", "A dog."], ["long"]]
    with pytest.raises(bertscope.InvalidInput, match="one list of"):
        bundled.embed_chunks(docs, chunks=[(0, 6)])
    with pytest.raises(bertscope.InvalidSpec, match="pools token vectors"):
        bundled.embed_chunks(docs, pooling="cls")


def test_late_chunks_with_a_prompt_leave_the_prompt_out(bundled: bertscope.Model) -> None:
    plain = bundled.embed_chunks(DOC, late=True)
    prompted = bundled.embed_chunks(DOC, late=True, prompt="passage: ")
    assert prompted.spans == plain.spans and prompted.spec["prompt"] == "passage: "
    assert (prompted.n_tokens == plain.n_tokens).all()
    assert np.abs(prompted.vectors - plain.vectors).max() > 1e-4


def test_embed_chunks_takes_chunk_size_and_the_old_size(bundled: bertscope.Model) -> None:
    """chunk_size/chunk_overlap as the corpus jobs, `--chunk-size/--chunk-overlap` and LangChain name them;
    size/overlap, their old names, still work with a DeprecationWarning at the caller's line; a name and its
    old one together are refused in one line, whatever the values."""
    by_name = bundled.embed_chunks(DOC, chunks="tokens", chunk_size=8, chunk_overlap=3)
    assert by_name.spans == chunk_spans(
        DOC, "tokens", tokenizer=bundled.tokenizer, chunk_size=8, chunk_overlap=3
    )
    assert by_name.spec["chunk_size"] == 8 and by_name.spec["chunk_overlap"] == 3
    with pytest.warns(DeprecationWarning) as said:
        old = bundled.embed_chunks(DOC, chunks="tokens", size=8, overlap=3)
    assert [str(w.message) for w in said] == [
        "embed_chunks(size=...) is deprecated; use chunk_size=...",
        "embed_chunks(overlap=...) is deprecated; use chunk_overlap=...",
    ]
    assert all(w.filename == __file__ for w in said)
    assert old.spans == by_name.spans and np.array_equal(old.vectors, by_name.vectors)
    default = bundled.embed_chunks(DOC, chunks="tokens")
    assert default.spec["chunk_size"] == 128 and default.spec["chunk_overlap"] == 0
    for given, said_line in (
        ({"chunk_size": 8, "size": 8}, "size= is the old name of chunk_size=; give chunk_size= only"),
        (
            {"chunk_overlap": 0, "overlap": 3},
            "overlap= is the old name of chunk_overlap=; give chunk_overlap= only",
        ),
    ):
        with pytest.raises(bertscope.InvalidInput) as refused:
            bundled.embed_chunks(DOC, chunks="tokens", **given)
        assert str(refused.value) == said_line
    with pytest.raises(
        bertscope.InvalidSpec, match=r"^token chunks need chunk_size >= 1 and 0 <= chunk_overlap < "
    ):
        bundled.embed_chunks(DOC, chunks="tokens", chunk_size=4, chunk_overlap=4)


def test_chunk_embeddings_repr_is_short_and_says_its_shape(bundled: bertscope.Model) -> None:
    doc = "The cat sat on the mat. It was happy. Stocks fell sharply on Monday after the news. " * 3
    result = bundled.embed_chunks(doc, chunks="tokens", chunk_size=8)
    shown = repr(result)
    assert shown.startswith(f"ChunkEmbeddings({len(result)} chunks, vectors ({len(result)}, 384)")
    assert "pooling=mean" in shown and len(shown) < 200


@pytest.mark.parametrize(
    ("chunks", "given", "here"),
    [
        ("sentence", {"chunk_size": 5}, "chunks='sentence'"),
        ("paragraph", {"chunk_overlap": 2}, "chunks='paragraph'"),
        ([(0, 12)], {"chunk_size": 3}, "chunks given as spans"),
    ],
)
def test_chunk_sizes_off_token_chunks_are_refused_not_ignored(
    bundled: bertscope.Model, chunks: object, given: dict[str, int], here: str
) -> None:
    """Only token chunks read chunk_size/chunk_overlap: given with any other chunking they would change
    nothing, so they are refused (as a corpus job's level table refuses them), the default left alone."""
    doc = "The cat sat on the mat. It was happy. Stocks fell."
    ((name, value),) = given.items()
    with pytest.raises(bertscope.errors.InvalidSpec) as refused:
        bundled.embed_chunks(doc, chunks=chunks, **given)  # type: ignore[arg-type]
    assert str(refused.value) == (
        f"{name}={value}: it applies with chunks='tokens' ({here} here); add chunks='tokens' or drop {name}="
    )
    assert len(bundled.embed_chunks(doc, chunks=chunks).vectors) >= 1  # type: ignore[arg-type]
    assert len(bundled.embed_chunks(doc, chunks="tokens", **given).vectors) >= 1
