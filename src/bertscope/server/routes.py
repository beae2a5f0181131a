"""The service's endpoints: embeddings (/embed, /embed_tokens, /v1/embeddings, /similarity and its baseline),
the model (/tokenize, /static, /anatomy) and the service itself (/health, /info, /metrics).

Handlers check what they can, then hand model work to the worker (`Service.sentences` for sentence
vectors, batched with other requests; `Service.on_worker` for the rest); errors become 4xx in `guard`.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from fastapi import FastAPI, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .. import __version__
from ..core._enums import Combine, SubwordPooling
from ..core.finite import refuse_non_finite
from ..core.given import QUOTED, quoted_text
from ..core.pooling import word_embeddings
from ..core.results import plain
from ..core.similarity import cos_sim, unit
from ..core.spec import EmbedOptions, EmbedSpec
from ..core.st_settings import auto_refused
from ..core.tokens import Tokens, check_texts, named_as
from ..errors import BertscopeError, InvalidInput, InvalidSpec, UnknownToken
from ..static import lookup
from .answers import Items, Rows, answer, with_rows
from .batching import Metrics
from .error_answers import TooManyInputs
from .openai_schemas import OpenAIRequest, OpenAIResponse
from .response_schemas import EmbedResponse, SimilarityResponse, TokensResponse
from .schemas import (
    AnatomyRequest,
    EmbedRequest,
    SimilarityRequest,
    StaticRequest,
    TokenizeRequest,
    TokensRequest,
)
from .service import cut_offer
from .settings import TokenIds
from .timing import RequestTimes, characters, tokenizing

if TYPE_CHECKING:
    from .service import Service

_MAX_NEIGHBOURS = 16_384  # items x k of one /static request: bounds its matrix work and answer
_ERROR_CHARS = 1_000  # characters of a /static refusal at most

__all__ = ["embedding_routes", "id_lists", "id_tokens", "model_routes", "ops_routes", "refuse_ids"]


def embedding_routes(app: FastAPI, svc: Service) -> None:
    """Sentence, token, OpenAI and similarity endpoints."""

    @app.post("/v2/embed", response_model=EmbedResponse, tags=["embeddings"])
    async def embed(req: EmbedRequest) -> Response:
        """Sentence vectors: any layers, combine, pooling, masking, normalisation, long-text policy."""
        recipe = svc.recipe(req.options(), req.post)
        res = recipe.finish(await svc.sentences(req.inputs, recipe.spec))
        return await answer(
            lambda: _with_old_width({"model": svc.name, **with_rows(res)}), size=res.vectors.size
        )

    @app.post("/embed_tokens", response_model=TokensResponse, tags=["embeddings"])
    async def embed_tokens(req: TokensRequest) -> Response:
        """Per-token vectors of any layers with tokens and offsets; per-word vectors with level words."""
        items = svc.texts(req.inputs)
        if req.with_words and any(isinstance(item, tuple) for item in items):
            asked = "words=true" if req.words else "level='words'"  # the spelling the client sent
            raise InvalidInput(f"{asked} takes texts, not (A, B) pairs: words index into one text")
        how = SubwordPooling.parse(req.subword, what="subword pooling")
        spec = svc.model.spec(layers=req.layers, combine=req.combine, pooling="mean", long=req.long,
                              stride=req.stride)  # fmt: skip
        kept = len(spec.layers) if spec.combine in (Combine.CONCAT, Combine.STACK) else 1
        width = svc.model.info().hidden_size * kept * (2 if req.with_words else 1)
        # Tokenized once: these tokens bound the answer and are the ones embedded. Texts read whole are
        # counted first, so a request over either limit is refused before its Tokens are made.
        over = min(svc.max_request_tokens // kept, svc.settings.max_answer_floats // width)
        least = await run_in_threadpool(svc.least_tokens, items, spec.long, over=over)
        _check_answer_size(svc, least, width, least=True)
        svc.check_tokens(least, layers=kept, least=True, long=spec.long)
        tokens = await svc.tokenizing(items, svc.gated, items, lambda: svc.model.engine.prepare(items, spec))
        count = sum(len(t) for t in tokens)
        _check_answer_size(svc, count, width)
        svc.check_tokens(count, layers=kept, long=spec.long)
        svc.check_windows(tokens, spec.long, spec.stride, layers=kept)

        def work() -> tuple[list[Any], list[Any] | None]:
            found = svc.model.embed_fitted_tokens(tokens, spec)
            refuse_non_finite([t.vectors for t in found])  # answered 500 in the service's words
            return found, [word_embeddings(t, how) for t in found] if req.with_words else None

        found, words = await svc.on_worker(work, n_tokens=count)

        def build() -> dict[str, Any]:
            # results.per_text's answer, each text's dict made as it is written.
            items: Any = (with_rows(t) for t in found)
            spec = plain(found[0].spec if found else {})
            if words is not None:
                # Both levels at once: each text's words ride along with its tokens, under the words' spec.
                pairs = zip(found, words, strict=True)
                items = ({**with_rows(t), "words": with_rows(w)} for t, w in pairs)
                spec = plain(words[0].spec)
            return {"model": svc.name, "items": Items(items), "spec": spec}

        return await answer(build, size=count * width)

    @app.post("/v1/embeddings", response_model=OpenAIResponse, tags=["embeddings"])
    async def openai_embeddings(req: OpenAIRequest) -> Response:
        """OpenAI-compatible embeddings: the model's own sentence vectors (pooling auto), unit length as
        OpenAI's and TEI's, with usage."""
        times = RequestTimes.begin()
        width = svc.model.info().hidden_size
        if req.dimensions is not None and req.dimensions > width:
            # Refused before any work: the model's sentence vectors are `width` wide whatever the texts.
            raise InvalidSpec(f"dimensions: {req.dimensions} is more than the model's {width}")
        # OpenAI refuses an input over the model's context (a 400 naming it); cut only when asked.
        spec = svc.recipe(EmbedOptions(long="truncate" if req.truncate else "error")).spec
        lists = id_lists(req.input)
        if lists is None:
            res = await svc.sentences(await run_in_threadpool(check_texts, req.input), spec, field="input")
        else:
            refuse_ids(svc, "input")
            # Batched with text requests and counted in the queue's tokens, like text.
            with tokenizing():
                tokens = await run_in_threadpool(id_tokens, svc, lists, spec, "input")
            res = await svc.fitted_sentences(tokens, spec, field="input")
        # Unit length always, as TEI's openai_embed (normalize: true) and OpenAI's vectors are: a model
        # without a Normalize module is normalized here too, and `dimensions` cuts, then normalizes again.
        vectors = res.vectors if req.dimensions is None else res.vectors[:, : req.dimensions]
        if req.dimensions is not None or not spec.normalize:
            vectors = unit(vectors)
        used = int(res.n_tokens.sum())

        def build() -> dict[str, Any]:
            data = [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode("ascii")
                    if req.encoding_format == "base64"
                    else Rows(v),
                }
                for i, v in enumerate(vectors)
            ]
            usage = {"prompt_tokens": used, "total_tokens": used}
            return {"object": "list", "data": data, "model": svc.name, "usage": usage}

        # TEI's openai_embed sends its timing headers too
        stamp = times.headers(characters=characters(req.input), tokens=used, compute_type=svc.compute_type)
        made = await answer(build, size=vectors.size)
        made.headers.update(stamp)
        return made

    @app.post("/v2/similarity", response_model=SimilarityResponse, tags=["embeddings"])
    async def similarity(req: SimilarityRequest) -> Response:
        """Cosine of the source sentence with each sentence, embedded with the same options (and `post`,
        as `Model.similarity(..., post=)`); with baseline, each cosine's percentile among unrelated pairs
        of a reference corpus embedded the same way, post-processing included (`Model.baseline`)."""
        if not req.sentences:
            check_texts(req.sentences)  # "no texts given", as every route refuses none
        texts = [req.source, *req.sentences]
        # "source is empty", "sentences[1] has 300 tokens": the request's fields, not "text 0" of the list
        with named_as(lambda kind, i: "source" if i == 0 else f"sentences[{i - 1}]"):
            check_texts(texts)
            options = req.options()
            recipe = svc.recipe(options, req.post)  # checks the post's name and the spec it was fitted on
            res = recipe.finish(await svc.sentences(texts, recipe.spec, field="source and sentences"))
        scores = cos_sim(res.vectors[:1], res.vectors[1:])[0]
        # float32 in its shortest form, as the vectors' and TEI's /similarity's scores are written.
        scored = {"model": svc.name, "scores": Rows(scores, dtype=np.float32), "spec": res.spec}
        if req.baseline or req.reference is not None:
            fitted = await svc.baseline(options, req.reference, post=req.post)
            scored.update(percentile=fitted.percentile(scores).tolist(), baseline=fitted.describe())
        return await answer(lambda: scored, size=len(scores))


def refuse_ids(svc: Service, field: str) -> None:
    """Raise the 422 that names the fix, unless the service was started with `--token-ids model`."""
    if svc.settings.token_ids == TokenIds.MODEL:
        return
    raise InvalidInput(
        f"{field}: token ids are refused; they look like a client-side tokenizer's ids (tiktoken's "
        "cl100k), which would be embedded as this model's pieces and give silently wrong vectors. Send "
        "text instead (LangChain OpenAIEmbeddings: check_embedding_ctx_length=False), or start "
        "bertscope serve with --token-ids model if the ids are this model's own"
    )


def id_lists(given: Any) -> list[list[int]] | None:
    """OpenAI's token-id input as id lists (one list of ints is one input); None for text input."""
    if isinstance(given, str) or not given or isinstance(given[0], str):
        return None
    return [given] if isinstance(given[0], int) else list(given)


def id_tokens(
    svc: Service, lists: Sequence[Sequence[int]], spec: EmbedSpec, field: str = "inputs"
) -> list[Tokens]:
    """Fitted tokens of each id list, embedded as given: the model's specials added once (`from_ids`).

    A client that sends [CLS] ... [SEP] (or <s> ... </s>) itself gets them once, not twice; OpenAI
    clients send ids without specials, and get them added. Every id is checked against the vocabulary.
    """
    svc.check_count(len(lists), splittable=True, field=field)  # as text: one job, batched by the engine
    if spec.prompt:
        # The prompt is text before the text; tokenized apart from it, it could come out as other pieces.
        if spec.prompt_name != svc.model.prompts.default_name:
            raise InvalidInput(
                f"prompt_name {spec.prompt_name!r} puts {spec.prompt!r} before the text, which token ids "
                "cannot carry exactly; leave prompt_name out, or send the text itself instead of ids"
            )
        raise InvalidInput(
            f"{field}: this model puts its default prompt {spec.prompt_name!r} ({spec.prompt!r}) before "
            "every text, which token ids cannot carry exactly; send the text itself instead of ids"
        )
    tokens = []
    for index, ids in enumerate(lists):
        if not ids:
            raise InvalidInput(f"input {index} is an empty list of token ids; send at least one id")
        try:
            svc.model.static_ids(ids)
        except UnknownToken as exc:
            position = next(p for p, i in enumerate(ids) if not _known(svc, i))
            raise UnknownToken(f"input {index}, position {position}: {exc}") from None
        given = svc.model.tokenizer.from_ids(ids, index=index)
        tokens.append(svc.model.tokenizer.fit(given, spec.long, index=index))  # long policy as text
    return tokens


def _known(svc: Service, token_id: int) -> bool:
    try:
        svc.model.static_ids([token_id])
    except UnknownToken:
        return False
    return True


def model_routes(app: FastAPI, svc: Service) -> None:
    """Tokenizer, static rows and anatomy endpoints."""

    @app.post("/v2/tokenize", tags=["model"])
    async def tokenize(req: TokenizeRequest) -> Response:
        """Word pieces: token, id, word, character span, special; with tokens cut by truncation."""
        items = svc.texts(req.inputs)
        # Each token is a record of 6 values (9 in a pair, the token type id under both its names): the
        # answer is bounded like every other.
        fields = 9 if any(isinstance(item, tuple) for item in items) else 6
        fix = f"send fewer or shorter texts{cut_offer(req.long)}"
        toks, count = await svc.tokenizing(
            items,
            svc.tokenized,
            items,
            req.long,
            fields,
            fix,
            lambda: svc.model.tokenize(items, long=req.long),
        )

        def build() -> dict[str, Any]:
            items = Items(_tokenized(t) for t in toks)
            return {"model": svc.name, "max_tokens": svc.model.max_tokens, "items": items}

        return await answer(build, size=count * fields)

    @cache
    def longest_piece() -> int:
        """Characters of the vocabulary's longest piece: a longer item is no piece of it."""
        return max(map(len, svc.model.vocab), default=0)

    @app.post("/static", tags=["model"])
    async def static(req: StaticRequest) -> Response:
        """Static word-piece rows (no position, no segment), or words as their pieces' mean; neighbours."""
        items = req.inputs if isinstance(req.inputs, list) else [req.inputs]
        if not items:  # refused as every other route refuses no texts (`check_texts`), not answered empty
            raise InvalidInput("no texts given: pass at least one word piece, word or token id")
        svc.check_count(len(items))
        if len(items) * req.top_k > _MAX_NEIGHBOURS:
            raise TooManyInputs(
                f"{len(items)} items x top_k={req.top_k} neighbours is over {_MAX_NEIGHBOURS} in one "
                "request; ask for fewer items or a smaller top_k"
            )

        words = req.with_words
        if words and (ids := [it for it in items if not isinstance(it, str)]):
            asked = "word=true" if req.word else "as_words=true"  # the spelling the client sent
            raise InvalidInput(f"{ids[0]!r} is not a word; with {asked} every item is a string")
        if not words:
            _refuse_long_pieces(items, longest_piece())
        texts = [it for it in items if isinstance(it, str)]
        # Each record: its vector, norm, id and item; each neighbour's token, id, score and cosine; and with
        # as_words each of a word's pieces and ids, counted as they are made. All refused over the limit
        # before the work: the fixed part before anything, the pieces on a cheap count first (`tokenized`'s
        # rule), and the answer reserved.
        per_item = svc.model.static_shape[1] + 3 + 4 * req.top_k
        fixed = len(items) * per_item
        made_of = f"{len(items)} items x {per_item} values"
        fix = "send fewer items or shorter words, or ask for a smaller top_k"
        svc.check_answer(fixed, made_of, fix)

        def work() -> tuple[list[dict[str, Any]], int]:
            if words:
                over = max(svc.settings.max_answer_floats - fixed, 0) // 2
                least = svc.least_tokens(texts, "window", over=over)
                svc.check_answer(fixed + 2 * least, f"{made_of} + {least} pieces x 2", fix, least=True)
            special = req.include_special

            def look(item: str | int) -> dict[str, Any]:
                try:
                    return lookup(svc.model, item, as_words=words, top_k=req.top_k, include_special=special)
                except BertscopeError as exc:  # a word the vocabulary does not spell lists all its pieces
                    raise _bounded(exc, item) from None

            records = svc.gated(texts, lambda: [look(it) for it in items])
            pieces = sum(len(record.get("ids", ())) for record in records)
            return records, pieces

        # Static rows only read the embedding matrix: they run beside the worker, never queue behind it;
        # words are tokenized as every route tokenizes, long ones in their client's turn at the gate.
        records, pieces = await svc.tokenizing(texts, work)
        numbers = fixed + 2 * pieces
        svc.check_answer(numbers, f"{made_of} + {pieces} pieces x 2", fix)
        return await answer(
            lambda: {"model": svc.name, "items": [_scored(record) for record in records]}, size=numbers
        )

    @app.post("/anatomy", tags=["model"])
    async def anatomy(req: AnatomyRequest) -> Response:
        """The embedding layer of one text taken apart, step by step, with the proof's max |error|."""
        text: Any = tuple(req.inputs) if isinstance(req.inputs, list) else req.inputs

        def tokenize() -> tuple[Tokens, tuple[int, int]]:
            row = _anatomy_row(svc)  # first: a model with no layers is refused before any tokenizing
            items = check_texts([text], pairs=True)  # in a list: a pair is one item
            fit = svc.model.tokenizer.encode_one_window
            return svc.gated(items, lambda: fit(items, req.long, what="the anatomy")[0]), row

        # Tokenized once (refused with long=error), and the answer bounded, before the worker.
        tokens, (steps, width) = await svc.tokenizing(req.inputs, tokenize)
        n = len(tokens)
        numbers = steps * n * width + 1  # and the proof's error
        svc.check_answer(numbers, f"{steps} steps x {n} tokens x {width} wide", "send a shorter text")

        def work() -> Any:
            from ..anatomy import decompose

            return decompose(svc.model, [tokens])[0]

        a = await svc.on_worker(work, n_tokens=n)
        return await answer(lambda: {"model": svc.name, **a.to_dict()}, size=numbers)


def _with_old_width(answer: dict[str, Any]) -> dict[str, Any]:
    """/v2/embed's answer with `dim`, the deprecated name of `dimension`, beside it (same number)."""
    made: dict[str, Any] = {}
    for name, value in answer.items():
        made[name] = value
        if name == "dimension":
            made["dim"] = value
    return made


def _refuse_long_pieces(items: list[Any], longest: int) -> None:
    """Refuse, in one line that quotes a short prefix, a string item longer than any piece of the
    vocabulary: it is none, and the refusal of a piece not in it lists all its pieces (a 40 KB item: a
    240 KB message), tokenized on the way."""
    long = next((it for it in items if isinstance(it, str) and len(it) > longest), None)
    if long is not None:
        raise UnknownToken(
            f"{quoted_text(long)} is no word piece in the vocabulary: its pieces have at most {longest} "
            "characters; send word pieces or token ids, or words with as_words=true"
        )


def _bounded(exc: BertscopeError, item: str | int) -> BertscopeError:
    """`exc`, a long `item` in its message quoted by a short prefix, and the message cut to `_ERROR_CHARS`
    characters: a refusal that quotes an item and its pieces never echoes a long one back whole."""
    message = str(exc)
    if isinstance(item, str) and len(item) > QUOTED:
        message = message.replace(repr(item), quoted_text(item))
    if len(message) <= _ERROR_CHARS:
        return exc if message == str(exc) else type(exc)(message)
    return type(exc)(
        f"{message[:_ERROR_CHARS]}... (cut from {len(message):,} characters); send shorter items"
    )


def _tokenized(tokens: Tokens) -> dict[str, Any]:
    """`Tokens.to_dict()`, each piece of a pair with its token type id under its older name (`type_id`,
    deprecated in the schema) too."""
    made = tokens.to_dict()
    for record in cast(list[dict[str, Any]], made["tokens"]):
        if "token_type_id" in record:
            record["type_id"] = record["token_type_id"]
    return made


def _scored(record: dict[str, Any]) -> dict[str, Any]:
    """A /static record (`static.lookup`'s: each neighbour's cosine is its `score`, as every hit's), with
    `cosine`, the older name, kept beside it: deprecated in the schema."""
    if record.get("neighbors") is not None:
        record["neighbors"] = [{**n, "cosine": n["score"]} for n in record["neighbors"]]
    return record


def _anatomy_row(svc: Service) -> tuple[int, int]:
    """The steps /anatomy answers a (tokens, width) array for (`anatomy.STEPS`, less the parts the family
    lacks), and at most their width (the wider of the embedding and hidden sizes). A static model has no
    module to take apart: its one-line refusal (422) comes from `hf_model`. Read without loading the
    PyTorch module where the model is light, as the anatomy itself is."""
    from ..anatomy import STEPS, lacked_parts

    lacks = lacked_parts(svc.model)
    info = svc.model.info()
    return len(STEPS) - len(lacks), max(info.hidden_size, info.embedding_size)


def ops_routes(app: FastAPI, svc: Service, metrics: Metrics) -> None:
    """Health, info and metrics endpoints."""

    @app.get("/health", tags=["service"])
    async def health() -> Response:
        """200 while the inference worker runs, 503 when it does not."""
        svc.batcher.start_unless_stopped()
        alive = svc.batcher.alive
        return JSONResponse(
            {"status": "ok" if alive else "worker stopped", "queue": svc.batcher.queued},
            status_code=200 if alive else 503,
        )

    @app.get("/v2/info", tags=["service"])
    async def info() -> Response:
        """The model (family, n_layers, sizes, vocabulary, prompts, limits) and the service's limits."""
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
            "max_request_tokens": svc.max_request_tokens,
            "max_answer_floats": s.max_answer_floats,
            "max_buffered_bytes": s.max_buffered_bytes,
        }
        fingerprint = await run_in_threadpool(lambda: svc.fingerprint)
        model = svc.model.info().to_dict()
        # "layers", the count's older name, kept beside "n_layers" (deprecated in the schema)
        model.update(layers=model["n_layers"], prompts=dict(svc.model.prompts.prompts))
        # sentence-transformers' attributes, as `bertscope info --json` lists them
        model.update(
            default_prompt_name=svc.model.default_prompt_name,
            truncate_dim=svc.model.truncate_dim,
            similarity_fn_name=svc.model.similarity_fn_name,
        )
        # as `bertscope info` says it: whether pooling auto does the folder's own sentence pipeline
        model["auto_refused"] = auto_refused(getattr(svc.model.loaded, "st_unsupported", None))
        described = {"model": svc.name, "version": __version__, **model}
        return JSONResponse({**described, "fingerprint": fingerprint, "limits": limits})

    @app.get(
        "/metrics",
        tags=["service"],
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
    )
    async def prometheus() -> Response:
        """Prometheus metrics: requests, latencies, queue size, batch sizes and tokens."""
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)


def _check_answer_size(svc: Service, count: int, width: int, *, least: bool = False) -> None:
    """Refuse (413) a token answer over --max-answer-floats before any forward: tokens x width."""
    svc.check_answer(
        count * width,
        f"{count} tokens x {width} wide",
        "ask for fewer texts or layers, or combine layers with mean",
        least=least,
    )
