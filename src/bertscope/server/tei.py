"""text-embeddings-inference's HTTP API, exactly as TEI's router defines it: `POST /` and `/embed`
(bare arrays), `/embed_all`, `/similarity`, `/tokenize`, `/decode`, `GET /info` and `GET /ping`
(SageMaker's health probe).

bertscope's own, richer answers (layers, pooling, spec, n_dropped) live under `/v2/`. Errors on these
paths carry TEI's body, `{"error", "error_type"}` (see `error_answers.error_response`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import numpy as np
from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, BeforeValidator, Field, StrictBool, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from .. import __version__
from ..core.similarity import cos_sim, unit
from ..core.spec import EmbedOptions
from ..errors import InvalidInput, InvalidSpec
from .answers import Items, Rows, answer
from .error_answers import EmptyInputs, error_response
from .routes import id_lists, id_tokens, refuse_ids
from .schema_fields import PositiveInt, Strict, WholeInt, named
from .tei_schemas import (
    TEI_IDS,
    TEI_INPUT,
    TEI_SENTENCES,
    TEI_TEXT,
    TEI_TEXTS,
    TEIDecodeResponse,
    TEIEmbedAllResponse,
    TEIEmbedResponse,
    TEIError,
    TEIInfo,
    TEISimilarityResponse,
    TEITokenizeResponse,
)
from .timing import RequestTimes, characters, tokenizing

if TYPE_CHECKING:
    from .service import Service

__all__ = ["TEI_PATHS", "tei_routes"]

from .error_answers import TEI_PATHS

# Values in each of /tokenize's token records: id, text, special, start, stop.
_TOKEN_FIELDS = 5


def _right_only(value: Any) -> Any:
    """The direction as sent, or one line refusing TEI's "left" with the reason and the fix (pydantic's own
    words name only the values allowed)."""
    if isinstance(value, str) and value.lower() == "left":
        raise PydanticCustomError(
            "one_name",  # one line as written (`validation.readable`)
            f"truncation_direction: {value!r} is not taken: bertscope cuts long texts on the right only; "
            'send "right", or leave truncation_direction out',
        )
    return value


# TEI also takes "left"; bertscope cuts long texts on the right only, so the schema offers right alone.
_Direction = Annotated[Literal["right", "Right"], BeforeValidator(_right_only)]


def _float_only(value: Any) -> Any:
    """The format as sent, or one line refusing "base64" with the route that writes it (pydantic's own
    words name only the value allowed)."""
    if value == "base64":
        raise PydanticCustomError(
            "one_name",  # one line as written (`validation.readable`)
            "encoding_format: 'base64' is not taken here: TEI's /embed answers floats only; send "
            '"float" or leave encoding_format out, or send the texts to POST /v1/embeddings, which '
            "answers base64",
        )
    return value


# huggingface_hub's InferenceClient.feature_extraction sends OpenAI's encoding_format, which TEI ignores:
# "float" is what this route answers anyway.
_Format = Annotated[Literal["float"] | None, BeforeValidator(_float_only)]


def _no_pairs(given: Any) -> Any:
    """The body as sent, or one line refusing a pair of texts in `inputs` (TEI's /embed takes none; the
    union's own words would call its first text a string that is not a token id)."""
    inputs = given.get("inputs") if isinstance(given, dict) else None
    if isinstance(inputs, list):
        for at, item in enumerate(inputs):
            if isinstance(item, list) and len(item) == 2 and all(isinstance(text, str) for text in item):
                raise PydanticCustomError(
                    "one_name",  # one line as written (`validation.readable`)
                    f"inputs: item {at} is a pair of texts, which TEI's /embed does not take (a list in "
                    "inputs is token ids); send the pair to /v2/embed, which embeds [A, B] pairs, or each "
                    "text alone here",
                )
    return given


class _TEIBody(Strict):
    """A body of TEI's API: refused as TEI refuses it, unknown fields in pydantic's words."""

    own_body = False


class TEIEmbedRequest(_TEIBody):
    """TEI's EmbedRequest: `inputs` is a text, a list of texts, or token ids (with --token-ids model)."""

    _pairs = model_validator(mode="before")(_no_pairs)

    inputs: Annotated[str | list[str] | list[WholeInt] | list[list[WholeInt]], TEI_INPUT] = Field(
        examples=["I like eating bread"]
    )
    truncate: StrictBool | None = Field(False, description="Cut texts over the model's length (else 422).")
    truncation_direction: _Direction = "right"
    prompt_name: Annotated[str | None, named("prompt")] = None
    normalize: StrictBool = True
    dimensions: Annotated[
        PositiveInt | None,
        WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 1, "x-fit": "width"}, {"type": "null"}]}),
    ] = Field(None, description="Keep the first N dimensions (unit length again when normalize).")
    encoding_format: _Format = Field("float", description="Sent by huggingface_hub; floats only here.")


class TEIEmbedAllRequest(_TEIBody):
    """TEI's EmbedAllRequest: text or texts (token ids are refused here)."""

    inputs: Annotated[str | list[str], TEI_TEXTS] = Field(examples=["I like eating bread"])
    truncate: StrictBool | None = Field(False, description="Cut texts over the model's length (else 422).")
    truncation_direction: _Direction = "right"
    prompt_name: Annotated[str | None, named("prompt")] = None


class TEISimilarityInput(_TEIBody):
    source_sentence: Annotated[str, TEI_TEXT]
    # Empty is TEI's 400 (error_type "Empty"), checked in the handler, not pydantic's 422.
    sentences: Annotated[list[str], TEI_SENTENCES]


class TEISimilarityParameters(_TEIBody):
    truncate: StrictBool | None = False
    truncation_direction: _Direction = "right"
    prompt_name: Annotated[str | None, named("prompt")] = None


class TEISimilarityRequest(_TEIBody):
    """TEI's SimilarityRequest: `{"inputs": {"source_sentence", "sentences"}, "parameters"}`."""

    inputs: TEISimilarityInput
    parameters: TEISimilarityParameters | None = None


class TEITokenizeRequest(_TEIBody):
    inputs: Annotated[str | list[str], TEI_TEXTS]
    add_special_tokens: StrictBool = True
    prompt_name: Annotated[str | None, named("prompt")] = None


class TEIDecodeRequest(_TEIBody):
    ids: Annotated[list[WholeInt] | list[list[WholeInt]], TEI_IDS]
    skip_special_tokens: StrictBool = True


# TEI's routes for the other kinds of model it serves (router/src/http/server.rs), each with the words TEI
# answers an embedding model there (core/src/infer.rs; "model is not a re-ranker model" is server.rs's),
# what the route needs, and the nearest route bertscope has.
_OTHER_MODELS = {
    "/rerank": (
        "model is not a re-ranker model",
        "a re-ranker (a cross-encoder with a sequence-classification head)",
        "POST /similarity scores texts against one text by the cosine of their vectors",
    ),
    "/predict": (
        "Model is not a classifier model",
        "a classifier (a sequence-classification model)",
        "POST /embed answers the texts' vectors",
    ),
    "/embed_sparse": (
        "Model is not an embedding model with SPLADE pooling",
        "a SPLADE model (sparse vectors over the vocabulary)",
        "POST /embed answers dense vectors",
    ),
}


def other_model(path: str) -> str:
    """The one line of TEI's route for another kind of model: TEI's words, then why and what to do."""
    tei, needs, nearest = _OTHER_MODELS[path]
    return (
        f"Backend error: {tei}: bertscope serves dense embedding models only, and {path} needs {needs}; "
        f"serve one with text-embeddings-inference, or use what this model answers: {nearest}"
    )


def _options(truncate: bool | None, prompt_name: str | None, **more: Any) -> EmbedOptions:
    """TEI's knobs as bertscope's options: truncate -> long=truncate, else a 422 over the length."""
    return EmbedOptions(long="truncate" if truncate else "error", prompt_name=prompt_name, **more)


def _not_empty(items: Any, field: str = "inputs") -> None:
    """TEI's answer to an empty batch: 400, error_type "Empty", in its own words."""
    if isinstance(items, list) and not items:
        raise EmptyInputs(f"`{field}` cannot be empty")


def _no_empty_input(items: list[Any], field: str = "inputs") -> None:
    """TEI's answer to an empty text (or id list) in a batch: 400, error_type "Empty", in the words of its
    tokenizer (core/src/tokenization.rs), before any prompt is put before it. A text of spaces alone is
    not empty to TEI: /tokenize tokenizes it, the embedding routes still refuse it (422, `check_texts`): it
    has no word piece to pool."""
    if any(len(item) == 0 for item in items):
        raise EmptyInputs(f"Input validation error: `{field}` cannot be empty")


def _texts(svc: Service, inputs: Any) -> list[str]:
    """A TEI input as texts; token ids are refused here (only /embed takes them, with --token-ids model)."""
    _not_empty(inputs)
    if isinstance(inputs, str):
        _no_empty_input([inputs])
        return [inputs]
    if inputs and not isinstance(inputs[0], str):
        refuse_ids(svc, "inputs")
        raise InvalidInput("inputs: this route takes text only; send the texts (token ids go to /embed)")
    _no_empty_input(inputs)
    return list(inputs)


def _decoded(svc: Service, lists: list[list[int]], skip_special_tokens: bool) -> list[str]:
    """/decode's work, off the event loop: every id checked against the vocabulary, then decoded."""
    backend = svc.model.tokenizer.backend
    size = backend.get_vocab_size()
    bad = next((i for ids in lists for i in ids if not 0 <= i < size), None)
    if bad is not None:
        raise InvalidInput(f"ids: token id {bad} is not in this model's vocabulary of {size}")
    return list(backend.decode_batch(lists, skip_special_tokens=skip_special_tokens))


def tei_routes(app: FastAPI, svc: Service) -> None:
    """TEI's routes, answering in TEI's shapes."""

    async def embed(req: TEIEmbedRequest) -> Response:
        times = RequestTimes.begin()
        opts = _options(req.truncate, req.prompt_name, normalize=req.normalize)
        spec = svc.recipe(opts).spec
        width = svc.model.info().hidden_size
        if req.dimensions is not None and req.dimensions > width:
            # Refused before any work, as /v1/embeddings refuses it: the vectors are `width` wide.
            raise InvalidSpec(f"dimensions: {req.dimensions} is more than the model's {width}")
        _not_empty(req.inputs)
        lists = id_lists(req.inputs)
        if lists is None:
            res = await svc.sentences(_texts(svc, req.inputs), spec)
        else:
            _no_empty_input(lists)
            refuse_ids(svc, "inputs")
            with tokenizing():
                tokens = await run_in_threadpool(id_tokens, svc, lists, spec)
            res = await svc.fitted_sentences(tokens, spec)
        vectors = res.vectors
        if req.dimensions is not None:
            vectors = vectors[:, : req.dimensions]
            vectors = unit(vectors) if req.normalize else vectors
        stamp = _stamp(svc, times, req.inputs, int(res.n_tokens.sum()))
        return _stamped(await answer(lambda: Rows(vectors, dtype=np.float32), size=vectors.size), stamp)

    for path in ("/", "/embed"):
        summary = "TEI: sentence vectors as a bare [[...]]"
        app.post(path, tags=["tei"], summary=summary, responses=_answer(TEIEmbedResponse))(embed)

    @app.post("/embed_all", tags=["tei"], responses=_answer(TEIEmbedAllResponse))
    async def embed_all(req: TEIEmbedAllRequest) -> Response:
        """TEI: every token's last-layer vector, [[[...]]], specials included."""
        # TEI puts the prompt (the named one, else the model's default) before each text and answers
        # every token of the whole, the prompt's included: once, as embed_tokens puts it there itself.
        times = RequestTimes.begin()
        texts = _texts(svc, req.inputs)
        prompt = _prompt(svc, req.prompt_name)
        long = str(_options(req.truncate, None).long)
        svc.check_count(len(texts))
        width = svc.model.info().hidden_size
        prompted = [prompt + text for text in texts]  # counted as they run, the prompt's tokens too
        with tokenizing():  # counted here; the worker tokenizes them again, inside x-inference-time
            count = await svc.tokenizing(prompted, svc.count_tokens, prompted, long)
        svc.check_answer(count * width, f"{count} tokens x {width} wide", "send fewer or shorter texts")
        svc.check_tokens(count)
        tokens = await svc.on_worker(
            lambda: svc.model.embed_tokens(texts, layers=-1, long=long, prompt_name=req.prompt_name),
            n_tokens=count,
        )
        stamp = _stamp(svc, times, req.inputs, count)
        made = await answer(
            lambda: Items(Rows(t.vectors, dtype=np.float32) for t in tokens), size=count * width
        )
        return _stamped(made, stamp)

    @app.post("/similarity", tags=["tei"], responses=_answer(TEISimilarityResponse))
    async def similarity(req: TEISimilarityRequest) -> Response:
        """TEI: the source sentence's cosine with each sentence, a bare list."""
        times = RequestTimes.begin()
        _not_empty(req.inputs.sentences, "inputs.sentences")
        _no_empty_input([req.inputs.source_sentence, *req.inputs.sentences])
        p = req.parameters or TEISimilarityParameters()
        spec = svc.recipe(_options(p.truncate, p.prompt_name)).spec
        texts = [req.inputs.source_sentence, *req.inputs.sentences]
        res = await svc.sentences(texts, spec, field="inputs.source_sentence and inputs.sentences")
        stamp = _stamp(svc, times, texts, int(res.n_tokens.sum()))
        scores = cos_sim(res.vectors[:1], res.vectors[1:])[0]
        # TEI's Vec<f32>: each score in the shortest form that reads back as the same float32.
        return _stamped(await answer(lambda: Rows(scores, dtype=np.float32), size=scores.size), stamp)

    @app.post("/tokenize", tags=["tei"], responses=_answer(TEITokenizeResponse))
    async def tokenize(req: TEITokenizeRequest) -> Response:
        """TEI: per text, its tokens as {id, text, special, start, stop}."""
        _not_empty(req.inputs)
        given = [req.inputs] if isinstance(req.inputs, str) else list(req.inputs)
        # One rule, TEI's: only "" is refused (its Empty 400); any other text is tokenized as the tokenizer
        # does, spaces or marks alone giving [CLS] [SEP] (the embedding routes refuse a text with no word
        # piece: it has nothing to pool).
        _no_empty_input(given)
        svc.check_count(len(given))
        # As TEI: the prompt (named, else the model's default) goes before each text, offsets into the whole.
        prompt = _prompt(svc, req.prompt_name)
        texts = [prompt + text for text in given]
        # Each token is a record of 5 values: the answer is bounded like every other (texts read whole).
        backend = svc.model.tokenizer.backend
        encodings, count = await svc.tokenizing(
            texts, svc.tokenized, texts, "window", _TOKEN_FIELDS, "send fewer or shorter texts",
            lambda: backend.encode_batch(texts, add_special_tokens=req.add_special_tokens),
        )  # fmt: skip
        return await answer(
            lambda: Items(Items(_simple(text, enc)) for text, enc in zip(texts, encodings, strict=True)),
            size=count * _TOKEN_FIELDS,
        )

    @app.post("/decode", tags=["tei"], responses=_answer(TEIDecodeResponse))
    async def decode(req: TEIDecodeRequest) -> Response:
        """TEI: token ids of this model back to text (ids here are always this model's own)."""
        # TEI's untagged enum reads a bare [] as one empty sequence; an empty sequence, bare or in a
        # batch, is its tokenizer's 400 (error_type "Empty"), as here.
        lists = cast("list[list[int]]", [req.ids] if not req.ids or isinstance(req.ids[0], int) else req.ids)
        svc.check_count(len(lists), field="ids")
        _no_empty_input(lists, "input_ids")
        out = await run_in_threadpool(_decoded, svc, lists, req.skip_special_tokens)
        return await answer(lambda: out, size=sum(map(len, lists)))

    for path in _OTHER_MODELS:
        # TEI answers an embedding model here 424 (error_type Backend); the body is never read.
        async def refuse(request: Request, path: str = path) -> Response:
            return error_response(path, 424, other_model(path), tei_type="Backend")

        app.post(path, tags=["tei"], include_in_schema=False)(refuse)

    @app.get("/info", tags=["tei"], responses=_answer(TEIInfo))
    async def info() -> Response:
        """TEI's /info fields, and the model's fingerprint; bertscope's own description is /v2/info."""
        return JSONResponse(await run_in_threadpool(_info, svc))

    @app.get(
        "/ping",
        tags=["tei"],
        response_class=Response,
        responses={
            200: {"description": "The inference worker runs (an empty body, as TEI's)."},
            503: {"description": "The inference worker has stopped.", "model": TEIError},
        },
    )
    async def ping() -> Response:
        """TEI's health probe (SageMaker's /ping): 200 with no body while the worker runs; 503 with TEI's
        error body when it does not. bertscope's own /health also counts the queue."""
        svc.batcher.start_unless_stopped()
        if svc.batcher.alive:
            return Response(status_code=200)
        return JSONResponse({"error": "unhealthy", "error_type": "Unhealthy"}, status_code=503)


def _stamp(svc: Service, times: RequestTimes, inputs: Any, tokens: int) -> dict[str, str]:
    """TEI's timing headers of a request whose inputs ran `tokens` tokens, measured now."""
    return times.headers(characters=characters(inputs), tokens=tokens, compute_type=svc.compute_type)


def _stamped(response: Response, stamp: dict[str, str]) -> Response:
    response.headers.update(stamp)
    return response


def _answer(model: type[BaseModel]) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI 200 of a route that writes its answer itself: TEI's schema of it."""
    return {200: {"model": model, "description": model.__doc__ or ""}}


def _prompt(svc: Service, prompt_name: str | None) -> str:
    """The prompt TEI puts before each text: the named one, else the model's default, else none."""
    return svc.recipe(EmbedOptions(prompt_name=prompt_name)).spec.prompt


def _simple(text: str, enc: Any) -> Iterator[dict[str, Any]]:
    """TEI's SimpleToken list, made as it is written: a piece's text is its span of the input; a
    special's, its token."""
    # TEI's start and stop count UTF-8 bytes (Rust's tokenizers); Python's offsets count characters.
    at = [0]
    for char in text:
        at.append(at[-1] + len(char.encode("utf-8")))
    for token_id, piece, (start, stop), special in zip(
        enc.ids, enc.tokens, enc.offsets, enc.special_tokens_mask, strict=True
    ):
        yield {
            "id": token_id,
            "text": piece if special else text[start:stop],
            "special": bool(special),
            "start": None if special else at[start],
            "stop": None if special else at[stop],
        }


def _info(svc: Service) -> dict[str, Any]:
    s = svc.settings
    spec = svc.recipe(EmbedOptions()).spec
    return {
        "model_id": svc.name,
        "model_sha": None,
        "model_dtype": str(svc.model.info().to_dict().get("dtype", "float32")),
        "served_model_name": svc.name,
        "model_type": {"embedding": {"pooling": str(getattr(spec.pooling, "value", spec.pooling))}},
        "max_concurrent_requests": s.max_queue,
        "max_input_length": svc.model.max_tokens,
        "max_batch_tokens": svc.batcher.max_batch_tokens,
        "max_batch_requests": None,
        "max_client_batch_size": s.max_inputs,
        "auto_truncate": False,
        "tokenization_workers": 1,
        "version": __version__,
        "sha": None,
        "docker_label": None,
        # not TEI's (its clients read the fields above and ignore others): the same as /v2/info's
        "fingerprint": svc.fingerprint,
    }
