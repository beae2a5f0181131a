"""OpenAI's embeddings request and answer bodies, and the 422 for bertscope's own fields sent there."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from .schema_fields import ID_SCHEMA, TEXT_SCHEMA, PositiveInt, WholeInt, texts_only

__all__ = ["OPENAI_INPUT", "ELSEWHERE", "OpenAIRequest", "OpenAIResponse"]

_IDS: dict[str, Any] = {"type": "array", "items": ID_SCHEMA, "minItems": 1, "x-fit": "ids"}
# Text(s) or token id list(s); TEI's /embed takes the same.
OPENAI_INPUT = {
    "anyOf": [
        TEXT_SCHEMA,
        texts_only("inputs-split"),
        _IDS,
        {"type": "array", "items": _IDS, "minItems": 1, "x-fit": "inputs-split"},
    ]
}

# bertscope's fields that change the vectors, which /v1/embeddings does not take, and the routes that do.
# Ignored there, like any unknown field, they would be answered with other vectors than asked for.
ELSEWHERE: dict[str, tuple[str, ...]] = {
    "normalize": ("/v2/embed", "TEI's /embed"),
    "prompt_name": ("/v2/embed", "TEI's /embed"),
    "truncation_direction": ("TEI's /embed",),
    **{
        name: ("/v2/embed",)
        for name in ("pooling", "layers", "combine", "mask_special", "long", "stride", "post")
    },
}


def _elsewhere(named: list[str]) -> str:
    """The 422 for bertscope's fields sent to /v1/embeddings: which route takes them."""
    common = [route for route in ELSEWHERE[named[0]] if all(route in ELSEWHERE[n] for n in named)]
    one = len(named) == 1
    where = " or ".join(common) if common else ", ".join(f"{n} to {' or '.join(ELSEWHERE[n])}" for n in named)
    return (
        f"{', '.join(named)}: /v1/embeddings does not take {'it' if one else 'them'} (OpenAI's API has no "
        f"such field{'' if one else 's'}), and ignoring {'it' if one else 'them'} would answer other "
        f"vectors than asked; send {'it' if one else 'them'} to {where}, or leave "
        f"{'it' if one else 'them'} out"
    )


class OpenAIRequest(BaseModel):
    """The OpenAI embeddings request: strings, or token ids of this model's own vocabulary."""

    # Clients send fields of their own (user, extra_body); OpenAI ignores what it does not know, so do we
    # (TEI's OpenAI route too), except bertscope's own fields that would change the vectors (ELSEWHERE).
    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _not_elsewhere(cls, given: Any) -> Any:
        named = [name for name in ELSEWHERE if isinstance(given, dict) and name in given]
        if named:
            raise PydanticCustomError("field_elsewhere", _elsewhere(named))
        return given

    input: Annotated[
        str | list[str] | list[WholeInt] | list[list[WholeInt]], WithJsonSchema(OPENAI_INPUT)
    ] = Field(description="Text(s) or token id list(s).")
    model: str | None = Field(None, description="Any name; the served model answers and is named back.")
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Annotated[
        PositiveInt | None,
        WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 1, "x-fit": "width"}, {"type": "null"}]}),
    ] = Field(None, description="Keep the first N dimensions (unit length again).")
    user: str | None = None
    # Not OpenAI's: its API refuses an input over the context (400); TEI's field name asks for the cut.
    truncate: StrictBool = Field(
        False,
        description="bertscope's extension (TEI's name): cut inputs over the model's limit instead of "
        "a 400 (openai client: extra_body={'truncate': True}).",
    )


class OpenAIEmbedding(BaseModel):
    """One vector in OpenAI's shape."""

    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class OpenAIUsage(BaseModel):
    """Tokens read, [CLS]/[SEP] included."""

    prompt_tokens: int
    total_tokens: int


class OpenAIResponse(BaseModel):
    """The OpenAI embeddings response."""

    object: Literal["list"] = "list"
    data: list[OpenAIEmbedding]
    model: str
    usage: OpenAIUsage
