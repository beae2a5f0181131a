"""The corpus levels by name (`Level`), and `make_level`, which builds one from the embedding options.

The one table of levels: the job, the Ray runner and the research aggregations build their level here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..chunk_embed import late_spec
from ..core._enums import Level, LongText, Pooling, Precision, SubwordPooling
from ..core.chunking import ChunkBy
from ..core.spec import EmbedOptions, resolve
from ..errors import InvalidSpec
from .chunk_level import ChunkLevel
from .levels import POOLED_OPTIONS, CorpusLevel, SentenceLevel, TokenLevel, WordLevel

__all__ = ["LEVELS", "make_level"]

LEVELS: dict[Level, type[CorpusLevel]] = {
    Level.SENTENCE: SentenceLevel,
    Level.TOKENS: TokenLevel,
    Level.WORDS: WordLevel,
    Level.CHUNKS: ChunkLevel,
}


def make_level(
    level: Level | str,
    model: Any,
    *,
    options: EmbedOptions,
    keep_text: bool = True,
    precision: Precision | str = "float32",
    subword: SubwordPooling | str = "mean",
    chunks: ChunkBy | str = "sentence",
    late: bool = True,
    chunk_size: int = 128,
    chunk_overlap: int = 0,
) -> CorpusLevel:
    """The level asked for, its spec resolved from the embedding options (`spec.resolve`) once.

    `chunks`, `late`, `chunk_size` and `chunk_overlap` say how the chunks level cuts and embeds documents
    (see `Model.embed_chunks`).
    """
    kind = Level.parse(level, what="level")
    store_as = Precision.parse(precision, what="precision")
    if kind is Level.CHUNKS:
        cut = ChunkBy.parse(chunks, what="chunking")
        long = LongText.TRUNCATE if options.long is None else LongText.parse(options.long, what="long")
        if late and long is LongText.TRUNCATE:
            long = LongText.WINDOW  # late chunks see every token: truncation is the default, never their wish
        recipe = resolve(model, replace(options, long=long))
        spec = late_spec(recipe.spec) if late else recipe.spec
        return ChunkLevel(
            model, spec, keep_text=keep_text, precision=store_as, processor=recipe.post, chunks=cut,
            late=late, size=chunk_size, overlap=chunk_overlap,
        )  # fmt: skip
    if kind is Level.SENTENCE:
        recipe = resolve(model, options)
        return SentenceLevel(
            model, recipe.spec, keep_text=keep_text, precision=store_as, processor=recipe.post
        )
    given = {"pooling": options.pooling != Pooling.AUTO, "mask_special": bool(options.mask_special)}
    given["normalize"] = options.normalize not in (None, False)
    pooled = [k for k in POOLED_OPTIONS if given[k]]
    if pooled or options.post is not None:
        asked = ", ".join(pooled + (["post"] if options.post is not None else []))
        raise InvalidSpec(
            f"{asked} pool or post-process sentence vectors; {kind.value} rows are not pooled: "
            f"leave {asked} out"
        )
    unpooled = replace(options, pooling=Pooling.MEAN, mask_special=False, normalize=None)
    spec = resolve(model, unpooled).spec
    if kind is Level.WORDS:
        how = SubwordPooling.parse(subword, what="subword pooling")
        return WordLevel(model, spec, keep_text=keep_text, precision=store_as, subword=how)
    return LEVELS[kind](model, spec, keep_text=keep_text, precision=store_as)  # type: ignore[call-arg]
