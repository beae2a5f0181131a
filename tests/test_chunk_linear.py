"""Chunk planning in linear time (audit 7, findings 1 and 2), with the same answers as before.

Sentence ends were found by slicing the paragraph before each mark twice (quadratic), and a run of marks
that ends no sentence was tried from each of its marks (``"." * 20_000``: 13 s); each chunk's token rows
were found by scanning every token of the document (chunks x tokens). The old code is kept here, as it
was, as the reference: the new gives the same spans and rows on varied texts, and the work it does is
counted (regex attempts, binary searches), never timed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.chunk_embed import _pool_streamed, plan_chunks, pool_spans, token_rows
from bertscope.core import chunking
from bertscope.core._enums import Pooling
from bertscope.core.chunking import chunk_spans, paragraph_spans, sentence_spans

# --- the code before the fix, verbatim: the reference -------------------------------------------------

_OLD_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s+[^\sa-z])")
_ABBREVIATIONS = chunking._ABBREVIATIONS


def _old_sentence_ends(paragraph: str) -> list[int]:
    ends = []
    for match in _OLD_END.finditer(paragraph):
        word = paragraph[: match.start()].rsplit(None, 1)[-1] if paragraph[: match.start()].strip() else ""
        stem = word.lower().lstrip("(\"'“‘")
        if stem in _ABBREVIATIONS or (len(stem) == 1 and stem.isalpha() and paragraph[match.start()] == "."):
            continue
        ends.append(match.end())
    return ends


def _old_sentence_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for p_start, p_end in paragraph_spans(text):
        start = p_start
        for end in _old_sentence_ends(text[p_start:p_end]):
            spans += chunking._trimmed(text, start, p_start + end)
            start = p_start + end
        spans += chunking._trimmed(text, start, p_end)
    return spans


def _old_rows(
    offsets: Sequence[tuple[int, int]],
    special: Sequence[bool],
    spans: Sequence[tuple[int, int]],
    shift: int = 0,
) -> list[list[int]]:
    """`_late`'s usable offsets and `_rows_in` for every span; None where a chunk held no piece."""
    usable = [
        (s - shift, e - shift) if not sp and e > s and s >= shift else None
        for (s, e), sp in zip(offsets, special, strict=True)
    ]
    return [
        [i for i, o in enumerate(usable) if o is not None and o[0] < end and o[1] > start]
        for start, end in spans
    ]


# --- sentences ------------------------------------------------------------------------------------------

_PIECES = [
    "Mr.", "e.g.", "(e.g.", '"', "“Dr.", "‘St.", "A.", "a.", "x.", " ", "  ", "\n", "\n\n", "\n \n", "...",
    "!?", "’", ")", "]", "Word", "lower", "İ.", "Σ.", "ΑΣ.", "\u00a0", "\u2003", "\x1c", "…", "'", "U.S.",
    "Sept.", "corp.", "'(mr.", "((", ".", "?", "\t", "Z", "\u3000", "Etc.", "ok", "1.", "no.",
]  # fmt: skip


def test_sentences_are_cut_as_before_on_varied_texts() -> None:
    rng = random.Random(7)
    texts = ["".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 40))) for _ in range(6000)]
    texts += ["Hi there. " * 50, "a" + "." * 500 + "x", "A" * 300 + ". " * 300, '"' * 200 + ". " * 200]
    texts += ["Dr. Who met Mr. Smith. He said hi! Then: “Yes.” (See e.g. Fig. 2.) Done?  Ok.\n\nNext one."]
    differ = [t for t in texts if sentence_spans(t) != _old_sentence_spans(t)]
    assert differ == []
    assert chunk_spans(texts[-1], "sentence") == _old_sentence_spans(texts[-1])


def test_the_word_sweep_reads_whitespace_as_split_and_strip_do() -> None:
    # The sweep finds words with the regex \S+ where the old code split with str.split(): the same only
    # if both call the same characters whitespace, every code point checked.
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    by_regex = {m.start() for m in re.finditer(r"\s", every)}
    assert by_regex == {i for i, c in enumerate(every) if c.isspace()}


def test_a_run_of_marks_that_ends_no_sentence_is_cut_as_before() -> None:
    # Tried from each of its marks, "." * 20,000 took 13 s (bench/BENCHMARKS.md); the look-behind tries
    # it once, and no match can start inside a run (a match takes the whole run: whitespace must follow).
    for n in (1, 2, 100, 400):
        for text in ("a" + "." * n + "x", "a" + "." * n + " b", "A" + "!?" * n + ") B", "." * n + " X"):
            assert sentence_spans(text) == _old_sentence_spans(text), text[:20]


def test_the_word_before_each_mark_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Counted work: the characters of the words the sweep reads (each word once), against the prefixes
    # the old code sliced (two per mark, each from the paragraph's start).
    read: list[int] = []
    real = chunking._WORD

    class Counting:
        pattern = real.pattern

        def finditer(self, text: str) -> Any:
            for match in real.finditer(text):
                read.append(match.end() - match.start())
                yield match

    monkeypatch.setattr(chunking, "_WORD", Counting())
    for n in (1000, 2000, 4000):
        read.clear()
        text = "Hi there. " * n
        assert sentence_spans(text) == _old_sentence_spans(text)
        assert sum(read) <= len(text.replace(" ", ""))  # each word read at most once: linear


# --- token rows -----------------------------------------------------------------------------------------

_DOC = (
    "Dr. Smith arrived in Berlin. The city, however, was asleep!  Nobody answered.\n\n"
    "A second paragraph: caf\u00e9 na\u00efve \u200b zero\u200bwidth. Ünïcödé words; numbers 3.14 and 2,000. "
) * 3


def _cases(model: bertscope.Model) -> list[tuple[str, Any, list[tuple[int, int]], int]]:
    """(name, tokens, spans, shift): sentence, paragraph, overlapping token chunks, spans cutting pieces,
    spans of zero-width characters only, a prompt before the text."""
    tokens = model.tokenize([_DOC], long="window")[0]
    overlapping = chunk_spans(_DOC, "tokens", tokenizer=model.tokenizer, chunk_size=7, chunk_overlap=5)
    cases: list[tuple[str, Any, list[tuple[int, int]], int]] = [
        ("sentence", tokens, sentence_spans(_DOC), 0),
        ("paragraph", tokens, paragraph_spans(_DOC), 0),
        (
            "tokens",
            tokens,
            overlapping,
            0,
        ),
        ("cut pieces", tokens, [(0, 2), (2, 3), (5, 31), (31, 90), (100, len(_DOC))], 0),
        ("overlapping", tokens, [(0, len(_DOC)), (3, 40), (0, 5), (len(_DOC) - 9, len(_DOC))], 0),
    ]
    zero = _DOC.index("\u200b")
    cases.append(("zero-width only", tokens, [(0, 10), (zero, zero + 1), (zero + 1, zero + 20)], 0))
    prompt = "query: "
    prompted = model.tokenize([prompt + _DOC], long="window")[0]
    cases.append(("prompt", prompted, sentence_spans(_DOC), len(prompt)))
    long_doc = _DOC * 40  # past one window: the rows index the whole document's tokens
    cases.append(("long", model.tokenize([long_doc], long="window")[0], sentence_spans(long_doc), 0))
    return cases


def test_token_rows_are_the_rows_the_scan_found(bundled: bertscope.Model) -> None:
    for name, tokens, spans, shift in _cases(bundled):
        old = _old_rows(tokens.offsets, tokens.special_mask, spans, shift)
        if all(old):
            rows = token_rows(tokens.offsets, tokens.special_mask, spans, shift=shift)
            assert [r.tolist() for r in rows] == old, name
        else:  # the first chunk without a piece is refused, in the old words
            first = next(number for number, found in enumerate(old) if not found)
            with pytest.raises(bertscope.InvalidInput) as refused:
                token_rows(tokens.offsets, tokens.special_mask, spans, shift=shift)
            assert str(refused.value) == (
                f"chunk {first} {spans[first]} holds no word piece the model sees (only control or "
                "zero-width characters?); give spans with text"
            ), name
    assert any(not all(_old_rows(t.offsets, t.special_mask, s, h)) for _, t, s, h in _cases(bundled))


def test_token_rows_are_found_by_binary_search_not_a_scan(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counted work: two searches over the tokens for all the chunks, and no per-chunk scan (the path kept
    # for offsets out of order) on a real tokenizer's offsets.
    searches: list[int] = []
    real = np.searchsorted

    def counted(a: Any, v: Any, side: Any = "left") -> Any:
        searches.append(len(v))
        return real(a, v, side=side)

    monkeypatch.setattr(np, "searchsorted", counted)
    for n in (500, 1000, 2000):
        searches.clear()
        doc = "Hi there. " * n
        tokens = bundled.tokenize([doc], long="window")[0]
        spans = sentence_spans(doc)
        rows = token_rows(tokens.offsets, tokens.special_mask, spans)
        assert searches == [n, n]  # one vectorised search of the n chunks in each direction
        assert [r.tolist() for r in rows] == [[3 * i + 1, 3 * i + 2, 3 * i + 3] for i in range(n)]


def test_offsets_out_of_order_still_give_the_scans_rows() -> None:
    rng = random.Random(3)
    for _ in range(300):
        n = rng.randint(1, 30)
        offsets = [(a, a + rng.randint(0, 4)) for a in (rng.randint(0, 40) for _ in range(n))]
        special = [rng.random() < 0.15 for _ in range(n)]
        spans = [(s, s + rng.randint(1, 15)) for s in (rng.randint(0, 40) for _ in range(rng.randint(1, 6)))]
        shift = rng.choice([0, 0, 2])
        old = _old_rows(offsets, special, spans, shift)
        if all(old):
            rows = token_rows(offsets, special, spans, shift=shift)
            assert [r.tolist() for r in rows] == old, (offsets, special, spans, shift)
        else:
            with pytest.raises(bertscope.InvalidInput, match="holds no word piece"):
                token_rows(offsets, special, spans, shift=shift)


def test_streamed_pooling_of_overlapping_rows_equals_the_whole_matrix() -> None:
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((300, 4)).astype(np.float32)
    rows = [np.arange(s, min(300, s + 40)) for s in range(0, 300, 7)]  # token chunks: overlapping
    rows += [np.arange(0, 300), np.arange(150, 151), np.arange(5, 9)]  # out of order, one whole
    blocks = [matrix[i : i + 23] for i in range(0, 300, 23)]
    for pooling in (Pooling.MEAN, Pooling.MAX):
        streamed = _pool_streamed(iter(blocks), rows, pooling)
        np.testing.assert_array_equal(streamed, pool_spans(matrix, rows, pooling))


# --- the plan, counted as it is cut ---------------------------------------------------------------------


def test_plan_chunks_tells_its_caller_the_count_and_stops_when_it_raises(bundled: bertscope.Model) -> None:
    heard: list[int] = []

    class Enough(Exception):
        pass

    def on_count(count: int, spec: Any) -> None:
        heard.append(count)
        if count >= 3000:
            raise Enough

    doc = "Hi there. " * 10_000
    with pytest.raises(Enough):
        plan_chunks(bundled, doc, chunks="sentence", on_count=on_count)
    assert heard == [1024, 2048, 3072]  # stopped within the document, 6,928 sentences uncut
    heard.clear()
    docs = ["One. Two.", "Three."]
    plan = plan_chunks(bundled, docs, chunks="sentence", on_count=lambda count, _: heard.append(count))
    assert heard == [2] and plan.spans == [[(0, 4), (5, 9)], [(0, 6)]]
    assert plan.spans == [chunk_spans(d, "sentence") for d in docs]


def test_late_chunks_answer_as_the_old_rows_pool(bundled: bertscope.Model) -> None:
    # End to end: the vectors of late chunks equal the token matrix pooled over the old scan's rows.
    doc = _DOC
    result = bundled.embed_chunks(doc, chunks="tokens", chunk_size=9, chunk_overlap=4)
    tokens = bundled.tokenize([doc], long="window")[0]
    matrix = bundled.embed_tokens(doc, long="window")[0].vectors
    old = _old_rows(tokens.offsets, tokens.special_mask, result.spans)
    expected = pool_spans(np.asarray(matrix, dtype=np.float32), old, Pooling.MEAN)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(result.vectors, expected, atol=1e-5)
    assert result.n_tokens.tolist() == [len(r) for r in old]
