"""A long text cut into pieces that tokenize as they do inside the whole text, so that truncating it, or
counting its tokens, takes memory bounded by a piece instead of by the text (about 140 bytes a character
in the Rust tokenizer, for tokens the truncation throws away).

A cut falls just before a run of whitespace that opens with a plain space (U+0020) and follows a visible
character whose normalized form does not end in whitespace: the run starts the next piece. The
tokenizers `cuts_for` accepts split a text into words at whitespace before anything else looks at it —
BERT's BertPreTokenizer, byte-level BPE's regex (RoBERTa's Ġ: a space joins the word after it, so it
stays with the next piece), SentencePiece's Metaspace (XLM-R's ▁) — and normalize character by
character (or inside a run of spaces: XLM-R's Replace(" {2,}", " ")). So the words before a cut come out
as in the whole text, with the same ids, offsets and word ids, and the pieces' token counts add up to
the whole text's. For any other tokenizer `cuts_for` is None and callers tokenize the text whole.

A stretch with no such space (10 MB of one 'word', or Chinese written without spaces) cannot be cut
without changing what it makes: its piece runs on to the next cut, or the text's end, and is tokenized
whole, as every text was before. Counts stay exact; memory is bounded by the longest such stretch.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from typing import Any

from tokenizers import Encoding
from tokenizers import Tokenizer as RustTokenizer

__all__ = ["PIECE_CHARS", "GROUP_CHARS", "Cuts", "cuts_for", "head_and_count", "head_of"]

PIECE_CHARS = 1 << 14  # characters of a counted piece, at least (it ends at the next cut)
GROUP_CHARS = 1 << 17  # characters tokenized at once while counting (~20 MB of the tokenizer's memory)
_TAIL = 16  # characters before a cut normalized to see that they do not end in whitespace

_SPACE = re.compile(r"(?<=\S) ")  # a space after a non-space: where a whitespace run opens with " "
# Pre-tokenizers that split at whitespace before anything else, and those that only split further.
_SPLITTERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}
_FURTHER = {"Punctuation", "Digits"}
# Normalizers that act character by character (a run of spaces stays a run of spaces).
_LOCAL = {"BertNormalizer", "Lowercase", "NFC", "NFD", "NFKC", "NFKD", "StripAccents", "Precompiled", "Nmt"}


class Cuts:
    """Where one tokenizer's texts may be cut (module docstring), and what pieces cut there make."""

    def __init__(self, normalizer: Any) -> None:
        self._normalizer = normalizer

    def at(self, text: str, at: int) -> int:
        """The first cut at or after `at` (never 0), or len(text) where there is none."""
        pos = max(at, 1)
        while (found := _SPACE.search(text, pos)) is not None:
            index = found.start()
            if self._ends_word(text, index):
                return index
            pos = index + 1
        return len(text)

    def _ends_word(self, text: str, index: int) -> bool:
        if unicodedata.category(text[index - 1])[0] in "CZ":  # controls, format, private: not visible
            return False
        if self._normalizer is None:
            return True
        tail = self._normalizer.normalize_str(text[max(0, index - _TAIL) : index])
        return bool(tail) and not tail[-1].isspace()  # nmt_nfkc makes "▁" and "\ufffd" a space

    def pieces(self, text: str, start: int, size: int) -> Iterator[str]:
        """text[start:] (`start` a cut, or 0) in pieces of `size` characters or more, each ending at a cut."""
        while start < len(text):
            stop = self.at(text, start + size)
            yield text[start:stop]
            start = stop

    def count(
        self,
        backend: RustTokenizer,
        text: str,
        *,
        start: int = 0,
        skip_id: int | None = None,
        stop_above: int | None = None,
    ) -> int:
        """Tokens (no specials) that text[start:] makes, `start` a cut or 0, `skip_id` not counted;
        tokenized a group of pieces at a time, stopping once the count passes `stop_above`."""
        total, group, size = 0, [], 0
        for piece in self.pieces(text, start, PIECE_CHARS):
            group.append(piece)
            size += len(piece)
            if size >= GROUP_CHARS:
                total += _count(backend, group, skip_id)
                if stop_above is not None and total > stop_above:
                    return total
                group, size = [], 0
        return total + (_count(backend, group, skip_id) if group else 0)


def _count(backend: RustTokenizer, group: list[str], skip_id: int | None) -> int:
    found = backend.encode_batch(group, add_special_tokens=False)
    if skip_id is None:
        return sum(map(len, found))
    return sum(len(e.ids) - e.ids.count(skip_id) for e in found)


def head_of(backend: RustTokenizer, cuts: Cuts, text: str, *, max_tokens: int) -> tuple[int, Encoding]:
    """The length of the shortest prefix of `text`, cut where its words tokenize as in the whole text,
    that makes more than `max_tokens` tokens (the whole text where it makes no more), and that prefix's
    encoding (specials added). The first prefix tried is 8 characters a token, to the next cut; each next
    one twice as long."""
    size = 8 * max_tokens
    while True:
        cut = cuts.at(text, size)
        head = backend.encode(text[:cut])
        if cut == len(text) or len(head) > max_tokens:
            return cut, head
        size = 2 * cut


def head_and_count(backend: RustTokenizer, cuts: Cuts, text: str, *, max_tokens: int) -> tuple[Encoding, int]:
    """The encoding (specials added) of a prefix of `text` that makes more than `max_tokens` tokens, or of
    the whole text where it makes no more (`head_of`); and how many tokens the whole text makes, specials
    included."""
    cut, head = head_of(backend, cuts, text, max_tokens=max_tokens)
    if cut == len(text):
        return head, len(head)
    return head, len(head) + cuts.count(backend, text, start=cut)


def cuts_for(backend: RustTokenizer) -> Cuts | None:
    """The cuts of a tokenizer that splits at whitespace first and normalizes locally, else None.

    Added tokens that are not special (special ones are read as text here) must hold no whitespace and
    take none after them (rstrip), or one could reach across a cut.
    """
    steps = _steps(backend.pre_tokenizer, "pretokenizers")
    if not any(map(_splits, steps)) or not all(_splits(s) or s.get("type") in _FURTHER for s in steps):
        return None
    if not all(map(_local, _steps(backend.normalizer, "normalizers"))):
        return None
    for added in backend.get_added_tokens_decoder().values():
        if not added.special and (added.rstrip or any(c.isspace() for c in added.content)):
            return None
    return Cuts(backend.normalizer)


def _steps(part: Any, key: str) -> list[dict[str, Any]]:
    """A pre-tokenizer's or normalizer's steps, each as its JSON: [] for none, a Sequence's members."""
    if part is None:
        return []
    state = json.loads(part.__getstate__())
    return state.get(key, []) if state.get("type") == "Sequence" else [state]  # type: ignore[no-any-return]


def _splits(step: dict[str, Any]) -> bool:
    kind = step.get("type")
    if kind == "ByteLevel":
        return bool(step.get("use_regex", True))
    if kind == "Metaspace":
        return bool(step.get("split", True))
    return kind in _SPLITTERS


def _local(step: dict[str, Any]) -> bool:
    if step.get("type") != "Replace":
        return step.get("type") in _LOCAL
    pattern, content = step.get("pattern", {}), step.get("content", "")
    if pattern == {"Regex": " {2,}"}:
        return bool(content == " ")
    plain = pattern.get("String")
    return isinstance(plain, str) and not any(c.isspace() for c in plain + content) and bool(plain)
