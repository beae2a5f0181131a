"""The service's document routes: POST /v2/embed_chunks, chunk vectors as `Model.embed_chunks` makes them.

The documents are cut into chunks before any forward pass, so the answer is bounded (chunks x width,
--max-answer-floats) before the worker is asked; the spans cut here are the ones embedded. The chunks are
counted as they are cut: an answer over the limit is refused (413) as soon as the count passes it, the
rest of the documents uncut, and a plan whose client left stops at its next count. Late max pooling,
which reads each chunk's token vectors apart (mean pools any overlap from prefix sums), is refused
(413) before the forward when its chunks would read too many (`_READS_PER_TOKEN`). Chunks embedded alone
(late=false) are counted as they run, overlaps run again (`ChunkPlan.tokens_run_alone`), against
--max-request-tokens before the forward, and that count is their share of the worker's queue.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Response
from fastapi.concurrency import run_in_threadpool

from ..chunk_embed import ChunkPlan, plan_chunks, refuse_idle_sizes
from ..core._enums import Combine
from ..core.spec import EmbedSpec
from .answers import Items, answer
from .error_answers import OverBudget
from .feature_schemas import ChunksRequest, ChunksResponse

if TYPE_CHECKING:
    from .service import Service

__all__ = ["chunk_routes"]


def chunk_routes(app: FastAPI, svc: Service) -> None:
    """POST /v2/embed_chunks."""

    @app.post("/v2/embed_chunks", response_model=ChunksResponse, tags=["embeddings"])
    async def embed_chunks(req: ChunksRequest) -> Response:
        """Chunk vectors of documents: sentence, paragraph, token or given spans; late or each chunk alone."""
        svc.check_count(1 if isinstance(req.inputs, str) else len(req.inputs))
        svc.refuse_when_full(1)  # a client with its share of the queue waiting: 429 before any cutting
        options = req.options()
        chunks: Any = req.chunks.value if isinstance(req.chunks, str) else req.chunks
        post = svc.post(req.post)
        chunk_size, chunk_overlap = req.sizes
        # Sizes sent with chunks other than tokens would be ignored: refused (422) as the library does.
        sent = req.model_fields_set
        refuse_idle_sizes(
            chunks,
            chunk_size=chunk_size if sent & {"chunk_size", "size"} else None,
            chunk_overlap=chunk_overlap if sent & {"chunk_overlap", "overlap"} else None,
        )
        left = threading.Event()

        def counted(count: int, spec: EmbedSpec) -> None:
            # As the chunks are cut: an answer already over the limit is refused with the rest uncut, and
            # a plan whose client left stops (its thread cannot be cancelled).
            if left.is_set():
                raise _Left
            numbers = count * _width(svc, spec)
            if numbers > svc.settings.max_answer_floats:
                svc.refuse_answer(numbers, f"{count} chunks x {_width(svc, spec)} wide", _FIX, least=True)

        def plan() -> ChunkPlan:
            return plan_chunks(
                svc.model,
                req.inputs,
                chunks=chunks,
                late=req.late,
                chunk_size=chunk_size,
                chunk_overlap=chunk_overlap,
                long=req.long,
                on_count=counted,
                layers=options.layers,
                combine=options.combine,
                pooling=options.pooling,
                mask_special=options.mask_special,
                normalize=options.normalize,
                stride=options.stride,
                prompt_name=options.prompt_name,
                post=post,  # checked against the spec it was fitted on
            )  # fmt: skip

        planning = asyncio.ensure_future(run_in_threadpool(plan))
        planning.add_done_callback(_retrieved)
        try:
            # Shielded: a client that leaves cancels this wait at once (the thread's own wait would
            # last until the plan is cut), and `left` stops the plan at its next count.
            planned = await asyncio.shield(planning)
        except asyncio.CancelledError:
            left.set()
            raise
        _check_answer_size(svc, planned)
        counted_tokens = await svc.tokenizing(
            planned.docs, lambda: svc.count_tokens(planned.docs, stride=options.stride, cuttable=False)
        )
        count = svc.check_tokens(counted_tokens)
        engine = svc.model.engine
        if not planned.late:  # each chunk runs alone, what chunks share run again: counted before any forward
            alone = await svc.tokenizing(planned.docs, lambda: planned.tokens_run_alone(engine))
            count = _check_alone(svc, planned, alone, counted_tokens)
        if planned.pooled_chunk_by_chunk:  # max pooling: what it reads bounded, before any forward
            reads = await svc.tokenizing(planned.docs, lambda: planned.rows_read_one_by_one(engine))
            _check_reads(svc, planned, reads, count)
        # Run batch by batch on the worker: other requests' small work goes between its batches, and
        # it stops at the next batch boundary when its client leaves.
        results = await svc.on_worker(lambda: planned.run(svc.model.engine, progress=False), n_tokens=count)
        return await answer(
            lambda: {"model": svc.name, "items": Items(_with_old_names(r.to_dict()) for r in results)},
            size=_numbers(svc, planned),
        )


class _Left(Exception):
    """The client of a plan being cut left: the plan stops (nobody reads this)."""


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Take a plan's outcome, so that one nobody awaits any more (its client left) logs nothing."""
    if not task.cancelled():
        task.exception()


def _with_old_names(document: dict[str, Any]) -> dict[str, Any]:
    """A document's chunks with the deprecated names beside the names (same numbers): `truncated` of
    `n_dropped`, `number` of `chunk` (the chunk's number, as a search hit names it)."""
    for chunk in document["chunks"]:
        chunk["truncated"] = chunk["n_dropped"]
        chunk["number"] = chunk["chunk"]
    return document


_FIX = "send fewer or shorter documents, or larger chunks that overlap less (chunk_overlap)"


def _width(svc: Service, spec: EmbedSpec) -> int:
    """Numbers in one chunk's vector: the model's width, times the layers with combine=concat."""
    return svc.model.info().hidden_size * (len(spec.layers) if spec.combine is Combine.CONCAT else 1)


# The bytes a number takes in the JSON answer ("-0.01234567, "): the chunk texts the answer carries count
# against --max-answer-floats at this many characters a number, so that overlapping chunks (chunk_size
# 10,000 with chunk_overlap 9,999: 10,001 copies of most of a document) cannot send hundreds of MB of text
# under a limit that counted their vectors alone.
_CHARS_PER_NUMBER = 12


def _text_chars(plan: ChunkPlan) -> int:
    """Characters of chunk text the answer carries: every chunk's span, overlaps counted each time."""
    return sum(end - start for spans in plan.spans for start, end in spans)


def _numbers(svc: Service, plan: ChunkPlan) -> int:
    """Numbers the answer holds: chunks x width, and its chunk texts at `_CHARS_PER_NUMBER` a number."""
    return plan.count * _width(svc, plan.spec) + -(-_text_chars(plan) // _CHARS_PER_NUMBER)


# Token vectors a pooling read chunk by chunk (max) may read per word piece of the documents: each
# piece in 64 chunks on average, pooling work far below the forward's (a piece costs the model ~10^5
# times what reading its vector does); chunk_size 10,000 with chunk_overlap 9,999 reads each 10,000 times.
_READS_PER_TOKEN = 64


def _check_reads(svc: Service, plan: ChunkPlan, reads: int, tokens: int) -> None:
    """Refuse (413) a late max pooling whose chunks read more than `_READS_PER_TOKEN` token vectors per
    word piece of the documents (at least the model's window of them): it pools chunk by chunk on the
    one worker, where mean pools any overlap from prefix sums in one pass."""
    limit = _READS_PER_TOKEN * max(tokens, svc.model.max_tokens)
    if reads > limit:
        raise OverBudget(
            f"pooling={plan.spec.pooling.value!r} would read {reads:,} token vectors ({plan.count} chunks x "
            f"{reads // max(plan.count, 1)} word pieces on average), over the limit of {limit:,} "
            f"({_READS_PER_TOKEN} per word piece of the documents); send a chunk_overlap further below "
            "chunk_size (or fewer overlapping spans), or pooling='mean', which pools any overlap in one pass"
        )


def _check_alone(svc: Service, plan: ChunkPlan, tokens: int, in_documents: int) -> int:
    """`tokens`, what chunks embedded alone (late=False) run, or OverBudget (413) when they pass
    --max-request-tokens: overlapping chunks run what they share again, each up to the model's window."""
    limit = svc.max_request_tokens
    if tokens <= limit:
        return tokens
    if "chunk_size" in plan.settings:
        sizes = (
            f"chunk_size {plan.settings['chunk_size']} with chunk_overlap {plan.settings['chunk_overlap']}"
        )
        fix = "a chunk_overlap further below chunk_size, a smaller chunk_size"
    else:
        sizes, fix = f"chunks={plan.settings['chunks']!r}", "fewer or shorter documents"
    raise OverBudget(
        f"late=false runs each of the {plan.count:,} chunks alone ({sizes}): {tokens:,} tokens, where the "
        f"documents hold {in_documents:,}, over the limit of {limit:,} per request (--max-request-tokens); "
        f"send {fix}, or late=true, which runs each document once"
    )


def _check_answer_size(svc: Service, plan: ChunkPlan) -> None:
    """Refuse (413) an answer over --max-answer-floats before any forward: chunks x width."""
    numbers = _numbers(svc, plan)
    width, chars = _width(svc, plan.spec), _text_chars(plan)
    made_of = f"{plan.count} chunks x {width} wide, and {chars:,} characters of chunk text"
    svc.check_answer(numbers, made_of, _FIX)
