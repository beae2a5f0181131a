"""The service's endpoints: embeddings (/embed, /embed_tokens, /v1/embeddings, /similarity), the model
(/tokenize, /static, /anatomy) and the service itself (/health, /info, /metrics).

Handlers check what they can, then hand model work to the worker (`Service.sentences` for sentence
vectors, batched with other requests; `Service.on_worker` for the rest); errors become 4xx in `guard`.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from fastapi import FastAPI, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .. import __version__
from ..anatomy import STEPS
from ..errors import InvalidSpec
from ..post import apply_post
from ..similarity import cos_sim, unit
from ..tokens import check_texts
from .batching import Metrics
from .schemas import (
    AnatomyRequest,
    EmbedRequest,
    EmbedResponse,
    OpenAIRequest,
    OpenAIResponse,
    SimilarityRequest,
    SimilarityResponse,
    StaticRequest,
    TokenizeRequest,
    TokensRequest,
    TokensResponse,
)

if TYPE_CHECKING:
    from ..model import Model
    from .service import Service

__all__ = ["embedding_routes", "model_routes", "ops_routes"]


def _rows(matrix: np.ndarray) -> list[list[float]]:
    return np.asarray(matrix, dtype=np.float32).tolist()  # type: ignore[no-any-return]


def embedding_routes(app: FastAPI, svc: Service) -> None:
    """Sentence, token, OpenAI and similarity endpoints."""

    @app.post("/embed", response_model=EmbedResponse, tags=["embeddings"])
    async def embed(req: EmbedRequest) -> Response:
        """Sentence vectors: any layers, combine, pooling, masking, normalisation, long-text policy."""
        options = req.spec_options()
        processor = svc.post(req.post, svc.model.spec(**options).as_dict())
        res = apply_post(await svc.sentences(req.inputs, options), processor)
        return JSONResponse(
            {
                "model": svc.name,
                "dim": int(res.vectors.shape[1]),
                "vectors": _rows(res.vectors),
                "n_tokens": res.n_tokens.tolist(),
                "truncated": res.truncated.tolist(),
                "spec": res.spec,
            }
        )

    @app.post("/embed_tokens", response_model=TokensResponse, tags=["embeddings"])
    async def embed_tokens(req: TokensRequest) -> Response:
        """Per-token vectors of any layers with tokens and offsets; per-word vectors with words=true."""
        items = svc.texts(req.inputs)
        opts: dict[str, Any] = {"layers": req.layers, "combine": req.combine, "long": req.long}

        def work() -> tuple[list[Any], list[Any] | None]:
            words = svc.model.embed_words(items, subword=req.subword, **opts) if req.words else None
            return svc.model.embed_tokens(items, **opts), words

        tokens, words = await svc.on_worker(work)
        out = []
        for i, tok in enumerate(tokens):
            item: dict[str, Any] = {
                "text": tok.text,
                "pair": tok.pair,
                "tokens": tok.tokens,
                "offsets": tok.offsets,
                "special": tok.special_mask,
                "vectors": _rows(tok.vectors),
                "n_dropped": tok.n_dropped,
            }
            if words is not None:
                w = words[i]
                item["words"] = {
                    "words": w.words,
                    "spans": w.spans,
                    "pieces": w.pieces,
                    "vectors": _rows(w.vectors),
                }
            out.append(item)
        spec = words[0].spec if words else tokens[0].spec
        return JSONResponse({"model": svc.name, "items": out, "spec": spec})

    @app.post("/v1/embeddings", response_model=OpenAIResponse, tags=["embeddings"])
    async def openai_embeddings(req: OpenAIRequest) -> Response:
        """OpenAI-compatible embeddings: the model's own sentence vectors (pooling auto), with usage."""
        texts = await run_in_threadpool(_openai_texts, svc, req.input)
        res = await svc.sentences(texts, {})
        vectors = res.vectors
        if req.dimensions is not None:
            if req.dimensions > vectors.shape[1]:
                raise InvalidSpec(f"dimensions: {req.dimensions} is more than the model's {vectors.shape[1]}")
            vectors = unit(vectors[:, : req.dimensions])
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode("ascii")
                if req.encoding_format == "base64"
                else v.tolist(),
            }
            for i, v in enumerate(vectors)
        ]
        used = int(res.n_tokens.sum())
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": svc.name,
                "usage": {"prompt_tokens": used, "total_tokens": used},
            }
        )

    @app.post("/similarity", response_model=SimilarityResponse, tags=["embeddings"])
    async def similarity(req: SimilarityRequest) -> Response:
        """Cosine of the source sentence with each sentence, embedded with the same options."""
        check_texts(req.sentences)
        res = await svc.sentences([req.source, *req.sentences], req.spec_options())
        scores = cos_sim(res.vectors[:1], res.vectors[1:])[0]
        return JSONResponse({"model": svc.name, "scores": scores.astype(float).tolist(), "spec": res.spec})


def _openai_texts(svc: Service, given: Any) -> list[str]:
    """Texts from OpenAI's input: strings as they are; id lists (this model's vocabulary) decoded."""
    if isinstance(given, str) or not given or isinstance(given[0], str):
        return check_texts(given)
    lists: Sequence[Any] = [given] if isinstance(given[0], int) else given
    svc.check_count(len(lists), splittable=True)
    return [
        svc.model.tokenizer.backend.decode(svc.model.static_ids(ids), skip_special_tokens=True)
        for ids in lists
    ]


def model_routes(app: FastAPI, svc: Service) -> None:
    """Tokenizer, static rows and anatomy endpoints."""

    @app.post("/tokenize", tags=["model"])
    async def tokenize(req: TokenizeRequest) -> Response:
        """Word pieces: token, id, word, character span, special; with tokens cut by truncation."""
        items = svc.texts(req.inputs)
        toks = await run_in_threadpool(svc.model.tokenize, items, long=req.long)
        return JSONResponse(
            {
                "model": svc.name,
                "max_tokens": svc.model.max_tokens,
                "items": [
                    {"text": t.text, "pair": t.pair, "tokens": t.as_records(), "n_dropped": t.n_dropped}
                    for t in toks
                ],
            }
        )

    @app.post("/static", tags=["model"])
    async def static(req: StaticRequest) -> Response:
        """Static word-piece rows (no position, no segment), or words as their pieces' mean; neighbours."""
        items = req.items if isinstance(req.items, list) else [req.items]
        svc.check_count(len(items))
        records = await svc.on_worker(lambda: [_static_record(svc.model, it, req) for it in items])
        return JSONResponse({"model": svc.name, "items": records})

    @app.post("/anatomy", tags=["model"])
    async def anatomy(req: AnatomyRequest) -> Response:
        """The embedding layer of one text taken apart, step by step, with the proof's max |error|."""
        text: Any = tuple(req.text) if isinstance(req.text, list) else req.text
        check_texts(text, pairs=True)
        a = await svc.on_worker(lambda: svc.model.anatomy(text))
        steps = STEPS
        return JSONResponse(
            {
                "model": svc.name,
                "tokens": a.tokens.tokens,
                "ids": a.tokens.ids,
                "token_type_ids": a.tokens.type_ids,
                "position_ids": a.position_ids,
                "lacks": list(a.lacks),
                "n_dropped": a.n_dropped,
                "max_abs_error": a.max_abs_error,
                "steps": {s: None if getattr(a, s) is None else _rows(getattr(a, s)) for s in steps},
            }
        )


def _static_record(model: Model, item: str | int, req: StaticRequest) -> dict[str, Any]:
    if req.word:
        if not isinstance(item, str):
            raise InvalidSpec(f"items: {item!r} is not a word; with word=true every item is a string")
        sw = model.static_word(item)
        rec: dict[str, Any] = {"item": item, "pieces": sw.pieces, "ids": sw.ids, "vector": sw.vector}
        query: Any = sw.vector
    else:
        token_id = model.static_ids([item])[0]
        rec = {
            "item": item,
            "token": model.id_to_token[token_id],
            "id": token_id,
            "vector": model.static([item])[0],
        }
        query = token_id
    rec["norm"] = float(np.linalg.norm(rec["vector"]))
    rec["vector"] = rec["vector"].astype(float).tolist()
    if req.k:
        rec["neighbors"] = [
            {"token": n.token, "id": n.id, "cosine": n.cosine}
            for n in model.static_neighbors(query, k=req.k, include_special=req.include_special)
        ]
    return rec


def ops_routes(app: FastAPI, svc: Service, metrics: Metrics) -> None:
    """Health, info and metrics endpoints."""

    @app.get("/health", tags=["service"])
    async def health() -> Response:
        """200 while the inference worker runs, 503 when it does not."""
        alive = svc.batcher.alive
        return JSONResponse(
            {"status": "ok" if alive else "worker stopped", "queue": svc.batcher.queued},
            status_code=200 if alive else 503,
        )

    @app.get("/info", tags=["service"])
    async def info() -> Response:
        """The model (family, layers, sizes, vocabulary, limits) and the service's limits."""
        s = svc.settings
        limits = {
            "max_tokens": svc.model.max_tokens,
            "max_inputs": s.max_inputs,
            "auto_split": s.auto_split,
            "max_body_bytes": s.max_body_bytes,
            "max_queue": s.max_queue,
            "batching": s.batching,
            "max_batch_tokens": svc.batcher.max_batch_tokens,
            "max_wait_ms": s.max_wait_ms,
        }
        return JSONResponse(
            {"model": svc.name, "version": __version__, **svc.model.info().as_dict(), "limits": limits}
        )

    @app.get("/metrics", tags=["service"])
    async def prometheus() -> Response:
        """Prometheus metrics: requests, latencies, queue size, batch sizes and tokens."""
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
