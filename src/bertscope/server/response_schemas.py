"""The service's answer bodies (pydantic): bertscope's own routes' answers and every error answer."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "EmbedResponse",
    "TokensResponse",
    "SimilarityResponse",
    "ErrorResponse",
    "ERROR_RESPONSES",
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


class EmbedResponse(BaseModel):
    """Sentence vectors (n, d) in input order, with per-text token counts and tokens cut by truncation."""

    model: str
    dimension: int = Field(description="Each vector's width (d).")
    dim: int = Field(
        description='The older name of "dimension" (the same number).', json_schema_extra={"deprecated": True}
    )
    vectors: list[list[float]]
    n_tokens: list[int]
    n_dropped: list[int]
    spec: dict[str, Any]


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


class SimilarityResponse(BaseModel):
    """One cosine per sentence, in order; with baseline, each one's percentile among unrelated pairs."""

    model: str
    scores: list[float]
    spec: dict[str, Any]
    percentile: list[float] | None = Field(
        None, description="The share (0..1) of unrelated reference pairs scoring at or below each score."
    )
    baseline: dict[str, Any] | None = Field(
        None,
        description="The baseline's n_pairs, median, p95, p99, n_texts (its reference texts) and the "
        "settings it was fitted with.",
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
        500: "Vectors that came out NaN or infinite (a float16 overflow: serve with --dtype float32), or a "
        "bug in bertscope (please report it); the answer is still JSON.",
        503: "The service is shutting down.",
    }.items()
}


# Answers of the routes that write their JSON themselves (no response_model): the OpenAPI document's 200
# schemas, so clients generated from it get types, not Any.
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
    """The model (`Model.info`: family, n_layers, sizes, vocabulary, pooling, backend), its prompts, and
    the service's limits; the model's fields beyond these are listed in the docs (`bertscope info --json`)."""

    model_config = ConfigDict(extra="allow")

    model: str
    version: str
    n_layers: int = Field(
        description="The model's layers (transformers' num_hidden_layers); 0 for a static model."
    )
    layers: int = Field(
        description='The older name of "n_layers" (the same number); "layers" elsewhere is a layer spec.',
        json_schema_extra={"deprecated": True},
    )
    prompts: dict[str, str] = Field(
        description="The model's sentence-transformers prompts, name -> text (prompt_name takes a name); "
        "empty where it has none."
    )
    default_prompt_name: str | None = Field(
        None,
        description="The prompt put before each text where a request names none (one of prompts), or null.",
    )
    truncate_dim: int | None = Field(
        None,
        description="The folder's sentence-transformers truncate_dim (null: none), which its encode keeps; "
        "the routes keep every dimension unless a request's dimensions says fewer, as TEI's.",
    )
    similarity_fn_name: str = Field(
        "cosine", description="sentence-transformers' similarity function of the model's vectors."
    )
    auto_refused: str | None = Field(
        None,
        description="Why pooling 'auto' (the default) and the TEI and OpenAI routes refuse this folder's own "
        "sentence-transformers pipeline (a Dense module, weightedmean ...), as `bertscope info` says it; "
        "null where it is reproduced.",
    )
    fingerprint: dict[str, Any]
    limits: ServiceLimits


class PieceRecord(BaseModel):
    """A word piece with its place: word index, character span (start, end), special; in a pair, which
    text it indexes (sequence) and its token type id."""

    token: str
    id: int
    word: int | None
    start: int
    end: int
    special: bool
    sequence: int | None = None
    token_type_id: int | None = Field(
        None, description="In a pair, the piece's token type id (transformers' token_type_ids)."
    )
    type_id: int | None = Field(
        None,
        description='The older name of "token_type_id" (the same number).',
        json_schema_extra={"deprecated": True},
    )


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
    """A vocabulary entry near the item: its token, id and score (the cosine of the static rows)."""

    token: str
    id: int
    score: float = Field(description="The cosine of the static rows, as every hit's score.")
    cosine: float = Field(
        description='The older name of "score" (the same number).', json_schema_extra={"deprecated": True}
    )


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
    proof_bound: float = Field(
        description="The most max_abs_error may be for the proof to hold: 1e-5, or 8 float32 rounding "
        "steps of layer 0's largest |value| where that is more."
    )
    proof_holds: bool = Field(
        description="Whether max_abs_error is at most proof_bound (false where it is NaN)."
    )
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
    n_dropped: list[int] = Field(
        description="[a, b]: the word pieces truncation cut from each text (0 where it was whole)."
    )
    spec: dict[str, Any]


class AttentionResponse(BaseModel):
    """Attention weights: (layers, heads, tokens, tokens), less the layer or head picked."""

    model: str
    tokens: list[str]
    token_type_ids: list[int] = Field(description="Each token's token type id (1 on B of a pair).")
    type_ids: list[int] = Field(
        description='The older name of "token_type_ids" (the same ids).',
        json_schema_extra={"deprecated": True},
    )
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
    cosines: list[list[list[float]]] = Field(
        description="(layers + 1, tokens, tokens), rounded to 5 decimals (within 5e-6)"
    )
    to_static: list[list[float]] | None = Field(
        description="(layers + 1, tokens), rounded to 5 decimals; null where the static rows are narrower "
        "than the layers (ALBERT's projection)"
    )
    norms: list[list[float]] = Field(description="(layers + 1, tokens), rounded to 6 decimals")


class ExploreBatchResponse(BaseModel):
    """Texts as the model reads them together: right-padded pieces and ids, and the attention mask."""

    model: str
    pad_id: int
    tokens: list[list[str]]
    input_ids: list[list[int]] = Field(description="Each text's ids, right-padded (transformers' name).")
    ids: list[list[int]] = Field(
        description='The older name of "input_ids" (the same ids).', json_schema_extra={"deprecated": True}
    )
    attention_mask: list[list[int]]
    token_type_ids: list[list[int]] | None = Field(
        description="Each text's token type ids, right-padded; null where the model type has none."
    )
    n_dropped: list[int]


class ExplorePostsResponse(BaseModel):
    """The post-processings the server has loaded (`bertscope serve --post NAME=FILE`), by name."""

    model: str
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
