"""Cutting a document into chunks: sentences, paragraphs, N tokens with overlap, or spans the user gives.

Every chunk is a character span (start, end) into the document; `document[start:end]` is its text.
Sentence and paragraph chunks cover every non-space character exactly once, in order, with the
whitespace between them left out; token chunks cover every token, neighbours sharing `chunk_overlap`
tokens (`chunk_size`/`chunk_overlap`, as the corpus jobs, `--chunk-size`/`--chunk-overlap` and
LangChain's splitters name them).
A token counts as one with the pieces that share its characters (a byte-level BPE gives an emoji four
pieces on one character), so token chunks never split a character; a piece of only whitespace (the
byte-level "Ġ" before a character it could not join) counts with the token after it.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator, Sequence

from ..errors import InvalidInput, InvalidSpec
from ._enums import StrEnum
from .tokens import TextTokenizer

__all__ = [
    "ChunkBy", "Span", "TOKEN_CHUNK_SIZES", "chunk_spans", "iter_chunk_spans", "sentence_spans",
    "paragraph_spans", "check_spans", "refuse_unread_sizes",
]  # fmt: skip

Span = tuple[int, int]

# A sentence ends at . ! ? or … (with closing quotes or brackets) followed by space and a non-lowercase
# start; a blank line always ends one. Abbreviations and initials do not end a sentence.
# Only at the first mark of a run: a run that ends no sentence is tried once, not from each of its marks
# (from each, "." * 20,000 cost 13 s, every attempt running to the run's end and back).
_END = re.compile(r"(?<![.!?…])[.!?…]+[\"'”’)\]]*(?=\s+[^\sa-z])")
_WORD = re.compile(r"\S+")
_OPENING = "(\"'“‘"  # what may open a word before its letters ("(e.g." is "e.g")
_BLANK = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e u.s u.k no fig gen col lt sgt rep sen gov jan feb mar apr "
    "jun jul aug sep sept oct nov dec inc ltd co corp mt ft".split()
)
_LONGEST = max(map(len, _ABBREVIATIONS))


class ChunkBy(StrEnum):
    """How a document is cut into chunks."""

    SENTENCE = "sentence"
    PARAGRAPH = "paragraph"
    TOKENS = "tokens"


# The options only token chunks read: with another chunking they would be ignored in silence.
TOKEN_CHUNK_SIZES = ("chunk_size", "chunk_overlap")


def refuse_unread_sizes(chunking: str, **sizes: object) -> None:
    """Refuse `chunk_size`/`chunk_overlap` given (not None) with a chunking other than 'tokens' (`chunking`:
    its name, or 'spans' for the caller's spans), which would ignore them; the one rule for embed_chunks
    and the corpus jobs' chunk level."""
    if chunking == ChunkBy.TOKENS.value:
        return
    here = f"chunks={chunking!r}" if chunking != "spans" else "chunks given as spans"
    for keyword in TOKEN_CHUNK_SIZES:
        if (value := sizes.get(keyword)) is not None:
            raise InvalidSpec(
                f"{keyword}={value!r}: it applies with chunks='tokens' ({here} here); add chunks='tokens' or "
                f"drop {keyword}="
            )


def chunk_spans(
    text: str,
    chunks: ChunkBy | str | Sequence[Span],
    *,
    tokenizer: TextTokenizer | None = None,
    chunk_size: int = 128,
    chunk_overlap: int = 0,
) -> list[Span]:
    """The (start, end) character spans of a document's chunks, in order.

    `chunks` is "sentence", "paragraph", "tokens" (`chunk_size` tokens each, neighbours sharing
    `chunk_overlap`; needs the model's `tokenizer`) or the spans themselves (checked: in range, in order,
    no overlap).
    """
    found = iter_chunk_spans(
        text, chunks, tokenizer=tokenizer, chunk_size=chunk_size, chunk_overlap=chunk_overlap
    )
    return list(found)


def iter_chunk_spans(
    text: str,
    chunks: ChunkBy | str | Sequence[Span],
    *,
    tokenizer: TextTokenizer | None = None,
    chunk_size: int = 128,
    chunk_overlap: int = 0,
) -> Generator[Span, None, None]:
    """`chunk_spans` one span at a time, sentences and paragraphs as they are found: a caller that counts
    them (the service, against its answer's limit) can stop before the whole document is cut."""
    if not isinstance(chunks, str):
        yield from check_spans(text, chunks)
        return
    how = ChunkBy.parse(chunks, what="chunking")
    if how is ChunkBy.SENTENCE:
        yield from _sentences(text)
    elif how is ChunkBy.PARAGRAPH:
        yield from _paragraphs(text)
    elif tokenizer is None:
        raise InvalidSpec("chunks='tokens' needs the model's tokenizer")
    else:
        yield from token_spans(text, tokenizer, size=chunk_size, overlap=chunk_overlap)


def paragraph_spans(text: str) -> list[Span]:
    """Spans of the paragraphs (separated by blank lines), surrounding whitespace left out."""
    return list(_paragraphs(text))


def sentence_spans(text: str) -> list[Span]:
    """Spans of the sentences of every paragraph, surrounding whitespace left out."""
    return list(_sentences(text))


def _paragraphs(text: str) -> Iterator[Span]:
    start = 0
    for gap in _BLANK.finditer(text):
        yield from _trimmed(text, start, gap.start())
        start = gap.end()
    yield from _trimmed(text, start, len(text))


def _sentences(text: str) -> Iterator[Span]:
    for p_start, p_end in _paragraphs(text):
        start = p_start
        for end in _sentence_ends(text[p_start:p_end]):
            yield from _trimmed(text, start, p_start + end)
            start = p_start + end
        yield from _trimmed(text, start, p_end)


def token_spans(text: str, tokenizer: TextTokenizer, *, size: int, overlap: int) -> list[Span]:
    """Spans of `size` consecutive tokens each, the next one starting `size - overlap` tokens on; a token
    is a word piece, or the pieces that share characters (byte pieces of one character), as one."""
    if size < 1 or not 0 <= overlap < size:
        raise InvalidSpec(
            "token chunks need chunk_size >= 1 and 0 <= chunk_overlap < chunk_size; got "
            f"chunk_size={size}, chunk_overlap={overlap}"
        )
    tokens = tokenizer.encode([text])[0]
    offsets = [o for o, special in zip(tokens.offsets, tokens.special_mask, strict=True) if not special]
    units = _token_units(text, offsets)
    if not units:
        return []
    step = size - overlap
    starts = list(range(0, max(1, len(units) - overlap), step))
    return [(units[s][0], units[min(s + size, len(units)) - 1][1]) for s in starts]


def _token_units(text: str, offsets: Sequence[Span]) -> list[Span]:
    """The character spans of the tokens a chunk counts, in order and disjoint: pieces whose characters
    overlap are one (byte pieces of one character), and a piece of only whitespace joins the next one
    (the last one, at the end)."""
    units: list[Span] = []
    pending: int | None = None  # where whitespace pieces not yet joined to a token begin
    for start, end in offsets:
        if units and start < units[-1][1]:
            units[-1] = (units[-1][0], max(units[-1][1], end))
            pending = None
        elif not text[start:end].strip():
            pending = start if pending is None else pending
        else:
            units.append((start if pending is None else min(pending, start), end))
            pending = None
    if pending is not None and units:
        units[-1] = (units[-1][0], max(units[-1][1], max(e for _, e in offsets)))
    return units


def check_spans(text: str, spans: Sequence[Span]) -> list[Span]:
    """User spans as (start, end) tuples; InvalidInput names the first one out of range or overlapping."""
    checked: list[Span] = []
    for number, span in enumerate(spans):
        try:
            start, end = (int(x) for x in span)
        except (TypeError, ValueError):
            raise InvalidInput(
                f"chunk span {number} is {span!r}; give (start, end) character offsets"
            ) from None
        if not 0 <= start < end <= len(text):
            raise InvalidInput(
                f"chunk span {number} ({start}, {end}) is out of range: the text has {len(text)} characters "
                "and a span needs 0 <= start < end <= len(text)"
            )
        if checked and start < checked[-1][1]:
            raise InvalidInput(
                f"chunk span {number} ({start}, {end}) overlaps or precedes span {number - 1} {checked[-1]}; "
                "give spans in order without overlap"
            )
        if not text[start:end].strip():
            raise InvalidInput(
                f"chunk span {number} ({start}, {end}) holds only whitespace; give spans with text"
            )
        checked.append((start, end))
    if not checked:
        raise InvalidInput("no chunk spans given: pass at least one (start, end)")
    return checked


def _sentence_ends(paragraph: str) -> list[int]:
    """Where each sentence of a paragraph ends, abbreviations and initials passed over.

    The word before each mark is found by a sweep over the paragraph's words beside the marks, never by
    reading the text before the mark again (`paragraph[:at].rsplit()` twice a mark: quadratic, 4.5 s for
    40,000 short sentences)."""
    ends = []
    words = _WORD.finditer(paragraph)
    word: re.Match[str] | None = None  # the last word that starts before the mark
    after = next(words, None)
    opened = 0  # where `word`'s letters start, its opening quotes and brackets passed over
    for match in _END.finditer(paragraph):
        at = match.start()
        while after is not None and after.start() < at:
            word, after = after, next(words, None)
            opened = word.start() + len(word.group()) - len(word.group().lstrip(_OPENING))
        if word is not None and _abbreviation(paragraph, opened, min(word.end(), at), at):
            continue
        ends.append(match.end())
    return ends


def _abbreviation(paragraph: str, start: int, end: int, at: int) -> bool:
    """Whether the word paragraph[start:end] (its opening quotes left out) before the mark at `at` is
    an abbreviation or an initial, which ends no sentence."""
    if end - start > _LONGEST:  # lowercasing never shortens a word: too long to be one
        return False
    stem = paragraph[start:end].lower() if start < end else ""
    return stem in _ABBREVIATIONS or (len(stem) == 1 and stem.isalpha() and paragraph[at] == ".")


def _trimmed(text: str, start: int, end: int) -> list[Span]:
    """[(s, e)] with the whitespace at both ends of text[start:end] left out, or [] if nothing is left."""
    piece = text[start:end]
    stripped = piece.strip()
    if not stripped:
        return []
    s = start + (len(piece) - len(piece.lstrip()))
    return [(s, s + len(stripped))]
