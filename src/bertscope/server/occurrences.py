"""The service's occurrence search: POST /occurrences over the token and word stores it was started with.

Stores are named at start-up (`bertscope serve --store NAME=FILE`), never by a path in a request, and
must have been made with the served model: each is opened and checked when the app is built, and again
when its file has changed since (rewritten by `embed --overwrite`, say): its settings are then read anew,
as the rows are read per request, so a context is never embedded by settings the rows were not made with.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from ..core.fingerprint_facts import file_identity
from ..errors import BertscopeError, CorpusError, InvalidSpec
from ..io.occurrences import checked_context, search_occurrences, token_store
from ..io.query import same_model
from ..io.stores import Store
from .feature_schemas import OccurrencesRequest, OccurrencesResponse

if TYPE_CHECKING:
    from .service import Service

__all__ = ["occurrence_routes"]


def occurrence_routes(app: FastAPI, svc: Service) -> None:
    """POST /occurrences: a word's stored occurrences, nearest to its use in a context first."""
    stores = {name: _Served.open(name, Path(path), svc) for name, path in svc.settings.stores}

    @app.post("/occurrences", response_model=OccurrencesResponse, tags=["corpus"])
    async def occurrences(req: OccurrencesRequest) -> OccurrencesResponse:
        """The top_k stored occurrences of `word` nearest to its use in `context` (or the first top_k)."""
        if req.store not in stores:
            loaded = ", ".join(stores) or "none (start bertscope serve with --store NAME=FILE)"
            raise InvalidSpec(f"store: no store named {req.store!r} is loaded; loaded: {loaded}")
        served = stores[req.store]
        store, identity = served.fresh(svc)
        count = None
        checked_context(req.context)  # before it is counted: named as the context, not as "text 0"
        if req.context is not None:
            # Counted before any forward, through the big-request gate, as every route that runs the model.
            count = await svc.tokenizing(req.context, _context_tokens, svc, store.settings, req.context)
        try:
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
        except Exception:
            _unchanged(req.store, store.path, identity)  # a file rewritten mid-read is named, not a 500
            raise
        _unchanged(req.store, store.path, identity)  # rewritten while read: the rows may not be the settings'
        return OccurrencesResponse(
            model=svc.name,
            store=req.store,
            word=req.word,
            context=req.context,
            context_span=None if found.context_span is None else list(found.context_span),
            n_occurrences=found.n_occurrences,
            n_dropped=found.n_dropped,
            total=found.n_occurrences,  # its older name, still sent beside it
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


@dataclass
class _Served:
    """A served store, opened and checked, and the identity of the file it was read from."""

    name: str
    store: Store
    identity: tuple[int, ...]

    @classmethod
    def open(cls, name: str, path: Path, svc: Service) -> _Served:
        """The store `name` at `path`, checked to hold token or word rows of the served model."""
        # Taken before the settings are read: a file rewritten in between is read again at the next request.
        identity = file_identity(path.stat()) if path.is_file() else ()  # none: token_store says why
        return cls(name, _served(token_store(path), svc), identity)

    def fresh(self, svc: Service) -> tuple[Store, tuple[int, ...]]:
        """The store as its file is now, and that file's identity: opened and checked again where the file
        changed since it was read."""
        identity = _identity(self.name, self.store.path)
        if identity != self.identity:
            try:
                self.store = _served(token_store(self.store.path), svc)
            except BertscopeError as error:
                raise CorpusError(
                    f"store {self.name!r}: {self.store.path} changed since the server opened it and can no "
                    f"longer be served: {error} (or restart bertscope serve with --store {self.name}=FILE)"
                ) from error
            self.identity = identity
        return self.store, identity


def _unchanged(name: str, path: Path, identity: tuple[int, ...]) -> None:
    """Refuse an answer read from a file rewritten while the request read it."""
    if _identity(name, path) != identity:
        raise CorpusError(
            f"store {name!r}: {path} changed while this request read it; send the request again once it is "
            "written"
        )


def _identity(name: str, path: Path) -> tuple[int, ...]:
    """The file's identity (size, times, inode), or CorpusError saying it is gone."""
    try:
        return file_identity(os.stat(path))
    except FileNotFoundError:
        raise CorpusError(
            f"store {name!r}: {path} is gone (deleted or moved since the server opened it): put it back, or "
            f"restart bertscope serve with --store {name}=FILE naming where it is now"
        ) from None


def _served(store: Store, svc: Service) -> Store:
    """The store, when the served model is the one it was made with: compared by the model's files, as
    every query compares them (`io.query.same_model`), so a model fine-tuned in place is refused and the
    same files under another name are served."""
    same_model(
        store.settings, svc.model, path=store.path,
        fix="serve the store's own model (-m), or embed the corpus again with this one",
    )  # fmt: skip
    return store
