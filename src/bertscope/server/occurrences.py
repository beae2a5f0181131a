"""The service's occurrence search: POST /occurrences over the token and word stores it was started with.

Stores are named at start-up (`bertscope serve --store NAME=FILE`), never by a path in a request, and
must have been made with the served model: each is opened and checked once, when the app is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from ..errors import InvalidSpec
from ..io.occurrences import search_occurrences, token_store
from ..io.query import same_model
from ..io.stores import Store
from .feature_schemas import OccurrencesRequest, OccurrencesResponse

if TYPE_CHECKING:
    from .service import Service

__all__ = ["occurrence_routes"]


def occurrence_routes(app: FastAPI, svc: Service) -> None:
    """POST /occurrences: a word's stored occurrences, nearest to its use in a context first."""
    stores = {name: _served(token_store(path), svc) for name, path in svc.settings.stores}

    @app.post("/occurrences", response_model=OccurrencesResponse, tags=["corpus"])
    async def occurrences(req: OccurrencesRequest) -> OccurrencesResponse:
        """The top_k stored occurrences of `word` nearest to its use in `context` (or the first top_k)."""
        if req.store not in stores:
            loaded = ", ".join(stores) or "none (start the server with --store NAME=FILE)"
            raise InvalidSpec(f"store: no store named {req.store!r} is loaded; loaded: {loaded}")
        store = stores[req.store]
        count = None
        if req.context is not None:
            # Counted before any forward, through the big-request gate, as every route that runs the model.
            count = await svc.tokenizing(req.context, _context_tokens, svc, store.settings, req.context)
        found = await svc.on_worker(
            lambda: search_occurrences(
                store,
                word=req.word,
                context=req.context,
                top_k=req.top_k,
                model=None if req.context is None else svc.model,  # nothing is embedded without one
            ),
            n_tokens=count,
        )
        return OccurrencesResponse(
            model=svc.name,
            store=req.store,
            word=req.word,
            total=found.total,
            hits=[hit.__dict__ for hit in found.hits],
        )


def _context_tokens(svc: Service, settings: dict[str, Any], context: str) -> int:
    """The tokens `context` runs, embedded as the store's rows were (`io.occurrences._query_vector`: the
    store's recorded prompt before it, none since token and word rows take none, its long-text policy and
    stride, each stored layer kept), or OverBudget (413) when they pass --max-request-tokens."""
    layers = settings.get("layers") or [-1]
    kept = len(layers) if settings.get("combine") in ("concat", "stack") else 1
    prompted = (settings.get("prompt") or "") + context
    long, stride = settings.get("long", "truncate"), settings.get("stride")
    count = svc.count_tokens(prompted, long, layers=kept, stride=stride, cuttable=False)  # the store's
    return svc.check_tokens(count, layers=kept)


def _served(store: Store, svc: Service) -> Store:
    """The store, when the served model is the one it was made with: compared by the model's files, as
    every query compares them (`io.query.same_model`), so a model fine-tuned in place is refused and the
    same files under another name are served."""
    same_model(
        store.settings, svc.model, path=store.path,
        fix="serve the store's own model (-m), or embed the corpus again with this one",
    )  # fmt: skip
    return store
