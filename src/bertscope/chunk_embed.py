"""Chunk vectors of documents: late (the whole document once, token vectors pooled per span) or naive.

Late chunking (Günther et al. 2024): the document runs through the model once, long ones in
overlapping windows stitched as everywhere else, and each chunk's vector pools the document-context
token vectors whose characters fall in its span, so a chunk keeps what the rest of its document says.
Naive chunking embeds each chunk's text alone, exactly as `Model.embed` would.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from functools import cache
from itertools import islice
from typing import Any

import numpy as np

from .core._enums import Combine, LongText, Pooling
from .core.chunking import ChunkBy, Span, iter_chunk_spans, refuse_unread_sizes
from .core.encoder import Encoder
from .core.engine import LONG_TOKENS, EmbedSpec, Engine, OnBatch
from .core.pooling import POOLINGS, pool_span
from .core.post import PostProcessor
from .core.progress import progress_callback
from .core.results import ChunkEmbeddings
from .core.spec import EmbedOptions, resolve
from .core.tokens import check_texts
from .errors import InvalidInput, InvalidSpec

__all__ = [
    "ChunkPlan", "ChunkRows", "embed_chunks", "plan_chunks", "late_spec", "iter_chunk_embeddings",
    "pool_spans", "token_rows",
]  # fmt: skip

_DOCS_PER_GROUP = 64
# One chunk's token rows: an int array (`token_rows`) or any sequence of ints.
Rows = Sequence[int] | np.ndarray
# How often `plan_chunks` tells its caller the chunks cut so far, within a document.
_COUNT_EVERY = 1024


def late_spec(spec: EmbedSpec) -> EmbedSpec:
    """The spec late chunking runs with: every token kept (windows), pooling that can pool a span."""
    if spec.pooling not in POOLINGS:
        raise InvalidSpec(
            f"late chunking pools token vectors over each chunk's span; pooling={spec.pooling.value!r} "
            f"reads one token for the whole text. Use {', '.join(p.value for p in POOLINGS)} (or late=False)"
        )
    if spec.combine is Combine.STACK and len(spec.layers) > 1:
        # A chunk vector is pooled like a sentence vector, which keeps no layer apart (as embed refuses).
        raise InvalidSpec(
            "combine='stack' keeps each layer's vector apart, which only token and word rows store; "
            "pool chunk vectors with combine mean, sum or concat"
        )
    if spec.long is LongText.TRUNCATE:
        raise InvalidSpec(
            "late chunking needs every token of the document; use long='window' (the default for late "
            "chunks) or 'error', or late=False to embed each chunk alone"
        )
    return spec


def iter_chunk_embeddings(
    engine: Engine,
    docs: Iterable[tuple[str, list[Span]]],
    spec: EmbedSpec,
    *,
    late: bool,
    settings: dict[str, object],
    on_batch: OnBatch | None = None,
) -> Iterator[ChunkEmbeddings]:
    """Each (document, its chunk spans) as ChunkEmbeddings (vectors (chunks, d)), in input order.

    Documents go through the model a group at a time, so memory is bounded on any number of them.
    """
    iterator = iter(docs)
    recorded = {**spec.as_dict(), **settings, "late": late}
    while group := list(islice(iterator, _DOCS_PER_GROUP)):
        texts = [doc for doc, _ in group]
        spans = [doc_spans for _, doc_spans in group]
        if late:
            yield from _late(engine, texts, spans, spec, recorded, on_batch)
        else:
            yield from _naive(engine, texts, spans, spec, recorded, on_batch)


def _late(
    engine: Engine,
    docs: list[str],
    spans: list[list[Span]],
    spec: EmbedSpec,
    recorded: dict[str, object],
    on_batch: OnBatch | None,
) -> Iterator[ChunkEmbeddings]:
    shift = len(spec.prompt)
    fitted = engine.prepare(docs, spec)
    short = iter(
        engine.fitted_token_matrices([t for t in fitted if len(t) <= LONG_TOKENS], spec, on_batch=on_batch)
    )
    for doc, doc_spans, tokens in zip(docs, spans, fitted, strict=True):
        rows = token_rows(tokens.offsets, tokens.special_mask, doc_spans, shift=shift)
        if len(tokens) <= LONG_TOKENS:
            vectors = pool_spans(next(short)[1], rows, spec.pooling)
        else:  # a book-length document: its token vectors a few windows at a time, never whole
            # progress in tokens as its windows run, the document counted once at its end
            vectors = _pool_streamed(engine.token_blocks(tokens, spec, on_batch=on_batch), rows, spec.pooling)
        if spec.normalize:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        yield ChunkEmbeddings(
            text=doc,
            chunks=[doc[s:e] for s, e in doc_spans],
            spans=doc_spans,
            vectors=vectors,
            n_tokens=_lengths(rows),
            n_dropped=np.zeros(len(doc_spans), dtype=np.int64),
            spec=recorded,
        )


def _naive(
    engine: Engine,
    docs: list[str],
    spans: list[list[Span]],
    spec: EmbedSpec,
    recorded: dict[str, object],
    on_batch: OnBatch | None,
) -> Iterator[ChunkEmbeddings]:
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


def pool_spans(matrix: np.ndarray, rows: ChunkRows | Sequence[Rows], pooling: Pooling) -> np.ndarray:
    """(chunks, d) float32: the token vectors `matrix` (tokens, d) pooled over each chunk's token rows."""
    factor = _sum_factor(pooling)
    if isinstance(rows, ChunkRows) and factor is not None:
        return _pool_by_sums([matrix], rows, factor)
    out = np.empty((len(rows), matrix.shape[1]), dtype=np.float32)
    for number, index in enumerate(rows):
        out[number] = pool_span(matrix[np.asarray(index, dtype=np.intp)], pooling)
    return out


def _pool_streamed(
    blocks: Iterable[np.ndarray], rows: ChunkRows | Sequence[Rows], pooling: Pooling
) -> np.ndarray:
    """`pool_spans` over a matrix given as consecutive blocks of rows (ascending rows in each chunk, as
    `token_rows` makes them), holding only what the chunks not yet pooled need."""
    factor = _sum_factor(pooling)
    if isinstance(rows, ChunkRows) and factor is not None:
        return _pool_by_sums(blocks, rows, factor)
    return _pool_held(blocks, rows, pooling)


@cache
def _sum_factor(pooling: Pooling) -> Callable[[np.ndarray], np.ndarray] | None:
    """For a pooling that is a span's row sum times a factor of its length (mean, mean_sqrt_len), that
    factor for each length (float64); None for one that is not (max): it pools each chunk's rows."""
    rule = POOLINGS.get(pooling)
    weights = None if rule is None else rule.weights
    if weights is None:
        return None

    def one_of(n: int) -> float:
        # A linear rule's weights are the kept mask times a factor of how many are kept: (1, n - 1) keeps
        # n in two entries, the first weighing the factor of n. O(1) for any n, where ones(n) is O(n).
        return float(weights(np.array([1.0, n - 1.0]))[0])

    if any(not np.allclose(weights(np.ones(n)), one_of(n), rtol=1e-12, atol=0) for n in (1, 2, 3, 7)):
        return None  # weights that depend on more than the count (by position): pooled chunk by chunk

    def factors(lengths: np.ndarray) -> np.ndarray:
        distinct, where = np.unique(lengths, return_inverse=True)
        return np.array([one_of(int(n)) for n in distinct.tolist()], dtype=np.float64)[where.reshape(-1)]

    return factors


def _pool_by_sums(
    blocks: Iterable[np.ndarray], rows: ChunkRows, factor: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """(chunks, d) float32 of a linear pooling from prefix sums over the kept rows, read once in blocks.

    S[j] is the float64 sum of the first j kept rows; chunk i is (S[stops[i]] - S[starts[i]]) x the
    factor of its length: tokens + chunks row-vectors of work whatever the overlap, where summing each
    chunk's rows was the sum of the chunks' lengths (chunk_size 10,000, overlap 9,999 on 20,000 tokens:
    10^8 rows). Memory: a block's sums and S at the starts of the chunks not yet pooled.
    """
    kept, starts, stops = rows.kept, rows.starts, rows.stops
    factors = factor(stops - starts)
    by_stop = np.argsort(stops, kind="stable")
    stop_order = stops[by_stop]
    # S at each distinct start, kept per block of starts (the first's number among the distinct, the
    # sums) while a chunk begun there is not pooled: chunks are pooled a block at a time, not one by one.
    distinct, which = np.unique(starts, return_inverse=True)
    which = which.reshape(-1)
    waiting = np.bincount(which, minlength=len(distinct))  # chunks not pooled yet, by their start
    saved: dict[int, tuple[np.ndarray, int]] = {}  # first distinct start -> (S there and on, chunks)
    out: np.ndarray | None = None
    total = np.empty(0)
    done = begun = ended = first = 0  # kept rows summed, distinct starts and chunks passed, first row
    for block in blocks:
        if out is None:
            out, total = np.empty((len(starts), block.shape[1]), np.float32), np.zeros(block.shape[1])
        high = int(np.searchsorted(kept, first + len(block)))  # kept[done:high] lie in this block
        # sums[k] = S[done + k]: the running total carried on, added row by row as one cumsum would
        sums = np.cumsum(np.vstack([total[None], block[kept[done:high] - first]], dtype=np.float64), axis=0)
        upto = int(np.searchsorted(distinct, high, side="right"))
        if upto > begun:  # copies: a view would hold the whole block's sums
            saved[begun] = (sums[distinct[begun:upto] - done], int(waiting[begun:upto].sum()))
            begun = upto
        last = int(np.searchsorted(stop_order, high, side="right"))
        numbers = by_stop[ended:last]
        ended = last
        if len(numbers):
            at = which[numbers]
            at_start = np.empty((len(numbers), len(total)))
            keys = np.fromiter(saved, dtype=np.intp, count=len(saved))  # ascending: made in order
            group = np.searchsorted(keys, at, side="right") - 1
            for k in np.unique(group).tolist():
                held, left = saved[int(keys[k])]
                mine = group == k
                at_start[mine] = held[at[mine] - keys[k]]
                left -= int(mine.sum())
                if left:
                    saved[int(keys[k])] = (held, left)
                else:
                    del saved[int(keys[k])]
            out[numbers] = (sums[stops[numbers] - done] - at_start) * factors[numbers, None]
        total, done, first = sums[-1], high, first + len(block)
    assert out is not None and ended == len(stops), "the blocks cover every chunk's rows"
    return out


def _pool_held(
    blocks: Iterable[np.ndarray], rows: ChunkRows | Sequence[Rows], pooling: Pooling
) -> np.ndarray:
    """Each chunk's rows pooled as they are whole: the blocks held in a list from the first row a chunk
    not yet pooled needs, and a chunk's rows gathered from the blocks it spans, never a running
    concatenation (a chunk over a whole book copied blocks x tokens rows)."""
    out: np.ndarray | None = None
    index = [np.asarray(r, dtype=np.intp) for r in rows]
    # Chunks by the row that completes them, and by their first row: both taken in order, once each, so
    # the bookkeeping is linear in the chunks (a list's pop(0) and a min over those waiting were not).
    waiting = deque(sorted(range(len(index)), key=lambda number: int(index[number][-1])))
    by_first = sorted(range(len(index)), key=lambda number: int(index[number][0]))
    pooled = np.zeros(len(index), dtype=bool)
    lowest = 0  # by_first[lowest:] holds every chunk not pooled yet
    held: list[np.ndarray] = []
    firsts: list[int] = []  # the first row of each held block
    end = 0  # rows given so far
    for block in blocks:
        if out is None:
            out = np.empty((len(index), block.shape[1]), dtype=np.float32)
        held.append(block)
        firsts.append(end)
        end += len(block)
        starts = np.asarray(firsts, dtype=np.intp)
        while waiting and index[waiting[0]][-1] < end:
            number = waiting.popleft()
            out[number] = pool_span(_gather(held, starts, index[number]), pooling)
            pooled[number] = True
        while lowest < len(by_first) and pooled[by_first[lowest]]:
            lowest += 1
        keep = int(index[by_first[lowest]][0]) if lowest < len(by_first) else end
        gone = int(np.searchsorted(np.add(firsts, [len(b) for b in held]), keep, side="right"))
        del held[:gone], firsts[:gone]  # blocks that no chunk left needs
    assert out is not None and not waiting, "the blocks cover every chunk's rows"
    return out


def _gather(held: Sequence[np.ndarray], starts: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The rows `index` (ascending) of the matrix the held blocks (starting at rows `starts`) hold:
    copied from the blocks they lie in, as many rows as the chunk has."""
    low = int(np.searchsorted(starts, index[0], side="right")) - 1
    high = int(np.searchsorted(starts, index[-1], side="right"))
    if high - low == 1:
        return held[low][index - starts[low]]
    cuts = np.searchsorted(index, starts[low + 1 : high]).tolist()
    parts = np.split(index, cuts)
    return np.concatenate([held[low + k][part - starts[low + k]] for k, part in enumerate(parts)])


class ChunkRows:
    """Each chunk's token rows as a run of one ascending array: chunk i's rows are kept[starts[i]:stops[i]].

    What `token_rows` finds on offsets in order; a sequence of int arrays to read, and runs to pool: a
    linear pooling (mean) pools every chunk from prefix sums over `kept`, whatever the overlap.
    """

    def __init__(self, kept: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> None:
        self.kept = np.asarray(kept, dtype=np.intp)
        self.starts = np.asarray(starts, dtype=np.intp)
        self.stops = np.asarray(stops, dtype=np.intp)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, number: int) -> np.ndarray:
        return self.kept[self.starts[number] : self.stops[number]]

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self.kept[a:b] for a, b in zip(self.starts.tolist(), self.stops.tolist(), strict=True))


def _lengths(rows: ChunkRows | Sequence[Rows]) -> np.ndarray:
    """(chunks,) int64: how many token rows each chunk has."""
    if isinstance(rows, ChunkRows):
        return (rows.stops - rows.starts).astype(np.int64)
    return np.array([len(r) for r in rows], dtype=np.int64)


def token_rows(
    offsets: Iterable[Span], special_mask: Sequence[bool], spans: Sequence[Span], *, shift: int = 0
) -> ChunkRows | list[np.ndarray]:
    """Each span's token rows (int arrays): the tokens, special ones left out, whose characters (less
    `shift`, a prompt's) overlap it; a piece cut by a span boundary counts for both.

    One sweep: tokenizers give offsets in order, so the rows of a span are the tokens that start before
    its end among those that end after its start, found by binary search; (tokens + chunks) log tokens,
    where a scan of every token for every chunk was tokens x chunks (80 KB of short sentences: 20 s on
    the service's one worker); the rows come as runs of the kept tokens (`ChunkRows`). Offsets out of
    order (no tokenizer seen gives them) are scanned per chunk, each chunk's rows an array of its own.
    """
    pairs = np.asarray(list(offsets), dtype=np.int64).reshape(-1, 2)
    starts, ends = pairs[:, 0], pairs[:, 1]
    kept = np.flatnonzero(~np.asarray(special_mask, dtype=bool) & (ends > starts) & (starts >= shift))
    starts, ends = starts[kept] - shift, ends[kept] - shift
    bounds = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    if np.all(starts[1:] >= starts[:-1]) and np.all(ends[1:] >= ends[:-1]):
        lows = np.searchsorted(ends, bounds[:, 0], side="right")  # the first that ends after the start
        highs = np.searchsorted(starts, bounds[:, 1], side="left")  # the first that starts at the end
        rows: ChunkRows | list[np.ndarray] = ChunkRows(kept, lows, np.maximum(highs, lows))
    else:
        rows = [kept[(starts < end) & (ends > start)] for start, end in bounds.tolist()]
    for number in np.flatnonzero(_lengths(rows) == 0)[:1].tolist():  # the first empty chunk
        raise InvalidInput(
            f"chunk {number} {tuple(spans[number])} holds no word piece the model sees (only control or "
            "zero-width characters?); give spans with text"
        )
    return rows


@dataclass(frozen=True)
class ChunkPlan:
    """Documents cut into chunks, with the spec they run under: what `embed_chunks` embeds.

    Planned apart from the run so that a caller (the service) can bound the answer (`count` chunks)
    before any forward pass, and the spans made here are the ones embedded.
    """

    docs: list[str]
    spans: list[list[Span]]
    spec: EmbedSpec
    late: bool
    settings: dict[str, Any]
    post: PostProcessor | None = None

    @property
    def count(self) -> int:
        """How many chunks all the documents have together."""
        return sum(map(len, self.spans))

    @property
    def pooled_chunk_by_chunk(self) -> bool:
        """Whether late pooling reads each chunk's token vectors apart (max), not from prefix sums (mean)."""
        return self.late and _sum_factor(self.spec.pooling) is None

    def rows_read_one_by_one(self, engine: Engine) -> int:
        """Token vectors late pooling reads chunk by chunk: the sum of the chunks' lengths in word pieces
        where the pooling has no prefix-sum form (max), 0 where it has (mean: read once in all) or the
        chunks are embedded alone. Tokenizes the documents as the run will, with no forward."""
        if not self.pooled_chunk_by_chunk:
            return 0
        shift, total = len(self.spec.prompt), 0
        for doc, spans in zip(self.docs, self.spans, strict=True):
            tokens = engine.prepare([doc], self.spec)[0]
            total += int(_lengths(token_rows(tokens.offsets, tokens.special_mask, spans, shift=shift)).sum())
        return total

    def run(self, engine: Engine, *, progress: bool | None = None) -> list[ChunkEmbeddings]:
        """Each document's ChunkEmbeddings, in input order."""
        with progress_callback(len(self.docs), enabled=progress) as on_batch:
            chunked = iter_chunk_embeddings(
                engine,
                zip(self.docs, self.spans, strict=True),
                self.spec,
                late=self.late,
                settings=self.settings,
                on_batch=on_batch,
            )
            results = list(chunked)
        if self.post is not None:
            # As the chunk store and `embed` do: every chunk vector post-processed, the processor recorded.
            for result in results:
                result.vectors = self.post.apply(result.vectors)
                result.spec = {**result.spec, "post": self.post.describe()}
        return results


def plan_chunks(
    encoder: Encoder,
    docs: str | Sequence[str],
    *,
    chunks: ChunkBy | str | Sequence[Any] = "sentence",
    late: bool = True,
    chunk_size: int = 128,
    chunk_overlap: int = 0,
    long: LongText | str | None = None,
    on_count: Callable[[int, EmbedSpec], None] | None = None,
    **options: Any,
) -> ChunkPlan:
    """Check the documents and options and cut each document into chunk spans (see `embed_chunks`).

    `on_count` hears the chunks cut so far and the spec they run under while more are to come (every
    `_COUNT_EVERY` chunks, and after each document but the last; the plan's `count` is the total): a
    caller may raise there to stop before the rest is cut (the service refuses an answer already over
    its limit, or stops a plan whose client left).
    """
    items = check_texts(docs)
    recipe = resolve(encoder, EmbedOptions.given(long=long or ("window" if late else "truncate"), **options))
    spec = recipe.spec
    if late:
        spec = late_spec(spec)
    per_doc = _spans_per_doc(chunks, items, isinstance(docs, str))
    spans: list[list[Span]] = []
    count = 0
    for index, (text, given) in enumerate(zip(items, per_doc, strict=True)):
        found: list[Span] = []
        cut = iter_chunk_spans(
            text, given, tokenizer=encoder.tokenizer, chunk_size=chunk_size, chunk_overlap=chunk_overlap
        )
        with closing(cut):  # stopped by `on_count`, the cutting ends there, not when it is collected
            for span in cut:
                found.append(span)
                count += 1
                if on_count is not None and count % _COUNT_EVERY == 0:
                    on_count(count, spec)
        if not found:
            # Only token chunks can come out empty: a text whose characters the tokenizer drops.
            raise InvalidInput(
                f"document {index} ({text[:20]!r}) gives no word pieces to chunk (only control or "
                "zero-width characters?); give it some text"
            )
        spans.append(found)
        if on_count is not None and index + 1 < len(items):
            on_count(count, spec)
    settings: dict[str, Any] = {"chunks": _chunks_name(chunks)}
    if settings["chunks"] == ChunkBy.TOKENS.value:
        settings.update(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return ChunkPlan(items, spans, spec, late, settings, recipe.post)


def embed_chunks(
    encoder: Encoder,
    docs: str | Sequence[str],
    *,
    chunks: ChunkBy | str | Sequence[Any] = "sentence",
    late: bool = True,
    chunk_size: int = 128,
    chunk_overlap: int = 0,
    long: LongText | str | None = None,
    progress: bool | None = None,
    **options: Any,
) -> Any:
    """Chunk vectors of a document (ChunkEmbeddings) or of each of a list of documents (a list).

    `options` are `Encoder.spec`'s; see `Model.embed_chunks` for the chunkings.
    """
    plan = plan_chunks(
        encoder, docs, chunks=chunks, late=late, chunk_size=chunk_size, chunk_overlap=chunk_overlap,
        long=long, **options,
    )  # fmt: skip
    results = plan.run(encoder.engine, progress=progress)
    return results[0] if isinstance(docs, str) else results


def _spans_per_doc(chunks: Any, docs: list[str], single: bool) -> list[Any]:
    """The chunking of each document: one name for all, or the user's spans (one list per document)."""
    if isinstance(chunks, str):
        return [chunks] * len(docs)
    if single:
        return [chunks]
    if not isinstance(chunks, Sequence) or len(chunks) != len(docs):
        raise InvalidInput(
            f"for {len(docs)} documents give one list of (start, end) spans per document, or a chunking name"
        )
    return list(chunks)


def refuse_idle_sizes(chunks: Any, **sizes: int | None) -> None:
    """Refuse `chunk_size`/`chunk_overlap` given (not None) with chunks other than 'tokens'
    (`core.chunking.refuse_unread_sizes`, as a corpus job's level table refuses them)."""
    refuse_unread_sizes(_chunks_name(chunks), **sizes)


def _chunks_name(chunks: Any) -> str:
    return str(ChunkBy.parse(chunks, what="chunking").value) if isinstance(chunks, str) else "spans"
