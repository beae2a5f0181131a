"""The result types: NumPy arrays with the tokens, offsets and provenance that produced them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, overload

import numpy as np

from ..errors import InvalidInput
from .renamed_fields import renamed_field

__all__ = [
    "SentenceEmbeddings",
    "TokenEmbeddings",
    "WordEmbeddings",
    "ChunkEmbeddings",
    "rows",
    "plain",
    "per_text",
]


def rows(matrix: np.ndarray) -> list[Any]:
    """A (n, d) matrix (or (n, k, d) block) as JSON-able float32 rows."""
    return np.asarray(matrix, dtype=np.float32).tolist()  # type: ignore[no-any-return]


def plain(settings: dict[str, Any]) -> dict[str, Any]:
    """Settings (a spec, provenance) as plain JSON values: tuples become lists, enums their names."""
    return json.loads(json.dumps(settings, default=str))  # type: ignore[no-any-return]


class _VectorsArray:
    """What NumPy reads of a result: its `vectors`, the one array that is its value.

    `np.asarray(m.embed(texts))` is the (n, d) matrix, not a 0-d object array; `dtype` and NumPy 2's
    `copy` are honoured (copy=False where a copy is needed raises, as NumPy's own arrays do). `shape`,
    `dtype` and `tolist()` are the vectors' own.
    """

    vectors: np.ndarray

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is None:
            return np.asarray(self.vectors, dtype=dtype)
        return np.asarray(self.vectors, dtype=dtype, copy=copy)

    def __dlpack__(self, **options: Any) -> Any:
        """The vectors over DLPack, which `torch.as_tensor(result)` reads whole (not row by row); DLPack's
        `copy` is honoured: copy=False on read-only vectors raises BufferError, as NumPy's arrays do."""
        vectors = np.asarray(self.vectors)
        try:
            return vectors.__dlpack__(**options)
        except BufferError:  # a read-only array, which DLPack cannot mark so: a copy goes instead
            if options.get("copy") is False:
                raise
            return vectors.copy().__dlpack__(**options)

    def __dlpack_device__(self) -> tuple[int, int]:
        """Where the vectors are, for DLPack: the CPU."""
        return np.asarray(self.vectors).__dlpack_device__()  # type: ignore[no-any-return]

    @property
    def shape(self) -> tuple[int, ...]:
        """The vectors' shape, as NumPy gives it: (n, d), or (tokens, layers, d) for stacked layers."""
        return tuple(np.shape(self.vectors))

    @property
    def dtype(self) -> np.dtype[Any]:
        """The vectors' NumPy dtype (float32 unless a precision other than float32 was asked)."""
        return np.asarray(self.vectors).dtype

    def tolist(self) -> list[Any]:
        """The vectors as nested Python lists of floats, as `ndarray.tolist()` gives them."""
        return np.asarray(self.vectors).tolist()  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> bool:
        """Whether `other` is a result of the same type with the same fields, arrays equal by
        `np.array_equal` (NaN equals nothing): one bool, never NumPy's element-wise array."""
        if type(other) is not type(self):  # not NotImplemented: NumPy would answer element-wise
            return False
        names = [f.name for f in fields(self)]  # type: ignore[arg-type]  # every result is a dataclass
        return all(_same(getattr(self, name), getattr(other, name)) for name in names)

    # Results hold arrays and lists, which change: unhashable, as a dataclass with __eq__ is.
    __hash__ = None  # type: ignore[assignment]


def _same(a: object, b: object) -> bool:
    """Whether two field values are equal as one bool: arrays by `np.array_equal`, containers item by item."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and bool(np.array_equal(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _zero_d(index: object) -> bool:
    """Whether `index` is a 0-d array that is no row number (a bool's, a float's): NumPy reads it as a
    mask or refuses it, neither a row."""
    return isinstance(index, np.ndarray) and index.ndim == 0


def _row_index(index: object) -> bool:
    """Whether `index` is of a kind that picks rows: a row number, a slice, a tuple (NumPy's own), or a
    list, range, array or Series of row numbers or bools; not a str, a float, a dict (NumPy's IndexError)."""
    if isinstance(index, (int, np.integer, slice, tuple)) or index is Ellipsis:
        return True
    if isinstance(index, (str, bytes)):
        return False
    try:
        given = np.asarray(index)  # a list, range, array or Series of row numbers or bools
    except (TypeError, ValueError):
        return False
    return given.ndim > 0 and (given.size == 0 or given.dtype.kind in "iub")


def _index_named(index: object) -> str:
    """An index a result refuses, as its line names it: the value where short (None, True), else its type."""
    return repr(index) if len(repr(index)) <= 30 else type(index).__name__


def _shown(result: _VectorsArray, count: int, noun: str) -> str:
    """How a result's repr begins: its count and its vectors' shape and dtype, never the numbers."""
    counted = f"{count} {noun}{'' if count == 1 else 's'}"
    return f"{type(result).__name__}({counted}, vectors {result.shape} {result.dtype}"


def texts_shown(text: object, pair: object = None) -> str:
    """How a repr names its text and, where there is one, its pair: ", text '...' (n chars), pair ..."."""
    return f", text {_quoted(text)}" + (f", pair {_quoted(pair)}" if pair is not None else "")


def _quoted(text: object) -> str:
    """A text as a repr quotes it: its first 40 characters and its length."""
    text = text if isinstance(text, str) else str(text)  # a repr never raises, whatever it was given
    start = text if len(text) <= 40 else f"{text[:40]}..."
    return f"{start!r} ({len(text)} chars)"


def _recipe(spec: dict[str, Any], keys: Sequence[str]) -> str:
    """The settings named by `keys` that the spec holds, as a repr ends: ", layers=(6,), pooling=mean)"."""
    spec = spec if isinstance(spec, dict) else {}
    return "".join(f", {key}={spec[key]}" for key in keys if key in spec) + ")"


@dataclass(eq=False)  # _VectorsArray's __eq__: one bool, arrays by np.array_equal
class SentenceEmbeddings(_VectorsArray):
    """Sentence vectors (n, d) float32 , per text the tokens read and dropped (n,), and the spec.

    NumPy reads it as `vectors`: `np.asarray(result)` is the (n, d) matrix, and so do pandas'
    `DataFrame(result)` and `torch.as_tensor(result)`. It reads as a list of rows too: `result[i]` is text
    i's vector (d,), iterating gives the rows in order, and a slice (or a list or mask of rows) is a
    `SentenceEmbeddings` of those texts; `shape`, `dtype` and `tolist()` are NumPy's. Two results compare
    with `==` as one bool (the same fields, arrays equal by `np.array_equal`); a result is unhashable.
    """

    vectors: np.ndarray
    n_tokens: np.ndarray
    n_dropped: np.ndarray
    spec: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(np.shape(self.vectors)[0])

    @overload
    def __getitem__(self, index: int | np.integer[Any]) -> np.ndarray: ...
    @overload
    def __getitem__(self, index: tuple[Any, ...]) -> np.ndarray: ...
    @overload
    def __getitem__(self, index: slice | Sequence[int] | np.ndarray) -> SentenceEmbeddings: ...
    def __getitem__(self, index: Any) -> np.ndarray | SentenceEmbeddings:
        """Text i's vector (d,); a slice, list or mask of rows: those texts' `SentenceEmbeddings`; a tuple
        indexes the (n, d) vectors as NumPy does (`result[:, :64]`). A 0-d integer array is a row number;
        None and a bool are refused (NumPy would add an axis: vectors of the wrong shape)."""
        if isinstance(index, np.ndarray) and index.ndim == 0 and index.dtype.kind in "iu":
            index = int(index)
        if index is None or isinstance(index, (bool, np.bool_)) or _zero_d(index) or not _row_index(index):
            raise InvalidInput(
                f"SentenceEmbeddings is indexed by a row number, a slice, a list or array of row numbers, a "
                f"mask of {len(self)} bools, or a tuple as its (n, d) vectors are; not {_index_named(index)}"
            )
        if isinstance(index, (int, np.integer, tuple)):
            return self.vectors[index]  # type: ignore[no-any-return]
        return SentenceEmbeddings(
            vectors=self.vectors[index],
            n_tokens=np.asarray(self.n_tokens)[index],
            n_dropped=np.asarray(self.n_dropped)[index],
            spec=self.spec,
        )

    def __iter__(self) -> Iterator[np.ndarray]:
        """The texts' vectors (d,), in order, as `list(result)` and a `for` loop read them."""
        return iter(self.vectors)

    def __contains__(self, vector: object) -> bool:
        """Whether a text's vector equals `vector` exactly, as `in` reads a list of rows (not NumPy's
        element-wise test, whose truth is ambiguous); a value of another shape is in none."""
        given = np.asarray(vector)
        vectors = np.asarray(self.vectors)
        if given.shape != vectors.shape[1:] or given.dtype.kind not in "biuf":
            return False
        return bool((vectors == given).reshape(len(vectors), -1).all(axis=1).any())

    def __repr__(self) -> str:
        """The texts' count, the vectors' shape and dtype, the tokens read and the recipe; no floats."""
        cut = int((np.asarray(self.n_dropped) > 0).sum())
        return (
            _shown(self, len(self), "text")
            + f", tokens {int(np.sum(self.n_tokens))}"
            + (f", {cut} cut" if cut else "")
            + _recipe(self.spec, ("layers", "pooling", "normalize"))
        )

    @classmethod
    def joined(cls, parts: Sequence[SentenceEmbeddings]) -> SentenceEmbeddings:
        """Consecutive parts' rows as one result (n1 + n2 + ..., d), under the first part's spec."""
        return cls(
            vectors=np.concatenate([p.vectors for p in parts]),
            n_tokens=np.concatenate([p.n_tokens for p in parts]),
            n_dropped=np.concatenate([p.n_dropped for p in parts]),
            spec=parts[0].spec,
        )

    @property
    def truncated(self) -> np.ndarray:
        """Deprecated: the old name of `n_dropped` (the same array), with a DeprecationWarning."""
        return renamed_field(self.n_dropped, owner="SentenceEmbeddings", name="n_dropped", old="truncated")

    @property
    def n_truncated(self) -> int:
        """How many texts lost tokens to truncation."""
        return int((np.asarray(self.n_dropped) > 0).sum())

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: dimension (d), vectors (n, d), n_tokens (n,), n_dropped (n,) and the spec."""
        return {
            "dimension": int(self.vectors.shape[1]),
            "vectors": rows(self.vectors),
            "n_tokens": np.asarray(self.n_tokens).astype(int).tolist(),
            "n_dropped": np.asarray(self.n_dropped).astype(int).tolist(),
            "spec": plain(self.spec),
        }


@dataclass(eq=False)  # _VectorsArray's __eq__: one bool, arrays by np.array_equal
class TokenEmbeddings(_VectorsArray):
    """One text's token vectors (tokens, d), pad trimmed, with tokens and character offsets; NumPy reads
    it as `vectors` (`embed_tokens` gives a list of these, one per text, of differing lengths).

    With combine="stack" and several layers the vectors are (tokens, layers, d): one per kept layer.
    For a pair (A, B), `sequence_ids` says which text each token's offsets and word id index: 0 for
    `text` (A), 1 for `pair` (B), None for a special token; None for a single text.

    `spec` is the resolved request the vectors were made under (`EmbedSpec.as_dict()`): layers, combine,
    long, stride and the prompt make them; its pooling, mask_special and normalize are the defaults a
    sentence vector would read, which token vectors never do (the repr leaves them out). Two
    results compare with `==` as one bool (the same fields, arrays equal by `np.array_equal`); a result
    is unhashable.
    """

    text: str
    tokens: list[str]
    offsets: list[tuple[int, int]]
    word_ids: list[int | None]
    special_tokens_mask: list[bool]
    vectors: np.ndarray
    n_dropped: int
    spec: dict[str, Any] = field(default_factory=dict)
    pair: str | None = None
    sequence_ids: list[int | None] | None = None
    # Whether the truncation cut inside the last kept word (Tokens.last_word_cut): not a whole word.
    last_word_cut: bool = False

    @property
    def special_mask(self) -> list[bool]:
        """Deprecated: the old name of `special_tokens_mask` (transformers' name)."""
        return renamed_field(
            self.special_tokens_mask, owner="TokenEmbeddings", name="special_tokens_mask", old="special_mask"
        )

    def __repr__(self) -> str:
        """The tokens' count, the vectors' shape and dtype, the text (and pair), the recipe; no floats."""
        return (
            _shown(self, len(self.tokens), "token")
            + texts_shown(self.text, self.pair)
            + (f", {self.n_dropped} dropped" if self.n_dropped else "")
            + _recipe(self.spec, ("layers", "combine"))  # not pooling: token vectors are not pooled
        )

    @classmethod
    def of(cls, tokens: Any, matrix: np.ndarray, spec: dict[str, Any]) -> TokenEmbeddings:
        """From an engine's (Tokens, (tokens, d or k*d) matrix); stacked layers split to (tokens, k, d)."""
        k = len(spec.get("layers") or ())
        if spec.get("combine") == "stack" and k > 1:
            matrix = matrix.reshape(len(matrix), k, -1)
        return cls(
            tokens.text, tokens.tokens, tokens.offsets, tokens.word_ids, tokens.special_tokens_mask, matrix,
            tokens.n_dropped, spec, tokens.pair, tokens.sequence_ids if tokens.pair is not None else None,
            tokens.last_word_cut,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: text, pair, tokens, offsets, word_ids, special, vectors, n_dropped, layers, combine;
        for a pair also sequence_ids (0: the offsets and word id index `text`, 1: `pair`, None: special).

        `vectors` is (tokens, d), or (tokens, layers, d) with combine "stack": one vector per `layers` entry.
        """
        found: dict[str, Any] = {
            "text": self.text,
            "pair": self.pair,
            "tokens": list(self.tokens),
            "offsets": [list(o) for o in self.offsets],
            "word_ids": list(self.word_ids),
            "special": list(self.special_tokens_mask),
        }
        if self.pair is not None and self.sequence_ids is not None:
            found["sequence_ids"] = list(self.sequence_ids)
        return {
            **found,
            "vectors": rows(self.vectors),
            "n_dropped": int(self.n_dropped),
            **_layering(self.spec),
        }


@dataclass(eq=False)  # _VectorsArray's __eq__: one bool, arrays by np.array_equal
class WordEmbeddings(_VectorsArray):
    """One text's word vectors (words, d), each word with its character span and pieces; NumPy reads it
    as `vectors`. Two results compare with `==` as one bool (the same fields, arrays equal by
    `np.array_equal`); a result is unhashable."""

    text: str
    words: list[str]
    spans: list[tuple[int, int]]
    pieces: list[list[str]]
    vectors: np.ndarray
    n_dropped: int
    spec: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        """The words' count, the vectors' shape and dtype, the text and the recipe; never the floats."""
        return (
            _shown(self, len(self.words), "word")
            + texts_shown(self.text)
            + (f", {self.n_dropped} dropped" if self.n_dropped else "")
            + _recipe(self.spec, ("layers", "combine", "subword"))
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: text, words, spans, pieces, vectors (words, d; or words, layers, d), n_dropped."""
        return {
            "text": self.text,
            "words": list(self.words),
            "spans": [list(s) for s in self.spans],
            "pieces": [list(p) for p in self.pieces],
            "vectors": rows(self.vectors),
            "n_dropped": int(self.n_dropped),
            **_layering(self.spec),
        }


def _layering(spec: dict[str, Any]) -> dict[str, Any]:
    """The layers and combine behind token or word vectors, when the spec names them."""
    return plain({k: spec[k] for k in ("layers", "combine") if k in spec})


def per_text(results: Sequence[TokenEmbeddings | WordEmbeddings]) -> dict[str, Any]:
    """JSON-able: `items` (each result's own dict, in input order) and the `spec` they share."""
    return {"items": [r.to_dict() for r in results], "spec": plain(results[0].spec if results else {})}


@dataclass(eq=False)  # _VectorsArray's __eq__: one bool, arrays by np.array_equal
class ChunkEmbeddings(_VectorsArray):
    """One document's chunk vectors (chunks, d), each chunk with its text and character span; NumPy reads
    it as `vectors`.

    `n_tokens` counts the chunk's own word pieces kept (its text's: not [CLS], [SEP] or the prompt's,
    whether the pooling reads those or not), late or not, so a late and a naive result compare (a prompt
    glued to the text without a space can merge with its first word, and count one piece apart);
    `n_dropped` the pieces a chunk embedded alone (late=False) lost to the model's window (always 0 for
    late chunks, which see every token), as `SentenceEmbeddings.n_dropped` counts a text's (`truncated`,
    its old name, still reads it, with a DeprecationWarning; a corpus store's column keeps the name
    `truncated`). Two results compare with `==` as one bool (the same fields, arrays equal by
    `np.array_equal`); a result is unhashable.
    """

    text: str
    chunks: list[str]
    spans: list[tuple[int, int]]
    vectors: np.ndarray
    n_tokens: np.ndarray
    n_dropped: np.ndarray
    spec: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.chunks)

    @property
    def truncated(self) -> np.ndarray:
        """Deprecated: the old name of `n_dropped` (the same array), with a DeprecationWarning."""
        return renamed_field(self.n_dropped, owner="ChunkEmbeddings", name="n_dropped", old="truncated")

    def __repr__(self) -> str:
        """The chunks' count, shape and dtype, the document's start and the pooling; no floats."""
        return (
            _shown(self, len(self.chunks), "chunk")
            + texts_shown(self.text)
            + f", tokens {int(np.sum(self.n_tokens))}"
            + _recipe(self.spec, ("layers", "pooling"))
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: text, and per chunk its number (`chunk`, as a search hit names it), start, end, text,
        n_tokens, n_dropped and vector."""
        chunks = [
            {
                "chunk": n,
                "start": s,
                "end": e,
                "text": c,
                "n_tokens": int(t),
                "n_dropped": int(d),
                "vector": v,
            }
            for n, ((s, e), c, t, d, v) in enumerate(
                zip(self.spans, self.chunks, self.n_tokens, self.n_dropped, rows(self.vectors), strict=True)
            )
        ]
        return {"text": self.text, "chunks": chunks, "spec": plain(self.spec)}
