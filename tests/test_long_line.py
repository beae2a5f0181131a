"""A long text cut at the model's limit is tokenized a piece at a time (core/text_pieces.py): the same
tokens and n_dropped as the whole text tokenized and truncated, in bounded memory.

Three kinds of tokenizer: the bundled model's WordPiece (BertPreTokenizer), byte-level BPE (RoBERTa's
Ġ; the tiny one tests/tiny_models.py trains) and XLM-R's SentencePiece unigram (Metaspace's ▁, with the
nmt_nfkc charsmap; tests/data/xlmr_unigram.tokenizer.json.xz).
"""

from __future__ import annotations

import lzma
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers, processors

import bertscope
from bertscope.core import text_pieces
from bertscope.core._enums import LongText
from bertscope.core.tokens import TextTokenizer
from bertscope.errors import InputTooLong
from tiny_models import _byte_level_backend

_XLMR = Path(__file__).parent / "data" / "xlmr_unigram.tokenizer.json.xz"

# Words, and what stands between them: runs of mixed whitespace, characters that normalize to a space
# (nmt_nfkc's "▁" and U+FFFD) or to nothing (U+200B, controls), specials written as text, CJK, emoji.
_WORDS = [
    "the", "Quick", "brown", "fox", "naïve", "café", "e\u0301", "中文", "東京は日本", "😀", "👩‍👩‍👧",
    "[SEP]", "[CLS]", "<s>", "</s>", "<mask>", "don't", "3.14", "1,000", "!!!", "(x)", "\u2581",
    "\ufffd", "\u200b", "a\u00b4", "Straße", "\x01", "ﬁ", "ℌ", "Привет", "مرحبا", "안녕하세요", "--",
]  # fmt: skip
_GAPS = [" ", "  ", "\t", "\n", " \t ", "   ", "", " \n\n ", "\u3000", "\u00a0 ", " \u200b ", "\r\n"]


def _text(rng: random.Random, n_words: int) -> str:
    return "".join(rng.choice(_WORDS) + rng.choice(_GAPS) for _ in range(n_words)).strip() or "x"


def _byte_level(*, roberta: bool = False, prefix_space: bool = False) -> Tokenizer:
    backend, _ = _byte_level_backend()
    if prefix_space:
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    if roberta:  # RoBERTa's own post-processor: <s> A </s>, offsets trimmed of the Ġ space
        ids = backend.get_vocab()
        backend.post_processor = processors.RobertaProcessing(
            ("[SEP]", ids["[SEP]"]), ("[CLS]", ids["[CLS]"]), trim_offsets=True, add_prefix_space=prefix_space
        )
    return backend


def _xlmr(prepend_scheme: str = "always") -> Tokenizer:
    backend = Tokenizer.from_str(lzma.decompress(_XLMR.read_bytes()).decode("utf-8"))
    if prepend_scheme != "always":
        backend.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=prepend_scheme)
    return backend


@pytest.fixture(scope="module")
def backends(bundled: bertscope.Model) -> dict[str, Tokenizer]:
    return {
        "wordpiece": bundled.tokenizer.backend,
        "byte-level": _byte_level(),
        "roberta": _byte_level(roberta=True),
        "roberta-prefix-space": _byte_level(roberta=True, prefix_space=True),
        "xlm-r": _xlmr(),
        "xlm-r-first": _xlmr("first"),
    }


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of one character to the next cut, a few tokenized at once: every cut the text has is made."""
    monkeypatch.setattr(text_pieces, "PIECE_CHARS", 1)
    monkeypatch.setattr(text_pieces, "GROUP_CHARS", 40)


def _fitted_whole(tok: TextTokenizer, text: str, long: LongText) -> Any:
    try:
        return tok.fit(tok.encode([text])[0], long)
    except InputTooLong as exc:
        return str(exc)


def _fitted_in_pieces(tok: TextTokenizer, text: str, long: LongText) -> Any:
    try:
        return tok.encode_fitted([text], long)[0]
    except InputTooLong as exc:
        return str(exc)


@pytest.mark.usefixtures("small_pieces")
@pytest.mark.parametrize(
    "name", ["wordpiece", "byte-level", "roberta", "roberta-prefix-space", "xlm-r", "xlm-r-first"]
)
def test_pieces_give_the_whole_texts_tokens_and_n_dropped(backends: dict[str, Tokenizer], name: str) -> None:
    backend = backends[name]
    assert text_pieces.cuts_for(backend) is not None, "this tokenizer should be cut at spaces"
    rng = random.Random(name)
    cut = 0
    for max_tokens in (6, 17, 64):
        tok = TextTokenizer(backend, max_tokens=max_tokens)
        tok.long_chars = 0  # every text takes the piece path
        for _ in range(25):
            text = _text(rng, rng.randint(1, 120))
            for long in (LongText.TRUNCATE, LongText.ERROR):
                whole = _fitted_whole(tok, text, long)
                assert _fitted_in_pieces(tok, text, long) == whole, (name, max_tokens, long, text)
                cut += isinstance(whole, bertscope.Tokens) and whole.n_dropped > 0
    assert cut > 20  # most texts were cut, so the counts of the rest were compared


@pytest.mark.usefixtures("small_pieces")
@pytest.mark.parametrize("name", ["wordpiece", "roberta", "xlm-r"])
def test_counted_in_pieces_as_whole(backends: dict[str, Tokenizer], name: str) -> None:
    backend = backends[name]
    cuts = text_pieces.cuts_for(backend)
    assert cuts is not None
    rng = random.Random(name)
    for _ in range(150):
        text = _text(rng, rng.randint(1, 60))
        whole = backend.encode(text, add_special_tokens=False).ids
        assert cuts.count(backend, text) == len(whole), text
        assert cuts.count(backend, text, skip_id=whole[0]) == len(whole) - whole.count(whole[0]), text


def test_a_space_that_the_normalizer_makes_is_no_cut() -> None:
    """XLM-R's nmt_nfkc makes "▁" a space, and Replace(" {2,}") joins it to the space after: a cut
    between them would add a ▁ token. The character before a cut is read as the normalizer writes it."""
    cuts = text_pieces.cuts_for(_xlmr())
    assert cuts is not None
    text = "a\u2581 b c"
    assert cuts.at(text, 1) == 4  # not 2, after the "▁"
    assert text_pieces.cuts_for(_byte_level()).at(text, 1) == 2  # NFC leaves "▁" a visible character


@pytest.mark.parametrize(
    "change",
    [
        lambda b: setattr(b, "pre_tokenizer", None),  # one word: nowhere to cut
        lambda b: setattr(b, "pre_tokenizer", pre_tokenizers.Split(Regex(r"\w+"), "isolated")),
        lambda b: setattr(b, "pre_tokenizer", pre_tokenizers.ByteLevel(use_regex=False)),
        lambda b: setattr(b, "pre_tokenizer", pre_tokenizers.Metaspace(split=False)),
        lambda b: setattr(b, "normalizer", normalizers.Strip()),  # a piece's leading space would go
        lambda b: setattr(b, "normalizer", normalizers.Replace("x", " ")),
        lambda b: b.add_tokens(["new york"]),  # an added token across a space
    ],
)
def test_a_tokenizer_not_cut_at_spaces_is_tokenized_whole(change: Any) -> None:
    backend = _byte_level(roberta=True)
    change(backend)
    assert text_pieces.cuts_for(backend) is None
    tok = TextTokenizer(backend, max_tokens=8)
    tok.long_chars = 0
    text = _text(random.Random(1), 80)
    whole = tok.fit(tok.encode([text])[0], LongText.TRUNCATE)
    assert whole.n_dropped > 0 and tok.encode_fitted([text], LongText.TRUNCATE)[0] == whole


def test_short_texts_window_and_pairs_take_the_whole_path(bundled: bertscope.Model) -> None:
    tok = bundled.tokenizer
    long = "word " * (tok.long_chars // 5 + 10)
    assert len(long) > tok.long_chars
    # a pair and window mode need every token, and are tokenized whole as before
    window = tok.encode_fitted([long], LongText.WINDOW)[0]
    assert len(window) == len(long.split()) + 2 and window.n_dropped == 0
    short, pair = "a short text", ("first part", "second part")
    got = tok.encode_fitted([short, long, pair], LongText.TRUNCATE, start=3)
    assert got[0] == tok.encode([short])[0] and got[2] == tok.encode([pair])[0]
    assert got[1] == tok.encode([long])[0].truncated(tok.max_tokens)
    with pytest.raises(InputTooLong, match=rf"^text 4 has {len(window)} tokens but the model takes at most"):
        tok.encode_fitted([short, long], LongText.ERROR, start=3)


def test_a_long_text_at_the_real_threshold(bundled: bertscope.Model) -> None:
    rng = random.Random(7)
    text = _text(rng, 40_000)
    assert len(text) > bundled.tokenizer.long_chars
    got = bundled.tokenize(text)
    whole = bundled.tokenizer.encode([text])[0]
    assert got == whole.truncated(bundled.max_tokens)
    assert got.n_dropped == len(whole) - bundled.max_tokens > 0


class _Spy:
    """The Rust tokenizer, with the most characters any one call was handed."""

    def __init__(self, backend: Tokenizer) -> None:
        self._backend, self.most, self.calls = backend, 0, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def _saw(self, texts: Iterator[Any]) -> None:
        self.calls += 1
        self.most = max(self.most, sum(len(t) if isinstance(t, str) else sum(map(len, t)) for t in texts))

    def encode(self, text: Any, *args: Any, **kwargs: Any) -> Any:
        self._saw(iter([text]))
        return self._backend.encode(text, *args, **kwargs)

    def encode_batch(self, texts: list[Any], *args: Any, **kwargs: Any) -> Any:
        self._saw(iter(texts))
        return self._backend.encode_batch(texts, *args, **kwargs)


def test_a_line_of_megabytes_is_never_handed_to_the_tokenizer_whole(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tokenized whole, a 20 MB line would take about 3 GB of the tokenizer's memory (Rust's, which
    tracemalloc does not see): here no call gets more than a group of pieces, and the n_dropped counted
    in pieces is exact (every 4-word block is 4 tokens, so the whole line is 4 * blocks + 2)."""
    # 2 MB: 30 times the length past which a text is cut before tokenizing (long_chars) and 15 groups of
    # pieces; the calls and their most characters hold at any such length, 20 MB only took 10 times longer.
    blocks = 100_000
    line = " ".join(["the quick brown fox"] * blocks)
    assert len(line) > 15 * text_pieces.GROUP_CHARS and len(line) > 30 * bundled.tokenizer.long_chars
    spy = _Spy(bundled.tokenizer.backend)
    monkeypatch.setattr(bundled.tokenizer, "backend", spy)
    found = bundled.embed(line)
    assert spy.calls > 10 and spy.most <= 2 * text_pieces.GROUP_CHARS
    assert list(found.n_dropped) == [4 * blocks + 2 - bundled.max_tokens]
    monkeypatch.undo()
    prefix = " ".join(line[:5000].split()[: bundled.max_tokens - 2])  # the words kept, as a text
    assert len(bundled.tokenize(prefix)) == bundled.max_tokens
    np.testing.assert_array_equal(found.vectors, bundled.embed(prefix).vectors)


def test_whether_a_long_text_gives_pieces_is_read_in_pieces(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A text with no letter or digit is asked whether it gives pieces (`text_problem`): a long one is
    answered from its first group of pieces; one with no cut at all (the uncased model strips the
    accents, leaving only spaces before each space) whole, as before."""
    tok = bundled.tokenizer
    spy = _Spy(tok.backend)
    monkeypatch.setattr(tok, "backend", spy)
    signs = "!? " * 1_000_000
    assert tok.gives_pieces(signs) and spy.most <= 2 * text_pieces.GROUP_CHARS
    marks = " ".join(["\u0301\u0308"] * (tok.long_chars // 3 + 1))
    assert len(marks) > tok.long_chars
    for text, answer in ((marks, False), (marks + " !", True), ("! " + marks, True)):
        assert tok.gives_pieces(text) is answer


@pytest.mark.usefixtures("small_pieces")
def test_a_static_models_n_dropped_is_counted_in_pieces(static_m2v: Any) -> None:
    """model2vec cuts a text to max_length pieces itself; the pieces it dropped (its [UNK]s left out)
    are counted a piece at a time, as many as the whole text's."""
    engine = static_m2v.engine
    text = _text(random.Random(3), 3000)
    (found,) = engine.pieces_of([text])
    every = [i for i in engine.pieces(text).ids if i != engine._unk]
    assert 0 < found.n_dropped == len(every) - len(found)
