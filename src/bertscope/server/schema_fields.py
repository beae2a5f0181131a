"""Fields shared by the request bodies: texts and ids with their JSON schemas, strict ints, strategy names."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..core._enums import LongText, StrEnum
from ..errors import InvalidSpec

__all__ = [
    "TEXT_SCHEMA",
    "ID_SCHEMA",
    "Strict",
    "fitted_int",
    "named",
    "one_name",
    "one_top_k",
    "top_k_field",
    "spelled",
    "texts_only",
    "whole_number",
    "WholeInt",
    "PositiveInt",
    "Layers",
    "OneText",
    "TextList",
    "Pair",
    "Text",
    "Texts",
    "SplitTexts",
    "Cut",
    "CUT_HELP",
]

# The OpenAPI schema says what the server takes, but validation stays the server's own (`check_texts`,
# `parse_layers`: one-line messages). What depends on the served model or the service's limits (layers,
# vocabulary, names, --max-inputs) carries an "x-fit" mark that `openapi.fit_openapi` fills in per app.
TEXT_SCHEMA: dict[str, Any] = {"type": "string", "minLength": 1, "x-fit": "text"}
_PAIR: dict[str, Any] = {"type": "array", "items": TEXT_SCHEMA, "minItems": 2, "maxItems": 2}


def _texts(fit: str) -> dict[str, Any]:
    """One text, or a non-empty list of texts and pairs whose length the service's limit caps."""
    listed = {"type": "array", "items": {"anyOf": [TEXT_SCHEMA, _PAIR]}, "minItems": 1, "x-fit": fit}
    return {"anyOf": [TEXT_SCHEMA, listed]}


def texts_only(fit: str) -> dict[str, Any]:
    """A non-empty list of texts (no pairs) whose length the service's limit caps."""
    return {"type": "array", "items": TEXT_SCHEMA, "minItems": 1, "x-fit": fit}


OneText = Annotated[str, WithJsonSchema(TEXT_SCHEMA)]
# Plain texts (no pairs), at most --max-inputs.
TextList = Annotated[list[str], WithJsonSchema(texts_only("inputs"))]
# A sentence pair (A, B) is a list of exactly two texts.
Pair = Annotated[list[str], Field(min_length=2, max_length=2), WithJsonSchema(_PAIR)]
Text = Annotated[str | Pair, WithJsonSchema({"anyOf": [TEXT_SCHEMA, _PAIR]})]
# inputs: at most --max-inputs; split: more are split into parts under --auto-split.
Texts = Annotated[str | list[str | Pair], WithJsonSchema(_texts("inputs"))]
SplitTexts = Annotated[str | list[str | Pair], WithJsonSchema(_texts("inputs-split"))]


def whole_number(value: Any) -> Any:
    """1.0 as 1: JSON Schema's integer includes it (true and "1" stay refused by the strict int after)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def spelled(kind: type[StrEnum]) -> BeforeValidator:
    """A strategy name in any spelling the library takes (`StrEnum.parse`: "MEAN", "mean-sqrt-len") as
    its member; a name the library does not know is left to the field's own check, which lists the names.
    The OpenAPI document still lists the names as written (a before-validator leaves the schema alone)."""

    def parse(value: Any) -> Any:
        if isinstance(value, str):
            try:
                return kind.parse(value, what=kind.__name__)
            except InvalidSpec:
                return value
        return value

    return BeforeValidator(parse)


# Strict: JSON true must not pass as layer 1 or token id 1 (pydantic's lax mode would coerce it).
WholeInt = Annotated[StrictInt, BeforeValidator(whole_number)]
PositiveInt = Annotated[StrictInt, Field(ge=1), BeforeValidator(whole_number)]
Layers = Annotated[
    str | WholeInt | list[WholeInt] | None,
    WithJsonSchema(
        {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "array"}], "x-fit": "layers"}
    ),
]


def fitted_int(fit: str) -> dict[str, Any]:
    """An integer whose bounds are the served model's (a layer, a head), or null."""
    return {"anyOf": [{"type": "integer", "x-fit": fit}, {"type": "null"}]}


# A token id of the served model's vocabulary.
ID_SCHEMA: dict[str, Any] = {"type": "integer", "minimum": 0, "x-fit": "id"}


def named(fit: str) -> WithJsonSchema:
    """A name the service knows (a loaded post-processing, a prompt, a store), or null."""
    return WithJsonSchema({"anyOf": [{"type": "string", "x-fit": fit}, {"type": "null"}]})


class Strict(BaseModel):
    # Unknown fields are errors, so a misspelt option is reported instead of silently ignored.
    model_config = ConfigDict(extra="forbid")
    # bertscope's own bodies set it: an unknown field that sentence-transformers, TEI or OpenAI name
    # (`normalize_embeddings`, `truncate`) is refused with the field the body has instead
    # (`error_answers.other_names`); TEI's bodies keep TEI's plain refusal.
    names_elsewhere: ClassVar[bool] = False
    # bertscope's own bodies (TEI's set False): a field one lacks that another takes, or a near miss of
    # one it has, is said so (`error_answers.other_names`)
    own_body: ClassVar[bool] = True


def one_name(given: Any, name: str, old: str, message: str) -> Any:
    """The body as sent, or a refusal (`message`, one line as written) where it holds a field under both
    its name and its older spelling, whatever their values."""
    if isinstance(given, dict) and name in given and old in given:
        raise PydanticCustomError("one_name", message)
    return given


def one_inputs(given: Any, old: str) -> Any:
    """The body as sent, or the one-line refusal of "inputs" beside `old` ("text", "items"), its older
    name on the route (pydantic said only that the old name was an extra input)."""
    message = f'"inputs" and "{old}" both given: "{old}" is the older name of "inputs"; send "inputs" only'
    return one_name(given, "inputs", old, message)


class InputsWasText(BaseModel):
    """A one-text body whose "inputs" was "text" (/anatomy, /attention, /explore/layers): both at once are
    refused in `one_inputs`' one line, where pydantic said only that "text" was an extra input."""

    @model_validator(mode="before")
    @classmethod
    def _one_inputs(cls, given: Any) -> Any:
        return one_inputs(given, "text")


def top_k_field(default: int, *, least: int, what: str, old: str) -> Any:
    """A route's count of results: "top_k", as the library and the command line name it, at most 1000,
    with `old` ("k" or "top"), its older spelling on the route, still read but not advertised."""
    return Field(
        default,
        ge=least,
        le=1000,
        description=f"{what}; `{old}` is accepted too.",
        validation_alias=AliasChoices("top_k", old),
    )


def one_top_k(old: str) -> str:
    """The refusal of a body with "top_k" and `old`, its older spelling on this route ("k" or "top"):
    the count of results has one name in the library, the command line and the service."""
    return f'"top_k" and "{old}" both given: "{old}" is the older spelling of "top_k"; send "top_k" only'


# One text's routes (/anatomy, /attention) read one window: a text over it is cut (counted in
# n_dropped) or refused; window is /v2/embed's.
Cut = Annotated[Literal[LongText.TRUNCATE, LongText.ERROR], spelled(LongText)]
CUT_HELP = "A text over the model's limit: cut (counted in n_dropped) or a 422."
