"""Tokens on the bundled model: pieces, ids, offsets, word ids, specials, truncation, windows, bad input."""

from __future__ import annotations

import copy
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.core.tokens import text_problem
from tiny_models import FAMILIES, build_tiny_model

BREAD_ID = 7852
# 300 single-piece words plus [CLS] and [SEP]: 302 tokens, 46 over the bundled model's 256.
LONG_TEXT = "bread " * 300
LONG_TOKENS = 302


def _distinct_words(n: int) -> str:
    """A text of `n` different everyday words, so windows can be checked by id, not just by count."""
    words = "the cat sat on a mat and ate some bread with butter while the dog slept near the door".split()
    return " ".join(f"{words[i % len(words)]} {i}" for i in range(n))


def test_bread_has_one_id_in_every_context(bundled: bertscope.Model) -> None:
    first = bundled.tokenize("I like eating bread")
    second = bundled.tokenize("The banana bread was horrible")
    assert first.ids[first.tokens.index("bread")] == BREAD_ID
    assert second.ids[second.tokens.index("bread")] == BREAD_ID
    assert bundled.vocab["bread"] == BREAD_ID


def test_tokens_fields(bundled: bertscope.Model) -> None:
    text = "I like eating bread"
    tok = bundled.tokenize(text)
    assert isinstance(tok, bertscope.Tokens)
    assert tok.text == text
    assert tok.tokens == ["[CLS]", "i", "like", "eating", "bread", "[SEP]"]
    assert tok.ids == [bundled.vocab[t] for t in tok.tokens]
    assert tok.ids[0] == bundled.loaded.tokenizer.cls_token_id
    assert tok.ids[-1] == bundled.loaded.tokenizer.sep_token_id
    assert tok.word_ids == [None, 0, 1, 2, 3, None]
    assert tok.special_tokens_mask == [True, False, False, False, False, True]
    assert len(tok) == 6 and tok.n_dropped == 0
    for piece, (start, end), special in zip(tok.tokens, tok.offsets, tok.special_tokens_mask, strict=True):
        if special:
            assert start == end
        else:
            assert text[start:end].lower() == piece


def test_offsets_of_split_word_point_into_the_text(bundled: bertscope.Model) -> None:
    text = "The tokenization works"
    tok = bundled.tokenize(text)
    assert tok.tokens[2:4] == ["token", "##ization"]
    assert tok.word_ids[2] == tok.word_ids[3] == 1
    assert text[slice(*tok.offsets[2])] == "token"
    assert text[slice(*tok.offsets[3])] == "ization"


def test_batch_returns_one_tokens_per_text(bundled: bertscope.Model) -> None:
    toks = bundled.tokenize(["a cat", "I like eating bread"])
    assert [t.text for t in toks] == ["a cat", "I like eating bread"]
    assert [len(t) for t in toks] == [4, 6]


def test_truncate_reports_exactly_what_was_dropped(bundled: bertscope.Model) -> None:
    assert bundled.max_tokens == 256
    full = bundled.loaded.tokenizer(LONG_TEXT)["input_ids"]
    assert len(full) == LONG_TOKENS
    tok = bundled.tokenize(LONG_TEXT, long="truncate")
    assert len(tok) == bundled.max_tokens
    assert tok.n_dropped == LONG_TOKENS - 256 == 46
    assert tok.tokens[0] == "[CLS]" and tok.tokens[-1] == "[SEP]"
    assert tok.special_tokens_mask[-1] and not any(tok.special_tokens_mask[1:-1])
    assert tok.ids[:-1] == full[: bundled.max_tokens - 1]


def test_error_policy_raises_input_too_long(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InputTooLong, match="256"):
        bundled.tokenize(LONG_TEXT, long="error")
    assert bundled.tokenize("a short text", long="error").n_dropped == 0


@pytest.mark.parametrize(("max_tokens", "stride"), [(16, None), (16, 5), (256, None)])
def test_windows_cover_every_content_token(
    bundled: bertscope.Model, max_tokens: int, stride: int | None
) -> None:
    tok = bundled.tokenize(_distinct_words(150), long="window")
    assert tok.n_dropped == 0 and len(tok) > 256
    content = tok.ids[1:-1]
    windows = tok.windows(max_tokens, stride)
    assert len(windows) > 1
    covered: set[int] = set()
    for window in windows:
        assert len(window.ids) <= max_tokens
        assert window.ids[0] == tok.ids[0] and window.ids[-1] == tok.ids[-1]
        assert window.n_prefix == 1
        assert window.ids[1:-1] == content[window.content_start : window.content_stop]
        covered.update(range(window.content_start, window.content_stop))
    assert covered == set(range(len(content)))
    if stride is not None:
        starts = [w.content_start for w in windows]
        assert all(b - a <= stride for a, b in zip(starts, starts[1:], strict=False))


def test_short_text_is_one_window(bundled: bertscope.Model) -> None:
    tok = bundled.tokenize("I like eating bread")
    (window,) = tok.windows(bundled.max_tokens)
    assert window.ids == tok.ids
    assert (window.content_start, window.content_stop) == (0, 4)


@pytest.mark.parametrize("bad", ["", "   \n\t", ["fine", 3], [], ["ok", ""], b"bytes"])
def test_bad_input_raises_invalid_input(bundled: bertscope.Model, bad: object) -> None:
    with pytest.raises(bertscope.InvalidInput):
        bundled.tokenize(bad)  # type: ignore[arg-type]


def test_bad_input_message_names_the_item(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InvalidInput, match="text 1 is an int"):
        bundled.tokenize(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(bertscope.InvalidInput, match="no texts"):
        bundled.tokenize([])


@pytest.mark.parametrize("text", ["\u0301\u0301", " \u0301", "\ufffd"])
def test_the_models_tokenizer_finds_a_text_of_no_word_pieces(bundled: bertscope.Model, text: str) -> None:
    """Combining marks with nothing to combine with, or a character the normaliser drops: no pieces."""
    assert text_problem(text) is None  # by category alone it looks like text (the schema agrees)
    assert "gives no word pieces" in (text_problem(text, tokenizer=bundled.tokenizer) or "")
    with pytest.raises(bertscope.InvalidInput, match="or combining marks"):
        bundled.tokenize(["fine", text])


def test_marks_after_a_letter_or_bytes_of_a_mark_are_word_pieces(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    for text in ("e\u0301", "caf\u00e9", "\u0301x", "\U0001f600", "\u0301 ."):
        assert text_problem(text, tokenizer=bundled.tokenizer) is None, ascii(text)
    byte_level = bertscope.load(str(build_tiny_model("bert", tmp_path / "bl", byte_level=True)), device="cpu")
    assert text_problem("\u0301\u0301", tokenizer=byte_level.tokenizer) is None  # its bytes are pieces


def test_unknown_long_policy_is_invalid_spec(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InvalidSpec):
        bundled.tokenize("a cat", long="chop")


# Sentence pairs ------------------------------------------------------------------------------------

PAIR = ("How are you?", "Fine, thanks.")


def test_pair_matches_the_plain_tokenizer(bundled: bertscope.Model, bundled_path: Path) -> None:
    import transformers

    reference = transformers.AutoTokenizer.from_pretrained(bundled_path)(*PAIR)
    (tok,) = bundled.tokenize([PAIR])
    assert tok.ids == reference["input_ids"]
    assert tok.token_type_ids == reference["token_type_ids"]
    assert tok.tokens[0] == "[CLS]" and tok.tokens.count("[SEP]") == 2
    assert set(tok.token_type_ids[tok.tokens.index("[SEP]") + 1 :]) == {1}
    assert (tok.text, tok.pair) == PAIR


def test_pair_offsets_point_into_their_own_text(bundled: bertscope.Model) -> None:
    (tok,) = bundled.tokenize([PAIR])
    records = tok.as_records()
    fine = next(i for i, r in enumerate(records) if r["token"] == "fine")
    assert records[fine]["sequence"] == 1 and records[fine]["token_type_id"] == 1
    assert tok.span_text(fine) == "Fine"
    assert tok.span_text(tok.tokens.index("how")) == "How"


def test_a_list_holds_texts_and_pairs(bundled: bertscope.Model) -> None:
    toks = bundled.tokenize(["How are you?", PAIR, list(PAIR)])
    assert [t.pair for t in toks] == [None, PAIR[1], PAIR[1]]
    assert toks[1].ids == toks[2].ids


def test_roberta_style_pair_has_separators_and_no_type_one(tiny_models: dict[str, bertscope.Model]) -> None:
    (tok,) = tiny_models["roberta"].tokenize([("a cat", "a dog")])
    assert tok.tokens == ["<s>", "a", "cat", "</s>", "</s>", "a", "dog", "</s>"]
    assert set(tok.token_type_ids) == {0}


def test_a_tokenizer_without_pair_template_refuses_pairs(bundled: bertscope.Model) -> None:
    from bertscope.core.tokens import TextTokenizer

    backend = copy.deepcopy(bundled.tokenizer.backend)
    backend.post_processor = None
    with pytest.raises(bertscope.InvalidInput, match="no sentence-pair template"):
        TextTokenizer(backend, max_tokens=512).encode([PAIR])


def test_a_pair_over_the_limit_is_refused(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InputTooLong, match="pair 0"):
        bundled.tokenize([("word " * 400, "another")])


def test_words_refuse_pairs(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InvalidInput, match="not a string"):
        bundled.embed_words([PAIR])


# Text is text: a special token's text written in the input is split like any other characters ----------


def _specials_written_out(tokenizer: object) -> str:
    """Every special token's text, as a user might type it, between ordinary words."""
    return " a ".join(tokenizer.all_special_tokens) + " end"  # type: ignore[attr-defined]


def _written_specials_stay_text(model: bertscope.Model) -> bertscope.Tokens:
    """Tokens of a text that spells out every special: real special ids only where the template puts them."""
    hf = model.loaded.tokenizer
    text = _specials_written_out(hf)
    tok = model.tokenize(text)
    frame = model.tokenize("a")
    head, tail = frame.n_prefix, frame.n_suffix
    assert tok.ids[:head] == frame.ids[:head] and tok.ids[-tail:] == frame.ids[-tail:]
    assert tok.special_tokens_mask == [True] * head + [False] * (len(tok) - head - tail) + [True] * tail
    framing = set(hf.all_special_ids) - {hf.unk_token_id}
    assert not framing & set(tok.ids[head : len(tok) - tail])
    assert tok.ids == hf(text, split_special_tokens=True)["input_ids"]
    return tok


def test_a_written_cls_is_text_not_the_cls_id(bundled: bertscope.Model) -> None:
    tok = bundled.tokenize("[CLS] a [SEP]")
    cls_id = bundled.loaded.tokenizer.cls_token_id
    assert tok.tokens == ["[CLS]", "[", "cl", "##s", "]", "a", "[", "sep", "]", "[SEP]"]
    assert [i for i, token_id in enumerate(tok.ids) if token_id == cls_id] == [0]
    assert bundled.tokenize([("[SEP] x", "y")])[0].tokens == [
        "[CLS]",
        "[",
        "sep",
        "]",
        "x",
        "[SEP]",
        "y",
        "[SEP]",
    ]
    _written_specials_stay_text(bundled)


def test_the_model_tokenizer_still_reads_specials(bundled: bertscope.Model) -> None:
    """The tokenizer others rely on is not changed: only bertscope's own copy splits special text."""
    bundled.tokenize("[CLS]")
    assert bundled.loaded.tokenizer("[CLS]", add_special_tokens=False)["input_ids"] == [101]


def test_probe_words_spelling_a_special_are_text(bundled: bertscope.Model) -> None:
    """A probe sentence with a literal [CLS] word probes that word's pieces, not the [CLS] vector."""
    from bertscope.research.probe import word_features
    from bertscope.research.probe_data import LabelledSentence

    sentence = LabelledSentence(words=("the", "[CLS]", "cat"), labels=("_", "X", "Y"))
    feats = word_features(bundled, [sentence], layers=[0])
    pieces = [bundled.vocab[p] for p in ("[", "cl", "##s", "]")]
    assert feats.static[0] == pytest.approx(bundled.static(pieces).mean(axis=0), abs=1e-6)
    assert feats.static[0] != pytest.approx(bundled.static(["[CLS]"])[0], abs=1e-3)


@pytest.mark.parametrize("family", FAMILIES)
def test_written_specials_are_text_in_every_family(
    tiny_models: dict[str, bertscope.Model], tiny_dirs: dict[str, Path], family: str
) -> None:
    from bertscope.core.folder import FolderView

    model = tiny_models[family]
    tok = _written_specials_stay_text(model)
    view = FolderView.open(tiny_dirs[family])
    assert view is not None
    assert view.tokenize([_specials_written_out(model.loaded.tokenizer)])[0].ids == tok.ids


def test_the_folder_view_reads_written_specials_as_the_model_does(bundled: bertscope.Model) -> None:
    from bertscope.core.folder import FolderView

    view = FolderView.open(None)
    assert view is not None
    text = "[CLS] a [SEP] [MASK]"
    assert view.tokenize([text])[0].ids == bundled.tokenize(text).ids


@pytest.mark.parametrize(
    ("texts", "named"),
    [
        ([("a cat", "")], "text 0 (pair part B) is empty"),
        ([("  ", "a dog")], "text 0 (pair part A) is empty"),
        (["fine", ("a cat", "\t")], "text 1 (pair part B) is empty"),
        (["fine", ""], "text 1 is empty"),
    ],
)
def test_an_empty_part_of_a_pair_is_named(bundled: bertscope.Model, texts: list[object], named: str) -> None:
    with pytest.raises(bertscope.InvalidInput, match=re.escape(named)):
        bundled.embed(texts)


# A bare tuple of two strings reads two ways (one pair, or two texts): refused where pairs are taken --------

BARE = ("a cat", "a dog")
READINGS = "a bare tuple ('a cat', 'a dog') reads two ways: [('a cat', 'a dog')] is one pair"


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.embed(BARE),
        lambda m: m.similarity(BARE),
        lambda m: m.similarity(["a cat"], BARE),
        lambda m: m.embed_tokens(BARE),
        lambda m: m.tokenize(BARE),
        lambda m: m.anatomy(BARE),
    ],
)
def test_a_bare_pair_is_refused_naming_both_readings(bundled: bertscope.Model, call: Any) -> None:
    with pytest.raises(bertscope.InvalidInput) as info:
        call(bundled)
    message = str(info.value)
    assert message.startswith(READINGS) and "['a cat', 'a dog'] two texts" in message
    assert "\n" not in message


def test_a_pair_in_a_list_and_two_texts_in_a_list_or_a_longer_tuple_still_read(
    bundled: bertscope.Model,
) -> None:
    assert bundled.embed([BARE]).vectors.shape == (1, 384)
    assert bundled.embed(list(BARE)).vectors.shape == (2, 384)
    assert bundled.embed(("a", "b", "c")).vectors.shape == (3, 384)
    assert bundled.encode(BARE).shape == (2, 384)  # sentence-transformers' reading: two texts
    assert bundled.embed_words(BARE)[1].words == ["a", "dog"]  # no pairs here: two texts, one reading
    assert bundled.hidden_states(BARE).shape[:2] == (7, 7)  # one text or pair: [CLS] a cat [SEP] a dog [SEP]
    assert bundled.attentions(BARE).shape[-1] == 7


def test_the_folder_view_refuses_a_bare_pair_as_the_model_does(bundled: bertscope.Model) -> None:
    """`bertscope tokens` reads a folder without torch (FolderView): a bare (A, B) is not two texts there."""
    from bertscope.core.folder import FolderView

    view = FolderView.open(None)
    assert view is not None
    with pytest.raises(bertscope.InvalidInput) as by_model:
        bundled.tokenize(BARE)
    with pytest.raises(bertscope.InvalidInput) as by_view:
        view.tokenize(BARE)
    assert str(by_view.value) == str(by_model.value)
    assert [t.ids for t in view.tokenize([BARE])] == [bundled.tokenize([BARE])[0].ids]


SET = (
    "texts must be a string or a list of strings, not a set: a set's order is not one you chose, and the "
    "rows come back in that order; pass a list, such as sorted(texts)"
)


@pytest.mark.parametrize("texts", [{"a cat", "a dog"}, frozenset({"a cat", "a dog"}), {"one"}])
def test_a_set_is_refused_as_it_has_no_order(bundled: bertscope.Model, texts: object) -> None:
    from bertscope.core.folder import FolderView
    from bertscope.core.tokens import check_texts
    from bertscope.research.contextuality import contextuality

    view = FolderView.open(None)
    assert view is not None
    for call in (
        lambda: check_texts(texts),
        lambda: check_texts(texts, pairs=True),
        lambda: bundled.embed(texts),
        lambda: bundled.similarity(texts),
        lambda: bundled.tokenize(texts),
        lambda: view.tokenize(texts),  # type: ignore[arg-type]
        lambda: list(bundled.iter_embed(texts)),  # type: ignore[arg-type]
        lambda: contextuality(bundled, texts),  # type: ignore[arg-type]
    ):
        with pytest.raises(bertscope.InvalidInput, match=f"^{re.escape(SET)}$"):
            call()
    assert bundled.embed(sorted(texts)).vectors.shape == (len(texts), 384)  # type: ignore[arg-type]


# Texts as any iterable: arrays, Series, generators ------------------------------------------------------


class SeriesLike:
    """What embed reads of a pandas Series: a 1-D object array-like of strings, iterable, not a Sequence."""

    def __init__(self, values: list[object]) -> None:
        self.values = np.array(values, dtype=object)
        self.dtype, self.ndim = self.values.dtype, 1

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Any:
        return iter(self.values)

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        return self.values


def _series(values: list[object]) -> Any:
    try:
        import pandas as pd
    except ImportError:
        return SeriesLike(values)
    return pd.Series(values)


TWO = ["a cat sat", "a dog ran"]


@pytest.mark.parametrize(
    "given",
    [
        lambda: np.array(TWO),
        lambda: np.array(TWO, dtype=object),
        lambda: _series(TWO),
        lambda: SeriesLike(TWO),
        lambda: (t for t in TWO),
    ],
    ids=["str-array", "object-array", "series", "series-like", "generator"],
)
def test_any_iterable_of_texts_is_taken_as_a_list_is(bundled: bertscope.Model, given: Any) -> None:
    want = bundled.embed(TWO).vectors
    np.testing.assert_array_equal(bundled.embed(given()).vectors, want)
    assert [t.tokens for t in bundled.embed_tokens(given())] == [t.tokens for t in bundled.embed_tokens(TWO)]
    np.testing.assert_allclose(bundled.similarity(given(), given()), bundled.similarity(TWO, TWO), atol=1e-6)
    assert bundled.similarity(given()).shape == (2, 2)
    assert len(bundled.tokenize(given())) == 2


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (lambda: _series(["a cat", float("nan")]), "text 1 is a float, not a string"),
        (lambda: np.array([1.5, 2.5], dtype=object), "text 0 is a float, not a string"),
        (lambda: (t for t in ["a", 3]), "text 1 is an int, not a string"),
        (lambda: np.array([[*TWO, "a fox"]]), "got a 2-D array with 3 columns"),
        (lambda: {"a": 1}, "not a dict: it would embed the keys"),
        (lambda: (t for t in []), "no texts given"),
    ],
)
def test_an_iterable_with_a_bad_item_is_refused_in_one_line(
    bundled: bertscope.Model, given: Any, said: str
) -> None:
    for call in (bundled.embed, bundled.embed_tokens, bundled.similarity):
        # similarity reads an array of numbers as vectors, and names what it takes
        named = "a is a 1-D object array" if call == bundled.similarity and "0 is a float" in said else said
        with pytest.raises(bertscope.InvalidInput, match=re.escape(named)):
            call(given())


def test_vectors_as_arrays_are_still_compared_as_vectors(bundled: bertscope.Model) -> None:
    vectors = bundled.embed(TWO).vectors
    np.testing.assert_allclose(bundled.similarity(vectors, vectors), bundled.similarity(TWO), atol=1e-6)


# Never truncated in silence: every path that cuts a text says so once, with the count -----------------

CUT = r"^1 of (1|2) text\(s\) ran past the model's 256 tokens and were truncated \(46 tokens dropped\): "
PATHS = {
    "embed": lambda m, t: m.embed([t, "short"]),
    "iter_embed": lambda m, t: list(m.iter_embed([t, "short"])),
    "similarity": lambda m, t: m.similarity(t, "short"),
    "similarity-b": lambda m, t: m.similarity("short", [t]),
    "embed_tokens": lambda m, t: m.embed_tokens([t, "short"]),
    "embed_words": lambda m, t: m.embed_words([t, "short"]),
    "hidden_states": lambda m, t: m.hidden_states(t),
    "attentions": lambda m, t: m.attentions(t),
    "anatomy": lambda m, t: m.anatomy(t),
    "explain": lambda m, t: m.explain(t, "short"),
}


@pytest.mark.parametrize("path", list(PATHS))
def test_every_path_that_cuts_a_text_says_so_once(bundled: bertscope.Model, path: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PATHS[path](bundled, LONG_TEXT)
    said = [w for w in caught if issubclass(w.category, bertscope.TruncatedTextsWarning)]
    assert len(said) == 1, [str(w.message) for w in said]
    assert re.match(CUT, str(said[0].message))
    counts = said[0].message  # the counts travel with the text, for a reader that says the cut its way
    assert isinstance(counts, bertscope.TruncatedTextsWarning)
    assert (counts.cut, counts.max_tokens, counts.tokens) == (1, 256, 46) and counts.texts in (1, 2)
    assert said[0].filename == __file__  # at the caller's line, however deep the library went
    with warnings.catch_warnings():
        warnings.simplefilter("error", bertscope.TruncatedTextsWarning)
        PATHS[path](bundled, "bread " * 250)  # 252 tokens: within the limit, nothing said


def test_a_window_or_a_refusal_is_no_cut(bundled: bertscope.Model) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", bertscope.TruncatedTextsWarning)
        assert bundled.embed(LONG_TEXT, long="window").n_truncated == 0
        with pytest.raises(bertscope.InputTooLong):
            bundled.embed_tokens(LONG_TEXT, long="error")


def test_encode_says_a_cut_once_in_its_own_words(bundled: bertscope.Model) -> None:
    """encode reports the cut itself (sentence-transformers' words): embed under it does not say it again."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bundled.encode([LONG_TEXT, "short"])
    said = [w.message for w in caught if isinstance(w.message, bertscope.TruncatedTextsWarning)]
    assert len(said) == 1 and "sentence-transformers" in str(said[0])
    assert (said[0].cut, said[0].texts, said[0].max_tokens) == (1, 2, 256)


def test_a_type_is_named_with_the_article_its_sound_takes() -> None:
    """'a int', 'a NoneType', 'an uint8' read wrong in refusals (audits 19b, 19c; review)."""
    from bertscope.core.texts_given import type_named

    assert [type_named(v) for v in (3, None, b"x", np.uint8(3), object(), [1])] == [
        "an int", "None", "bytes", "a uint8", "an object", "a list",
    ]  # fmt: skip
