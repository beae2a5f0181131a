"""The texts a call is given, checked before any is tokenized: a string or an ordered iterable of them
(and (A, B) pairs where pairs are taken), each non-empty and valid Unicode, or one line naming the text
and the fix (`check_texts`, `iter_checked`, `text_items`)."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any, Protocol

import numpy as np

from ..errors import InvalidInput
from .context_vars import set_within
from .results import ChunkEmbeddings, SentenceEmbeddings, TokenEmbeddings, WordEmbeddings

__all__ = [
    "bare_pair_message", "by_pair", "check_text", "check_texts", "is_pair", "iter_checked", "named_as",
    "one_text_or_pair", "refuse_unordered", "refuse_unusable", "TEXTS_TAKEN", "text_items", "text_named",
    "shortened_pair", "text_problem", "text_refusal", "type_named",
]  # fmt: skip

TEXTS_TAKEN = "texts must be a string or a list of strings"
# Results read as lists of their vectors: given as texts, refused as what they are (`refuse_unusable`).
VECTOR_RESULTS = (SentenceEmbeddings, TokenEmbeddings, WordEmbeddings, ChunkEmbeddings)


# How a refusal names a text of one call: the library "text 3" by its index (from 0), the command line
# by the number or id it prints the text under (`named_as`).
def _by_index(kind: str, index: int) -> str:
    return f"{kind} {index}"


_NAMED: ContextVar[Callable[[str, int], str]] = ContextVar("named", default=_by_index)


def named_as(name: Callable[[str, int], str]) -> AbstractContextManager[None]:
    """Refusals raised inside name a call's text, pair or document `i` (counted from 0) as
    `name(kind, i)` ("text 2", "the text of id '7'"), not "text i"."""
    return set_within(_NAMED, name)


def type_named(value: object) -> str:
    """`value`'s type as a refusal says it, with its article: 'an int', 'a list', 'None', 'bytes'."""
    if value is None:
        return "None"
    name = type(value).__name__
    if name == "bytes":  # a plural noun takes no article
        return name
    # by the sound: an int, an object; a uint8, a ubinary (said "you-")
    vowel = name[:1].lower() in "aeiou" and not name.lower().startswith(("ui", "ub", "uu", "us"))
    return ("an " if vowel else "a ") + name


def text_named(kind: str, index: int) -> str:
    """How a refusal names the call's `kind` ("text", "pair", "document") at `index` (from 0)."""
    return _NAMED.get()(kind, index)


def by_pair(left: Sequence[str], right: Sequence[str]) -> Callable[[str, int], str]:
    """A `named_as` naming for the distinct texts of pairs (left[j], right[j]), in order of first
    appearance (`dict.fromkeys([*left, *right])`): text i by the pair it first occurs in, "the first text
    of pair 3", the pair named as the naming around names pairs (the command line: by its file and line)."""
    outer = _NAMED.get()
    first: dict[str, tuple[str, int]] = {}
    for number, pair in enumerate(zip(left, right, strict=True)):
        for column, text in zip(("first", "second"), pair, strict=True):
            first.setdefault(text, (column, number))
    where = [first[text] for text in dict.fromkeys([*left, *right])]
    return lambda _kind, i: f"the {where[i][0]} text of {outer('pair', where[i][1])}"


def is_pair(value: object) -> bool:
    """Whether `value` is a sentence pair: a tuple (or, inside a list, a list) of two strings."""
    return (
        isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(part, str) for part in value)
    )


class GivesPieces(Protocol):
    """What `text_problem` asks of a model's tokenizer (`tokens.TextTokenizer` meets it)."""

    def gives_pieces(self, text: str) -> bool:
        """Whether `text` gives at least one word piece besides the special ones."""
        ...


def text_problem(text: str, *, tokenizer: GivesPieces | None = None) -> str | None:
    """Why a tokenizer cannot take `text` (a lone surrogate; only control/format/space), or None.

    With the model's `tokenizer`, also a text it turns into no word pieces at all: one of only
    combining marks (an uncased BERT strips them), or of characters its normaliser drops. That is
    the tokenizer's own answer, asked only of a text with no letter or digit (those always give a
    piece, [UNK] at worst); without it, such a text passes here and fails at `TextTokenizer.fit`.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = ascii(text[exc.start])
        return f"holds a lone surrogate {bad}, which is not valid Unicode; fix its encoding"
    # any() stops at the first visible character, so ordinary text costs next to nothing here.
    if not any(unicodedata.category(c)[0] not in "CZ" for c in text):
        return "has only control, format or space characters: no word pieces besides the special ones"
    if tokenizer is not None and not _has_letter(text) and not tokenizer.gives_pieces(text):
        return (
            "gives no word pieces with this model's tokenizer (only combining marks, or characters "
            "it drops); give it some text"
        )
    return None


def text_refusal(text: str, *, tokenizer: GivesPieces | None = None) -> str | None:
    """Why a text given to embed is refused (an empty or all-space one first, then `text_problem`), or None:
    the words that follow its name ("text 0 ...", "text a ...")."""
    if not text.strip():
        return "is empty: every text needs a non-space character"
    return text_problem(text, tokenizer=tokenizer)


def _has_letter(text: str) -> bool:
    return any(unicodedata.category(c)[0] in "LN" for c in text)


def check_texts(texts: object, *, pairs: bool = False) -> list[Any]:
    """Return texts as a list of non-empty strings (and (A, B) tuples with `pairs`), or raise InvalidInput.

    Texts are a string, or any iterable of them: a list, a NumPy string or object array, a pandas
    Series, a generator (read once, here). With `pairs`, an item of two strings is a pair; a bare tuple
    of two strings is refused, as it reads two ways (one pair, or two texts): put a pair in a list. A set
    is refused: it has no order, so row i of a result would be no text the caller could name.
    """
    items = text_items(texts, pairs=pairs)
    if not isinstance(items, Sequence):
        items = list(items)  # a generator or another one-pass iterable: read once, here
    if len(items) == 0:
        raise InvalidInput("no texts given: pass at least one non-empty string")
    return [check_text(text, index, pairs=pairs) for index, text in enumerate(items)]


def bare_pair_message(texts: tuple[str, str]) -> str:
    """Why a bare tuple of two strings is refused where texts and pairs are both taken, with both readings."""
    a, b = shortened_pair(texts)
    return (
        f"a bare tuple {(a, b)!r} reads two ways: [{(a, b)!r}] is one pair [CLS] A [SEP] B [SEP], "
        f"{[a, b]!r} two texts; pass the list you mean"
    )


def shortened_pair(texts: tuple[str, str]) -> tuple[str, str]:
    """A bare (A, B) tuple as its refusals quote it: each text cut to 24 characters."""
    a, b = (t if len(t) <= 24 else t[:21] + "..." for t in texts)
    return a, b


def text_items(texts: object, *, pairs: bool = False, takes: str = TEXTS_TAKEN) -> Iterable[Any]:
    """What `texts` holds, item by item, unread where it streams: a lone string is one text (never its
    characters); a 1-D array its items; with `pairs`, a 2-D array of strings with 2 columns its rows as
    (A, B) pairs (as a list of 2-tuples is, and as sentence-transformers reads one); any other iterable as
    given. Refused in one line that begins with `takes` (what the caller takes): a bare (A, B) tuple with
    `pairs` (it reads two ways), a 0-D array, another 2-D array and what `refuse_unusable` refuses.
    `check_texts` (embed), `iter_checked` (iter_embed), encode and the research measures read texts
    through it."""
    if isinstance(texts, str):
        return [texts]
    if pairs and isinstance(texts, tuple) and is_pair(texts):
        raise InvalidInput(bare_pair_message(texts))
    if isinstance(texts, np.ndarray):
        return _array_items(texts, pairs=pairs, takes=takes)
    refuse_unusable(texts, takes)
    return texts  # type: ignore[return-value]  # refuse_unusable passed only iterables


def refuse_unusable(texts: object, takes: str) -> None:
    """Refuse, in one line that begins with `takes` (what the caller takes), what would embed the wrong
    texts or none: a mapping (its keys), a set (its hashes' order), bytes (their numbers), a table (its
    column names), None and anything not iterable. encode and the framework integrations refuse in the
    same words as embed."""
    if isinstance(texts, Mapping):
        raise InvalidInput(
            f"{takes}, not a dict: it would embed the keys; pass list(d) for the keys or list(d.values()) "
            "for the values"
        )
    if texts is None:
        raise InvalidInput(f"{takes}, not None")
    if isinstance(texts, VECTOR_RESULTS):  # now iterable as its rows, else read as texts of numbers
        raise InvalidInput(
            f"{takes}, got {type(texts).__name__}: vectors already made, not texts; pass the texts it "
            "was made from"
        )
    if isinstance(texts, (bytes, bytearray)):  # else read as its numbers, "text 0 is a int"
        raise InvalidInput(f"{takes}, not bytes: decode them first, such as texts.decode('utf-8')")
    refuse_unordered(texts, takes)
    refuse_table(texts, takes)
    if not isinstance(texts, Iterable):
        raise InvalidInput(f"{takes}, got {type(texts).__name__}")


def refuse_table(texts: object, takes: str) -> None:
    """Refuse a 2-D table (a pandas or polars DataFrame), which iterates its column names, not its rows;
    `takes` says what the caller takes."""
    shape = getattr(texts, "shape", None)
    if isinstance(shape, tuple) and len(shape) == 2 and not isinstance(texts, np.ndarray):
        raise InvalidInput(
            f"{takes}, got a table ({type(texts).__name__}, {shape[0]} x {shape[1]}): pass its text column, "
            "e.g. df['text']"
        )


def _array_items(texts: np.ndarray, *, pairs: bool, takes: str) -> list[Any]:
    """A 1-D NumPy array's texts (np.str_ items as str), never an item's printed form; with `pairs` a 2-D
    array of strings with 2 columns as (A, B) tuples; any other shape refused in one line, as are bytes."""
    if texts.dtype.kind == "S" and texts.ndim:  # bytes, of any shape: else "text 0 is bytes" or "numbers"
        raise InvalidInput(
            f"{takes}, not bytes: decode them first, such as np.char.decode(texts, 'utf-8') for an array "
            "of bytes"
        )
    if texts.ndim == 1:
        return texts.tolist()
    if texts.ndim == 0:
        raise InvalidInput(f"{takes}, got a 0-D array: pass its text, array.item()")
    if not pairs:
        raise InvalidInput(
            f"{takes}, got a {texts.ndim}-D array: pass a 1-D array of texts (pairs are not taken here)"
        )
    if texts.ndim != 2:
        raise InvalidInput(
            f"{takes}, got a {texts.ndim}-D array: pass a 1-D array of texts, or a 2-D array of 2 columns "
            "(A, B pairs)"
        )
    if texts.dtype.kind not in "UO":
        raise InvalidInput(f"{takes}, got a 2-D array of {texts.dtype}: pass texts, not numbers")
    if texts.shape[1] != 2:
        raise InvalidInput(
            f"{takes}, got a 2-D array with {texts.shape[1]} column{'' if texts.shape[1] == 1 else 's'}: "
            "a 2-D array must have 2 columns (A, B pairs)"
        )
    return [tuple(row) for row in texts.tolist()]  # each part checked as a text (check_text)


def check_text(text: object, index: int, *, pairs: bool = False) -> Any:
    """One text (or (A, B) tuple with `pairs`) checked, or InvalidInput naming its index and the fix."""
    if isinstance(text, (list, tuple)):
        _refuse_not_a_pair(text, index, pairs=pairs)
    parts = tuple(text) if pairs and is_pair(text) else (text,)  # type: ignore[arg-type]
    for side, part in zip("AB", parts, strict=False):
        if not isinstance(part, str):
            hint = "strings or (A, B) pairs" if pairs else "str items only (pairs are not taken here)"
            said = f"{text_named('text', index)} is {type_named(part)}"
            raise InvalidInput(f"{said}, not a string: pass {hint}")
        problem = text_refusal(part)
        if problem:
            # In a pair, say which part: "text 0 is empty" of ("a", "") sends the user to the wrong one.
            named = text_named("text", index)
            which = f"{named} (pair part {side})" if len(parts) == 2 else named
            raise InvalidInput(f"{which} {problem}")
    return parts if len(parts) == 2 else text


def _refuse_not_a_pair(value: list[Any] | tuple[Any, ...], index: int, *, pairs: bool) -> None:
    """Refuse a list or tuple that is no (A, B) pair, saying why: a pair's A or B that is no string, or
    another count of texts, such as words split beforehand (transformers' is_split_into_words), which
    would read as a pair where there are two."""
    kind = type(value).__name__
    if pairs and len(value) == 2:
        for side, part in zip("AB", value, strict=True):
            if not isinstance(part, str):
                said = f"{text_named('pair', index)}'s {side} is {type_named(part)}, not a string"
                raise InvalidInput(f"{said}: a pair is (A, B), two strings")
        return
    if not value or not all(isinstance(part, str) for part in value):
        return  # said as what it is: "text 0 is a list, not a string"
    count = f"{len(value)} text{'' if len(value) == 1 else 's'}"
    taken = "a pair is (A, B), two texts" if pairs else "pairs are not taken here"
    raise InvalidInput(
        f"{text_named('text', index)} is a {kind} of {count}, not a string: {taken}; pre-split words are not "
        "taken: join them with spaces"
    )


def one_text_or_pair(value: object) -> bool:
    """Whether `value` is one text or one (A, B) pair, what a call that reads a single input takes (its
    hidden states, its attentions): a bare tuple is a pair there, as it reads only one way."""
    return isinstance(value, str) or (isinstance(value, tuple) and is_pair(value))


def refuse_unordered(texts: object, takes: str = TEXTS_TAKEN) -> None:
    """Refuse a set of texts: row i of a result must be a text the caller can name, and a set's order is
    its hashes'; `takes` says what the caller takes."""
    if isinstance(texts, (set, frozenset)):
        raise InvalidInput(
            f"{takes}, not a set: a set's order is not one you chose, and the rows come back in that order; "
            "pass a list, such as sorted(texts)"
        )


def iter_checked(texts: Iterable[object], *, pairs: bool = False) -> Iterator[Any]:
    """A stream of texts (and pairs) through `check_text`, raising at the first bad one (with its index); a
    lone string is one text, and what is no stream of texts is refused at once (`text_items`)."""
    items = text_items(texts, pairs=pairs)  # checked now, before the first text is asked for
    return (check_text(text, index, pairs=pairs) for index, text in enumerate(items))
