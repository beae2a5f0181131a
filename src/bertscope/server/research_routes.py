"""The service's research route: POST /v2/cka, linear CKA between the served model's layers.

At most --max-inputs texts, read whole (long texts windowed), whose tokens x (layers + 1) stay within
--max-request-tokens: the library keeps every layer of each text it reads, so the budget, checked
before any forward, bounds the memory. The estimator's sums are (layers x width)^2 whatever the texts,
and the answer is (layers + 1)^2 numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse

from ..core.tokens import check_texts
from .feature_schemas import CkaRequest, CkaResponse
from .wording import as_fields

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
        # CKA keeps every layer of each text it reads: the budget counts tokens x layers.
        layers = svc.model.n_layers + 1
        count = await svc.tokenizing(req.inputs, lambda: svc.count_tokens(req.inputs, layers=layers))
        svc.check_tokens(count, layers=layers)
        result = await svc.on_worker(
            lambda: svc.model.cka(req.inputs, level=req.level.value, debiased=req.debiased, progress=False),
            n_tokens=count,
        )
        answer = result.to_dict()
        if answer.get("note"):  # the library's note names its keyword (debiased=True): here, the field
            answer["note"] = as_fields(answer["note"], CkaRequest)
        return JSONResponse({"model": svc.name, **answer})
