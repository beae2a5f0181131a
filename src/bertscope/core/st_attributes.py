"""sentence-transformers' settable model attributes, shared by `Model` and `StaticModel`.

`truncate_dim` (the width `encode` keeps where its call names none, and `get_embedding_dimension`'s answer),
`default_prompt_name` (the prompt put before each text where none is asked) and `similarity_fn_name` (what
`similarity` of vectors and `similarity_pairwise` compute), with sentence-transformers' setters, so
`model.truncate_dim = 128` does the same on either kind of model. A class using the mixin has `info()` (its
`hidden_size` is the full width), `loaded` (whose `st_unsupported` says why encode refuses the folder's
pipeline), a settable `prompts` and `_settings_folder()` (the folder whose config_sentence_transformers.json
names the similarity function).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from ..errors import InvalidSpec
from .spec import auto_refusal, whole_number
from .st_settings import (
    SIMILARITY_FUNCTIONS,
    folder_similarity_fn_name,
    folder_truncate_dim,
    similarity_function,
)

if TYPE_CHECKING:
    from pathlib import Path

    from .encoder import ModelInfo
    from .prompts import Prompts

__all__ = ["ENCODE_INSTEAD", "SentenceTransformersAttributes"]

# What gives sentence vectors of a folder whose pipeline encode does not reproduce (`st_unsupported`).
ENCODE_INSTEAD = "model.embed(texts, pooling='mean') gives the encoder's own pooled vectors"


class SentenceTransformersAttributes:
    """truncate_dim, default_prompt_name, similarity_fn_name and the width they give, as
    sentence-transformers' model has them."""

    if TYPE_CHECKING:
        loaded: Any  # the loaded folder's facts: its source and st_unsupported

        @property
        def prompts(self) -> Prompts: ...
        @prompts.setter
        def prompts(self, value: Prompts) -> None: ...
        def info(self) -> ModelInfo: ...
        def _settings_folder(self) -> Path | None: ...

    @property
    def default_prompt_name(self) -> str | None:
        """sentence-transformers' name of the prompt `encode` and `embed` put before each text where none is
        asked (`prompts.default_name`): the folder's config_sentence_transformers.json's, until set."""
        return self.prompts.default_name

    @default_prompt_name.setter
    def default_prompt_name(self, name: str | None) -> None:
        """As sentence-transformers' setter: one of `prompts`' names, or None for no default prompt."""
        self.prompts = self.prompts.with_default(name)

    @property
    def truncate_dim(self) -> int | None:
        """sentence-transformers' dimensions `encode` keeps where its call names none (None: all): the
        folder's config_sentence_transformers.json's `truncate_dim`, as sentence-transformers reads it at
        load, until set; `embed` keeps the full width."""
        if "_truncate_dim" not in self.__dict__:  # read on first use, as `similarity_fn_name` is
            self.__dict__["_truncate_dim"] = folder_truncate_dim(self._settings_folder())
        return cast("int | None", self.__dict__["_truncate_dim"])

    @truncate_dim.setter
    def truncate_dim(self, value: int | None) -> None:
        """As sentence-transformers' setter: a whole number of at least 1, or None for every dimension."""
        if value is not None:
            value = whole_number(
                value, "truncate_dim", meaning="the dimensions to keep, such as 128; or None for all"
            )
        self.__dict__["_truncate_dim"] = value

    @property
    def similarity_fn_name(self) -> str:
        """sentence-transformers' name of what `similarity` of vectors and `similarity_pairwise` compute:
        "cosine", "dot", "euclidean" or "manhattan", the folder's config_sentence_transformers.json's
        (cosine where it names none, as sentence-transformers 3+), until set."""
        chosen = self.__dict__.get("_similarity_fn_name")
        if chosen is None:
            # read on first use, as `prompts` is; a name it cannot compute is a one-line ModelLoadError
            chosen = self.__dict__["_similarity_fn_name"] = folder_similarity_fn_name(self._settings_folder())
        return str(chosen)

    @similarity_fn_name.setter
    def similarity_fn_name(self, value: Any) -> None:
        """As sentence-transformers' setter: a name or a `SimilarityFunction` member (None: cosine)."""
        name = similarity_function(value)
        if name is None:
            raise InvalidSpec(
                f"similarity_fn_name {value!r} is not a similarity function sentence-transformers computes "
                f"on one vector per text; give one of {', '.join(SIMILARITY_FUNCTIONS)} (or a "
                "SimilarityFunction member)"
            )
        self.__dict__["_similarity_fn_name"] = name

    def get_embedding_dimension(self) -> int:
        """sentence-transformers' width of `encode`'s vectors: the hidden size, or `truncate_dim` where
        that is set and narrower; refused where `encode` refuses the folder's pipeline (a Dense module, a
        pooling it does not apply), whose width is not the hidden size."""
        width = int(self.info().hidden_size)
        if self.loaded.st_unsupported:  # a wrong width would size an index for vectors encode never gives
            raise auto_refusal(
                self.loaded, "encode", f"get_embedding_dimension() has no width to give: {ENCODE_INSTEAD} "
                f"({width} wide), or use sentence-transformers for the full pipeline",
            )  # fmt: skip
        return width if self.truncate_dim is None else min(width, self.truncate_dim)

    def get_sentence_embedding_dimension(self) -> int:
        """sentence-transformers' older name of `get_embedding_dimension`."""
        return self.get_embedding_dimension()
