"""Token, word and sentence pooling (bertscope.core.pooling), directly and through Model.embed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

import bertscope
from bertscope import Pooling, SubwordPooling
from bertscope.core.pooling import group_words, pool_sentences, pool_words, text_words
from bertscope.core.tokens import Tokens
from tiny_models import build_tiny_model

MASK = np.array([[1, 1, 1, 0], [1, 1, 0, 0]])


def _close(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal within float32 tolerances (torch.testing.assert_close's), same shape and dtype."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1.3e-6, atol=1e-5)


def _hidden(pad_value: float = 0.0) -> np.ndarray:
    """A (batch=2, tokens=4, d=3) float32 array; rows past MASK's real tokens (pad) hold `pad_value`."""
    hidden = np.array(
        [
            [[1.0, -2.0, 3.0], [4.0, -5.0, 0.5], [-1.0, -8.0, 2.0], [0.0, 0.0, 0.0]],
            [[-3.0, -1.0, 2.0], [5.0, -4.0, -6.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
        ],
        dtype=np.float32,
    )
    hidden[MASK == 0] = pad_value
    return hidden


def _expected(pooling: Pooling) -> np.ndarray:
    """Sentence vectors computed by hand over the real (unpadded) rows of `_hidden()`."""
    hidden = _hidden()
    rows = [hidden[0, :3], hidden[1, :2]]
    if pooling is Pooling.CLS:
        return np.stack([r[0] for r in rows])
    if pooling is Pooling.MAX:
        return np.stack([r.max(axis=0) for r in rows])
    if pooling is Pooling.MEAN_SQRT_LEN:
        return np.stack([r.sum(axis=0) / np.float32(len(r) ** 0.5) for r in rows])
    return np.stack([r.mean(axis=0) for r in rows])


@pytest.mark.parametrize("pooling", [Pooling.CLS, Pooling.MEAN, Pooling.MAX, Pooling.MEAN_SQRT_LEN])
def test_pool_sentences_matches_hand_computation(pooling: Pooling) -> None:
    out = pool_sentences(_hidden(), MASK, pooling)
    assert out.shape == (2, 3)
    _close(out, _expected(pooling))


@pytest.mark.parametrize("pooling", [Pooling.CLS, Pooling.MEAN, Pooling.MAX, Pooling.MEAN_SQRT_LEN])
@pytest.mark.parametrize("pad_value", [100.0, -100.0, 7.5])
def test_pad_never_counts(pooling: Pooling, pad_value: float) -> None:
    clean = pool_sentences(_hidden(0.0), MASK, pooling)
    noisy = pool_sentences(_hidden(pad_value), MASK, pooling)
    _close(noisy, clean)


def test_max_pooling_all_negative_ignores_zero_pad() -> None:
    hidden = -np.ones((1, 3, 2), dtype=np.float32) * np.array([[[1.0], [2.0], [3.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])
    hidden[0, 2] = 0.0  # pad row holds zeros, larger than every real value
    _close(pool_sentences(hidden, mask, Pooling.MAX), np.array([[-1.0, -1.0]], dtype=np.float32))


def test_max_pooling_does_not_modify_its_input() -> None:
    hidden = _hidden(pad_value=42.0)
    before = hidden.copy()
    pool_sentences(hidden, MASK, Pooling.MAX)
    np.testing.assert_array_equal(hidden, before)


def test_pooler_without_pooler_raises() -> None:
    with pytest.raises(bertscope.InvalidSpec, match="pooler"):
        pool_sentences(_hidden(), MASK, Pooling.POOLER, pooler=None)


def test_pool_sentences_calls_the_given_pooler() -> None:
    out = pool_sentences(_hidden(), MASK, Pooling.POOLER, pooler=lambda h: h[:, 0] * 2)
    _close(out, _hidden()[:, 0] * 2)


# Word pooling ----------------------------------------------------------------------------------

TOKEN_VECTORS = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0], [8.0, 9.0]], dtype=np.float32)
GROUPS = [[0], [1, 2, 3], [4]]


@pytest.mark.parametrize(
    ("subword", "expected"),
    [
        (SubwordPooling.FIRST, [[0, 1], [2, 3], [8, 9]]),
        (SubwordPooling.LAST, [[0, 1], [6, 7], [8, 9]]),
        (SubwordPooling.MEAN, [[0, 1], [4, 5], [8, 9]]),
        (SubwordPooling.FIRST_LAST, [[0, 1, 0, 1], [2, 3, 6, 7], [8, 9, 8, 9]]),
    ],
)
def test_pool_words(subword: SubwordPooling, expected: list[list[float]]) -> None:
    out = pool_words(TOKEN_VECTORS, GROUPS, subword)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.float32))


def test_group_words_leaves_specials_out_and_keeps_order() -> None:
    word_ids = [None, 0, 1, 1, 2, None]
    special = [True, False, False, False, False, True]
    assert group_words(word_ids, special) == [[1], [2, 3], [4]]


def test_a_group_of_whitespace_alone_is_no_word() -> None:
    """A byte-level BPE gives a line break and a second space word ids of their own ("Ċ", "Ġ")."""
    text = "cat\n\ndog  sat"
    tok = Tokens(
        text=text,
        tokens=["[CLS]", "cat", "Ċ", "Ċ", "Ġdog", "Ġ", "Ġsat", "[SEP]"],
        ids=list(range(8)),
        offsets=[(0, 0), (0, 3), (3, 4), (4, 5), (5, 8), (8, 9), (9, 13), (0, 0)],
        word_ids=[None, 0, 1, 2, 3, 4, 5, None],
        special_tokens_mask=[True, False, False, False, False, False, False, True],
        token_type_ids=[0] * 8,
    )
    groups, spans = text_words(tok)
    assert groups == [[1], [4], [6]]
    assert [text[s:e] for s, e in spans] == ["cat", "dog", "sat"]


def test_words_of_a_byte_level_tokenizer_are_the_texts_words(tmp_path: Path) -> None:
    """embed_words gave '' words with empty spans for the line breaks and double spaces (ModernBERT's)."""
    folder = build_tiny_model("modernbert", tmp_path / "bpe", byte_level=True)
    bpe = bertscope.load(folder, device="cpu")
    text = "the cat\n\nthe dog  sat\tdown"
    assert any(t in ("Ċ", "Ġ", "ĉ") for t in bpe.tokenize(text).tokens)  # whitespace pieces of their own
    words = bpe.embed_words(text, layers="0,1", combine="stack")[0]
    assert words.words == text.split()
    assert [text[s:e] for s, e in words.spans] == words.words
    assert words.vectors.shape[:2] == (len(text.split()), 2)
    assert [p for p in words.pieces if not "".join(p).strip("ĠĊĉ")] == []
    store = tmp_path / "words.parquet"  # the corpus job's word rows read words the same way
    bertscope.embed_corpus(
        [text], store, model=bpe, level="words", layers="0,1", combine="stack", progress=False
    )
    rows = pq.read_table(store, columns=["word", "start", "end"]).to_pydict()
    assert rows["word"] == words.words and list(zip(rows["start"], rows["end"], strict=True)) == words.spans


# Through the model ---------------------------------------------------------------------------


def test_mask_special_leaves_cls_and_sep_out(bundled: bertscope.Model) -> None:
    texts = ["The cat sat on the mat.", "A short one"]
    masked = bundled.embed(texts, pooling="mean", mask_special=True, normalize=False).vectors
    plain = bundled.embed(texts, pooling="mean", normalize=False).vectors
    for i, tok in enumerate(bundled.embed_tokens(texts)):
        special = np.array(tok.special_tokens_mask)
        assert tok.tokens[0] == "[CLS]" and tok.tokens[-1] == "[SEP]"
        assert special[0] and special[-1] and not special[1:-1].any()
        np.testing.assert_allclose(masked[i], tok.vectors[~special].mean(axis=0), atol=1e-5)
        np.testing.assert_allclose(plain[i], tok.vectors.mean(axis=0), atol=1e-5)
        assert not np.allclose(masked[i], plain[i], atol=1e-3)


def test_unknown_pooling_lists_choices(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InvalidSpec) as info:
        bundled.embed("hello", pooling="average")
    message = str(info.value)
    assert "'average'" in message
    for name in ("cls", "pooler", "mean", "max", "mean_sqrt_len", "first_last_avg", "auto"):
        assert name in message


@pytest.mark.parametrize("family", ["deberta-v2", "electra"])
def test_pooler_on_model_without_pooler_raises(tiny_models: dict[str, bertscope.Model], family: str) -> None:
    model = tiny_models[family]
    assert not model.engine.has_pooler
    with pytest.raises(bertscope.InvalidSpec, match="pooler"):
        model.embed("the cat", pooling="pooler")


def test_pooler_on_bundled_equals_hf_pooler(bundled: bertscope.Model) -> None:
    texts = ["The cat sat on the mat.", "Pooling reads the first token only"]
    vectors = bundled.embed(texts, pooling="pooler").vectors
    assert vectors.shape == (2, 384)
    for text, vector in zip(texts, vectors, strict=True):
        last = torch.from_numpy(bundled.hidden_states(text)[-1])[None]
        with torch.inference_mode():
            expected = bundled.hf_model.pooler(last)[0].numpy()
        np.testing.assert_allclose(vector, expected, atol=1e-5)
        assert not np.allclose(vector, last[0, 0].numpy(), atol=1e-3)


@pytest.mark.parametrize("pooling", ["cls", "pooler"])
def test_first_token_pooling_refuses_mask_special(bundled: bertscope.Model, pooling: str) -> None:
    layers = "-4:" if pooling == "cls" else "-1"  # the pooler reads the last layer only
    with pytest.raises(bertscope.InvalidSpec, match="would do nothing: leave mask_special out"):
        bundled.embed("hello there", layers=layers, pooling=pooling, mask_special=True)
    plain = bundled.embed("hello there", layers=layers, pooling=pooling)
    assert plain.spec["mask_special"] is False and plain.vectors.shape == (1, 384)


def test_issue_example_cls_over_concatenated_layers(bundled: bertscope.Model) -> None:
    result = bundled.embed(["a cat", "a dog"], layers="-4:", combine="concat", pooling="cls", normalize=True)
    tokens = bundled.embed_tokens(["a cat", "a dog"], layers="-4:", combine="concat")
    first = np.stack([t.vectors[0] for t in tokens])
    expected = first / np.linalg.norm(first, axis=1, keepdims=True)
    np.testing.assert_allclose(result.vectors, expected, atol=1e-6)


def test_pooler_refuses_concatenated_layers(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InvalidSpec, match="one hidden-size vector"):
        bundled.embed("hello", layers="-2:", combine="concat", pooling="pooler")


def test_cls_pooling_is_the_first_token_vector(bundled: bertscope.Model) -> None:
    text = "The first token is [CLS]"
    vector = bundled.embed(text, pooling="cls").vectors[0]
    np.testing.assert_allclose(vector, bundled.embed_tokens(text)[0].vectors[0], atol=1e-6)


def test_unknown_subword_pooling_lists_choices(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InvalidSpec, match="first, last, mean, first_last"):
        bundled.embed_words("hello", subword="middle")
