"""TEI's field schemas and answer bodies, in the shapes of TEI's own OpenAPI document (types.rs)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, RootModel, WithJsonSchema

from .openai_schemas import OPENAI_INPUT
from .schema_fields import ID_SCHEMA, TEXT_SCHEMA, texts_only

__all__ = [
    "TEI_INPUT",
    "TEI_TEXTS",
    "TEI_TEXT",
    "TEI_IDS",
    "TEI_SENTENCES",
    "TEIEmbedResponse",
    "TEIEmbedAllResponse",
    "TEISimilarityResponse",
    "TEISimpleToken",
    "TEITokenizeResponse",
    "TEIDecodeResponse",
    "TEIInfo",
    "TEIError",
]

# TEI's routes: text or texts (/embed also ids, fitted away unless --token-ids model); at most --max-inputs.
TEI_INPUT = WithJsonSchema(OPENAI_INPUT)
TEI_TEXTS = WithJsonSchema({"anyOf": [TEXT_SCHEMA, texts_only("inputs")]})
TEI_TEXT = WithJsonSchema(TEXT_SCHEMA)
_ID_LIST = {"type": "array", "items": ID_SCHEMA, "minItems": 1}
TEI_IDS = WithJsonSchema(
    {"anyOf": [_ID_LIST, {"type": "array", "items": _ID_LIST, "minItems": 1, "x-fit": "inputs"}]}
)
TEI_SENTENCES = WithJsonSchema(texts_only("sentences"))


# TEI's answers, written by its routes themselves (no response_model): the OpenAPI document's 200 schemas,
# under TEI-prefixed names where bertscope has its own of that name.
class TEIEmbedResponse(RootModel[list[list[float]]]):
    """TEI's EmbedResponse: one sentence vector per input, in order."""


class TEIEmbedAllResponse(RootModel[list[list[list[float]]]]):
    """TEI's EmbedAllResponse: per input, every token's vector, specials included."""


class TEISimilarityResponse(RootModel[list[float]]):
    """TEI's SimilarityResponse: the source sentence's cosine with each sentence, in order."""


class TEISimpleToken(BaseModel):
    """TEI's SimpleToken: start and stop are UTF-8 byte offsets into the text, null for a special."""

    id: int = Field(ge=0)
    text: str
    special: bool
    start: int | None = Field(None, ge=0)
    stop: int | None = Field(None, ge=0)


class TEITokenizeResponse(RootModel[list[list[TEISimpleToken]]]):
    """TEI's TokenizeResponse: per text, its tokens."""


class TEIDecodeResponse(RootModel[list[str]]):
    """TEI's DecodeResponse: one text per id list."""


class TEIEmbeddingModel(BaseModel):
    pooling: str


class TEIModelType(BaseModel):
    """TEI's ModelType; bertscope serves embedding models only."""

    embedding: TEIEmbeddingModel


class TEIInfo(BaseModel):
    """TEI's Info, and the model's fingerprint (not TEI's: its clients ignore fields they do not know)."""

    model_id: str
    model_sha: str | None = None
    model_dtype: str
    served_model_name: str
    model_type: TEIModelType
    max_concurrent_requests: int = Field(ge=0)
    max_input_length: int = Field(ge=0)
    max_batch_tokens: int = Field(ge=0)
    max_batch_requests: int | None = Field(None, ge=0)
    max_client_batch_size: int = Field(ge=0)
    auto_truncate: bool
    tokenization_workers: int = Field(ge=0)
    version: str
    sha: str | None = None
    docker_label: str | None = None
    fingerprint: dict[str, Any] = Field(description="The same as /v2/info's (see `bertscope verify`).")


class TEIError(BaseModel):
    """TEI's ErrorResponse."""

    error: str
    error_type: Literal["Unhealthy", "Backend", "Overloaded", "Validation", "Tokenizer", "Empty"]
