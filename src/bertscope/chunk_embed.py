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
    "ChunkPlan", "embed_chunks", "plan_chunks", "late_spec", "iter_chunk_embeddings", "pool_spans",
    "token_rows",
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
            n_tokens=np.array([len(r) for r in rows], dtype=np.int64),
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


def pool_spans(matrix: np.ndarray, rows: Sequence[Rows], pooling: Pooling) -> np.ndarray:
    """(chunks, d) float32: the token vectors `matrix` (tokens, d) pooled over each chunk's token rows."""
    out = np.empty((len(rows), matrix.shape[1]), dtype=np.float32)
    for number, index in enumerate(rows):
        out[number] = pool_span(matrix[np.asarray(index, dtype=np.intp)], pooling)
    return out


def _pool_streamed(blocks: Iterable[np.ndarray], rows: Sequence[Rows], pooling: Pooling) -> np.ndarray:
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


def token_rows(
    offsets: Iterable[Span], special_mask: Sequence[bool], spans: Sequence[Span], *, shift: int = 0
) -> list[np.ndarray]:
    """Each span's token rows (int arrays): the tokens, special ones left out, whose characters (less
    `shift`, a prompt's) overlap it; a piece cut by a span boundary counts for both.

    One sweep: tokenizers give offsets in order, so the rows of a span are the tokens that start before
    its end among those that end after its start, found by binary search; (tokens + chunks) log tokens,
    where a scan of every token for every chunk was tokens x chunks (80 KB of short sentences: 20 s on
    the service's one worker). Offsets out of order (no tokenizer seen gives them) are scanned per chunk.
    """
    pairs = np.asarray(list(offsets), dtype=np.int64).reshape(-1, 2)
    starts, ends = pairs[:, 0], pairs[:, 1]
    kept = np.flatnonzero(~np.asarray(special_mask, dtype=bool) & (ends > starts) & (starts >= shift))
    starts, ends = starts[kept] - shift, ends[kept] - shift
    bounds = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    if np.all(starts[1:] >= starts[:-1]) and np.all(ends[1:] >= ends[:-1]):
        lows = np.searchsorted(ends, bounds[:, 0], side="right")  # the first that ends after the start
        highs = np.searchsorted(starts, bounds[:, 1], side="left")  # the first that starts at the end
        rows = [kept[low:high] for low, high in zip(lows.tolist(), highs.tolist(), strict=True)]
    else:
        rows = [kept[(starts < end) & (ends > start)] for start, end in bounds.tolist()]
    for number, found in enumerate(rows):
        if not len(found):
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
