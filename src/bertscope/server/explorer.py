"""The explorer: a static page at `/` (plain HTML + JS in `explorer/`) and the few JSON endpoints it needs.

    mount_explorer(app)   # after the service's routes; app.state.service must be set

The page calls the service's own endpoints (/tokenize, /anatomy, /embed, /static, /info) and these:
POST /explore/layers (token-to-token cosines per layer, each token's cosine to its static row per layer),
POST /explore/batch (the padded batch by `Model.batch`'s names: input_ids, attention_mask,
token_type_ids), GET /explore/posts (loaded post-processings); /explorer/ and /explorer/index.html go to /.

Both POST routes are bounded as the service's others: their texts are tokenized through the big-request
gate (`Service.gated`), their answers are refused (413) past --max-answer-floats before any forward, and
a text past the model's limit is cut and says so (`n_dropped`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from fastapi import FastAPI, Request, Response
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from ..core.similarity import unit
from ..core.tokens import Tokens, check_texts, pad_batch
from ..errors import InvalidInput
from .answers import Rows, answer
from .schema_fields import InputsWasText, OneText, TextList

if TYPE_CHECKING:
    from ..core.spec import EmbedSpec
    from ..model import Model
    from .service import Service

__all__ = ["mount_explorer", "layer_cosines"]

STATIC_DIR = Path(__file__).parent / "static"


class LayersRequest(InputsWasText):
    """One text whose tokens are followed through every layer."""

    model_config = ConfigDict(extra="forbid")
    inputs: OneText = Field(
        description="One non-empty text; `text` is accepted too.",
        examples=["I like eating bread"],
        validation_alias=AliasChoices("inputs", "text"),
    )

    @field_validator("inputs", mode="before")
    @classmethod
    def _one_text(cls, given: Any) -> Any:
        # pydantic said only "Input should be a valid string", with no fix
        if isinstance(given, list):
            raise PydanticCustomError(
                "one_text", "give one text (a string), not a list; /v2/embed takes several"
            )
        return given


class BatchRequest(BaseModel):
    """Texts to pad into one batch."""

    model_config = ConfigDict(extra="forbid")
    inputs: TextList = Field(description="Texts (each non-empty).", examples=[["I like bread", "Hi"]])


def every_layer(model: Model) -> EmbedSpec:
    """/explore/layers' spec: every layer's token vectors side by side, a text cut at the model's limit."""
    return model.spec(layers="all", combine="concat", pooling="mean", long="truncate")


def layer_numbers(model: Model, n_tokens: int) -> int:
    """Numbers in the answer for a text of `n_tokens`: per layer (L+1), its tokens x tokens cosines and
    each token's cosine to its static row and norm."""
    return (model.n_layers + 1) * n_tokens * (n_tokens + 2)


def layer_cosines(model: Model, text: str) -> dict[str, Any]:
    """Token-to-token cosines per layer (L+1, tokens, tokens) and cosine to the static row (L+1, tokens)."""
    spec = every_layer(model)
    tokens = model.engine.prepare([text], spec)[0]
    return cosines_of(model, tokens, _every_layer_rows(model, tokens, spec))


def _every_layer_rows(model: Model, tokens: Tokens, spec: EmbedSpec) -> np.ndarray:
    """(tokens, (L+1) * d): the forward of tokens already through `engine.prepare` with `spec`."""
    return next(iter(model.engine.fitted_token_matrices([tokens], spec)))[1]


def cosines_of(model: Model, tokens: Tokens, rows: np.ndarray) -> dict[str, Any]:
    """The answer of /explore/layers from a text's tokens and their rows (tokens, (L+1) * d)."""
    hidden = rows.reshape(len(tokens), model.n_layers + 1, -1).transpose(1, 0, 2)  # (L+1, tokens, d)
    units = unit(hidden.reshape(-1, hidden.shape[-1])).reshape(hidden.shape)
    pairs = np.einsum("ltd,lsd->lts", units, units)
    static = model.static(tokens.ids)  # (tokens, d_embedding)
    to_static: list[list[float]] | None = None
    if static.shape[1] == hidden.shape[2]:  # families with a projection (ALBERT) have narrower rows
        to_static = np.einsum("ltd,td->lt", units, unit(static)).astype(float).round(5).tolist()
    return {
        "tokens": tokens.tokens,
        "ids": tokens.ids,
        "special": tokens.special_tokens_mask,
        "n_dropped": tokens.n_dropped,
        "n_layers": int(hidden.shape[0] - 1),
        "cosines": pairs.astype(float).round(5).tolist(),
        "to_static": to_static,
        # 6 decimals: a norm (tens) at 4 missed the library's by 5e-5; the (L+1) x tokens of them are few
        "norms": np.linalg.norm(hidden, axis=2).astype(float).round(6).tolist(),
    }


def _one_text_said(message: str) -> str:
    """The library's refusal of "text 0" said of the one text /explore/layers takes, its field `inputs`."""
    return "inputs" + message[len("text 0") :] if message.startswith("text 0 ") else message


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
        spec = every_layer(svc.model)

        def tokenize() -> Tokens:
            try:
                items = check_texts(req.inputs)
                return svc.gated(items, lambda: svc.model.engine.prepare(items, spec))[0]
            except InvalidInput as exc:  # "text 0 is empty": the route takes one text, its field "inputs"
                raise InvalidInput(_one_text_said(str(exc))) from exc

        tokens = await svc.tokenizing(req.inputs, tokenize)
        n, kept = len(tokens), svc.model.n_layers + 1
        svc.check_tokens(n, layers=kept)
        numbers = layer_numbers(svc.model, n)
        svc.check_answer(
            numbers, f"{kept} layers x {n} tokens x {n + 2} values", "send a shorter text (it counts squared)"
        )
        rows = await svc.on_worker(lambda: _every_layer_rows(svc.model, tokens, spec), n_tokens=n)
        return await answer(lambda: {"model": svc.name, **cosines_of(svc.model, tokens, rows)}, size=numbers)

    @app.post("/explore/batch", tags=["explorer"])
    async def explore_batch(req: BatchRequest) -> Response:
        """Texts as the model sees them together: right-padded ids, pieces and the attention mask."""

        def tokenize() -> list[Tokens]:
            items = svc.texts(req.inputs)
            return svc.gated(items, lambda: svc.model.tokenize(items))

        toks = await svc.tokenizing(req.inputs, tokenize)
        width = max(map(len, toks))
        types = svc.model.family.uses_token_types
        # at each padded position: a piece, its id (twice: input_ids and ids), a mask value, a type id
        per_token = 4 + int(types)
        numbers = per_token * len(toks) * width
        svc.check_answer(
            numbers,
            f"{len(toks)} texts x {width} padded tokens x {per_token} values",
            "send fewer or shorter texts",
        )

        def build() -> dict[str, Any]:
            ids, mask = pad_batch([t.ids for t in toks], svc.model.pad_id)
            pad = svc.model.id_to_token.get(svc.model.pad_id, "[PAD]")
            # Model.batch's names (transformers'); null token_type_ids where the family has none
            type_ids = Rows(pad_batch([t.token_type_ids for t in toks], 0)[0]) if types else None
            return {
                "model": svc.name,
                "input_ids": Rows(ids),
                "attention_mask": Rows(mask),
                "token_type_ids": type_ids,
                "tokens": [t.tokens + [pad] * (width - len(t)) for t in toks],
                "pad_id": svc.model.pad_id,
                "n_dropped": [t.n_dropped for t in toks],
                "ids": Rows(ids),  # the older name of input_ids, kept beside it (deprecated)
            }

        return await answer(build, size=numbers)

    @app.get("/explore/posts", tags=["explorer"])
    async def explore_posts() -> Response:
        """Names of the post-processings (whitening, PCA, ...) this server has loaded."""
        return JSONResponse({"model": svc.name, "posts": sorted(getattr(svc, "posts", None) or {})})

    @app.get("/explorer/index.html", include_in_schema=False)
    @app.get("/explorer/", include_in_schema=False)
    async def page_file(request: Request) -> Response:
        """The page is served at / only: its relative links (explorer/app.js) resolve from there, and
        from /explorer/ they named /explorer/explorer/app.js, a broken copy of the page."""
        return RedirectResponse(request.scope.get("root_path", "") + "/")

    app.mount("/explorer", StaticFiles(directory=STATIC_DIR), name="explorer")
