"""The HTTP service: every embedding bertscope makes, behind FastAPI, batched across requests.

    app = create_app(bertscope.load(), settings=ServerSettings(api_key="secret"))

Every request is checked (texts, options, long-text policy) before it is queued, so bad input is a 4xx
and never reaches a batch; sentence work is then batched with other requests by the one worker
(`batching`), and everything else that touches the model runs on that worker too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from fastapi.middleware.cors import CORSMiddleware
from fastapi_offline import FastAPIOffline

from .. import __version__
from .answers import Reservations
from .batching import Batcher, Metrics
from .chunk_routes import chunk_routes
from .error_answers import add_error_handlers
from .explain_routes import explain_routes
from .explorer import mount_explorer
from .guard import DOCS_ASSETS, Guard
from .occurrences import occurrence_routes
from .openapi import fit_openapi
from .research_routes import research_routes
from .response_schemas import ERROR_RESPONSES
from .routes import embedding_routes, model_routes, ops_routes
from .service import Service
from .settings import ServerSettings
from .tei import tei_routes

if TYPE_CHECKING:
    from ..model import Model

__all__ = ["create_app"]


def create_app(model: Model, *, settings: ServerSettings | None = None) -> FastAPI:
    """The FastAPI app serving `model`; the worker thread runs while the app's lifespan does."""
    settings = settings or ServerSettings()
    metrics = Metrics()
    batcher = Batcher(
        model,
        max_batch_tokens=settings.max_batch_tokens or model.engine.token_budget,
        max_wait_ms=settings.max_wait_ms,
        max_queue=settings.max_queue,
        client_share=settings.queue_share,
        batching=settings.batching,
        metrics=metrics,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        batcher.start()
        try:
            yield
        finally:
            await run_in_threadpool(batcher.stop)

    # FastAPIOffline is FastAPI with /docs and /redoc loading swagger-ui's and ReDoc's files from the
    # service itself (the package ships them), not from a CDN: they work on a machine with no internet.
    app = FastAPIOffline(
        static_url=DOCS_ASSETS,
        title="bertscope",
        version=__version__,
        lifespan=lifespan,
        description="Every embedding of a BERT-family model: static rows, the embedding layer taken "
        "apart, every layer's token vectors, word and sentence vectors; OpenAI-compatible /v1/embeddings.",
        responses=ERROR_RESPONSES,
    )
    service = Service(model, settings, batcher)
    app.state.service = service
    add_error_handlers(app)
    tei_routes(app, service)
    embedding_routes(app, service)
    chunk_routes(app, service)
    model_routes(app, service)
    ops_routes(app, service, metrics)
    explain_routes(app, service)
    occurrence_routes(app, service)
    research_routes(app, service)
    mount_explorer(app)
    _describe(app, model, settings)
    paths = frozenset(getattr(r, "path", "") for r in app.routes)
    app.add_middleware(Reservations)  # inside the guard: each request's answer reserved before its work
    app.add_middleware(Guard, settings=settings, metrics=metrics, endpoints=paths)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["*"],
            allow_headers=["*"],
        )
    return app


def _describe(app: FastAPI, model: Model, settings: ServerSettings) -> None:
    """The OpenAPI schema of this service: fitted to its model and limits, and with --api-key, saying
    that every endpoint but the open ones takes the key, either way."""
    from fastapi.openapi.utils import get_openapi

    from .guard import OPEN_PATHS

    def schema() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            doc = fit_openapi(doc, model=model, settings=settings)
            if settings.api_key:
                doc.setdefault("components", {})["securitySchemes"] = {
                    "bearer": {"type": "http", "scheme": "bearer"},
                    "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                }
                for path, operations in doc.get("paths", {}).items():
                    if path not in OPEN_PATHS:
                        for operation in operations.values():
                            operation["security"] = [{"bearer": []}, {"apiKey": []}]
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = schema  # type: ignore[method-assign]
