"""Corpus levels: what one row of a corpus job's output is.

Every level runs through the same resumable job, the same sinks (Parquet, NumPy; SQLite for sentences)
and the same Ray runner; adding a level is one `CorpusLevel` subclass and one entry in `io.level_table`.
A level declares its facts where it is defined (`pooled`, `searchable`, the `LevelOptions` it reads) and
builds itself from the options types (`build`); the job, Ray, the CLI and search read them from the table.

    sentence  one row per text: id, text, embedding, n_tokens, truncated (post-processing applies)
    tokens    one row per word piece: id, position, token, token_id, start, end, word_index, special,
              text and truncated (on each text's first row only), then the vectors
    words     one row per word, its pieces pooled by `subword`: id, position, word, pieces, start, end,
              text and truncated (first row only), then the vectors
    chunks    one row per chunk of a document, late-chunked or each alone (`bertscope.io.chunk_level`)

Vectors are one `embedding` column, or with combine="stack" one `layer_N` column per kept layer (N the
absolute layer number); `precision="float16"` stores them at half the size. A level turns records into
`Rows` (an Arrow table without metadata, plus counts); the sinks attach the job's settings.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

import numpy as np

from ..core._enums import Combine, Level, LongText, Pooling, Precision, SubwordPooling
from ..core.chunking import ChunkBy
from ..core.engine import OnBatch
from ..core.pooling import pool_words, text_words, whole_words
from ..core.post import PostProcessor
from ..core.spec import EmbedOptions, EmbedSpec, Recipe, resolve
from ..core.texts_given import type_named
from ..core.tokens import named_as, text_named
from ..errors import InvalidInput
from .readers import Record

if TYPE_CHECKING:  # pyarrow is imported where rows are built: a plain embed (no -o) never builds them
    import pyarrow as pa

__all__ = [
    "LevelOptions",
    "LevelKeywords",
    "Rows",
    "CorpusLevel",
    "SentenceLevel",
    "TokenLevel",
    "WordLevel",
    "POOLED_OPTIONS",
    "vector_columns",
    "vector_array",
    "arrow_texts",
    "missing_field",
]

# Options that pool tokens into one vector: meaningless for rows that are tokens or words.
POOLED_OPTIONS = ("pooling", "mask_special", "normalize")


@dataclass(frozen=True)
class LevelOptions:
    """What a corpus job asks of its level besides the recipe: which level, how its rows are stored, and
    the options a level reads when it declares them (`CorpusLevel.options`: subword, chunks, ...)."""

    level: Level | str = Level.SENTENCE
    keep_text: bool = True
    precision: Precision | str = Precision.FLOAT32
    subword: SubwordPooling | str = SubwordPooling.MEAN
    chunks: ChunkBy | str = ChunkBy.SENTENCE
    late: bool = True
    chunk_size: int = 128
    chunk_overlap: int = 0

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> LevelOptions:
        """The level options that reproduce a stored output's settings."""
        names = cls.__dataclass_fields__
        return cls(**{key: value for key, value in settings.items() if key in names and key != "keep_text"})


class LevelKeywords(TypedDict, total=False):
    """LevelOptions as keywords (`embed_corpus`, `embed_dataset`, `run_ray_job` take them with the recipe)."""

    level: Level | str
    keep_text: bool
    precision: Precision | str
    subword: SubwordPooling | str
    chunks: ChunkBy | str
    late: bool
    chunk_size: int
    chunk_overlap: int


@dataclass
class Rows:
    """One batch of a level's rows (an Arrow table) and the texts, tokens and truncated texts behind it."""

    table: pa.Table
    texts: int
    tokens: int
    truncated: int


class CorpusLevel(ABC):
    """One kind of output row; `embed` turns a batch of records into rows of one fixed schema."""

    name: ClassVar[Level]
    # The facts every runner reads from the table: rows are pooled vectors (pooling, mask_special,
    # normalize, post and prompt apply), a query text searches them (else: by occurrence), a row is a
    # span of a document (a hit names its document, number and span), and the LevelOptions fields the
    # level reads besides keep_text and precision.
    pooled: ClassVar[bool] = False
    searchable: ClassVar[bool] = False
    spans: ClassVar[bool] = False
    options: ClassVar[tuple[str, ...]] = ()

    def __init__(self, model: Any, spec: EmbedSpec, *, keep_text: bool, precision: Precision) -> None:
        self.model = model
        self.spec = spec
        self.keep_text = keep_text
        self.precision = precision
        self._empty: pa.Table | None = None

    @classmethod
    def build(cls, model: Any, recipe: EmbedOptions, asked: LevelOptions) -> CorpusLevel:
        """This level for a model, its spec resolved from the recipe (`spec.resolve`) once.

        Every level in the table (`io.level_table.LEVELS`) has one; several views are built by
        `io.views.views_level`, from the views asked.
        """
        raise NotImplementedError(f"{cls.__name__} is not built from the level table")

    @abstractmethod
    def recorded(self) -> dict[str, Any]:
        """This level's settings, stored with the output (the job adds the model and runtime)."""

    @abstractmethod
    def embed(self, records: Sequence[Record], *, on_batch: OnBatch | None = None) -> Rows:
        """Rows for a batch of records, in record order."""

    @abstractmethod
    def tally(self, table: pa.Table) -> tuple[int, int, int]:
        """(texts, tokens, truncated texts) behind a table of this level's rows."""

    def empty(self) -> pa.Table:
        """A table of no rows with this level's columns and types (vector widths found by one probe)."""
        if self._empty is None:
            self._empty = self.embed([Record("probe", "a", 0)]).table.slice(0, 0)
        return self._empty

    def embed_arrow(
        self, batch: pa.Table, text_column: str, *, where: Sequence[str] | None = None
    ) -> pa.Table:
        """Rows for an Arrow batch with `id` and `text_column` columns (Ray); empty texts are skipped.
        `where`: each row's FILE:LINE, where the corpus reader gave it, which a refusal names."""
        texts = arrow_texts(batch, text_column)
        if "id" not in batch.column_names:
            fix = "give each row an id (this level's rows name it)"
            raise InvalidInput(missing_field("id", batch.column_names, fix))
        ids = batch.column("id").to_pylist()
        keep = [i for i, t in enumerate(texts) if isinstance(t, str) and t.strip()]
        records = [Record(str(ids[i]), texts[i], 0) for i in keep]
        named = _row_names([ids[i] for i in keep], None if where is None else [where[i] for i in keep])
        with named_as(named):
            return self.embed(records).table if records else self.empty()


def arrow_texts(batch: pa.Table, text_column: str) -> list[Any]:
    """The texts of an Arrow batch (a Ray Dataset's), None for a null; InvalidInput in one line for a
    missing column or a value that is not text (a number, bytes, a list), as the local job refuses it."""
    if text_column not in batch.column_names:
        fix = "name the text column with text_field="
        raise InvalidInput(missing_field(text_column, batch.column_names, fix))
    texts = batch.column(text_column).to_pylist()
    for index, text in enumerate(texts):
        if text is not None and not isinstance(text, str):
            ids = batch.column("id").to_pylist() if "id" in batch.column_names else None
            row = _row_names(ids)("text", index) if ids else f"a row ({_shown(text)})"
            raise InvalidInput(
                f"field {text_column!r} of {row} is {type_named(text)}, not a string: give text "
                "only (cast the column to string, or filter such rows out first)"
            )
    return texts


def _row_names(ids: list[Any] | None, where: list[str] | None = None) -> Callable[[str, int], str]:
    """How a refusal names text `i` of a Ray batch (`core.tokens.named_as`): by its FILE:LINE where the
    corpus reader gave it, as the local job names it ("c.txt:21: the text"), else by its row's id, as
    the refusal of a text that is not a string does; not by its place in one actor's batch ("text 0")."""

    def name(kind: str, index: int) -> str:
        if where:
            return f"{where[index]}: the {kind}"
        return f"the row with id {ids[index]!r}" if ids else "a row"

    return name


def missing_field(field: str, columns: Sequence[str], fix: str) -> str:
    """The one line for a dataset without a field, naming the columns it has."""
    have = ", ".join(repr(c) for c in columns) or "none"
    return f"the dataset has no field {field!r} (its columns: {have}): {fix}"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class SentenceLevel(CorpusLevel):
    """One row per text: the pooled sentence vector (post-processed when asked)."""

    name = Level.SENTENCE
    pooled = True
    searchable = True

    def __init__(
        self,
        model: Any,
        spec: EmbedSpec,
        *,
        keep_text: bool,
        precision: Precision,
        processor: PostProcessor | None,
    ) -> None:
        super().__init__(model, spec, keep_text=keep_text, precision=precision)
        self.recipe = Recipe(spec, processor)

    @classmethod
    def build(cls, model: Any, recipe: EmbedOptions, asked: LevelOptions) -> SentenceLevel:
        """The recipe resolved as `Model.embed` resolves it, post-processing included."""
        resolved = resolve(model, recipe)
        return cls(model, resolved.spec, **storage(asked), processor=resolved.post)

    def recorded(self) -> dict[str, Any]:
        """The spec and post-processing; level and precision only when not the defaults (older stores)."""
        settings = self.recipe.provenance()
        if self.precision is not Precision.FLOAT32:
            settings["precision"] = self.precision.value
        return settings

    def embed(self, records: Sequence[Record], *, on_batch: OnBatch | None = None) -> Rows:
        """id, text, embedding, n_tokens, truncated per record."""
        import pyarrow as pa

        texts = [r.text for r in records]
        result = self.recipe.finish(self.model.engine.sentences_once(texts, self.spec, on_batch=on_batch))
        columns: dict[str, Any] = {"id": pa.array([r.id for r in records], pa.string())}
        if self.keep_text:
            columns["text"] = pa.array(texts, pa.string())
        columns["embedding"] = vector_array(result.vectors, self.precision)
        columns["n_tokens"] = pa.array(result.n_tokens.astype(np.int32))
        columns["truncated"] = pa.array(result.n_dropped.astype(np.int32))
        return Rows(pa.table(columns), len(records), int(result.n_tokens.sum()), result.n_truncated)

    def embed_arrow(
        self, batch: pa.Table, text_column: str, *, where: Sequence[str] | None = None
    ) -> pa.Table:
        """The batch's own columns with embedding, n_tokens and truncated added; empty texts dropped.
        `where`: each row's FILE:LINE, as `CorpusLevel.embed_arrow`'s."""
        import pyarrow as pa

        texts = arrow_texts(batch, text_column)
        keep = [i for i, t in enumerate(texts) if isinstance(t, str) and t.strip()]
        if len(keep) < len(texts):
            batch = batch.take(pa.array(keep, pa.int64()))
        records = [Record("", texts[i], 0) for i in keep]
        ids = batch.column("id").to_pylist() if "id" in batch.column_names else None
        kept = None if where is None else [where[i] for i in keep]
        with named_as(_row_names(ids, kept)):  # the batch holds the kept rows alone by now
            rows = self.embed(records).table if records else self.empty()
        for name in ("embedding", "n_tokens", "truncated"):
            batch = batch.append_column(name, rows.column(name))
        return batch

    def tally(self, table: pa.Table) -> tuple[int, int, int]:
        """Rows are texts."""
        n_tokens = table.column("n_tokens").to_numpy()
        truncated = table.column("truncated").to_numpy()
        return table.num_rows, int(n_tokens.sum()), int(np.count_nonzero(truncated))


class _PieceLevel(CorpusLevel):
    """Shared by token and word rows: per-layer vectors, per-text facts on each text's first row."""

    @classmethod
    def build(cls, model: Any, recipe: EmbedOptions, asked: LevelOptions) -> CorpusLevel:
        """Layers, combine and the long-text policy of the recipe (rows are not pooled)."""
        return cls(model, unpooled_spec(model, recipe), **storage(asked))

    def recorded(self) -> dict[str, Any]:
        """Layers, combine, long-text policy, precision and the level; no pooling (rows are not pooled)."""
        spec = {k: v for k, v in self.spec.as_dict().items() if k not in POOLED_OPTIONS}
        return {"level": self.name.value, **spec, "precision": self.precision.value}

    def _layer_blocks(self, matrix: np.ndarray) -> list[np.ndarray]:
        """(tokens, k*d) stacked rows -> k (tokens, d) blocks; one block for any other combine."""
        if self.spec.combine is not Combine.STACK or len(self.spec.layers) == 1:
            return [matrix]
        return np.split(matrix, len(self.spec.layers), axis=1)

    def _table(self, columns: dict[str, Any], blocks: list[list[np.ndarray]]) -> pa.Table:
        import pyarrow as pa

        names = self.vector_names()
        for index, name in enumerate(names):
            columns[name] = vector_array(np.concatenate([b[index] for b in blocks]), self.precision)
        return pa.table(columns)

    def vector_names(self) -> list[str]:
        """`embedding`, or `layer_N` per kept layer with combine="stack"."""
        if self.spec.combine is Combine.STACK and len(self.spec.layers) > 1:
            return [f"layer_{n}" for n in self.spec.layers]
        return ["embedding"]

    def _first_row(self, counts: list[int], values: list[Any]) -> list[Any]:
        """Each text's value on its first row, null on the others (Parquet stores the nulls in bits)."""
        out: list[Any] = []
        for count, value in zip(counts, values, strict=True):
            out.append(value)
            out.extend([None] * (count - 1))
        return out

    def _common(self, records: Sequence[Record], counts: list[int]) -> dict[str, Any]:
        import pyarrow as pa

        ids = [r.id for r, n in zip(records, counts, strict=True) for _ in range(n)]
        return {
            "id": pa.array(ids, pa.string()),
            "position": pa.array([p for n in counts for p in range(n)], pa.int32()),
        }

    def _tail(
        self, columns: dict[str, Any], records: Sequence[Record], counts: list[int], dropped: list[int]
    ) -> None:
        import pyarrow as pa

        if self.keep_text:
            columns["text"] = pa.array(self._first_row(counts, [r.text for r in records]), pa.string())
        columns["truncated"] = pa.array(self._first_row(counts, dropped), pa.int32())

    def tally(self, table: pa.Table) -> tuple[int, int, int]:
        """Texts are first rows; tokens are rows (pieces) or summed pieces (words)."""
        first = table.column("position").to_numpy() == 0
        dropped = table.column("truncated").to_numpy(zero_copy_only=False)
        return int(first.sum()), self._tokens(table), int(np.count_nonzero(np.nan_to_num(dropped[first])))

    def _tokens(self, table: pa.Table) -> int:
        return table.num_rows


class TokenLevel(_PieceLevel):
    """One row per word piece, specials included (flagged), with its character span in the text."""

    name = Level.TOKENS

    def embed(self, records: Sequence[Record], *, on_batch: OnBatch | None = None) -> Rows:
        """id, position, token, token_id, start, end, word_index, special, text, truncated, vectors."""
        import pyarrow as pa

        texts = [r.text for r in records]
        pieces, ids, starts, ends, words, special = [], [], [], [], [], []
        counts, dropped, blocks = [], [], []
        for tok, matrix in self.model.engine.token_matrices(texts, self.spec, on_batch=on_batch):
            counts.append(len(tok))
            dropped.append(tok.n_dropped)
            pieces += tok.tokens
            ids += tok.ids
            starts += [s for s, _ in tok.offsets]
            ends += [e for _, e in tok.offsets]
            words += tok.word_ids
            special += tok.special_tokens_mask
            blocks.append(self._layer_blocks(matrix))
        columns = self._common(records, counts)
        columns["token"] = pa.array(pieces, pa.string())
        columns["token_id"] = pa.array(ids, pa.int32())
        columns["start"] = pa.array(starts, pa.int32())
        columns["end"] = pa.array(ends, pa.int32())
        columns["word_index"] = pa.array(words, pa.int32())
        columns["special"] = pa.array(special, pa.bool_())
        self._tail(columns, records, counts, dropped)
        table = self._table(columns, blocks)
        return Rows(table, len(records), len(pieces), sum(1 for d in dropped if d))


class WordLevel(_PieceLevel):
    """One row per word (the tokenizer's word ids), its pieces pooled by `subword`; specials left out.

    A word whose last pieces long="truncate" cut off ("bank" of bank ##note) is no word of the text and
    gets no row (`core.pooling.whole_words`), as static --corpus and embed_words leave it out. Stores
    record it (`whole_words: True`); one written before kept it, and verify remakes its rows so.
    """

    name = Level.WORDS
    options = ("subword",)

    @classmethod
    def build(cls, model: Any, recipe: EmbedOptions, asked: LevelOptions) -> WordLevel:
        """As token rows, with the pieces of each word pooled by `subword`."""
        how = SubwordPooling.parse(asked.subword, what="subword pooling")
        return cls(model, unpooled_spec(model, recipe), **storage(asked), subword=how)

    def __init__(
        self,
        model: Any,
        spec: EmbedSpec,
        *,
        keep_text: bool,
        precision: Precision,
        subword: SubwordPooling,
        whole_words: bool = True,
    ) -> None:
        super().__init__(model, spec, keep_text=keep_text, precision=precision)
        self.subword = subword
        self.whole_words = whole_words

    def recorded(self) -> dict[str, Any]:
        """The piece-level settings, how pieces pool into words, and that a cut word gets no row."""
        # an older store's settings lack it; only a cut (long="truncate") can split a word
        cuts = self.spec.long is LongText.TRUNCATE
        rule = {"whole_words": True} if self.whole_words and cuts else {}
        return {**super().recorded(), "subword": self.subword.value, **rule}

    def as_stored(self, settings: dict[str, Any]) -> None:
        """Make rows by the rule of a store's `settings`: one written before `whole_words` was recorded
        kept a word the truncation cut (verify remakes its rows as they were written)."""
        self.whole_words = bool(settings.get("whole_words", False))

    def embed(self, records: Sequence[Record], *, on_batch: OnBatch | None = None) -> Rows:
        """id, position, word, pieces, start, end, text, truncated, vectors."""
        import pyarrow as pa

        texts = [r.text for r in records]
        words, pieces, starts, ends = [], [], [], []
        counts, dropped, blocks, n_pieces = [], [], [], 0
        tokens = self.model.engine.token_matrices(texts, self.spec, on_batch=on_batch)
        for index, (tok, matrix) in enumerate(tokens):
            groups, spans = whole_words(tok) if self.whole_words else text_words(tok)
            if not groups:  # every text has rows: its first one holds its text and counts it
                raise InvalidInput(
                    f"{text_named('text', index)}'s first word is longer than the model's "
                    f"{self.model.engine.tokenizer.max_tokens}-token limit, so long='truncate' leaves no "
                    "whole word of it to store: shorten that word or leave the text out; long='window' "
                    "(--long window), in a new output, reads it whole"
                )
            counts.append(len(groups))
            dropped.append(tok.n_dropped)
            words += [tok.text[s:e] for s, e in spans]
            pieces += [[tok.tokens[i] for i in g] for g in groups]
            starts += [s for s, _ in spans]
            ends += [e for _, e in spans]
            n_pieces += sum(len(g) for g in groups)
            blocks.append([pool_words(b, groups, self.subword) for b in self._layer_blocks(matrix)])
        columns = self._common(records, counts)
        columns["word"] = pa.array(words, pa.string())
        columns["pieces"] = pa.array(pieces, pa.list_(pa.string()))
        columns["start"] = pa.array(starts, pa.int32())
        columns["end"] = pa.array(ends, pa.int32())
        self._tail(columns, records, counts, dropped)
        table = self._table(columns, blocks)
        return Rows(table, len(records), n_pieces, sum(1 for d in dropped if d))

    def _tokens(self, table: pa.Table) -> int:
        import pyarrow.compute as pc

        return int(pc.sum(pc.list_value_length(table.column("pieces"))).as_py() or 0)


def storage(asked: LevelOptions) -> dict[str, Any]:
    """How every level stores its rows: keep_text, and the precision checked."""
    return {"keep_text": asked.keep_text, "precision": Precision.parse(asked.precision, what="precision")}


def unpooled_spec(model: Any, recipe: EmbedOptions, *, prompt: str = "") -> EmbedSpec:
    """The spec of rows that are not pooled: the recipe's layers, combine, long and stride, and no prompt
    (`prompt`: a store's recorded one, for a query made as its rows were): a row's span indexes the text
    as given, and a model's default prompt is its sentence vectors' (it made 'passage' and ':' words of
    every text, and shifted every span by the prompt's length)."""
    unpooled = replace(
        recipe, pooling=Pooling.MEAN, mask_special=False, normalize=None, prompt_name=None, prompt=prompt
    )
    return resolve(model, unpooled).spec


def vector_columns(schema: pa.Schema) -> list[str]:
    """The names of a store's vector columns (fixed-size lists): `embedding` or `layer_N`..."""
    import pyarrow as pa

    return [f.name for f in schema if pa.types.is_fixed_size_list(f.type)]


def vector_array(vectors: np.ndarray, precision: Precision) -> pa.FixedSizeListArray:
    """A fixed-size list column of (rows, d) vectors in the stored precision."""
    import pyarrow as pa

    dtype = np.float16 if precision is Precision.FLOAT16 else np.float32
    flat = np.ascontiguousarray(vectors, dtype=dtype).reshape(-1)
    return pa.FixedSizeListArray.from_arrays(pa.array(flat), int(vectors.shape[1]))
