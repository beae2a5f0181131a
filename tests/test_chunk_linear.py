"""Chunk planning and pooling in linear time (audit 7, findings 1 and 2), with the same answers as before.

Sentence ends were found by slicing the paragraph before each mark twice (quadratic), and a run of marks
that ends no sentence was tried from each of its marks (``"." * 20_000``: 13 s); each chunk's token rows
were found by scanning every token of the document (chunks x tokens). The old code is kept here, as it
was, as the reference: the new gives the same spans and rows on varied texts, and the work it does is
counted (regex attempts, binary searches), never timed.

Pooling: each chunk's rows were summed apart (the sum of the chunks' lengths: chunk_size 10,000 with
chunk_overlap 9,999 on 20,000 tokens is 10^8 rows), and streamed blocks were joined to the rows held on
each block (blocks x tokens copied). Mean-like poolings now come from prefix sums (rows counted), max
gathers each chunk's rows once (rows copied counted); both equal the direct pooling kept here.
"""

from __future__ import annotations

import random
import re
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

import bertscope
import bertscope.chunk_embed as chunk_embed
from bertscope.chunk_embed import plan_chunks
from bertscope.core import chunk_pooling, chunking
from bertscope.core._enums import Pooling
from bertscope.core.chunk_pooling import ChunkRows, pool_spans, pool_streamed, token_rows
from bertscope.core.chunking import chunk_spans, paragraph_spans, sentence_spans
from bertscope.core.pooling import POOLINGS, pool_span
from bertscope.core.results import ChunkEmbeddings

# --- the code before the fix, verbatim: the reference -------------------------------------------------

_OLD_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s+[^\sa-z])")
_ABBREVIATIONS = chunking._ABBREVIATIONS


def _old_sentence_ends(paragraph: str) -> list[int]:
    ends = []
    for match in _OLD_END.finditer(paragraph):
        words = paragraph[: match.start()].split()
        word = words[-1] if words else ""
        stem = word.lower().lstrip("(\"'“‘")
        if stem == "no":  # "No. 5" only: "the answer is no. Then" ends a sentence
            if paragraph[match.end() :].lstrip()[:1].isdigit():
                continue
        elif stem in _ABBREVIATIONS or (
            len(stem) == 1 and stem.isalpha() and paragraph[match.start()] == "."
        ):
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


Rows = Sequence[int] | np.ndarray


def _direct(matrix: np.ndarray, rows: Iterable[Rows], pooling: Pooling) -> np.ndarray:
    """Each chunk's rows pooled apart: what `pool_spans` did for every pooling."""
    return np.stack([pool_span(matrix[np.asarray(r, dtype=np.intp)], pooling) for r in rows])


def _old_pool_streamed(blocks: Iterable[np.ndarray], rows: Sequence[Rows], pooling: Pooling) -> np.ndarray:
    """`pool_spans` over a matrix given as consecutive blocks of rows, holding only the rows of the chunks
    not yet pooled (each chunk's rows are consecutive, as `token_rows` makes them)."""
    out: np.ndarray | None = None
    index = [np.asarray(r, dtype=np.intp) for r in rows]
    # Chunks by the row that completes them, and by their first row: both taken in order, once each, so
    # the bookkeeping is linear in the chunks (a list's pop(0) and a min over those waiting were not).
    waiting = deque(sorted(range(len(index)), key=lambda number: int(index[number][-1])))
    by_first = sorted(range(len(index)), key=lambda number: int(index[number][0]))
    pooled = np.zeros(len(index), dtype=bool)
    lowest = 0  # by_first[lowest:] holds every chunk not pooled yet
    held, first = np.empty((0, 0), dtype=np.float32), 0  # rows first.. of the matrix
    for block in blocks:
        if out is None:
            out, held = np.empty((len(index), block.shape[1]), dtype=np.float32), block[:0]
        held = np.concatenate([held, block])
        while waiting and index[waiting[0]][-1] < first + len(held):
            number = waiting.popleft()
            out[number] = pool_span(held[index[number] - first], pooling)
            pooled[number] = True
        while lowest < len(by_first) and pooled[by_first[lowest]]:
            lowest += 1
        keep = int(index[by_first[lowest]][0]) if lowest < len(by_first) else first + len(held)
        held, first = held[keep - first :], keep
    assert out is not None and not waiting, "the blocks cover every chunk's rows"
    return out


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
        old = _old_rows(tokens.offsets, tokens.special_tokens_mask, spans, shift)
        if all(old):
            rows = token_rows(tokens.offsets, tokens.special_tokens_mask, spans, shift=shift)
            assert [r.tolist() for r in rows] == old, name
        else:  # the first chunk without a piece is refused, why named as embed names it (audit 18g)
            first = next(number for number, found in enumerate(old) if not found)
            with pytest.raises(bertscope.InvalidInput) as refused:
                token_rows(tokens.offsets, tokens.special_tokens_mask, spans, shift=shift)
            assert str(refused.value) == (
                f"chunk {first} {spans[first]} of document 0 holds no word piece the model sees (only "
                "control or zero-width characters, or combining marks?); give spans with text"
            ), name
    assert any(not all(_old_rows(t.offsets, t.special_tokens_mask, s, h)) for _, t, s, h in _cases(bundled))


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
        rows = token_rows(tokens.offsets, tokens.special_tokens_mask, spans)
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
        streamed = pool_streamed(iter(blocks), rows, pooling)
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
    old = _old_rows(tokens.offsets, tokens.special_tokens_mask, result.spans)
    expected = pool_spans(np.asarray(matrix, dtype=np.float32), old, Pooling.MEAN)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(result.vectors, expected, atol=1e-5)
    assert result.n_tokens.tolist() == [len(r) for r in old]


# --- pooling: prefix sums, blocks gathered once ---------------------------------------------------------


def _random_rows(rng: np.random.Generator, n_matrix: int) -> ChunkRows:
    """Runs of an ascending subset of the rows (gaps: specials, zero-width pieces), overlapping at random:
    token chunks with every overlap, chunks over the whole document, one-row chunks."""
    kept = np.flatnonzero(rng.random(n_matrix) < 0.85)
    size = int(rng.integers(1, len(kept) + 1))
    step = int(rng.integers(1, size + 1))
    starts = list(range(0, max(len(kept) - size, 0) + 1, step))
    stops = [min(a + size, len(kept)) for a in starts]
    extra = rng.integers(0, len(kept), size=(int(rng.integers(0, 8)), 2))
    starts += [0, len(kept) - 1] + extra.min(axis=1).tolist()
    stops += [len(kept), len(kept)] + (extra.max(axis=1) + 1).tolist()
    order = rng.permutation(len(starts))  # chunks in any order, as given spans may be
    return ChunkRows(kept, np.array(starts)[order], np.array(stops)[order])


def _random_blocks(rng: np.random.Generator, matrix: np.ndarray) -> list[np.ndarray]:
    """The matrix cut at random places: one block, blocks of one row, empty blocks."""
    cuts = np.sort(rng.integers(0, len(matrix) + 1, size=int(rng.integers(0, 12))))
    return np.split(matrix, cuts)


@pytest.mark.parametrize("pooling", list(POOLINGS), ids=lambda p: p.value)
def test_pooling_equals_the_direct_pooling_for_random_overlaps_and_blocks(pooling: Pooling) -> None:
    rng = np.random.default_rng(list(POOLINGS).index(pooling))
    for trial in range(150):
        n_matrix = int(rng.integers(1, 90))
        matrix = (rng.standard_normal((n_matrix, 5)) * rng.choice([1, 30])).astype(np.float32)
        matrix[0] += 100 * trial  # large sums before a chunk: the float64 differences keep the precision
        rows = _random_rows(rng, n_matrix)
        blocks = _random_blocks(rng, matrix)
        direct = _direct(matrix, rows, pooling)
        whole = pool_spans(matrix, rows, pooling)
        np.testing.assert_allclose(whole, direct, rtol=1e-6, atol=1e-5)
        np.testing.assert_array_equal(pool_streamed(iter(blocks), rows, pooling), whole)
        assert whole.dtype == np.float32
        listed = [np.asarray(r) for r in rows]  # any rows: pooled chunk by chunk, as before
        np.testing.assert_array_equal(pool_streamed(iter(blocks), listed, pooling), direct)


def test_a_chunk_that_starts_blocks_after_the_last_one_pooled_reads_its_own_rows(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rows held were cut at the next chunk's first row even when the blocks had not reached it yet,
    # so the rows that came next were taken for later ones: spans far apart on a streamed document (or
    # an empty first block) pooled the wrong token vectors.
    matrix = np.arange(10, dtype=np.float32)[:, None]
    rows = [np.arange(0, 2), np.arange(6, 8)]
    blocks = [matrix[:3], matrix[3:]]
    assert _old_pool_streamed(iter(blocks), rows, Pooling.MEAN).ravel().tolist() == [0.5, 3.5]  # not 6.5
    assert pool_streamed(iter(blocks), rows, Pooling.MEAN).ravel().tolist() == [0.5, 6.5]
    assert pool_streamed(iter([matrix[:0], matrix]), rows[1:], Pooling.MAX).ravel().tolist() == [7.0]
    doc = _DOC * 3  # about 370 tokens: one matrix, or 4 windows with LONG_TOKENS at 100 (spans 3 apart)
    cases = [(spans, pooling) for spans in ([(0, 30), (len(doc) - 40, len(doc))], [(len(doc) - 40, len(doc))])
             for pooling in ("mean", "max")]  # fmt: skip
    whole = [bundled.embed_chunks(doc, chunks=spans, pooling=pooling).vectors for spans, pooling in cases]
    monkeypatch.setattr(chunk_embed, "LONG_TOKENS", 100)
    for (spans, pooling), expected in zip(cases, whole, strict=True):
        streamed = bundled.embed_chunks(doc, chunks=spans, pooling=pooling).vectors
        np.testing.assert_allclose(streamed, expected, atol=1e-6, err_msg=f"{spans} {pooling}")


@pytest.fixture
def summed(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Rows read: summed by prefix sums (cumsum), pooled one chunk at a time (pool_span), joined."""
    work = {"summed": 0, "pooled": 0, "joined": 0}
    real_cumsum, real_concatenate, real_pool = np.cumsum, np.concatenate, chunk_pooling.pool_span

    def cumsum(a: Any, *args: Any, **kwargs: Any) -> Any:
        work["summed"] += len(a) if np.ndim(a) == 2 else 0  # rows of vectors (np.unique sums counts)
        return real_cumsum(a, *args, **kwargs)

    def concatenate(arrays: Any, *args: Any, **kwargs: Any) -> Any:
        arrays = list(arrays)
        work["joined"] += sum(len(a) for a in arrays)
        return real_concatenate(arrays, *args, **kwargs)

    def pooled(block: np.ndarray, pooling: Pooling) -> np.ndarray:
        work["pooled"] += len(block)
        return real_pool(block, pooling)

    monkeypatch.setattr(np, "cumsum", cumsum)
    monkeypatch.setattr(np, "concatenate", concatenate)
    monkeypatch.setattr(chunk_pooling, "pool_span", pooled)
    monkeypatch.setitem(globals(), "pool_span", pooled)  # the old code's, here
    return work


@pytest.mark.parametrize("pooling", [Pooling.MEAN, Pooling.MEAN_SQRT_LEN, Pooling.FIRST_LAST_AVG])
def test_mean_pooling_reads_tokens_plus_chunks_rows_whatever_the_overlap(
    summed: dict[str, int], pooling: Pooling
) -> None:
    # chunk_size n/2 with overlap n/2 - 1: n/2 chunks of n/2 rows, n^2/4 rows pooled apart; by prefix
    # sums each row is summed once, plus one running total a block.
    for n in (1000, 2000, 4000):
        matrix = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        size = n // 2
        rows = ChunkRows(np.arange(n), np.arange(n - size + 1), np.arange(size, n + 1))
        blocks = [matrix[i : i + 100] for i in range(0, n, 100)]
        for key in summed:
            summed[key] = 0
        streamed = pool_streamed(iter(blocks), rows, pooling)
        assert summed == {"summed": n + len(blocks), "pooled": 0, "joined": 0}
        summed["summed"] = 0
        assert pool_spans(matrix, rows, pooling).tobytes() == streamed.tobytes()
        assert summed["summed"] == n + 1 and summed["pooled"] == 0
    summed["pooled"] = 0
    _old_pool_streamed(iter(blocks), list(rows), pooling)
    assert summed["pooled"] == (n - size + 1) * size  # before: every chunk's rows, 2,002,000 rows


def test_streamed_max_pooling_copies_each_chunks_rows_once(summed: dict[str, int]) -> None:
    # One chunk over a whole book and its sentences, 200 blocks: each block was joined to the rows held
    # (all of them, the first chunk pending to the end), blocks x tokens rows copied.
    n = 20_000
    matrix = np.random.default_rng(1).standard_normal((n, 3)).astype(np.float32)
    rows = [np.arange(n)] + [np.arange(a, min(a + 30, n)) for a in range(0, n, 30)]
    blocks = [matrix[i : i + 100] for i in range(0, n, 100)]
    streamed = pool_streamed(iter(blocks), rows, Pooling.MAX)
    lengths = sum(len(r) for r in rows)
    assert summed["joined"] <= lengths and summed["pooled"] == lengths
    np.testing.assert_array_equal(streamed, _direct(matrix, rows, Pooling.MAX))
    summed["joined"] = 0
    _old_pool_streamed(iter(blocks), rows, Pooling.MAX)
    assert summed["joined"] > 50 * lengths  # before: 2,010,000 rows joined


def test_late_chunks_pool_from_prefix_sums(bundled: bertscope.Model, summed: dict[str, int]) -> None:
    # End to end on the bundled model, one window and streamed in blocks: token chunks of 60 pieces
    # sharing 59 pool (mean) as the old rows pooled one by one, reading each token once.
    doc = _DOC * 4
    tokens = bundled.tokenize([doc], long="window")[0]
    matrix = np.asarray(bundled.embed_tokens(doc, long="window")[0].vectors, dtype=np.float32)
    for pooling in ("mean", "max", "mean_sqrt_len"):
        for long_tokens in (chunk_embed.LONG_TOKENS, 100):
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(chunk_embed, "LONG_TOKENS", long_tokens)  # 100: streamed in windows
                for key in summed:
                    summed[key] = 0
                result = bundled.embed_chunks(
                    doc, chunks="tokens", chunk_size=60, chunk_overlap=59, pooling=pooling, normalize=False
                )
            pooled_apart = summed["pooled"]
            old = _old_rows(tokens.offsets, tokens.special_tokens_mask, result.spans)
            expected = _direct(matrix, old, Pooling(pooling))
            np.testing.assert_allclose(result.vectors, expected, rtol=1e-6, atol=1e-5)
            assert result.n_tokens.tolist() == [len(r) for r in old]
            lengths = sum(map(len, old))
            assert pooled_apart == (lengths if pooling == "max" else 0), (pooling, long_tokens)


# --- chunks embedded alone (late=False) ---------------------------------------------------------------


def _old_naive(
    engine: Any, docs: list[str], spans: list[Any], spec: Any, recorded: dict[str, object], on_batch: Any
) -> Iterator[ChunkEmbeddings]:
    """chunk_embed._naive before it streamed (verbatim): every chunk text made at once."""
    texts = [doc[s:e] for doc, doc_spans in zip(docs, spans, strict=True) for s, e in doc_spans]
    result = engine.sentences_once(texts, spec, on_batch=on_batch)
    start = 0
    for doc, doc_spans in zip(docs, spans, strict=True):
        stop = start + len(doc_spans)
        yield ChunkEmbeddings(
            text=doc,
            chunks=texts[start:stop],
            spans=doc_spans,
            vectors=result.vectors[start:stop],
            n_tokens=result.n_tokens[start:stop],
            n_dropped=result.n_dropped[start:stop],
            spec=recorded,
        )
        start = stop


_NAIVE_DOCS = [_DOC, "Hi there. " * 200, "short one."]
# The streaming test's: its second document (302 tokens) is still past the bundled model's 256-token
# window, so chunks of 400 pieces are truncated or windowed; half of _NAIVE_DOCS' forwards, run twice.
_STREAM_DOCS = [_DOC, "Hi there. " * 100, "short one."]
_NAIVE_CHUNKINGS: list[dict[str, Any]] = [
    {"chunks": "tokens", "chunk_size": 40, "chunk_overlap": 30},  # overlapping token chunks
    {"chunks": "tokens", "chunk_size": 400, "chunk_overlap": 350},  # longer than the window: truncated
    {"chunks": "tokens", "chunk_size": 400, "chunk_overlap": 350, "long": "window"},
    {"chunks": "sentence"},
    {"chunks": "paragraph", "pooling": "max"},
]


@pytest.mark.parametrize(
    "chunk_size", [None, 5]
)  # the engine's texts a pass: its own, or 5 (a document's chunks over several passes)
def test_chunks_embedded_alone_stream_the_same_vectors(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch, chunk_size: int | None
) -> None:
    engine = bundled.engine
    if chunk_size is not None:
        monkeypatch.setattr(engine, "chunk_size", chunk_size)
    window = bundled.engine.tokenizer.max_tokens
    assert len(bundled.tokenize(_STREAM_DOCS[1], long="window")) > window  # a chunk longer than it
    for options in _NAIVE_CHUNKINGS:
        plan = plan_chunks(bundled, _STREAM_DOCS, late=False, **options)
        new = list(
            chunk_embed.iter_chunk_embeddings(
                engine, zip(plan.docs, plan.spans, strict=True), plan.spec, late=False, settings=plan.settings
            )
        )
        recorded = {**plan.spec.as_dict(), **plan.settings, "late": False}
        old = list(_old_naive(engine, plan.docs, plan.spans, plan.spec, recorded, None))
        assert len(new) == len(old) == len(_STREAM_DOCS)
        for a, b in zip(new, old, strict=True):
            assert a.vectors.tobytes() == b.vectors.tobytes(), options  # the same batches: bit for bit
            assert (a.chunks, a.spans, a.spec) == (b.chunks, b.spans, b.spec)
            # n_tokens: the chunk's own pieces, where the old count took its [CLS] and [SEP] in too
            assert (a.n_tokens + 2).tolist() == b.n_tokens.tolist(), options
            assert a.n_dropped.tolist() == b.n_dropped.tolist()


class _Counted(str):
    """A str whose slices are _Counted too, counting the instances alive (`alive[0]`) and the most seen."""

    alive = [0]

    def __new__(cls, text: str) -> _Counted:
        cls.alive[0] += 1
        return super().__new__(cls, text)

    def __del__(self) -> None:
        type(self).alive[0] -= 1

    def __getitem__(self, key: Any) -> Any:
        return _Counted(str.__getitem__(self, key))


def test_chunks_embedded_alone_hold_one_pass_of_chunk_texts(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 104 chunks sharing 19 of their 20 pieces, the engine taking 8 texts a pass: the texts alive while
    # the chunks run are one pass's, where all 104 were made (and held) before the first forward.
    engine = bundled.engine
    monkeypatch.setattr(engine, "chunk_size", 8)
    plan = plan_chunks(bundled, _DOC, late=False, chunks="tokens", chunk_size=20, chunk_overlap=19)
    seen: list[int] = []
    real, real_fitted = engine.sentences, engine.fitted_sentences

    def sentences(texts: Any, spec: Any, **kwargs: Any) -> Iterator[Any]:
        for part in real(texts, spec, **kwargs):
            seen.append(_Counted.alive[0] - 1)  # chunk texts alive as a pass is embedded (less the document)
            yield part

    def fitted_sentences(fitted: Any, spec: Any, **kwargs: Any) -> Any:
        seen.append(_Counted.alive[0] - 1)  # the chunks run alone now: one pass's texts, prepared
        return real_fitted(fitted, spec, **kwargs)

    monkeypatch.setattr(engine, "sentences", sentences)
    monkeypatch.setattr(engine, "fitted_sentences", fitted_sentences)
    doc = _Counted(plan.docs[0])
    recorded: dict[str, object] = {}
    (result,) = chunk_embed.iter_chunk_embeddings(
        engine, [(doc, plan.spans[0])], plan.spec, late=False, settings=recorded
    )
    assert len(result.chunks) == plan.count == 104 and len(seen) == 13
    assert max(seen) <= 8
    assert isinstance(result.chunks[0], _Counted)  # the result's texts: made once its vectors are
    del result
    seen.clear()
    list(_old_naive(engine, [doc], plan.spans, plan.spec, recorded, None))
    assert min(seen) == 104  # before: every chunk's text, from the first pass to the last


@pytest.mark.parametrize("options", _NAIVE_CHUNKINGS)
def test_tokens_run_alone_are_what_the_chunks_run(bundled: bertscope.Model, options: dict[str, Any]) -> None:
    # Counted from each document's token rows, with no forward: the tokens the run reports, where a
    # chunk's text alone may tokenize a word its span cuts into one piece more (3 in 2,690 here at most).
    plan = plan_chunks(bundled, _NAIVE_DOCS, late=False, **options)
    counted = plan.tokens_run_alone(bundled.engine)
    # each chunk's n_tokens is its own pieces; run alone, it ran them with its [CLS] and [SEP]
    ran = sum(int(r.n_tokens.sum()) + 2 * len(r.n_tokens) for r in plan.run(bundled.engine, progress=False))
    assert abs(counted - ran) <= ran // 500, (counted, ran)
    overlapping = plan_chunks(
        bundled, "Hi there. " * 300, late=False, chunks="tokens", chunk_size=800, chunk_overlap=799
    )
    window = bundled.engine.tokenizer.max_tokens
    assert overlapping.tokens_run_alone(bundled.engine) == 101 * window  # 101 chunks, each a whole window
    assert plan_chunks(bundled, _DOC, chunks="tokens").tokens_run_alone(bundled.engine) == 0  # late: once


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("The answer is no. Then we left.", ["The answer is no.", "Then we left."]),
        ("See No. 5 of the list. Ok.", ["See No. 5 of the list.", "Ok."]),
        ("He left. A. Smith came in.", ["He left.", "A. Smith came in."]),
        ("we met J. Smith. Ok.", ["we met J. Smith.", "Ok."]),
        (
            "John F. Kennedy spoke. Then J. R. R. Tolkien wrote.",
            ["John F. Kennedy spoke.", "Then J. R. R. Tolkien wrote."],
        ),
        ("A. Smith came. It rained.", ["A. Smith came.", "It rained."]),
    ],
)
def test_no_ends_a_sentence_unless_a_number_follows(text: str, sentences: list[str]) -> None:
    """Audit 16d: 'no.' was always 'No. 5', so 'the answer is no. Then' was one sentence; a lone capital
    stays an initial wherever it is ('vitamin C. Then' reads as 'met J. Smith')."""
    from bertscope.core.chunking import sentence_spans

    assert [text[a:b] for a, b in sentence_spans(text)] == sentences


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("日本語です。次の文です。", ["日本語です。", "次の文です。"]),
        ("我爱你！你爱我吗？是的。", ["我爱你！", "你爱我吗？", "是的。"]),
        ("「こんにちは。」次。", ["「こんにちは。」", "次。"]),
        ("日本語です。。。次！", ["日本語です。。。", "次！"]),
        ("هل أنت بخير؟ نعم أنا بخير.", ["هل أنت بخير؟", "نعم أنا بخير."]),
        ("यह एक वाक्य है। यह दूसरा है।", ["यह एक वाक्य है।", "यह दूसरा है।"]),
        ("Il est là. élève arrive.", ["Il est là. élève arrive."]),
        ("Il est là. Élève arrive.", ["Il est là.", "Élève arrive."]),
        ("Really？! Yes.", ["Really？!", "Yes."]),  # one run of marks of both kinds is one end (review)
        ("本当？! はい。", ["本当？!", "はい。"]),
    ],
)
def test_sentences_end_at_the_marks_of_other_scripts(text: str, sentences: list[str]) -> None:
    """Audit 18g: a Japanese, Chinese, Arabic or Hindi document was one sentence (only . ! ? … followed by
    space ended one), so late chunking gave the whole document one vector; and a lowercase letter past
    ASCII ('é') was read as a capital that starts a sentence."""
    from bertscope.core.chunking import sentence_spans

    assert [text[a:b] for a, b in sentence_spans(text)] == sentences


def test_a_run_of_full_width_marks_at_the_end_is_one_sentence() -> None:
    """Backtracking inside a run of 。 at a paragraph's end cut its last mark off as a sentence of its own."""
    from bertscope.core.chunking import sentence_spans

    for text in ("。" * 2000, "終わり。" + "。" * 2000, "終わり" + "！？" * 1000):
        assert sentence_spans(text) == [(0, len(text))]


def test_a_lone_combining_mark_is_refused_for_the_same_reason_by_embed_and_embed_chunks(
    bundled: bertscope.Model,
) -> None:
    """embed named combining marks as a cause, embed_chunks did not (audit 18g): the uncased model drops
    the accent, and the document was said to hold only control or zero-width characters."""
    why = "(only control or zero-width characters, or combining marks?); give it some text"
    for call in (lambda: bundled.embed("\u0301"), lambda: bundled.embed_chunks("\u0301", chunks="tokens")):
        with pytest.raises(bertscope.InvalidInput) as refused:
            call()
        assert str(refused.value).endswith(why), str(refused.value)
