"""Chunk vectors of documents: late (the whole document once, token vectors pooled per span) or naive.

Late chunking (Günther et al. 2024): the document runs through the model once, long ones in
overlapping windows stitched as everywhere else, and each chunk's vector pools the document-context
token vectors whose characters fall in its span, so a chunk keeps what the rest of its document says.
Naive chunking embeds each chunk's text alone, exactly as `Model.embed` would.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from contextvars import copy_context
from dataclasses import dataclass, replace
from functools import partial
from itertools import islice
from typing import Any

import numpy as np

from .core._enums import Combine, LongText
from .core.chunk_pooling import (
    ChunkRows,
    chunk_lengths,
    empty_chunk,
    pool_spans,
    pool_streamed,
    sum_factor,
    token_rows,
)
from .core.chunking import ChunkBy, Span, check_late, iter_chunk_spans, refuse_unread_sizes
from .core.encoder import Encoder
from .core.engine import LONG_TOKENS, EmbedSpec, Engine, OnBatch
from .core.finite import refuse_non_finite
from .core.pooling import POOLINGS
from .core.post import PostProcessor
from .core.progress import progress_callback
from .core.results import ChunkEmbeddings, SentenceEmbeddings
from .core.segments import chunks as text_groups
from .core.spec import EmbedOptions, resolve
from .core.texts_given import shortened_pair
from .core.tokens import NO_PIECES_WHY, Tokens, check_texts, is_pair, named_as, say_cut, text_named
from .errors import InputTooLong, InvalidInput, InvalidSpec

__all__ = [
    "ChunkPlan", "ChunkRows", "embed_chunks", "plan_chunks", "late_spec", "iter_chunk_embeddings",
    "pool_spans", "token_rows",
]  # fmt: skip

# `_pool_streamed`: its name before it moved to core/chunk_pooling.py (tests/test_blocks.py reads it here)
_pool_streamed = pool_streamed
_DOCS_PER_GROUP = 64
# How often `plan_chunks` tells its caller the chunks cut so far, within a document.
_COUNT_EVERY = 1024


def late_spec(spec: EmbedSpec) -> EmbedSpec:
    """The spec late chunking runs with: every token kept (windows), pooling that can pool a span, and
    mask_special True: a chunk pools the tokens of its span, where no special token lies, whatever was
    asked (recorded as it is done, so that a store's query is pooled as its chunks were)."""
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
    return replace(spec, mask_special=True)


def iter_chunk_embeddings(
    engine: Engine,
    docs: Iterable[tuple[str, list[Span]]],
    spec: EmbedSpec,
    *,
    late: bool,
    settings: dict[str, object],
    on_batch: OnBatch | None = None,
    named: Callable[[int], str] | None = None,
) -> Iterator[ChunkEmbeddings]:
    """Each (document, its chunk spans) as ChunkEmbeddings (vectors (chunks, d)), in input order.

    Documents go through the model a group at a time, so memory is bounded on any number of them.
    A document or chunk over the model's limit under long='error' is refused by `named(its number)`
    (counted from 0 over all the documents; by default "document 3", or as `core.tokens.named_as` names
    it) and its chunk's number.
    """
    if named is None:
        named = partial(text_named, "document")
    iterator = iter(docs)
    recorded = {**spec.as_dict(), **settings, "late": late}
    first = 0  # the number of the group's first document
    while group := list(islice(iterator, _DOCS_PER_GROUP)):
        texts = [doc for doc, _ in group]
        spans = [doc_spans for _, doc_spans in group]
        try:
            # the group's documents named by their number among all (`first` on), as `_too_long` names them
            name = partial(_offset_named, named, first)
            if late:
                yield from _late(engine, texts, spans, spec, recorded, on_batch, name)
            else:
                yield from _naive(engine, texts, spans, spec, recorded, on_batch, name)
        except InputTooLong:
            # The engine numbers the texts of one call: a group's documents, or their chunks flattened.
            raise _too_long(engine, texts, spans, spec, late, named, first) from None
        first += len(group)


def _offset_named(named: Callable[[int], str], first: int, number: int) -> str:
    return named(first + number)


def _too_long(
    engine: Engine,
    docs: list[str],
    spans: list[list[Span]],
    spec: EmbedSpec,
    late: bool,
    named: Callable[[int], str],
    first: int,
) -> InputTooLong:
    """The refusal of the first document (late) or chunk (not late) over the model's limit under
    long='error', by its document's name (`named`, the group's first numbered `first`) and its chunk's
    number, with only the fixes that work there.

    Found again on the way out of the engine's refusal (error path only), which numbers the texts of one
    call as it was handed them."""
    limit = engine.tokenizer.max_tokens
    whole = replace(spec, long=LongText.WINDOW)  # every piece counted, never refused
    for k, (doc, doc_spans) in enumerate(zip(docs, spans, strict=True), first):
        if late:
            if (n := len(engine.prepare([doc], whole)[0])) > limit:
                return InputTooLong(
                    f"{named(k)} has {n} tokens but the model takes at most {limit}; use long='window' "
                    "(overlapping windows stitched, the default for late chunks) to pool every token"
                )
            continue
        for number, (s, e) in enumerate(doc_spans):
            if (n := len(engine.prepare([doc[s:e]], whole)[0])) > limit:
                return InputTooLong(
                    f"chunk {number} ({s}, {e}) of {named(k)} has {n} tokens but the model takes at most "
                    f"{limit}; use long='truncate' (drops the chunk's end, reported) or long='window' "
                    "(overlapping windows), smaller chunks, or late=True (each document once, windowed)"
                )
    raise AssertionError("the engine refused a text over the model's limit, and none is")


def _late(
    engine: Engine,
    docs: list[str],
    spans: list[list[Span]],
    spec: EmbedSpec,
    recorded: dict[str, object],
    on_batch: OnBatch | None,
    named: Callable[[int], str],
) -> Iterator[ChunkEmbeddings]:
    shift = len(spec.prompt)
    fitted = engine.prepare(docs, spec)
    short = iter(
        engine.fitted_token_matrices([t for t in fitted if len(t) <= LONG_TOKENS], spec, on_batch=on_batch)
    )
    for number, (doc, doc_spans, tokens) in enumerate(zip(docs, spans, fitted, strict=True)):
        offsets = _document_offsets(tokens.offsets, shift)
        rows = token_rows(offsets, tokens.special_tokens_mask, doc_spans, shift=shift, document=named(number))
        if len(tokens) <= LONG_TOKENS:
            vectors = pool_spans(next(short)[1], rows, spec.pooling)
        else:  # a book-length document: its token vectors a few windows at a time, never whole
            # progress in tokens as its windows run, the document counted once at its end
            vectors = pool_streamed(engine.token_blocks(tokens, spec, on_batch=on_batch), rows, spec.pooling)
        if spec.normalize:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        yield ChunkEmbeddings(
            text=doc,
            chunks=[doc[s:e] for s, e in doc_spans],
            spans=doc_spans,
            vectors=vectors,
            n_tokens=chunk_lengths(rows),
            n_dropped=np.zeros(len(doc_spans), dtype=np.int64),
            spec=recorded,
        )


def _document_offsets(offsets: Sequence[Span], shift: int) -> Sequence[Span]:
    """The tokens' offsets in the prompted text, a token the prompt shares with the document's first word
    (no space after the prompt: "pre" + "fix is" gives "prefix") starting where the document does: it
    counts for the chunks it overlaps, as a piece a span boundary cuts does and as `embed` pools it,
    where `token_rows` leaves out every token that starts in the prompt."""
    if not shift:
        return offsets
    pairs = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    shared = (pairs[:, 0] < shift) & (pairs[:, 1] > shift)
    if not shared.any():
        return offsets
    pairs[shared, 0] = shift
    return [(int(start), int(end)) for start, end in pairs.tolist()]


def _naive(
    engine: Engine,
    docs: list[str],
    spans: list[list[Span]],
    spec: EmbedSpec,
    recorded: dict[str, object],
    on_batch: OnBatch | None,
    named: Callable[[int], str],
) -> Iterator[ChunkEmbeddings]:
    # The chunk texts made as the engine takes them (`engine.chunk_size` at a time) and dropped once
    # embedded, each document's result in turn: made all at once, chunks sharing most of their text held
    # chunks x chunk_size characters (chunk_size 10,000, chunk_overlap 9,999 on 20,000 pieces: ~500 MB).
    texts = (doc[s:e] for doc, doc_spans in zip(docs, spans, strict=True) for s, e in doc_spans)
    parts = _by_chunk(_alone(engine, texts, spec, on_batch), spans, named)
    pending: list[SentenceEmbeddings] = []  # embedded rows not handed out yet, in order
    for doc, doc_spans in zip(docs, spans, strict=True):
        n = len(doc_spans)
        while sum(map(len, pending)) < n:
            pending.append(next(parts))
        rows = pending[0] if len(pending) == 1 else SentenceEmbeddings.joined(pending)
        yield ChunkEmbeddings(
            text=doc,
            chunks=[doc[s:e] for s, e in doc_spans],
            spans=doc_spans,
            vectors=rows.vectors[:n],
            n_tokens=rows.n_tokens[:n],
            n_dropped=rows.n_dropped[:n],
            spec=recorded,
        )
        rest = replace(
            rows, vectors=rows.vectors[n:], n_tokens=rows.n_tokens[n:], n_dropped=rows.n_dropped[n:]
        )
        pending = [rest] if len(rest) else []


def _alone(
    engine: Engine, texts: Iterator[str], spec: EmbedSpec, on_batch: OnBatch | None
) -> Iterator[SentenceEmbeddings]:
    """`engine.sentences` of the chunk texts (`engine.chunk_size` at a time), each row's n_tokens the
    chunk's own word pieces pooled, specials and the prompt's pieces left out, as late chunks count them
    (the engine's n_tokens counts every token run: [CLS] and [SEP] made a two-piece chunk 4)."""
    start = 0  # the group's first chunk's number among all: the engine's refusals name "text N" by it
    for group in text_groups(texts, engine.chunk_size):  # hands freed memory back between groups
        with named_as(partial(_numbered_from, start)):
            fitted = engine.prepare(group, spec)
        rows = engine.fitted_sentences(fitted, spec, on_batch=on_batch)
        own = np.array([_own_pieces(tokens, len(spec.prompt)) for tokens in fitted], dtype=np.int64)
        start += len(group)
        # one group's prepared pieces (~110 MB for 4,096 chunks of 122 tokens) are dropped before the
        # rows go downstream: held across the yield, two groups' were alive as the next was prepared
        del fitted, group
        yield replace(rows, n_tokens=own)


def _numbered_from(start: int, kind: str, index: int) -> str:
    return f"{kind} {start + index}"


def _own_pieces(tokens: Tokens, shift: int) -> int:
    """The word pieces of a chunk's text kept (after truncation): not special, not wholly in the prompt
    (a piece the prompt shares with the chunk's first word is the chunk's, as `_document_offsets` has it)."""
    special = np.asarray(tokens.special_tokens_mask, dtype=bool)
    pairs = np.asarray(tokens.offsets, dtype=np.int64).reshape(-1, 2)
    in_prompt = (pairs[:, 0] < shift) & (pairs[:, 1] <= shift)
    return int(np.count_nonzero(~special & ~in_prompt))


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
        return self.late and sum_factor(self.spec.pooling) is None

    def rows_read_one_by_one(self, engine: Engine) -> int:
        """Token vectors late pooling reads chunk by chunk: the sum of the chunks' lengths in word pieces
        where the pooling has no prefix-sum form (max), 0 where it has (mean: read once in all) or the
        chunks are embedded alone. Tokenizes the documents as the run will, with no forward."""
        if not self.pooled_chunk_by_chunk:
            return 0
        return sum(int(chunk_lengths(rows).sum()) for _, rows in self._rows(engine, self.spec))

    def tokens_run_alone(self, engine: Engine) -> int:
        """Tokens the chunks embedded alone (late=False) run through the model, with no forward: each
        chunk's word pieces in its document plus the special tokens and prompt its own text gets, at most
        the model's window where long text is truncated; 0 for late chunks (each document runs once).

        Chunks that share most of their text each run it again: chunk_size 10,000 with chunk_overlap
        9,999 runs a 20,000-piece document's 10,001 chunks, 10,001 windows of the model, not 20,000
        tokens. Read from each document's token rows (as late pooling finds them), not by tokenizing
        every chunk: a chunk's text alone may cut a word its span splits into one more piece."""
        if self.late:
            return 0
        whole = replace(self.spec, long=LongText.WINDOW)  # every piece of the document, to find the rows
        window = engine.tokenizer.max_tokens
        total = 0
        for tokens, rows in self._rows(engine, whole):
            special = np.asarray(tokens.special_tokens_mask, dtype=bool)
            starts = np.asarray(tokens.offsets, dtype=np.int64).reshape(-1, 2)[:, 0]
            added = int(special.sum() + np.count_nonzero(~special & (starts < len(self.spec.prompt))))
            lengths = chunk_lengths(rows) + added
            if self.spec.long is LongText.TRUNCATE:
                lengths = np.minimum(lengths, window)
            total += int(lengths.sum())
        return total

    def _rows(self, engine: Engine, spec: EmbedSpec) -> Iterator[tuple[Tokens, ChunkRows | list[np.ndarray]]]:
        """Each document tokenized under `spec` (one at a time), with its chunks' token rows."""
        for number, (doc, spans) in enumerate(zip(self.docs, self.spans, strict=True)):
            tokens = engine.prepare([doc], spec)[0]
            shift = len(spec.prompt)
            named = text_named("document", number)
            offsets = _document_offsets(tokens.offsets, shift)
            yield tokens, token_rows(offsets, tokens.special_tokens_mask, spans, shift=shift, document=named)

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
        refuse_non_finite([r.vectors for r in results])  # by document: the library's and the service's
        if self.post is not None:
            # As the chunk store and `embed` do: every chunk vector post-processed, the processor recorded.
            for result in results:
                result.vectors = self.post.apply(result.vectors, check_finite=False)
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
    items = _checked_documents(docs)
    late = check_late(late)
    if chunks is None or not isinstance(chunks, str | Sequence | np.ndarray):
        raise InvalidSpec(
            f"chunks={chunks!r}: give 'sentence', 'paragraph' or 'tokens', or (start, end) spans per document"
        )
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
            text, given, tokenizer=encoder.tokenizer, chunk_size=chunk_size, chunk_overlap=chunk_overlap,
            document=text_named("document", index),
        )  # fmt: skip
        with closing(cut):  # stopped by `on_count`, the cutting ends there, not when it is collected
            for span in cut:
                found.append(span)
                count += 1
                if on_count is not None and count % _COUNT_EVERY == 0:
                    on_count(count, spec)
        if not found:
            # Only token chunks can come out empty: a text whose characters the tokenizer drops.
            raise InvalidInput(
                f"{text_named('document', index)} ({text[:20]!r}) gives no word pieces to chunk "
                f"({NO_PIECES_WHY}); give it some text"
            )
        spans.append(found)
        if on_count is not None and index + 1 < len(items):
            on_count(count, spec)
    settings: dict[str, Any] = {"chunks": _chunks_name(chunks)}
    if settings["chunks"] == ChunkBy.TOKENS.value:
        settings.update(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return ChunkPlan(items, spans, spec, late, settings, recipe.post)


def _checked_documents(docs: object) -> list[str]:
    """`check_texts` naming each input a document ("document 1 is empty"), as embed_chunks' other
    refusals do, through the caller's naming (`named_as`: the command line's numbers and ids); a bare
    (A, B) tuple refused, as embed refuses it."""
    if isinstance(docs, tuple) and is_pair(docs):  # as embed refuses it: ("Q?", "A.") may be meant a pair
        a, b = shortened_pair(docs)
        raise InvalidInput(
            f"a bare tuple {(a, b)!r} reads two ways, one pair or two documents, and chunks take no pairs: "
            f"pass the list {[a, b]!r} for two documents"
        )
    outer = copy_context()  # the caller's naming, read from outside the one set here
    with named_as(lambda kind, i: outer.run(text_named, "document" if kind == "text" else kind, i)):
        return check_texts(docs)


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
    if not late:  # chunks embedded alone are cut at the window as `embed` cuts a text: never in silence
        cut = np.concatenate([r.n_dropped for r in results])
        say_cut(cut, encoder.max_tokens, "late chunking (late=True) or long='window' keeps every token")
    return results[0] if isinstance(docs, str) else results


# The engine's refusal of a text with no word pieces (`TextTokenizer.fit`), its texts being the chunks
_NO_PIECES = re.compile(r"^text (\d+) \(.*\) gives no word pieces", re.S)


def _by_chunk(
    parts: Iterator[SentenceEmbeddings], spans: list[list[Span]], named: Callable[[int], str]
) -> Iterator[SentenceEmbeddings]:
    """The engine's parts; its refusal of "text N", the Nth chunk of the group's documents, said by the
    document's name (`named`, by its number in the group) and the chunk's, as the late path says it."""
    try:
        while True:
            # The engine's "text N" is the Nth chunk, not a text the caller's naming (`named_as`) knows:
            # each part made under the plain "text N", the caller's naming kept between parts.
            with named_as(_plain_named):
                part = next(parts, None)
            if part is None:
                return
            yield part
    except InvalidInput as exc:
        found = _NO_PIECES.match(str(exc))
        if found is None:
            raise
        flat = int(found.group(1))
        for document, doc_spans in enumerate(spans):
            if flat < len(doc_spans):
                raise empty_chunk(named(document), flat, doc_spans[flat]) from None
            flat -= len(doc_spans)
        raise


def _plain_named(kind: str, index: int) -> str:
    return f"{kind} {index}"


def _spans_per_doc(chunks: Any, docs: list[str], single: bool) -> list[Any]:
    """The chunking of each document: one name for all, or the user's spans (one list per document)."""
    if isinstance(chunks, str):
        return [chunks] * len(docs)
    if single:
        return [chunks]
    if not isinstance(chunks, Sequence | np.ndarray) or len(chunks) != len(docs):
        raise InvalidInput(
            f"for {len(docs)} documents give one list of (start, end) spans per document, or a chunking name"
        )
    for number, given in enumerate(chunks):
        if len(given) and isinstance(given[0], int | float | np.number):
            # [[0, 3], [4, 7]] for two documents: the spans of one, not a list of spans for each
            raise InvalidInput(
                f"chunks entry {number} ({_shown(given)}) is one span, where a list of {len(docs)} "
                "document(s) takes a list of spans for each: give (start, end) spans per document, e.g. "
                "[[(0, 3)], [(4, 7)]] for two"
            )
    return list(chunks)


def _shown(given: Any) -> str:
    return repr(given.tolist() if isinstance(given, np.ndarray) else given)


def refuse_idle_sizes(chunks: Any, **sizes: int | None) -> None:
    """Refuse `chunk_size`/`chunk_overlap` given (not None) with chunks other than 'tokens'
    (`core.chunking.refuse_unread_sizes`, as a corpus job's level table refuses them)."""
    refuse_unread_sizes(_chunks_name(chunks), **sizes)


def _chunks_name(chunks: Any) -> str:
    return str(ChunkBy.parse(chunks, what="chunking").value) if isinstance(chunks, str) else "spans"
