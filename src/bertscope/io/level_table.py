"""The corpus levels by name (`LEVELS`), the options a corpus job takes, and `make_level`.

The one table of levels: the job, the Ray runner, the CLI, search and the research aggregations read a
level's facts (`pooled`, `searchable`, the options it reads) and build it here. Each level declares them
on its class (`bertscope.io.levels`); adding a level is its class and one row below.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ..core._enums import Level, LongText
from ..core.chunking import TOKEN_CHUNK_SIZES, ChunkBy, check_late, refuse_unread_sizes
from ..core.spec import EmbedOptions, RecipeKeywords, refuse_sentence_options, unknown_option
from ..errors import InvalidSpec
from .levels import (
    CorpusLevel,
    LevelKeywords,
    LevelOptions,
    SentenceLevel,
    TokenLevel,
    WordLevel,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["LEVELS", "CorpusKeywords", "CorpusOptions", "level_of", "make_level", "refuse_idle_level_options"]

_ROWS: dict[Level, type[CorpusLevel]] = {
    Level.SENTENCE: SentenceLevel,
    Level.TOKENS: TokenLevel,
    Level.WORDS: WordLevel,
}


class _LevelTable(Mapping[Level, type[CorpusLevel]]):
    """The rows by level; the chunks row's module (`io/chunk_level.py`, which imports pyarrow and the
    chunker) is imported when that row is read, so a plain `embed` that checks its level pays for neither."""

    def __getitem__(self, level: Level) -> type[CorpusLevel]:
        if level is Level.CHUNKS:
            from .chunk_level import ChunkLevel

            return ChunkLevel
        return _ROWS[level]

    def __iter__(self) -> Iterator[Level]:
        return iter((*_ROWS, Level.CHUNKS))

    def __len__(self) -> int:
        return len(_ROWS) + 1


LEVELS: Mapping[Level, type[CorpusLevel]] = _LevelTable()


class CorpusKeywords(RecipeKeywords, LevelKeywords, total=False):
    """A corpus job's options as keywords: the recipe (`RecipeKeywords`) and the level's (`LevelKeywords`)."""


@dataclass(frozen=True)
class CorpusOptions:
    """What a corpus job embeds and how its rows are made: the recipe and the level options, one object.

    The command line builds it from its flags and passes it on; `embed_corpus`, `embed_dataset` and
    `run_ray_job` build it from their keywords (`of`).
    """

    recipe: EmbedOptions = field(default_factory=EmbedOptions)
    level: LevelOptions = field(default_factory=LevelOptions)

    @classmethod
    def of(cls, **given: Unpack[CorpusKeywords]) -> CorpusOptions:
        """Keywords split into the recipe and the level options (an unknown one is UnknownOption)."""
        names = [f.name for f in fields(LevelOptions)]
        known = [*(f.name for f in fields(EmbedOptions)), *names]
        if unknown := [key for key in given if key not in known]:
            raise unknown_option(unknown[0], known)
        level: dict[str, Any] = {key: value for key, value in given.items() if key in names}
        refuse_idle_level_options(LevelOptions(**level), given=level)
        if "late" in level:  # late="no" is truthy: refused before it picks late chunking and is stored
            level["late"] = check_late(level["late"])
        recipe: dict[str, Any] = {key: value for key, value in given.items() if key not in names}
        asked = LevelOptions(**level)
        if "long" not in recipe and level_of(asked).name is Level.CHUNKS and asked.late:
            recipe["long"] = LongText.WINDOW  # not given: late chunks' own default; truncate is refused
        return cls(EmbedOptions(**recipe), asked)

    def for_level(self) -> CorpusOptions:
        """Only what the level reads: an unpooled level's pooling, normalisation, post and prompt left out.

        For callers that hold every option whatever the level (the command line's flags): an option left
        at its default is dropped, one given is refused (it would be ignored), as `make_level` refuses it.
        """
        row = level_of(self.level)
        if row.pooled:
            return self
        refuse_sentence_options(self.recipe, f"{row.name.value} rows")
        kept = EmbedOptions(
            self.recipe.layers, self.recipe.combine, long=self.recipe.long, stride=self.recipe.stride
        )
        return CorpusOptions(kept, self.level)


def level_of(asked: LevelOptions | Level | str) -> type[CorpusLevel]:
    """The table's row (the level's class, with its facts) for a level or the options naming one."""
    name = asked.level if isinstance(asked, LevelOptions) else asked
    return LEVELS[Level.parse(name, what="level")]


def refuse_idle_level_options(asked: LevelOptions, *, given: Iterable[str] | None = None) -> None:
    """Refuse a level option the run would not read (it would be ignored in silence): one the level does
    not read (`CorpusLevel.options`: `subword='first'` on sentence rows), naming the levels that read it,
    or a token chunk's size with another chunking (`core.chunking.refuse_unread_sizes`).

    `given`: the options the caller named (keywords); without it, those not at their defaults.
    """
    row = level_of(asked)
    if given is None:
        default = LevelOptions()
        given = [f.name for f in fields(LevelOptions) if getattr(asked, f.name) != getattr(default, f.name)]
    every = ("level", "keep_text", "precision")  # what every level reads
    for name in given:
        if name in every:
            continue
        value = getattr(asked, name)
        if name not in row.options:
            takers = [level.name.value for level in LEVELS.values() if name in level.options]
            where = " or ".join(f"'{taker}'" for taker in takers)
            where += ", chunks='tokens'" if name in TOKEN_CHUNK_SIZES else ""
            raise InvalidSpec(
                f"{name}={value!r}{_WHAT.get(name, '')}: it applies with level={where} "
                f"({row.name.value} rows here); add level={where} or drop {_dropped(name, value)}"
            )
        if name in TOKEN_CHUNK_SIZES:
            refuse_unread_sizes(_parsed(asked, "chunks").value, **{name: value})


# What a level option does, for the refusal of one given to a level that does not read it.
_WHAT = {"subword": " pools each word's pieces into one vector"}


def _parsed(asked: LevelOptions, name: str) -> ChunkBy:
    return ChunkBy.parse(getattr(asked, name), what="chunking")


def _dropped(name: str, value: object) -> str:
    """How to leave an option out: `subword=`, or a switch with its value (`late=False`: --naive typed,
    not --late)."""
    return f"{name}={value!r}" if isinstance(value, bool) else f"{name}="


def make_level(model: object, options: CorpusOptions) -> CorpusLevel:
    """The level asked for, its spec resolved from the recipe (`spec.resolve`) once.

    A level that is not pooled refuses the options that pool or post-process (pooling, mask_special,
    normalize, post): its rows are tokens or words; any level refuses a level option it does not read.
    """
    refuse_idle_level_options(options.level)
    row = level_of(options.level)
    if not row.pooled:
        refuse_sentence_options(options.recipe, f"{row.name.value} rows")
    return row.build(model, options.recipe, options.level)
