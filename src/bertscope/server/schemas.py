"""The service's request and response bodies (pydantic); the strategy fields reuse the library's enums."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    RootModel,
    StrictBool,
    StrictInt,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..core._enums import Combine, Level, LongText, Pooling, StrEnum, SubwordPooling
from ..core.spec import EmbedOptions
from ..errors import InvalidSpec

__all__ = [
    "TEXT_SCHEMA",
    "Strict",
    "SpecFields",
    "fitted_int",
    "spelled",
    "texts_only",
    "whole_number",
    "WholeInt",
    "PositiveInt",
    "OneText",
    "TextList",
    "EmbedRequest",
    "EmbedResponse",
    "TokensRequest",
    "TokensResponse",
    "ONE_LEVEL",
    "ONE_AS_WORDS",
    "one_name",
    "ELSEWHERE",
    "OpenAIRequest",
    "OpenAIResponse",
    "TokenizeRequest",
    "StaticRequest",
    "AnatomyRequest",
    "Cut",
    "CUT_HELP",
    "SimilarityRequest",
    "SimilarityResponse",
    "ErrorResponse",
    "ERROR_RESPONSES",
    "TEIEmbedResponse",
    "TEIEmbedAllResponse",
    "TEISimilarityResponse",
    "TEISimpleToken",
    "TEITokenizeResponse",
    "TEIDecodeResponse",
    "TEIInfo",
    "TEIError",
    "HealthResponse",
    "ServiceInfo",
    "TokenizeResponse",
    "StaticResponse",
    "AnatomyResponse",
    "ExplainResponse",
    "AttentionResponse",
    "ExploreLayersResponse",
    "ExploreBatchResponse",
    "ExplorePostsResponse",
    "ANSWERS",
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


_ID: dict[str, Any] = {"type": "integer", "minimum": 0, "x-fit": "id"}
_PIECE = TEXT_SCHEMA  # a word piece of this vocabulary (which no schema lists), or with as_words=true a word
_STATIC_ITEMS = {
    "anyOf": [_PIECE, _ID, {"type": "array", "items": {"anyOf": [_PIECE, _ID]}, "x-fit": "inputs"}]
}
_IDS: dict[str, Any] = {"type": "array", "items": _ID, "minItems": 1, "x-fit": "ids"}
_OPENAI_INPUT = {
    "anyOf": [
        TEXT_SCHEMA,
        texts_only("inputs-split"),
        _IDS,
        {"type": "array", "items": _IDS, "minItems": 1, "x-fit": "inputs-split"},
    ]
}


def named(fit: str) -> WithJsonSchema:
    """A name the service knows (a loaded post-processing, a prompt, a store), or null."""
    return WithJsonSchema({"anyOf": [{"type": "string", "x-fit": fit}, {"type": "null"}]})


_TEXTS = (
    "One text or a list of texts (each non-empty); an item that is a list of two texts is a sentence pair "
    "(A, B), read as [CLS] A [SEP] B [SEP]."
)
_LAYERS = (
    "Layer spec: -1 (last), -2, 0 (embedding output), 6, -4:, 1:4, 0,6, all; or an int or a list of ints."
)

# TEI's routes: text or texts (/embed also ids, fitted away unless --token-ids model); at most --max-inputs.
TEI_INPUT = WithJsonSchema(_OPENAI_INPUT)
TEI_TEXTS = WithJsonSchema({"anyOf": [TEXT_SCHEMA, texts_only("inputs")]})
TEI_TEXT = WithJsonSchema(TEXT_SCHEMA)
_ID_LIST = {"type": "array", "items": _ID, "minItems": 1}
TEI_IDS = WithJsonSchema(
    {"anyOf": [_ID_LIST, {"type": "array", "items": _ID_LIST, "minItems": 1, "x-fit": "inputs"}]}
)
TEI_SENTENCES = WithJsonSchema(texts_only("sentences"))


class Strict(BaseModel):
    # Unknown fields are errors, so a misspelt option is reported instead of silently ignored.
    model_config = ConfigDict(extra="forbid")


class _LayerFields(Strict):
    layers: Layers = Field(None, description=_LAYERS, examples=["-1", "-4:", "1:4"])
    combine: Annotated[Combine, spelled(Combine)] = Field(
        Combine.MEAN, description="How several layers combine."
    )
    long: Annotated[LongText, spelled(LongText)] = Field(
        LongText.TRUNCATE,
        description="Texts over the model's limit: cut (reported), overlapping windows, or a 422.",
    )
    stride: PositiveInt | None = Field(
        None, description="Window step in tokens, with long=window only (default: half a window)."
    )


class SpecFields(_LayerFields):
    pooling: Annotated[Pooling, spelled(Pooling)] = Field(
        Pooling.AUTO, description="Sentence pooling; auto is the model's own."
    )
    mask_special: StrictBool = Field(False, description="Leave [CLS]/[SEP] (<s>, </s>) out of pooling.")
    normalize: StrictBool | None = Field(
        None, description="Unit-length vectors (null: the model's own choice)."
    )
    prompt_name: Annotated[str | None, named("prompt")] = Field(
        None, description="One of the model's own prompts (e.g. query); null: its default prompt, if any."
    )

    def options(self) -> EmbedOptions:
        """The embedding options these fields ask for (resolved once per request by `Service.recipe`)."""
        given = (self.layers, self.combine, self.pooling, self.mask_special, self.normalize, self.long)
        return EmbedOptions(*given, self.stride, prompt_name=self.prompt_name)


class EmbedRequest(SpecFields):
    """Sentence vectors for texts, any layers, any pooling."""

    inputs: SplitTexts = Field(description=_TEXTS, examples=[["I like eating bread", "a cat"]])
    post: Annotated[str | None, named("post")] = Field(
        None, description="Name of a loaded post-processing (whitening, PCA, ...)."
    )


class EmbedResponse(BaseModel):
    """Sentence vectors (n, d) in input order, with per-text token counts and tokens cut by truncation."""

    model: str
    dim: int
    vectors: list[list[float]]
    n_tokens: list[int]
    n_dropped: list[int]
    spec: dict[str, Any]


# What a row is, as `embed --level` and the corpus jobs' `level` name it; /embed_tokens answers these two
# (sentence vectors: /v2/embed; chunks: /v2/embed_chunks).
TokenLevel = Annotated[Literal[Level.TOKENS, Level.WORDS], spelled(Level)]
# "words": true was "level": "words" before the level had the name it has everywhere else.
ONE_LEVEL = (
    '"level" and "words" both given: "words": true is the older spelling of "level": "words"; send "level" '
    "only"
)


def one_name(given: Any, name: str, old: str, message: str) -> Any:
    """The body as sent, or a refusal (`message`, one line as written) where it holds a field under both
    its name and its older spelling, whatever their values."""
    if isinstance(given, dict) and name in given and old in given:
        raise PydanticCustomError("one_name", message)
    return given


class TokensRequest(_LayerFields):
    """Per-token (and with level "words", per-word) vectors of the chosen layers."""

    inputs: Texts = Field(description=_TEXTS)
    level: TokenLevel = Field(
        Level.TOKENS,
        description="tokens: each text's token vectors; words: each text's word vectors too (its word "
        "pieces pooled by subword).",
    )
    words: StrictBool = Field(
        False,
        description='The older spelling of "level": "words" (true); send one of them.',
        json_schema_extra={"deprecated": True},
    )
    subword: Annotated[SubwordPooling, spelled(SubwordPooling)] = Field(
        SubwordPooling.MEAN, description="How a word's pieces become one vector."
    )

    @model_validator(mode="before")
    @classmethod
    def _one_level(cls, given: Any) -> Any:
        return one_name(given, "level", "words", ONE_LEVEL)

    @property
    def with_words(self) -> bool:
        """Word vectors asked for, by either spelling."""
        return self.words or self.level is Level.WORDS


# (tokens or words, d), or with combine "stack" and several layers (tokens or words, layers, d).
_LayeredVectors = list[list[float]] | list[list[list[float]]]
_LAYERS = "The layers the vectors come from (0 is the embedding output), in the order stacked."


class WordItem(BaseModel):
    """One text's words: the word, its character span, its pieces, its vector."""

    text: str
    words: list[str]
    spans: list[tuple[int, int]]
    pieces: list[list[str]]
    vectors: _LayeredVectors = Field(description="(words, d), or (words, layers, d) with combine stack.")
    n_dropped: int
    layers: list[int] = Field(description=_LAYERS)
    combine: str = Field(description="How the layers were combined; stack keeps one vector per layer.")


class TokenItem(BaseModel):
    """One text's tokens with character offsets, which are special, and their vectors (tokens, d)."""

    text: str
    pair: str | None = None
    tokens: list[str]
    offsets: list[tuple[int, int]]
    word_ids: list[int | None]
    sequence_ids: list[int | None] | None = Field(
        None, description="For a pair: 0 where offsets index text, 1 where they index pair, None special."
    )
    special: list[bool]
    vectors: _LayeredVectors = Field(description="(tokens, d), or (tokens, layers, d) with combine stack.")
    n_dropped: int
    layers: list[int] = Field(description=_LAYERS)
    combine: str = Field(description="How the layers were combined; stack keeps one vector per layer.")
    words: WordItem | None = None


class TokensResponse(BaseModel):
    """Token (and word) vectors per input text."""

    model: str
    items: list[TokenItem]
    spec: dict[str, Any]


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
        str | list[str] | list[WholeInt] | list[list[WholeInt]], WithJsonSchema(_OPENAI_INPUT)
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


class TokenizeRequest(Strict):
    """Word pieces of texts: token, id, word, character span, special."""

    inputs: Texts = Field(description=_TEXTS)
    long: Annotated[LongText, spelled(LongText)] = LongText.TRUNCATE


# "word": true was "as_words": true before it had the name `static --as-words` gives it ("word" is a word
# itself on /occurrences, as `similar --word bank`).
ONE_AS_WORDS = (
    '"as_words" and "word" both given: "word": true is the older spelling of "as_words": true; send '
    '"as_words" only'
)


class StaticRequest(Strict):
    """Static rows of word pieces or ids (or words, as the mean of their pieces), with neighbours."""

    inputs: Annotated[str | WholeInt | list[str | WholeInt], WithJsonSchema(_STATIC_ITEMS)] = Field(
        description="Word pieces or token ids (or words with as_words=true); `items` is accepted too.",
        examples=[["bread", 7852]],
        validation_alias=AliasChoices("inputs", "items"),
    )
    as_words: StrictBool = Field(
        False, description="Read the items as words: each the mean of its pieces' rows."
    )
    word: StrictBool = Field(
        False,
        description='The older spelling of "as_words" (true); send one of them.',
        json_schema_extra={"deprecated": True},
    )
    k: WholeInt = Field(0, ge=0, le=1000, description="How many nearest vocabulary entries to list.")
    include_special: StrictBool = Field(False, description="Let neighbours be special or [unused] tokens.")

    @model_validator(mode="before")
    @classmethod
    def _one_as_words(cls, given: Any) -> Any:
        return one_name(given, "as_words", "word", ONE_AS_WORDS)

    @property
    def with_words(self) -> bool:
        """Items read as words, by either spelling."""
        return self.as_words or self.word


# One text's routes (/anatomy, /attention) read one window: a text over it is cut (counted in
# n_dropped) or refused; window is /v2/embed's.
Cut = Annotated[Literal[LongText.TRUNCATE, LongText.ERROR], spelled(LongText)]
CUT_HELP = "A text over the model's limit: cut (counted in n_dropped) or a 422."


class AnatomyRequest(Strict):
    """The embedding layer of one text taken apart."""

    inputs: Text = Field(
        description="One non-empty text, or a sentence pair as a list of two texts; `text` is accepted too.",
        examples=["I am Sinan"],
        validation_alias=AliasChoices("inputs", "text"),
    )
    long: Cut = Field(LongText.TRUNCATE, description=CUT_HELP)


class SimilarityRequest(SpecFields):
    """Cosine of one source sentence against each of the sentences, with the same embedding options."""

    source: OneText = Field(description="The sentence to compare.", examples=["a cat"])
    sentences: Annotated[
        list[str],
        WithJsonSchema(texts_only("sentences")),
    ] = Field(description="Sentences to compare it with.", examples=[["a dog", "a car"]])
    baseline: StrictBool = Field(
        False, description="Add each score's percentile among unrelated pairs of a reference corpus."
    )
    reference: Annotated[
        list[str] | None,
        WithJsonSchema(
            {
                "anyOf": [
                    {
                        "type": "array",
                        "items": TEXT_SCHEMA,
                        "minItems": 3,
                        "uniqueItems": True,
                        "x-fit": "inputs",
                    },
                    {"type": "null"},
                ]
            }
        ),
    ] = Field(
        None,
        description="The baseline's reference corpus, at least 3 distinct texts (null: the sentences "
        "shipped with bertscope); implies baseline.",
    )


class SimilarityResponse(BaseModel):
    """One cosine per sentence, in order; with baseline, each one's percentile among unrelated pairs."""

    model: str
    scores: list[float]
    spec: dict[str, Any]
    percentile: list[float] | None = Field(
        None, description="The share (0..1) of unrelated reference pairs scoring at or below each score."
    )
    baseline: dict[str, Any] | None = Field(
        None, description="The baseline's pairs, median, p95, p99 and the settings it was fitted with."
    )


class ErrorResponse(BaseModel):
    """Every error answer: `detail` names the problem and the fix (OpenAI's `error` object under /v1/)."""

    model_config = ConfigDict(extra="allow")

    detail: str
    errors: list[dict[str, Any]] | None = None
    # OpenAI's error object under /v1/; TEI's message (with `error_type`) on TEI's paths.
    error: dict[str, Any] | str | None = None
    error_type: str | None = None


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": why}
    for status, why in {
        400: "The body is not UTF-8 JSON; under /v1/, also an input over the model's context (OpenAI's).",
        401: "The API key is missing or wrong (when the service has one).",
        408: "The request body did not arrive in time.",
        413: "The body, the number of inputs or the answer is over the service's limits.",
        415: "The body was sent with a Content-Type that is not JSON; send Content-Type: application/json.",
        422: "A field or a text is invalid; `detail` says which and what is allowed.",
        429: "The queue is full; retry after the `Retry-After` seconds.",
        500: "A bug in bertscope (please report it); the answer is still JSON.",
        503: "The service is shutting down.",
    }.items()
}


# Answers of the routes that write their JSON themselves (no response_model): the OpenAPI document's 200
# schemas, so clients generated from it get types, not Any. TEI's are the shapes of TEI's own document
# (router/src/http/types.rs), under TEI-prefixed names where bertscope has its own of that name.
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


class HealthResponse(BaseModel):
    """The worker's state, and how many jobs wait in the queue."""

    status: str = Field(description='"ok" while the inference worker runs.')
    queue: int


class ServiceLimits(BaseModel):
    """The service's limits, as it was started."""

    max_tokens: int
    max_inputs: int
    auto_split: bool
    max_body_bytes: int
    max_queue: int
    batching: bool
    max_batch_tokens: int
    max_wait_ms: float
    max_request_tokens: int
    max_answer_floats: int
    max_buffered_bytes: int


class ServiceInfo(BaseModel):
    """The model (`Model.info`: family, layers, sizes, vocabulary, pooling, backend), and the service's
    limits; the model's fields beyond these are listed in the docs (`bertscope info --json`)."""

    model_config = ConfigDict(extra="allow")

    model: str
    version: str
    fingerprint: dict[str, Any]
    limits: ServiceLimits


class PieceRecord(BaseModel):
    """A word piece with its place: word index, character span (start, end), special; in a pair, which
    text it indexes (sequence) and its type id."""

    token: str
    id: int
    word: int | None
    start: int
    end: int
    special: bool
    sequence: int | None = None
    type_id: int | None = None


class TokenizedText(BaseModel):
    text: str
    pair: str | None
    tokens: list[PieceRecord]
    n_dropped: int


class TokenizeResponse(BaseModel):
    """Each text's word pieces."""

    model: str
    max_tokens: int
    items: list[TokenizedText]


class Neighbour(BaseModel):
    token: str
    id: int
    cosine: float


class StaticRecord(BaseModel):
    """A piece or id (token, id) or, with as_words, a word (word, pieces, ids); its static row and norm;
    with k > 0 its nearest vocabulary entries."""

    item: str | int
    token: str | None = None
    id: int | None = None
    word: str | None = None
    pieces: list[str] | None = None
    ids: list[int] | None = None
    vector: list[float]
    norm: float
    neighbors: list[Neighbour] | None = None


class StaticResponse(BaseModel):
    model: str
    items: list[StaticRecord]


class AnatomyResponse(BaseModel):
    """One text's embedding layer taken apart (`Anatomy.to_dict`)."""

    model: str
    text: str
    pair: str | None
    tokens: list[str]
    ids: list[int]
    token_type_ids: list[int]
    position_ids: list[int]
    lacks: list[str]
    positions_in_attention: str | None
    notes: list[str]
    n_dropped: int
    max_abs_error: float
    steps: dict[str, list[list[float]] | None] = Field(
        description="Each step (word ... model_output, in order): its (tokens, width) rows, or null where "
        "the family lacks that part."
    )


class TokenPair(BaseModel):
    i: int
    j: int
    token_a: str
    token_b: str
    offsets_a: tuple[int, int]
    offsets_b: tuple[int, int]
    contribution: float


class ExplainResponse(BaseModel):
    """The cosine of a and b split over token pairs (exact), or [CLS] attention shares (marked)."""

    model: str
    score: float
    exact: bool
    method: str
    note: str
    text_a: str
    text_b: str
    tokens_a: list[str]
    tokens_b: list[str]
    offsets_a: list[tuple[int, int]]
    offsets_b: list[tuple[int, int]]
    share_a: list[float]
    share_b: list[float]
    contributions: list[list[float]] | None = Field(
        description="(tokens of a, tokens of b), summing to the score; null when not exact."
    )
    top_pairs: list[TokenPair]
    spec: dict[str, Any]


class AttentionResponse(BaseModel):
    """Attention weights: (layers, heads, tokens, tokens), less the layer or head picked."""

    model: str
    tokens: list[str]
    type_ids: list[int]
    special: list[bool]
    n_dropped: int
    n_layers: int
    n_heads: int
    layer: int | None
    head: int | None
    mean_heads: bool
    attention: list[list[float]] | list[list[list[float]]] | list[list[list[list[float]]]]


class ExploreLayersResponse(BaseModel):
    """One text's tokens at every layer: token-to-token cosines, cosine to the static row, norms."""

    model: str
    tokens: list[str]
    ids: list[int]
    special: list[bool]
    n_dropped: int
    n_layers: int
    cosines: list[list[list[float]]] = Field(description="(layers + 1, tokens, tokens)")
    to_static: list[list[float]] = Field(description="(layers + 1, tokens)")
    norms: list[list[float]] = Field(description="(layers + 1, tokens)")


class ExploreBatchResponse(BaseModel):
    """Texts as the model reads them together: right-padded pieces and ids, and the attention mask."""

    pad_id: int
    tokens: list[list[str]]
    ids: list[list[int]]
    attention_mask: list[list[int]]
    n_dropped: list[int]


class ExplorePostsResponse(BaseModel):
    posts: list[str]


# The 200 schemas `openapi.fit_openapi` fills in for the routes that name no response model (routes.py's
# and the explorer's); a route that names its own keeps it.
ANSWERS: dict[tuple[str, str], type[BaseModel]] = {
    ("get", "/health"): HealthResponse,
    ("get", "/v2/info"): ServiceInfo,
    ("post", "/v2/tokenize"): TokenizeResponse,
    ("post", "/static"): StaticResponse,
    ("post", "/anatomy"): AnatomyResponse,
    ("post", "/explore/layers"): ExploreLayersResponse,
    ("post", "/explore/batch"): ExploreBatchResponse,
    ("get", "/explore/posts"): ExplorePostsResponse,
}
