"""The explorer: a static page at `/` (plain HTML + JS in `explorer/`) and the few JSON endpoints it needs.

    mount_explorer(app)   # after the service's routes; app.state.service must be set

The page calls the service's own endpoints (/tokenize, /anatomy, /embed, /static, /info) and these:
POST /explore/layers (token-to-token cosines per layer, each token's cosine to its static row per layer),
POST /explore/batch (the padded id batch and attention mask), GET /explore/posts (loaded post-processings).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from fastapi import FastAPI, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from ..core.similarity import unit
from ..core.tokens import check_texts, pad_batch
from .schemas import OneText, TextList

if TYPE_CHECKING:
    from ..model import Model
    from .service import Service

__all__ = ["mount_explorer", "layer_cosines"]

STATIC_DIR = Path(__file__).parent / "static"


class LayersRequest(BaseModel):
    """One text whose tokens are followed through every layer."""

    model_config = ConfigDict(extra="forbid")
    inputs: OneText = Field(
        description="One non-empty text; `text` is accepted too.",
        examples=["I like eating bread"],
        validation_alias=AliasChoices("inputs", "text"),
    )


class BatchRequest(BaseModel):
    """Texts to pad into one batch."""

    model_config = ConfigDict(extra="forbid")
    inputs: TextList = Field(description="Texts (each non-empty).", examples=[["I like bread", "Hi"]])


def layer_cosines(model: Model, text: str) -> dict[str, Any]:
    """Token-to-token cosines per layer (L+1, tokens, tokens) and cosine to the static row (L+1, tokens)."""
    tok = model.tokenize(text)
    hidden = model.hidden_states(text)  # (L+1, tokens, d)
    units = unit(hidden.reshape(-1, hidden.shape[-1])).reshape(hidden.shape)
    pairs = np.einsum("ltd,lsd->lts", units, units)
    static = model.static(tok.ids)  # (tokens, d_embedding)
    to_static: list[list[float]] | None = None
    if static.shape[1] == hidden.shape[2]:  # families with a projection (ALBERT) have narrower rows
        to_static = np.einsum("ltd,td->lt", units, unit(static)).astype(float).round(5).tolist()
    return {
        "tokens": tok.tokens,
        "ids": tok.ids,
        "special": tok.special_mask,
        "n_layers": int(hidden.shape[0] - 1),
        "cosines": pairs.astype(float).round(5).tolist(),
        "to_static": to_static,
        "norms": np.linalg.norm(hidden, axis=2).astype(float).round(4).tolist(),
    }


def mount_explorer(app: FastAPI) -> None:
    """Serve the explorer page at `/`, its files under /explorer, and its /explore/* endpoints."""
    svc: Service = app.state.service

    @app.get("/", include_in_schema=False)
    async def index() -> Response:
        """The explorer page."""
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    @app.post("/explore/layers", tags=["explorer"])
    async def explore_layers(req: LayersRequest) -> Response:
        """For one text: token-to-token cosine matrix per layer and each token's cosine to its static row."""
        check_texts(req.inputs)
        out = await svc.on_worker(lambda: layer_cosines(svc.model, req.inputs))
        return JSONResponse({"model": svc.name, **out})

    @app.post("/explore/batch", tags=["explorer"])
    async def explore_batch(req: BatchRequest) -> Response:
        """Texts as the model sees them together: right-padded ids, pieces and the attention mask."""
        items = svc.texts(req.inputs)
        toks = await run_in_threadpool(svc.model.tokenize, items)
        ids, mask = pad_batch([t.ids for t in toks], svc.model.pad_id)
        pad = svc.model.id_to_token.get(svc.model.pad_id, "[PAD]")
        pieces = [t.tokens + [pad] * (ids.shape[1] - len(t)) for t in toks]
        return JSONResponse(
            {
                "pad_id": svc.model.pad_id,
                "tokens": pieces,
                "ids": ids.tolist(),
                "attention_mask": mask.tolist(),
            }
        )

    @app.get("/explore/posts", tags=["explorer"])
    async def explore_posts() -> Response:
        """Names of the post-processings (whitening, PCA, ...) this server has loaded."""
        return JSONResponse({"posts": sorted(getattr(svc, "posts", None) or {})})

    app.mount("/explorer", StaticFiles(directory=STATIC_DIR), name="explorer")
