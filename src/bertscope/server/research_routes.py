"""The service's research route: POST /v2/cka, linear CKA between the served model's layers.

For small inputs (at most --max-inputs texts, each cut at the model's window): the estimator's sums are
(layers x width)^2 whatever the texts, and the answer is (layers + 1)^2 numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse

from ..core.tokens import check_texts
from .feature_schemas import CkaRequest, CkaResponse

if TYPE_CHECKING:
    from .service import Service

__all__ = ["research_routes"]


def research_routes(app: FastAPI, svc: Service) -> None:
    """POST /v2/cka."""

    @app.post("/v2/cka", response_model=CkaResponse, tags=["research"])
    async def cka(req: CkaRequest) -> Response:
        """Linear CKA between every pair of layers (0 = the embedding output), token or sentence rows."""
        svc.check_count(len(req.inputs))
        check_texts(req.inputs)
        result = await svc.on_worker(
            lambda: svc.model.cka(req.inputs, level=req.level.value, debiased=req.debiased, progress=False)
        )
        return JSONResponse({"model": svc.name, **result.to_dict()})
