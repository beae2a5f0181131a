"""bertscope's own request bodies (pydantic); the strategy fields reuse the library's enums."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, StrictBool, WithJsonSchema, model_validator

from ..core._enums import Combine, Level, LongText, Pooling, SubwordPooling
from ..core.spec import EmbedOptions
from .schema_fields import (
    CUT_HELP,
    ID_SCHEMA,
    TEXT_SCHEMA,
    Cut,
    InputsWasText,
    Layers,
    OneText,
    PositiveInt,
    SplitTexts,
    Strict,
    Text,
    Texts,
    WholeInt,
    named,
    one_inputs,
    one_name,
    one_top_k,
    spelled,
    texts_only,
    top_k_field,
)

__all__ = [
    "SpecFields",
    "EmbedRequest",
    "TokensRequest",
    "ONE_LEVEL",
    "ONE_AS_WORDS",
    "TokenizeRequest",
    "StaticRequest",
    "AnatomyRequest",
    "SimilarityRequest",
]

_PIECE = TEXT_SCHEMA  # a word piece of this vocabulary (which no schema lists), or with as_words=true a word
_STATIC_ITEMS = {
    "anyOf": [
        _PIECE,
        ID_SCHEMA,
        {"type": "array", "items": {"anyOf": [_PIECE, ID_SCHEMA]}, "x-fit": "inputs"},
    ]
}

_TEXTS = (
    "One text or a list of texts (each non-empty); an item that is a list of two texts is a sentence pair "
    "(A, B), read as [CLS] A [SEP] B [SEP]."
)
_LAYERS = (
    "Layer spec: -1 (last), -2, 0 (embedding output), 6, -4:, 1:4, 0,6, all; or an int or a list of ints."
)


class _LayerFields(Strict):
    names_elsewhere = True  # `normalize_embeddings`, `truncate`, `layer`, ... refused with this body's names
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
        None,
        description="Unit-length vectors (null: the model's own with pooling auto, off with a named "
        "pooling).",
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


# What a row is, as `embed --level` and the corpus jobs' `level` name it; /embed_tokens answers these two
# (sentence vectors: /v2/embed; chunks: /v2/embed_chunks).
TokenLevel = Annotated[Literal[Level.TOKENS, Level.WORDS], spelled(Level)]
# "words": true was "level": "words" before the level had the name it has everywhere else.
ONE_LEVEL = (
    '"level" and "words" both given: "words": true is the older spelling of "level": "words"; send "level" '
    "only"
)


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


class TokenizeRequest(Strict):
    """Word pieces of texts: token, id, word, character span, special."""

    names_elsewhere = True

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

    names_elsewhere = True  # the command line's `ids` is refused saying how ids are sent

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
    top_k: WholeInt = top_k_field(0, least=0, what="How many nearest vocabulary entries to list", old="k")
    include_special: StrictBool = Field(False, description="Let neighbours be special or [unused] tokens.")

    @model_validator(mode="before")
    @classmethod
    def _one_as_words(cls, given: Any) -> Any:
        given = one_inputs(one_name(given, "top_k", "k", one_top_k("k")), "items")
        return one_name(given, "as_words", "word", ONE_AS_WORDS)

    @property
    def with_words(self) -> bool:
        """Items read as words, by either spelling."""
        return self.as_words or self.word


class AnatomyRequest(InputsWasText, Strict):
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
    post: Annotated[str | None, named("post")] = Field(
        None,
        description="Name of a loaded post-processing (whitening, PCA, ...), applied to the source, the "
        "sentences and a baseline's reference.",
    )
