"""Request and answer bodies of the routes past embedding: chunks, explain, attention, occurrences."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    Field,
    StrictBool,
    StrictInt,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..core._enums import LongText
from ..core.chunking import ChunkBy
from ..errors import InvalidSpec
from ..research.cka import DEBIASED_FEW_ROWS, FEW_ROWS, MIN_ROWS, CkaLevel
from .schema_fields import (
    CUT_HELP,
    TEXT_SCHEMA,
    Cut,
    InputsWasText,
    OneText,
    PositiveInt,
    Strict,
    Text,
    WholeInt,
    fitted_int,
    named,
    one_name,
    one_top_k,
    spelled,
    texts_only,
    top_k_field,
    whole_number,
)
from .schemas import SpecFields

__all__ = [
    "ChunksRequest",
    "ONE_CHUNK_SIZE",
    "ONE_CHUNK_OVERLAP",
    "ChunkItem",
    "ChunkDocument",
    "ChunksResponse",
    "ExplainRequest",
    "AttentionRequest",
    "OccurrencesRequest",
    "OccurrenceHit",
    "OccurrencesResponse",
    "Span",
    "CkaRequest",
    "CkaResponse",
]


# A chunk's (start, end) character span; one document's spans; one list of spans per document.
_SPAN = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2}
_SPANS = {"type": "array", "items": _SPAN, "minItems": 1}
_SPANS_PER_DOC = {"type": "array", "items": _SPANS, "minItems": 1, "x-fit": "inputs"}
_Offset = Annotated[StrictInt, Field(ge=0), BeforeValidator(whole_number)]
Span = tuple[_Offset, _Offset]
_Overlap = _Offset  # a whole number from 0

# "size" and "overlap" were "chunk_size" and "chunk_overlap" before they had the names the corpus jobs,
# `embed --chunk-size/--chunk-overlap`, the library's embed_chunks and LangChain's splitters give them.
ONE_CHUNK_SIZE = (
    '"chunk_size" and "size" both given: "size" is the older spelling of "chunk_size"; send "chunk_size" only'
)
ONE_CHUNK_OVERLAP = (
    '"chunk_overlap" and "overlap" both given: "overlap" is the older spelling of "chunk_overlap"; send '
    '"chunk_overlap" only'
)


class ChunksRequest(SpecFields):
    """Chunk vectors of documents, late (each document once, token vectors pooled per chunk) or naive."""

    inputs: Annotated[str | list[str], WithJsonSchema({"anyOf": [TEXT_SCHEMA, texts_only("inputs")]})] = (
        Field(
            description="One document or a list of documents (no pairs).",
            examples=["Late chunking keeps context. Each chunk sees the whole document."],
        )
    )
    chunks: Annotated[
        Annotated[ChunkBy, spelled(ChunkBy)] | list[Span] | list[list[Span]],
        WithJsonSchema(
            {"anyOf": [{"type": "string", "enum": [c.value for c in ChunkBy]}, _SPANS, _SPANS_PER_DOC]}
        ),
    ] = Field(
        ChunkBy.SENTENCE,
        description="sentence, paragraph, tokens (`chunk_size` pieces, neighbours sharing `chunk_overlap`), "
        "or the (start, end) character spans: a list of spans for one document, one list per document for a "
        "list.",
    )
    late: StrictBool = Field(
        True, description="Late chunking (the whole document once, windows stitched) or each chunk alone."
    )
    chunk_size: PositiveInt = Field(
        128,
        description="Word pieces per chunk with chunks=tokens; the pieces of one character count as one.",
    )
    chunk_overlap: _Overlap = Field(
        0, description="Word pieces neighbouring token chunks share (less than chunk_size)."
    )
    size: PositiveInt = Field(
        128,
        description='The older spelling of "chunk_size"; send one of them.',
        json_schema_extra={"deprecated": True},
    )
    overlap: _Overlap = Field(
        0,
        description='The older spelling of "chunk_overlap"; send one of them.',
        json_schema_extra={"deprecated": True},
    )
    long: Annotated[LongText, spelled(LongText)] | None = Field(  # type: ignore[assignment]
        None,
        description="Documents or chunks over the model's limit (null: window when late, truncate when not).",
    )
    post: Annotated[str | None, named("post")] = Field(
        None, description="Name of a loaded post-processing (whitening, PCA, ...), applied to every chunk."
    )

    @model_validator(mode="before")
    @classmethod
    def _one_name_each(cls, given: Any) -> Any:
        given = one_name(given, "chunk_size", "size", ONE_CHUNK_SIZE)
        given = one_name(given, "chunk_overlap", "overlap", ONE_CHUNK_OVERLAP)
        return _known_chunking(given)

    @property
    def sizes(self) -> tuple[int, int]:
        """(chunk_size, chunk_overlap), each by the spelling sent."""
        sent = self.model_fields_set
        return (
            self.size if "size" in sent else self.chunk_size,
            self.overlap if "overlap" in sent else self.chunk_overlap,
        )


def _known_chunking(given: Any) -> Any:
    """The body as sent, or the library's refusal of a chunking name it does not know ("unknown chunking
    'words'; choose one of: ..."): the union's own line said "chunks is a string", as if none were taken."""
    if isinstance(given, dict) and isinstance(chunks := given.get("chunks"), str):
        try:
            ChunkBy.parse(chunks, what="chunking")
        except InvalidSpec as exc:
            # "one_name": a type whose line server/validation.py passes on as written
            raise PydanticCustomError("one_name", f"chunks: {exc}") from None
    return given


class ChunkItem(BaseModel):
    """One chunk: its number, character span, text, word pieces pooled, pieces cut, vector."""

    chunk: int = Field(description="The chunk's number in its document, from 0 (a search hit's `chunk`).")
    number: int = Field(
        description='The older name of "chunk", the same number, kept beside it.',
        json_schema_extra={"deprecated": True},
    )
    start: int
    end: int
    text: str
    n_tokens: int
    n_dropped: int = Field(
        description="Word pieces truncation cut from the chunk (late: false only), as /v2/embed's n_dropped."
    )
    truncated: int = Field(
        description='The older name of "n_dropped", the same number, kept beside it.',
        json_schema_extra={"deprecated": True},
    )
    vector: list[float]


class ChunkDocument(BaseModel):
    """One document's chunks, as `ChunkEmbeddings.to_dict()`."""

    text: str
    chunks: list[ChunkItem]
    spec: dict[str, Any]


class ChunksResponse(BaseModel):
    """Each document's chunks in input order."""

    model: str
    items: list[ChunkDocument]


class ExplainRequest(SpecFields):
    """Why two texts score what they score, with the same options as /embed and /similarity."""

    a: OneText = Field(description="The first text.", examples=["The cat sat on the mat."])
    b: OneText = Field(description="The second text.", examples=["A dog lay on the rug."])
    post: Annotated[str | None, named("post")] = Field(
        None, description="Name of a loaded post-processing (whitening, PCA, ...)."
    )
    top_k: WholeInt = top_k_field(10, least=0, what="How many token pairs to list", old="top")
    exact: StrictBool = Field(
        False, description="Refuse poolings with no exact split (cls, pooler) with a 422."
    )

    @model_validator(mode="before")
    @classmethod
    def _one_top_k(cls, given: Any) -> Any:
        return one_name(given, "top_k", "top", one_top_k("top"))


class AttentionRequest(InputsWasText, Strict):
    """Attention weights of one text or (A, B) pair: one layer, one head, or all of them."""

    inputs: Text = Field(
        description="One text, or a pair as a list of two texts; `text`, its old name, is accepted too.",
        examples=["I like bread"],
        validation_alias=AliasChoices("inputs", "text"),
    )
    layer: Annotated[WholeInt | None, WithJsonSchema(fitted_int("encoder-layer"))] = Field(
        None, description="Encoder layer 1..L or -1..-L (null: every layer)."
    )
    head: Annotated[WholeInt | None, WithJsonSchema(fitted_int("head"))] = Field(
        None, ge=0, description="One head (null: every head)."
    )
    mean_heads: StrictBool = Field(False, description="Average over heads instead of listing them.")
    long: Cut = Field(LongText.TRUNCATE, description=CUT_HELP)


class OccurrencesRequest(Strict):
    """A word's occurrences in a token or word store the server was started with (--store NAME=FILE)."""

    store: Annotated[str, WithJsonSchema({"type": "string", "x-fit": "store"})] = Field(
        description="The store's name, as given to --store NAME=FILE.", examples=["news"]
    )
    word: OneText = Field(description="One word, as written in the texts.", examples=["bank"])
    context: Annotated[str | None, WithJsonSchema({"anyOf": [TEXT_SCHEMA, {"type": "null"}]})] = Field(
        None,
        description="A text using the word: occurrences are ranked by cosine to its use here (its first use, "
        "where it is used more than once).",
        examples=["we sat on the bank of the river"],
    )
    top_k: WholeInt = top_k_field(
        5, least=1, what="How many occurrences (5 by default, as `similar` lists)", old="k"
    )

    @model_validator(mode="before")
    @classmethod
    def _one_top_k(cls, given: Any) -> Any:
        return one_name(given, "top_k", "k", one_top_k("k"))


class OccurrenceHit(BaseModel):
    """One stored occurrence: its text's id, word number, character span, marked snippet and cosine."""

    id: str
    position: int = Field(
        description="The word's number in its text (0-based, specials not counted, a word of several "
        "pieces once): a words store's row position, the same on a token store."
    )
    start: int
    end: int
    snippet: str
    score: float | None


class OccurrencesResponse(BaseModel):
    """The occurrences (nearest first with a context) and how many the store holds."""

    model: str
    store: str
    word: str
    context: str | None = Field(description="The context searched with, as sent (null: none).")
    context_span: list[int] | None = Field(
        None,
        description="The [start, end] characters of the word's use in the context searched with: its first "
        "where the context uses it more than once (null without a context).",
    )
    n_occurrences: int = Field(description="How many times the word occurs in the store.")
    n_dropped: int = Field(
        0,
        description="Word pieces the model's limit cut from the context searched with (0: none cut).",
    )
    total: int = Field(
        description='The older name of "n_occurrences" (the same count).',
        json_schema_extra={"deprecated": True},
    )
    hits: list[OccurrenceHit]


# Enough texts for either estimator at sentence level (one row per text): the debiased one needs most.
_CKA_MIN_TEXTS = max(MIN_ROWS.values())
_CKA_TEXTS = {**texts_only("inputs"), "minItems": _CKA_MIN_TEXTS}


class CkaRequest(Strict):
    """POST /v2/cka: linear CKA between every pair of the served model's layers, as `Model.cka`."""

    inputs: Annotated[list[str], Field(min_length=_CKA_MIN_TEXTS), WithJsonSchema(_CKA_TEXTS)] = Field(
        description=f"The texts (at least {_CKA_MIN_TEXTS}, at most --max-inputs).",
        examples=[["The cat sat.", "A dog ran.", "Rain fell all day.", "Prices rose again."]],
    )
    level: Annotated[CkaLevel, spelled(CkaLevel)] = Field(
        CkaLevel.TOKEN,
        description="tokens: every non-pad token is a row; sentence: one mean-pooled vector per text "
        "(token and sentences read alike).",
    )
    debiased: StrictBool = Field(False, description="The debiased estimator (better for few rows).")


class CkaResponse(BaseModel):
    """Layers 0..L against layers 0..L; a cell is null where a layer's rows do not vary."""

    model: str
    layers_a: list[int]
    layers_b: list[int]
    cka: list[list[float | None]]
    n_rows: int
    n_texts: int | None = None
    settings: dict[str, Any]
    note: str | None = Field(
        None,
        description=f"Says when the distinct rows are too few: under {FEW_ROWS} x the width for the linear "
        f"estimator, which then reads high; under {DEBIASED_FEW_ROWS} for the debiased one, with its chance "
        "spread; null otherwise.",
    )
