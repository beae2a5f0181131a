"""Static word-piece vectors: rows of the input embedding matrix, no position, no segment."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .core.exports import Block, ExportFormat, RowKind, Rows, export_format, side_path, write_rows
from .core.given import row_id
from .core.renamed import older_spelling, renamed_keyword, top_k_given
from .core.renamed_fields import renamed_field
from .core.similarity import unit
from .core.spec import whole_number
from .core.tokens import text_problem
from .errors import InvalidInput, UnknownToken

if TYPE_CHECKING:
    from tokenizers import Encoding

__all__ = [
    "StaticSource",
    "StaticWord",
    "Neighbor",
    "ExportFormat",
    "export_format",
    "written_files",
    "refuse_replacing",
    "static_rows",
    "static_word",
    "spelled_pieces",
    "several_words",
    "stand_in",
    "neighbors",
    "export",
    "lookup",
    "first_words",
]

_UNUSED = re.compile(r"^\[unused\d+\]$|^<unused\d+>$")


class StaticSource(Protocol):
    """What the static functions read: a loaded model, or a model folder read without torch (FolderView)."""

    @property
    def vocab(self) -> dict[str, int]:
        """Word piece -> id."""

    @property
    def id_to_token(self) -> dict[int, str]:
        """Id -> word piece."""

    @property
    def special_ids(self) -> list[int]:
        """Ids of the special tokens."""

    @property
    def static_shape(self) -> tuple[int, int]:
        """(rows, width) of the input embedding matrix."""

    def embedding_rows(self, ids: Sequence[int]) -> np.ndarray:
        """(n, width) float32 rows of the input embedding matrix."""

    def unit_static_matrix(self) -> np.ndarray:
        """The matrix with unit rows, for cosine neighbours."""

    def pieces(self, text: str) -> Encoding:
        """The tokenizer's encoding of `text` without special tokens."""


@dataclass
class StaticWord:
    """One word's static vector: the mean of its pieces' rows, with the pieces and their ids."""

    word: str
    pieces: list[str]
    ids: list[int]
    vector: np.ndarray

    def __repr__(self) -> str:
        """The word, its pieces and the vector's width and norm; not hundreds of floats."""
        vector = np.asarray(self.vector)
        return (
            f"StaticWord(word={self.word!r}, pieces={self.pieces!r}, vector=({vector.shape[-1]},) "
            f"norm {float(np.linalg.norm(vector)):.4g})"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: word, pieces, ids, vector (d,) and its norm."""
        return {
            "word": self.word,
            "pieces": list(self.pieces),
            "ids": list(self.ids),
            "vector": np.asarray(self.vector, dtype=np.float32).tolist(),
            "norm": float(np.linalg.norm(self.vector)),
        }


@dataclass
class Neighbor:
    """A vocabulary entry near a query: its `score` is the cosine of the static rows (`score`, as every
    hit's; `cosine` is its deprecated old name)."""

    token: str
    id: int
    score: float

    @property
    def cosine(self) -> float:
        """Deprecated: the old name of `score` (the same cosine)."""
        return renamed_field(self.score, owner="Neighbor", name="score", old="cosine")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: token, id, score (not the deprecated `cosine`)."""
        return {"token": self.token, "id": self.id, "score": self.score}


def token_ids(model: StaticSource, items: str | int | Sequence[str | int]) -> list[int]:
    """Ids of word-piece strings or ids, each checked against the vocabulary."""
    if isinstance(items, (str, int, np.integer)):
        items = [items]
    if not isinstance(items, Sequence | np.ndarray):
        # A float (7852.0) or another scalar: say what is taken instead of failing on len().
        raise InvalidInput(
            f"{items!r} is neither a word piece (str), a token id (int), nor a list of them; "
            "pass an id as an int (7852, not 7852.0)"
        )
    if len(items) == 0:
        raise InvalidInput("no tokens given: pass a word piece, an id, or a list of them")
    vocab = model.vocab
    rows = model.static_shape[0]
    ids = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int, np.integer)):
            raise InvalidInput(f"{item!r} is neither a word piece (str) nor a token id (int)")
        if isinstance(item, str):
            if item not in vocab:
                raise UnknownToken(_not_a_piece(model, item))
            ids.append(vocab[item])
        else:
            row_id(item, rows, tokens=len(vocab))  # the check `embedding_rows` makes: 0..rows-1
            if int(item) not in model.id_to_token:
                raise UnknownToken(f"token id {item} has a row in the matrix but no token in the tokenizer")
            ids.append(int(item))
    return ids


def _not_a_piece(model: StaticSource, item: str) -> str:
    """Why `item` has no row of its own, and what to pass instead."""
    if not item.strip():  # in static_word's words: one wording of an empty item on every path
        return f"{item!r} is no word piece (empty or only spaces): give a piece, e.g. 'bread', or a token id"
    problem = text_problem(item)
    if problem:
        return f"{ascii(item)} {problem}"
    encoding = model.pieces(item)
    pieces = encoding.tokens
    piece = stand_in(model, item, encoding)
    if piece is not None:
        # its pieces hold the unknown token: that row is no vector of it, as a piece or as a word (the mean
        # of its pieces): no option of any command gives it one, so none is named
        return (
            f"{item!r} has no piece in the vocabulary: the tokenizer reads it as {pieces}, and the row of "
            f"{piece} is not its, as a piece or as a word; `bertscope tokens` shows a text's pieces"
        )
    if len(pieces) == 1:
        # the vocabulary's own name of the piece: an added token's piece is the text it matched ("new york ")
        name = model.id_to_token.get(encoding.ids[0], pieces[0])
        return (
            f"{item!r} is not in the vocabulary as written; the tokenizer normalises it to the piece "
            f"{name!r}: pass {name!r}"
        )
    return (
        f"{item!r} is not a single word piece in the vocabulary (the tokenizer splits it into {pieces}); "
        f"use static_word({item!r}) for the mean of its pieces"
    )


def static_rows(model: StaticSource, items: str | int | Sequence[str | int]) -> np.ndarray:
    """(n, d) rows of the input embedding matrix for word pieces or ids."""
    ids = token_ids(model, items)
    return model.embedding_rows(ids)


def stand_in(model: StaticSource, word: str, encoding: Encoding) -> str | None:
    """The first of `word`'s pieces (`encoding`) that is a special piece the word does not spell, or None.

    Such a piece is the unknown token standing in for what the vocabulary lacks: its row (and its vector
    in context) is no vector of the word, and a mean over it, with the word's other pieces or alone, would
    pass for one. A word that spells a special token itself (the text '[UNK]') keeps it."""
    special = set(model.special_ids)
    pieces = zip(encoding.tokens, encoding.ids, strict=True)
    return next((t for t, i in pieces if i in special and t not in word), None)


def several_words(word: str) -> str | None:
    """Why `word` cannot be one new token (a space inside it), or None (`add_tokens`). A static vector
    takes several words: `static_word("new york")` is the mean of the rows of both words' pieces."""
    if any(c.isspace() for c in word.strip()):
        # both spellings named, no call written out: cli/wording.py rewrites `static_word('...')` into
        # its flag alone, which read "a phrase's static vector is --as-words" on `vocab add`
        return (
            f"{word!r} is several words: a new token is one word without spaces; add each word on its own, "
            f"e.g. {word.split()[0]!r} (a phrase's static vector is the mean of the rows of its words' "
            f"pieces: static_word in Python, bertscope static {word!r} --as-words)"
        )
    return None


def spelled_pieces(model: StaticSource, word: str) -> Encoding:
    """`word`'s pieces, refused in one line when there are none or one is a stand-in (`stand_in`)."""
    encoding = model.pieces(word)
    if not encoding.ids:
        raise InvalidInput(f"{word!r} gives no word pieces")
    piece = stand_in(model, word, encoding)
    if piece is not None:
        raise InvalidInput(
            f"{word!r} is not in this model's vocabulary: its pieces are {list(encoding.tokens)}, and "
            f"the row of {piece} is not the word's; give a word the vocabulary spells "
            "(`bertscope tokens` shows a text's pieces)"
        )
    return encoding


def static_word(model: StaticSource, word: str) -> StaticWord:
    """One vector for a word split into pieces: the mean of its pieces' rows (of every word's pieces for a
    phrase, "new york", as model2vec encodes one)."""
    if not isinstance(word, str):
        raise InvalidInput(
            f"{word!r} is not a word ({type(word).__name__}): give a string, e.g. 'breadmaker'"
        )
    if not word.strip():
        # said in words that serve a Python call, `static --as-words` and the service alike
        raise InvalidInput(f"{word!r} is no word (empty or only spaces): give a word, e.g. 'breadmaker'")
    encoding = spelled_pieces(model, word)
    rows = static_rows(model, list(encoding.ids))
    return StaticWord(word, list(encoding.tokens), list(encoding.ids), rows.mean(axis=0))


def lookup(
    model: StaticSource,
    item: str | int,
    *,
    as_words: bool | None = None,
    top_k: int | None = None,
    include_special: bool = False,
    word: bool | None = None,
    k: int | None = None,
) -> dict[str, Any]:
    """One JSON-able static record: a piece or id (token, id) or with `as_words` (default False) a word
    (word, pieces, ids), with its vector (d,), norm, and with top_k > 0 its `neighbors` (token, id,
    score: the cosine; default 0, none).

    `as_words` is `static --as-words` and the service's `"as_words"`; `word` is its deprecated old name
    (a `word` is a word itself elsewhere: `search_occurrences(word=...)`); `k=` is the older spelling of
    `top_k=`, still read."""
    count, given_as = older_spelling(top_k, k, name="top_k", old="k", default=0)
    if renamed_keyword(as_words, word, name="as_words", old="word", caller="lookup"):
        if not isinstance(item, str):
            raise InvalidInput(f"{item!r} is not a word; with as_words=True every item is a string")
        found = static_word(model, item)
        record: dict[str, Any] = {"item": item, **found.to_dict()}
        query: int | np.ndarray = found.vector
        # a word that is one piece has that piece's row as its vector: it is left out of its neighbours as
        # the piece itself is (a word of several pieces has no row of its own, so nothing is left out)
        own = found.ids if len(found.ids) == 1 else []
    else:
        query = token_ids(model, [item])[0]
        own = []  # the piece's own row: left out by `_neighbors`
        vector = static_rows(model, [query])[0]
        record = {
            "item": item,
            "token": model.id_to_token[query],
            "id": query,
            "vector": vector.tolist(),
            "norm": float(np.linalg.norm(vector)),
        }
    if count:
        record["neighbors"] = [
            n.to_dict()
            for n in _neighbors(model, query, whole_number(count, given_as), include_special, leave_out=own)
        ]
    return record


def neighbors(
    model: StaticSource,
    query: str | int | np.ndarray,
    *,
    top_k: int | None = None,
    include_special: bool = False,
    k: int | None = None,
) -> list[Neighbor]:
    """The `top_k` (default 10; `k=` is its older spelling, still read) vocabulary entries nearest to a
    piece, id or vector by cosine (the query itself left out)."""
    return _neighbors(model, query, top_k_given(top_k, k, old="k", default=10), include_special)


def _neighbors(
    model: StaticSource,
    query: str | int | np.ndarray,
    k: int,
    include_special: bool,
    *,
    leave_out: Sequence[int] = (),
) -> list[Neighbor]:
    """The k (checked) vocabulary entries nearest to `query` by cosine: a piece's own row, and the rows
    of `leave_out` (a one-piece word's), are left out."""
    if isinstance(query, np.ndarray):
        vector, own = query.astype(np.float32).reshape(-1), -1
        width = model.static_shape[1]
        if vector.shape[0] != width:
            raise InvalidInput(
                f"the query vector has {vector.shape[0]} numbers (shape {query.shape}), but this model's "
                f"static rows have {width}: give a vector of {width} (e.g. model.static_word('cat').vector)"
            )
    else:
        own = token_ids(model, query)[0]
        vector = static_rows(model, [own])[0]
    scores = model.unit_static_matrix() @ unit(vector)
    scores = scores.astype(np.float64)
    scores[_excluded(model, include_special)] = -np.inf
    if own >= 0:
        scores[own] = -np.inf
    scores[list(leave_out)] = -np.inf
    top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
    top = top[np.argsort(-scores[top])]
    return [
        Neighbor(model.id_to_token.get(int(i), ""), int(i), float(scores[i]))
        for i in top
        if scores[i] > -np.inf
    ]


def _excluded(model: StaticSource, include_special: bool) -> np.ndarray:
    rows = model.static_shape[0]
    mask = np.zeros(rows, dtype=bool)
    missing = [i for i in range(rows) if i not in model.id_to_token]
    mask[missing] = True
    if not include_special:
        special = [i for i in model.special_ids if i < rows]
        mask[special] = True
        mask[[i for t, i in model.vocab.items() if _UNUSED.match(t) and i < rows]] = True
    return mask


def first_words(model: StaticSource, n: int) -> list[int]:
    """Ids of the first `n` whole-word pieces (letters only, 2+ characters, no ## or special) by id.

    WordPiece and BPE vocabularies list pieces roughly by how often they were merged, so these are
    about the commonest words; the vocabulary carries no counts to do better.
    """
    n = whole_number(n, "top")
    excluded = _excluded(model, include_special=False)
    chosen = []
    for i in range(model.static_shape[0]):
        word = model.id_to_token.get(i, "").lstrip("\u0120\u2581")
        if not excluded[i] and len(word) > 1 and word.isalpha() and not model.id_to_token[i].startswith("##"):
            chosen.append(i)
            if len(chosen) == n:
                break
    return chosen


# A static row: its id and word piece beside the vector; the piece names it in the side files.
_PIECES = RowKind(columns=(("id", int), ("token", str)), side=("token",))


def _blocks(model: StaticSource, ids: Sequence[int], chunk: int = 4096) -> Iterator[Block]:
    """The rows of `ids` a chunk at a time: a whole vocabulary is never held twice."""
    for start in range(0, len(ids), chunk):
        block = list(ids[start : start + chunk])
        names = [model.id_to_token.get(i, f"[id{i}]") for i in block]
        yield {"id": block, "token": names}, model.embedding_rows(block)


def _each_once(model: StaticSource, ids: Sequence[int], items: Sequence[str | int]) -> None:
    """Refuse a row named twice (`king king`, or a piece and its id): every export keys a row by its
    piece, and a key written twice is one word with two vectors (gensim reads the second as None)."""
    first: dict[int, str | int] = {}
    for item, i in zip(items, ids, strict=True):
        if i in first:
            token = model.id_to_token[i]
            again = (
                f"{item!r} is named twice"
                if first[i] == item
                else f"{first[i]!r} and {item!r} name one row ({token!r}, id {i})"
            )
            raise InvalidInput(
                f"{again}: an export keys each row by its piece, so {token!r} would be written twice (one "
                "word, two vectors); name each row once"
            )
        first[i] = item


def written_files(path: str | Path, fmt: ExportFormat | str | None, *, columns: int = 1) -> list[Path]:
    """Every file `write_rows` writes at `path` in `fmt` for rows of `columns` side columns (1: a static
    row's piece; 2: a word and its count), as core/exports.py's writers name them."""
    path = Path(path)
    chosen = export_format(path, fmt)
    if chosen is ExportFormat.WORD2VEC:
        return [path] if columns == 1 else [path, side_path(path, ".counts.tsv")]
    if chosen is ExportFormat.NPY:
        path = path if path.suffix == ".npy" else path.with_name(path.name + ".npy")
        return [path, path.with_suffix(".vocab.txt" if columns == 1 else ".vocab.tsv")]
    if chosen is ExportFormat.PROJECTOR:
        return [side_path(path, ".vectors.tsv"), side_path(path, ".metadata.tsv")]
    return [path]


def refuse_replacing(files: Sequence[Path], error: type[Exception] = InvalidInput) -> None:
    """Raise `error` naming those of `files` that exist: an export replaces them only with overwrite."""
    there = [file for file in files if file.exists()]
    if there:
        verb, them = ("exist", "them") if len(there) > 1 else ("exists", "it")
        named = ", ".join(map(str, there))
        raise error(f"{named} {verb}; pass overwrite=True (--overwrite) to replace {them}")


def export(
    model: StaticSource,
    path: str | Path,
    fmt: ExportFormat | str | None = None,
    *,
    items: Sequence[str | int] | None = None,
    overwrite: bool = False,
) -> list[Path]:
    """Write the static rows of `items` (pieces or ids; default every row) to `path`; returns the files.

    Without `fmt` the file's suffix chooses (.vec/.txt/.w2v word2vec text, .npy, .parquet; any other
    suffix is refused). Any file the export would write that exists (a projector's .vectors.tsv and
    .metadata.tsv, an .npy's vocabulary) is refused unless `overwrite=True`, as `bertscope static -o`
    refuses it without --overwrite, and a row named twice in `items` is refused (every format keys a row
    by its piece), before anything is written.
    """
    files = written_files(path, fmt)  # a wrong name is refused before the rows are checked
    if not overwrite:
        refuse_replacing(files)
    if items is None:
        chosen = list(range(model.static_shape[0]))
    else:
        chosen = token_ids(model, items)
        _each_once(model, chosen, [items] if isinstance(items, (str, int, np.integer)) else list(items))
    rows = Rows(_PIECES, len(chosen), model.static_shape[1], _blocks(model, chosen))
    return write_rows(path, fmt, rows)
