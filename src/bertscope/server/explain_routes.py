"""The endpoints behind "why" and "how": /explain (token-pair contributions of a cosine) and /attention.

Both count their tokens first (through the big-request gate) and refuse an answer over
--max-answer-floats before any forward; then they run on the worker that owns the model
(`Service.on_worker`); errors become 4xx in `guard`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from fastapi import FastAPI, Response
from fastapi.concurrency import run_in_threadpool

from ..attention import attention_of
from ..core.pooling import exact_poolings
from ..core.tokens import check_texts
from ..errors import InvalidInput
from ..explain import texts_named
from .answers import Rows, answer, with_rows
from .feature_schemas import AttentionRequest, ExplainRequest
from .response_schemas import AttentionResponse, ExplainResponse
from .service import cut_offer

if TYPE_CHECKING:
    from .service import Service

__all__ = ["explain_routes"]


def explain_routes(app: FastAPI, svc: Service) -> None:
    """POST /explain and POST /attention."""

    @app.post("/explain", response_model=ExplainResponse, tags=["explain"])
    async def explain(req: ExplainRequest) -> Response:
        """The cosine of a and b as token-pair contributions (exact), or [CLS] attention (marked)."""
        with texts_named("a", "b"):  # "text b is empty", as the library names it, not "text 1"
            check_texts([req.a, req.b])
        recipe = svc.recipe(req.options(), req.post)  # checks the post's name and the spec it was fitted on
        post = recipe.post
        # Counted as they run: the prompt asked (else the model's default) before each text.
        texts = [recipe.spec.prompt + text for text in (req.a, req.b)]

        def each_counted() -> list[int]:
            # each text counted alone, named by its field: alone, b was "text 0"
            counts = []
            for name, text in zip("ab", texts, strict=True):
                with texts_named(name):
                    counts.append(svc.count_tokens(text, req.long, stride=req.stride))
            return counts

        n_a, n_b = await svc.tokenizing(texts, each_counted)
        count = svc.check_tokens(n_a + n_b, long=req.long)
        # An exact split answers the (tokens of a) x (tokens of b) matrix of contributions.
        numbers = n_a * n_b if recipe.spec.pooling in exact_poolings() else n_a + n_b
        svc.check_answer(numbers, f"{n_a} x {n_b} token pairs", f"send shorter texts{cut_offer(req.long)}")
        result = await svc.on_worker(
            lambda: svc.model.explain(
                req.a,
                req.b,
                post=post,
                top_k=req.top_k,
                exact=req.exact,
                layers=req.layers,
                combine=req.combine,
                pooling=req.pooling,
                mask_special=req.mask_special,
                normalize=req.normalize,
                long=req.long,
                stride=req.stride,
                prompt_name=req.prompt_name,
            ),  # fmt: skip
            n_tokens=count,
        )

        def build() -> dict[str, Any]:
            if result.contributions is None:
                return {"model": svc.name, **result.to_dict()}
            return {"model": svc.name, **with_rows(result, "contributions", dtype=float)}

        return await answer(build, size=numbers)

    @app.post("/attention", response_model=AttentionResponse, tags=["explain"])
    async def attention(req: AttentionRequest) -> Response:
        """Weights as output_attentions gives them: (layers, heads, tokens, tokens), or the slice asked."""
        text: Any = tuple(req.inputs) if isinstance(req.inputs, list) else req.inputs

        # The layer and head asked are checked against the config first: an impossible one is refused
        # before anything loads (a light model loads its PyTorch module only for weights it can give).
        n_heads = _heads(svc)
        if not n_heads:  # a config naming none (a static model is refused here, with its one line)
            n_heads = await run_in_threadpool(lambda: int(svc.model.hf_model.config.num_attention_heads))
        layer = _layer(req, svc.model.n_layers, n_heads)

        def count() -> Any:
            items = check_texts([text], pairs=True)  # in a list: a pair is one item
            fit = svc.model.tokenizer.encode_one_window
            return svc.gated(items, lambda: fit(items, req.long, what="attention")[0])

        # Counted first (refused with long=error), so the answer is bounded before any forward; the
        # worker reads these tokens, not the text a second time.
        counted = await svc.tokenizing(req.inputs, count)
        n = len(counted)
        layers = svc.model.n_layers if layer is None else 1
        heads = 1 if req.head is not None or req.mean_heads else n_heads
        numbers = layers * heads * n * n
        svc.check_answer(
            numbers,
            f"{layers} layers x {heads} heads x {n} x {n} tokens",
            "ask for one layer (layer) or one head (head, mean_heads), or send a shorter text",
        )
        # One window of one text at most: it may run between another request's batches.
        tokens, weights = await svc.on_worker(
            lambda: attention_of(svc.model, text, long=req.long, tokens=counted), n_tokens=n
        )
        picked = _pick(weights, req, layer)
        return await answer(
            lambda: {
                "model": svc.name,
                "tokens": tokens.tokens,
                "token_type_ids": tokens.token_type_ids,
                "type_ids": tokens.token_type_ids,  # the old name, kept (deprecated in the schema)
                "special": tokens.special_tokens_mask,
                "n_dropped": tokens.n_dropped,
                "n_layers": int(weights.shape[0]),
                "n_heads": int(weights.shape[1]),
                "layer": layer,
                "head": req.head,
                "mean_heads": req.mean_heads,
                "attention": Rows(picked, dtype=np.float64, decimals=6),
            },
            size=picked.size,
        )


def _heads(svc: Service) -> int:
    """The model's attention heads, from its config (config.json where the model was opened light)."""
    return int(getattr(svc.model.config, "num_attention_heads", 0) or 0)


def _layer(req: AttentionRequest, n_layers: int, n_heads: int) -> int | None:
    """The layer asked, 1..L (None: every layer), once the layer and head asked are the model's."""
    if req.head is not None and req.mean_heads:  # one head was answered, labelled as the heads' mean
        raise InvalidInput(f"head: {req.head} and mean_heads: true; give one head or their mean, not both")
    if req.head is not None and req.head >= n_heads:
        raise InvalidInput(f"head: {req.head}; this model has heads 0..{n_heads - 1}")
    if req.layer is None:
        return None
    if req.layer == 0 or not -n_layers <= req.layer <= n_layers:
        raise InvalidInput(f"layer: {req.layer}; attention layers are 1..{n_layers} (or -1..-{n_layers})")
    return req.layer if req.layer > 0 else n_layers + 1 + req.layer


def _pick(weights: np.ndarray, req: AttentionRequest, layer: int | None) -> np.ndarray:
    """The slice of (layers, heads, tokens, tokens) weights asked, less each axis picked: a layer drops
    the layers' axis, a head or the heads' mean drops the heads' (with or without a layer)."""
    if req.head is not None:
        weights = weights[:, req.head]
    elif req.mean_heads:
        weights = weights.mean(axis=1)
    return weights if layer is None else weights[layer - 1]
