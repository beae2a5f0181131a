"""Tokens of a text as the model sees them, and how a long text is cut (truncate) or split (windows)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import chain
from typing import Any, overload

import numpy as np
from tokenizers import Encoding
from tokenizers import Tokenizer as RustTokenizer

from ..errors import InputTooLong, InvalidInput, InvalidSpec
from ._enums import LongText

# Moved out with the code unchanged; every import path is kept.
from .cut_said import REPORTERS as REPORTERS
from .cut_said import WINDOW_KEEPS as WINDOW_KEEPS
from .cut_said import cut_summary as cut_summary
from .cut_said import cut_warning as cut_warning
from .cut_said import say_cut as say_cut
from .renamed_fields import renamed_field
from .results import texts_shown
from .text_pieces import Cuts, cuts_for, head_and_count
from .texts_given import bare_pair_message as bare_pair_message
from .texts_given import by_pair as by_pair
from .texts_given import check_text as check_text
from .texts_given import check_texts as check_texts
from .texts_given import is_pair as is_pair
from .texts_given import iter_checked as iter_checked
from .texts_given import named_as as named_as
from .texts_given import one_text_or_pair as one_text_or_pair
from .texts_given import refuse_unordered as refuse_unordered
from .texts_given import text_items as text_items
from .texts_given import text_named as text_named
from .texts_given import text_problem as text_problem

__all__ = [
    "Text",
    "Tokens",
    "Window",
    "TextTokenizer",
    "pad_batch",
    "say_cut",
    "check_texts",
    "check_text",
    "iter_checked",
    "is_pair",
    "text_problem",
    "stride_refusal",
    "window_width",
]

# A text, or a sentence pair (A, B) that the model reads as [CLS] A [SEP] B [SEP].
Text = str | tuple[str, str]


@dataclass(frozen=True)
class Tokens:
    """One text's word pieces: tokens, ids, character offsets, word ids, which are special, and each
    one's token type id (transformers' `token_type_ids`: 1 on the second text of a pair where the family
    has token types)."""

    text: str
    tokens: list[str]
    ids: list[int]
    offsets: list[tuple[int, int]]
    word_ids: list[int | None]
    special_tokens_mask: list[bool]
    token_type_ids: list[int] = field(repr=False)
    n_dropped: int = 0
    pair: str | None = None
    sequence_ids: list[int | None] | None = field(default=None, repr=False)
    # Whether the truncation cut inside the last kept word: its next piece (same word id) was dropped.
    last_word_cut: bool = False

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        """The tokens' count and the first of them, the text (and pair) and what was dropped: never every
        id, offset and word id of a long text."""
        count, tokens = len(self.tokens), self.tokens
        shown = [repr(t) for t in tokens] if count <= 8 else [*map(repr, tokens[:6]), "...", repr(tokens[-1])]
        return (
            f"Tokens({count} token{'' if count == 1 else 's'} [{', '.join(shown)}]"
            + texts_shown(self.text, self.pair)
            + (f", {self.n_dropped} dropped" if self.n_dropped else "")
            + ")"
        )

    @property
    def type_ids(self) -> list[int]:
        """Deprecated: the old name of `token_type_ids` (transformers' name)."""
        return renamed_field(self.token_type_ids, owner="Tokens", name="token_type_ids", old="type_ids")

    @property
    def special_mask(self) -> list[bool]:
        """Deprecated: the old name of `special_tokens_mask` (transformers' name)."""
        return renamed_field(
            self.special_tokens_mask, owner="Tokens", name="special_tokens_mask", old="special_mask"
        )

    @property
    def n_prefix(self) -> int:
        """How many special tokens open the sequence ([CLS] or <s>)."""
        count = 0
        while count < len(self.special_tokens_mask) and self.special_tokens_mask[count]:
            count += 1
        return count

    @property
    def n_suffix(self) -> int:
        """How many special tokens close the sequence ([SEP] or </s>)."""
        count = 0
        while count < len(self.special_tokens_mask) - self.n_prefix and self.special_tokens_mask[-1 - count]:
            count += 1
        return count

    def truncated(self, max_tokens: int) -> Tokens:
        """The first tokens that fit in `max_tokens`, closing specials kept, with n_dropped set."""
        if len(self) <= max_tokens:
            return self
        head, tail = self.n_prefix, self.n_suffix
        keep = max_tokens - head - tail
        if keep < 1:
            raise InvalidInput(
                f"max_tokens={max_tokens} leaves no room for text between {head + tail} specials"
            )
        index = list(range(head + keep)) + list(range(len(self) - tail, len(self)))
        # the tokenizer's own word ids tell a cut word: "st" of st ##or ##m, SentencePiece's "coast" of
        # "coast," (one word there; WordPiece's "," is a word of its own, so its "coast" is whole)
        last, dropped = self.word_ids[head + keep - 1], self.word_ids[head + keep]
        cut = last is not None and last == dropped and not self.special_tokens_mask[head + keep - 1]
        return replace(self._take(index, n_dropped=len(self) - len(index)), last_word_cut=cut)

    def windows(self, max_tokens: int, stride: int | None = None) -> list[Window]:
        """Overlapping windows of at most `max_tokens`, each with the specials; `stride` is the step."""
        head, tail = self.n_prefix, self.n_suffix
        width = max_tokens - head - tail
        n_content = len(self) - head - tail
        windows = []
        for start in self._window_starts(max_tokens, stride):
            stop = min(n_content, start + width)
            inner = slice(head + start, head + stop)
            closing = slice(len(self) - tail, len(self))
            windows.append(
                Window(
                    ids=self.ids[:head] + self.ids[inner] + self.ids[closing],
                    token_type_ids=self.token_type_ids[:head]
                    + self.token_type_ids[inner]
                    + self.token_type_ids[closing],
                    content_start=start,
                    content_stop=stop,
                    n_prefix=head,
                )
            )
        return windows

    def n_windows(self, max_tokens: int, stride: int | None = None) -> int:
        """How many windows `windows` cuts (InvalidInput for a stride out of range), none of them made."""
        return len(self._window_starts(max_tokens, stride))

    def _window_starts(self, max_tokens: int, stride: int | None) -> list[int]:
        """Where each window's content starts, `stride` apart (default: half a window), the last flush
        with the end."""
        width = max_tokens - self.n_prefix - self.n_suffix
        n_content = len(self) - self.n_prefix - self.n_suffix
        step = max(1, width // 2) if stride is None else stride
        if step < 1 or step > width:
            raise InvalidInput(stride_refusal(stride, width))
        return [0] if n_content <= width else [*range(0, n_content - width, step), n_content - width]

    def _take(self, index: list[int], *, n_dropped: int) -> Tokens:
        return replace(
            self,
            tokens=[self.tokens[i] for i in index],
            ids=[self.ids[i] for i in index],
            offsets=[self.offsets[i] for i in index],
            word_ids=[self.word_ids[i] for i in index],
            special_tokens_mask=[self.special_tokens_mask[i] for i in index],
            token_type_ids=[self.token_type_ids[i] for i in index],
            n_dropped=n_dropped,
        )

    def to_dict(self) -> dict[str, object]:
        """JSON-able: text, pair (the second text, or None), tokens (records, see `as_records`), n_dropped."""
        return {
            "text": self.text,
            "pair": self.pair,
            "tokens": self.as_records(),
            "n_dropped": self.n_dropped,
        }

    def as_records(self) -> list[dict[str, object]]:
        """One dict per token: token, id, word, start, end, special (and for a pair: sequence,
        token_type_id)."""
        records: list[dict[str, object]] = [
            {"token": tok, "id": i, "word": w, "start": s, "end": e, "special": sp}
            for tok, i, w, (s, e), sp in zip(
                self.tokens, self.ids, self.word_ids, self.offsets, self.special_tokens_mask, strict=True
            )
        ]
        if self.pair is not None and self.sequence_ids is not None:
            for rec, seq, kind in zip(records, self.sequence_ids, self.token_type_ids, strict=True):
                rec["sequence"], rec["token_type_id"] = seq, kind
        return records

    def source(self, index: int) -> str:
        """The text token `index`'s offsets point into: the text, or B for the pair's second part."""
        if self.pair is not None and self.sequence_ids is not None and self.sequence_ids[index] == 1:
            return self.pair
        return self.text

    def span_text(self, index: int) -> str:
        """The characters token `index` covers in its own text."""
        start, end = self.offsets[index]
        return self.source(index)[start:end]


@dataclass(frozen=True)
class Window:
    """One window of a long text: ids with specials, and which content tokens (by index) it covers."""

    ids: list[int]
    token_type_ids: list[int]
    content_start: int
    content_stop: int
    n_prefix: int


# Why a text gives the model no word piece: its characters are ones the tokenizer drops.
NO_PIECES_WHY = "only control or zero-width characters, or combining marks?"


def stride_refusal(stride: int | None, width: int) -> str:
    """The one line for a window `stride` outside 1..`width` (a window's content tokens): the windows'
    own check, and the recipe's before any work (core/spec.py)."""
    return (
        f"stride={stride}: a window's stride must be between 1 and {width} tokens; leave stride out for half "
        "a window"
    )


def window_width(tokenizer: TextTokenizer) -> int:
    """The content tokens one window holds: the model's limit less the specials one text gets."""
    probe = tokenizer.encode(["a"])[0]
    return tokenizer.max_tokens - probe.n_prefix - probe.n_suffix


def window_owner(windows: Sequence[Window], n_content: int) -> np.ndarray:
    """For each content token, the window in which it sits nearest the centre (its vector is kept).

    Ties go to the earlier window. Work and memory are linear in the tokens (each window is visited
    once over its own span), so a book-length text costs no more than its windows do.
    """
    owner = np.zeros(n_content, dtype=np.int64)
    best = np.full(n_content, np.inf)
    for k, window in enumerate(windows):
        span = slice(window.content_start, window.content_stop)
        positions = np.arange(window.content_start, window.content_stop)
        distance = np.abs(positions - (window.content_start + window.content_stop - 1) / 2.0)
        nearer = distance < best[span]
        best[span][nearer] = distance[nearer]
        owner[span][nearer] = k
    return owner


class TextTokenizer:
    """Fast batch tokenization with the model's own tokenizer, never truncating on its own.

    Text is text: a special token's text written in the input ("[CLS]", "<s>", "[MASK]") is split
    as ordinary characters, never read as the special id (the tokenizers' `encode_special_tokens`,
    transformers' `split_special_tokens=True`). The specials the template adds ([CLS] A [SEP]) are
    the real ids. The caller's tokenizer is copied, not changed.

    A text longer than `long_chars` characters that is to be cut or refused (`encode_fitted`) is
    tokenized a piece at a time (core/text_pieces.py): the tokens kept and n_dropped are those of the
    whole text, in memory bounded by a piece rather than by the text.
    """

    def __init__(self, backend: RustTokenizer, *, max_tokens: int, token_types: bool = True) -> None:
        self.backend = copy.deepcopy(backend)
        # False: the tokenizer's model_input_names leave token_type_ids out (transformers' tokenizer gives
        # none, so the model reads segment 0 everywhere): a pair's B is segment 0 here too
        self.token_types = token_types
        self.backend.no_truncation()
        self.backend.no_padding()
        self.backend.encode_special_tokens = True
        self.max_tokens = max_tokens
        self.long_chars = max(1 << 16, 32 * max_tokens)

    @overload
    def encode(self, texts: str) -> Tokens: ...  # type: ignore[overload-overlap]
    @overload
    def encode(self, texts: Sequence[Text]) -> list[Tokens]: ...
    def encode(self, texts: str | Sequence[Text]) -> Tokens | list[Tokens]:
        """Tokens of one text (a str: one `Tokens`), or of each text or (A, B) pair of a list, in full (no
        truncation), with specials."""
        if isinstance(texts, str):  # one text, as sentence-transformers' callers give it: not its characters
            return self.encode([texts])[0]
        if any(isinstance(t, tuple) for t in texts):
            self.check_pairs()
        return [
            _tokens(text, enc, self.token_types)
            for text, enc in zip(texts, self.backend.encode_batch(list(texts)), strict=True)
        ]

    def encode_fitted(self, texts: Sequence[Text], long: LongText, *, start: int = 0) -> list[Tokens]:
        """`fit` of each of `encode(texts)`, text i as `start + i`; a text over `long_chars` characters
        under truncate or error is tokenized a piece at a time, with the same tokens and n_dropped."""
        far = [long is not LongText.WINDOW and isinstance(t, str) and len(t) > self.long_chars for t in texts]
        near = iter(self.encode([t for t, f in zip(texts, far, strict=True) if not f]))
        return [
            self._fit_long(t, long, index=start + i)
            if isinstance(t, str) and f
            else self.fit(next(near), long, index=start + i)
            for i, (t, f) in enumerate(zip(texts, far, strict=True))
        ]

    def _fit_long(self, text: str, long: LongText, *, index: int) -> Tokens:
        """`fit` of a long text from its first tokens, with the whole text's count (streamed) in n_dropped."""
        if self._cuts is None:
            return self.fit(self.encode([text])[0], long, index=index)
        head, total = head_and_count(self.backend, self._cuts, text, max_tokens=self.max_tokens)
        tokens = _tokens(text, head, self.token_types)
        if long is LongText.ERROR and total > len(tokens):
            raise self._too_long(index, total)
        fitted = self.fit(tokens, long, index=index)
        return replace(fitted, n_dropped=total - len(fitted))

    @overload
    def __call__(self, texts: str) -> Tokens: ...  # type: ignore[overload-overlap]
    @overload
    def __call__(self, texts: Sequence[Text]) -> list[Tokens]: ...
    def __call__(self, texts: str | Sequence[Text]) -> Tokens | list[Tokens]:
        """`encode(texts)`: one text's `Tokens`, or a list's, in full with specials."""
        return self.encode(texts)

    def __getattr__(self, name: str) -> Any:
        """Refuse a name this tokenizer lacks in one line, pointing at the Hugging Face tokenizer."""
        # copy and pickle probe dunders before __dict__ exists, and a private name's AttributeError is
        # bertscope's own (a cached property failing inside): no pointer there
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(
            f"bertscope's tokenizer has no {name!r} (it has encode, from_ids and calling it on texts); "
            "the tokenizers library's tokenizer, with its encode, decode and the rest, is m.tokenizer.backend"
        )

    def __repr__(self) -> str:
        """The vocabulary's size and the model's token limit."""
        vocab = self.__dict__["backend"].get_vocab_size()
        return f"TextTokenizer(vocab {vocab}, max_tokens={self.__dict__['max_tokens']})"

    @cached_property
    def _cuts(self) -> Cuts | None:
        return cuts_for(self.backend)

    def gives_pieces(self, text: str) -> bool:
        """Whether `text` gives any word piece besides the specials the template adds."""
        if len(text) > self.long_chars and self._cuts is not None:
            return self._cuts.count(self.backend, text, stop_above=0) > 0
        return bool(self.backend.encode(text, add_special_tokens=False).ids)

    def check_pairs(self) -> None:
        """Raise InvalidInput when this tokenizer has no template that puts a separator between A and B."""
        single = sum(self.backend.encode("a").special_tokens_mask)
        pair = self.backend.encode("a", "b").special_tokens_mask
        if self.backend.post_processor is None or sum(pair) <= single:
            raise InvalidInput(
                "this tokenizer has no sentence-pair template (nothing marks where B starts); "
                "pass the two texts as one string, or use a model whose tokenizer joins pairs"
            )

    def from_ids(self, ids: Sequence[int], *, index: int = 0) -> Tokens:
        """Tokens of ids given as they are (no text), framed by the specials the tokenizer adds to one text.

        The frame ([CLS] ... [SEP], <s> ... </s>, with its type ids) comes from the tokenizer's own
        post-processor. Ids that already open with the frame's opening specials, or close with its
        closing ones, are not framed twice: those are taken as the frame. Every other id is content,
        [UNK] and [SEP] included, as it is in a tokenized text. There is no text: `text` is "", every
        offset is (0, 0), and each content id is a word of its own (word ids 0, 1, ...). The ids must
        be in the vocabulary (check them first, e.g. with `Model.static_ids`).
        """
        head, content_type, tail = self._frame
        opening, closing = [i for i, _ in head], [i for i, _ in tail]
        body = list(ids)
        if opening and body[: len(opening)] == opening:
            body = body[len(opening) :]
        if closing and len(body) >= len(closing) and body[len(body) - len(closing) :] == closing:
            body = body[: len(body) - len(closing)]
        if not body:
            raise InvalidInput(
                f"input {index} holds no token ids besides the specials the model adds itself; "
                "send the ids of some text"
            )
        all_ids = opening + body + closing
        pieces = [self.backend.id_to_token(i) for i in all_ids]
        if None in pieces:
            raise InvalidInput(
                f"input {index}: id {all_ids[pieces.index(None)]} has no token in the tokenizer"
            )
        n_head, n_body = len(opening), len(body)
        return Tokens(
            text="",
            tokens=pieces,  # type: ignore[arg-type]
            ids=all_ids,
            offsets=[(0, 0)] * len(all_ids),
            word_ids=[None] * n_head + list(range(n_body)) + [None] * len(closing),
            special_tokens_mask=[True] * n_head + [False] * n_body + [True] * len(closing),
            token_type_ids=[t for _, t in head] + [content_type] * n_body + [t for _, t in tail],
        )

    @cached_property
    def _frame(self) -> tuple[list[tuple[int, int]], int, list[tuple[int, int]]]:
        """(opening (id, type id)s, content type id, closing (id, type id)s) of one text's specials."""
        probe = self.backend.encode("a", add_special_tokens=False)
        framed = self.backend.post_process(probe, None, True)
        mask, n_probe = framed.special_tokens_mask, len(probe.ids)
        head = next((i for i, s in enumerate(mask) if not s), len(mask))
        rows = list(zip(framed.ids, framed.type_ids, strict=True))
        if n_probe == 0 or len(rows) - head < n_probe or not all(mask[head + n_probe :]):
            raise InvalidInput("this tokenizer's post-processor does not frame one text as specials + text")
        return rows[:head], framed.type_ids[head], rows[head + n_probe :]

    def fit(self, tokens: Tokens, long: LongText, *, index: int = 0) -> Tokens:
        """Apply the long-text policy to one text (window is resolved later by the engine)."""
        if all(tokens.special_tokens_mask):
            raise InvalidInput(
                f"{text_named('text', index)} ({tokens.text[:20]!r}) gives no word pieces besides the "
                f"special ones ({NO_PIECES_WHY}); give it some text"
            )
        if len(tokens) > self.max_tokens and tokens.pair is not None:
            raise InputTooLong(
                f"{text_named('pair', index)} has {len(tokens)} tokens but the model takes at most "
                f"{self.max_tokens}, and a pair is neither truncated nor windowed (either part could be "
                "cut); shorten A or B"
            )
        if len(tokens) <= self.max_tokens or long is LongText.WINDOW:
            return tokens
        if long is LongText.ERROR:
            raise self._too_long(index, len(tokens))
        return tokens.truncated(self.max_tokens)

    def encode_one_window(self, texts: Sequence[Text], long: LongText | str, *, what: str) -> list[Tokens]:
        """`encode_fitted` for a view of one window (`what`: "the anatomy", "attention"): `window` refused,
        and a text over the limit under `error` refused with the fixes one window has."""
        try:
            policy = LongText.parse(long, what="long-text policy")
        except InvalidSpec:  # its list offers window, which a view of one window refuses next
            raise InvalidSpec(
                f"unknown long-text policy {long!r}; {what} reads one window: choose one of: truncate, error"
            ) from None
        if policy is LongText.WINDOW:
            raise InvalidInput(f"{what} reads one window: use long='truncate' or 'error', not 'window'")
        tokens = self.encode_fitted(texts, LongText.TRUNCATE)
        for index, fitted in enumerate(tokens):
            if policy is LongText.ERROR and fitted.n_dropped:
                raise InputTooLong(
                    f"{text_named('text', index)} has {len(fitted) + fitted.n_dropped} tokens but the model "
                    f"takes at most {self.max_tokens}, and {what} reads one window; use long='truncate' "
                    "(drops the end, reported) or a shorter text"
                )
        return tokens

    def _too_long(self, index: int, n_tokens: int) -> InputTooLong:
        return InputTooLong(
            f"{text_named('text', index)} has {n_tokens} tokens but the model takes at most "
            f"{self.max_tokens}; use long='truncate' (drops the end, reported) or long='window' "
            "(overlapping windows)"
        )


def _tokens(text: Text, enc: Encoding, types: bool = True) -> Tokens:
    # Each Encoding attribute is already a fresh list (offsets of tuples), so it is taken as it is: a
    # second copy of every field cost 43 ms against 35 ms for 2,400 texts, where a whole float16 embed
    # on a GPU takes about 160 ms (bench/profile_gpu.py on an H200's host).
    pair = isinstance(text, tuple)
    return Tokens(
        text=text[0] if pair else text,  # type: ignore[arg-type]
        pair=text[1] if pair else None,
        sequence_ids=enc.sequence_ids if pair else None,
        tokens=enc.tokens,
        ids=enc.ids,
        offsets=enc.offsets,
        word_ids=enc.word_ids,
        special_tokens_mask=list(map(bool, enc.special_tokens_mask)),
        token_type_ids=enc.type_ids if types else [0] * len(enc.ids),
    )


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad id rows into (batch, tokens) int64 ids and the attention mask."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    keep = np.arange(int(lengths.max())) < lengths[:, None]
    ids = np.full(keep.shape, pad_id, dtype=np.int64)
    # row-major: the kept cells are each row's first len(row) in order, which the rows joined fill
    ids[keep] = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
    return ids, keep.astype(np.int64)
