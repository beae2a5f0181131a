"""Cutting a document into chunks: sentences, paragraphs, N tokens with overlap, or spans the user gives.

Every chunk is a character span (start, end) into the document; `document[start:end]` is its text.
Sentence and paragraph chunks cover every character exactly once, in order, but the whitespace and
invisible characters (control and format ones: zero-width space, BOM, word joiner) between them, which
are left out as whitespace is; cut with the model's tokenizer, a chunk that gives the model no word
piece (a lone combining mark an uncased model drops) joins the chunk before it (the first: the one
after). Token chunks cover every token, neighbours sharing `chunk_overlap` tokens (`chunk_size`/
`chunk_overlap`, as the corpus jobs, `--chunk-size`/`--chunk-overlap` and LangChain's splitters name them).
A token counts as one with the pieces that share its characters (a byte-level BPE gives an emoji four
pieces on one character), so token chunks never split a character; a piece of only whitespace (the
byte-level "Ġ" before a character it could not join) counts with the token after it, and combining
marks no piece covers (an accent an uncased model drops) with the token before them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Generator, Iterator, Sequence

import numpy as np

from ..errors import InvalidInput, InvalidSpec
from ._enums import StrEnum
from .spec import whole_number
from .tokens import TextTokenizer

__all__ = [
    "ChunkBy", "Span", "TOKEN_CHUNK_SIZES", "chunk_spans", "iter_chunk_spans", "sentence_spans",
    "paragraph_spans", "check_spans", "check_late", "refuse_unread_sizes",
]  # fmt: skip

Span = tuple[int, int]

# A sentence ends at . ! ? or … (with closing quotes or brackets) followed by space, at the Arabic and
# Indic marks (؟ ۔ । ॥) followed by space, and at the CJK full-width marks (。！？) with or without space;
# a blank line always ends one. What follows must not start in lowercase (any script's: "é" too), and
# abbreviations and initials end no sentence (`_sentence_ends`).
# Only at the first mark of a run: a run that ends no sentence is tried once, not from each of its marks
# (from each, "." * 20,000 cost 13 s, every attempt running to the run's end and back).
_CLOSING = "\"'”’)\\]」』）〕】"
_MARKS = ".!?…؟۔।॥。！？｡"  # every mark that can end a sentence: a run of any of them is one end
_FULL_WIDTH = frozenset("。！？｡")  # a run holding one ends a sentence with or without a space after it
# The run and its closing quotes are taken whole (a lookahead's capture, atomic, then consumed), so a run
# that ends no sentence is tried once and never backtracked into: 20,000 marks cost one attempt.
_END = re.compile(rf"(?<![{_MARKS}])(?=(?P<end>[{_MARKS}]+[{_CLOSING}]*))(?P=end)(?=\s*\S)")
_WORD = re.compile(r"\S+")
# The first visible character: whitespace and the common invisible ones passed over in the pattern (the
# rarer control and format characters `_invisible` counts by the caller's loop)
_VISIBLE = re.compile(r"[\s\u00ad\u200b-\u200f\u2060-\u2064\ufeff]*(\S)")
_OPENING = "(\"'“‘"  # what may open a word before its letters ("(e.g." is "e.g")
# A blank line: nothing a reader sees between two line ends (whitespace such as a no-break or ideographic
# space, and the format characters _invisible counts: zero-width space, word joiner, BOM, soft hyphen)
_BLANK = re.compile(r"\n(?:[^\S\n]|[\u00ad\u200b-\u200f\u2060-\u2064\ufeff])*\n\s*")
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


def check_late(late: object) -> bool:
    """`late` as a bool, or InvalidSpec: the one check of embed_chunks, the service and the corpus jobs'
    chunk level ("no" and "false" are truthy and would run late chunking; 0 and None would store as such)."""
    if not isinstance(late, bool | np.bool_):
        raise InvalidSpec(f"late must be True or False, not {late!r}")
    return bool(late)


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
    document: str | None = None,
) -> Generator[Span, None, None]:
    """`chunk_spans` one span at a time, sentences and paragraphs as they are found: a caller that counts
    them (the service, against its answer's limit) can stop before the whole document is cut. `document`
    names the text in a refusal of its given spans ("document 1"), as the other chunk refusals do."""
    if not isinstance(chunks, str):
        yield from check_spans(text, chunks, document=document)
        return
    how = ChunkBy.parse(chunks, what="chunking")
    if how is not ChunkBy.TOKENS:
        cut = _sentences(text) if how is ChunkBy.SENTENCE else _paragraphs(text)
        yield from cut if tokenizer is None else _seen_by(text, cut, tokenizer)
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


def _seen_by(text: str, spans: Iterator[Span], tokenizer: TextTokenizer) -> Iterator[Span]:
    """The spans, each one that gives the model no word piece joined to the one before it (before the
    first that does: to that one); none where no span gives one (the caller refuses the document)."""
    held: Span | None = None  # the last span that gives a piece, extended by those after it that give none
    lead: int | None = None  # where spans that give none begin, before the first that gives one
    for start, end in spans:
        if _gives_pieces(text[start:end], tokenizer):
            if held is not None:
                yield held
            held, lead = (start if lead is None else lead, end), None
        elif held is not None:
            held = (held[0], end)
        elif lead is None:
            lead = start
    if held is not None:
        yield held


def _gives_pieces(chunk: str, tokenizer: TextTokenizer) -> bool:
    # A letter or digit is never dropped by a tokenizer (at worst it is [UNK], a piece): only the rest
    # (punctuation, marks, symbols) is tokenized to see.
    return any(char.isalnum() for char in chunk) or tokenizer.gives_pieces(chunk)


def token_spans(text: str, tokenizer: TextTokenizer, *, size: int, overlap: int) -> list[Span]:
    """Spans of `size` consecutive tokens each, the next one starting `size - overlap` tokens on; a token
    is a word piece, or the pieces that share characters (byte pieces of one character), as one."""
    whole_number(size, "chunk_size", meaning="word pieces per chunk")  # a str or float: one line
    whole_number(overlap, "chunk_overlap", least=0, meaning="word pieces two chunks share")
    if size < 1 or not 0 <= overlap < size:
        raise InvalidSpec(
            "token chunks need chunk_size >= 1 and 0 <= chunk_overlap < chunk_size; got "
            f"chunk_size={size}, chunk_overlap={overlap}"
        )
    tokens = tokenizer.encode([text])[0]
    offsets = [
        o for o, special in zip(tokens.offsets, tokens.special_tokens_mask, strict=True) if not special
    ]
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
    return _with_marks(text, units)


def _with_marks(text: str, units: list[Span]) -> list[Span]:
    """Each unit's end moved over the combining marks just after it that no token covers (an uncased
    model's normalizer drops the accent of "re\u0301sume\u0301"): a chunk's text takes the marks of its
    last character, which would otherwise lie in no chunk."""
    for number, (start, end) in enumerate(units):
        stop = units[number + 1][0] if number + 1 < len(units) else len(text)
        while end < stop and unicodedata.category(text[end]).startswith("M"):
            end += 1
        units[number] = (start, end)
    return units


def check_spans(text: str, spans: Sequence[Span], *, document: str | None = None) -> list[Span]:
    """User spans as (start, end) tuples; InvalidInput names the first one out of range, reversed, empty or
    overlapping, and its document (`document`, "document 1") where given."""
    of = f" of {document}" if document else ""
    checked: list[Span] = []
    for number, span in enumerate(spans):
        if isinstance(span, (int, float)):  # numpy's too: a span's own numbers given as the list of spans
            raise InvalidInput(
                f"chunk span {number}{of} is {span!r}, a number: give a list of (start, end) spans, e.g. "
                "[(0, 3), (4, 7)], even for one span"
            )
        try:
            start, end = (_offset(x) for x in span)
        except (TypeError, ValueError, OverflowError):
            raise InvalidInput(
                f"chunk span {number}{of} is {span!r}; give (start, end) character offsets, whole numbers"
            ) from None
        named = f"chunk span {number} ({start}, {end}){of}"
        if start >= end:  # said as such: "out of range" would send the reader to the text's length
            what = "empty" if start == end else "reversed"
            raise InvalidInput(f"{named} is {what}: a span's start must be before its end (start < end)")
        if not 0 <= start < end <= len(text):
            raise InvalidInput(
                f"{named} is out of range: the text has {len(text)} characters and a span needs "
                "0 <= start < end <= len(text)"
            )
        if checked and start < checked[-1][1]:
            raise InvalidInput(
                f"{named} overlaps or precedes span {number - 1} {checked[-1]}; give spans in order without "
                "overlap"
            )
        if not text[start:end].strip():
            raise InvalidInput(f"{named} holds only whitespace; give spans with text")
        checked.append((start, end))
    if not checked:
        where = f" for {document}" if document else ""
        raise InvalidInput(f"no chunk spans given{where}: pass at least one (start, end)")
    return checked


def _offset(value: object) -> int:
    """A character offset as an int: a whole number (2.0 too), never a fraction cut to one (ValueError)."""
    if isinstance(value, bool) or isinstance(value, str):
        raise TypeError(value)
    whole = int(value)  # type: ignore[call-overload]
    if whole != value:
        raise ValueError(value)
    return whole


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
        # a zero-width space, BOM or word joiner after the mark is a space too, as _invisible trims it
        spaced = match.end() < len(paragraph) and _invisible(paragraph[match.end()])
        if not spaced and _FULL_WIDTH.isdisjoint(match.group("end")):  # "3.14", "e.g.x": no end
            continue
        if _next_visible(paragraph, match.end()).islower():  # "là. élève" reads on; a capital starts one
            continue
        at = match.start()
        while after is not None and after.start() < at:
            word, after = after, next(words, None)
            opened = word.start() + len(word.group()) - len(word.group().lstrip(_OPENING))
        if word is not None and _abbreviation(paragraph, opened, min(word.end(), at), match):
            continue
        ends.append(match.end())
    return ends


def _next_visible(paragraph: str, at: int) -> str:
    """The first character at or after `at` that is not whitespace nor invisible (`_invisible`; "" at the
    end), found in place: a slice of the rest at every mark would cost the paragraph's length each time."""
    while (found := _VISIBLE.match(paragraph, at)) and _invisible(found.group(1)):
        at = found.end()  # a zero-width space or BOM: passed over as whitespace is
    return found.group(1) if found else ""


def _abbreviation(paragraph: str, start: int, end: int, mark: re.Match[str]) -> bool:
    """Whether the word paragraph[start:end] (its opening quotes left out) before `mark` is an
    abbreviation or an initial, which ends no sentence."""
    if end - start > _LONGEST:  # lowercasing never shortens a word: too long to be one
        return False
    stem = paragraph[start:end].lower() if start < end else ""
    if stem == "no":  # "No. 5", but "the answer is no. Then ..." ends a sentence
        return _next_visible(paragraph, mark.end()).isdigit()
    # A lone letter is an initial ("J. Smith", "we met J. Smith"): "vitamin C. Then" reads the same, and
    # cutting there would cut every "met J. Smith" too
    return stem in _ABBREVIATIONS or (len(stem) == 1 and stem.isalpha() and paragraph[mark.start()] == ".")


def _trimmed(text: str, start: int, end: int) -> list[Span]:
    """[(s, e)] with the whitespace and invisible characters at both ends of text[start:end] left out,
    or [] if nothing is left."""
    while start < end and _invisible(text[start]):
        start += 1
    while end > start and _invisible(text[end - 1]):
        end -= 1
    return [(start, end)] if start < end else []


def _invisible(char: str) -> bool:
    """Whitespace, or a control or format character (zero-width space, BOM, word joiner, soft hyphen):
    nothing a reader sees, and what BERT's normalizer deletes (str.strip keeps the format ones)."""
    return char.isspace() or unicodedata.category(char) in ("Cc", "Cf")
