"""A long text's layers a few windows at a time (engine.token_blocks, research.states.layer_blocks): the
same rows as the whole-text matrix, in order, and CKA over them equal to CKA over the whole rows."""

from __future__ import annotations

import numpy as np
import pytest

import bertscope
from bertscope.research.cka import _rows, cka_of_arrays
from bertscope.research.states import LONG_TOKENS, layer_blocks, layer_states

WORDS = "the river bank was quiet while the bank in town opened its doors to a long line".split()


def _long_text(n_words: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n_words))


@pytest.mark.parametrize("family", ["bert", "roberta", "modernbert"])
def test_token_blocks_are_the_stitched_matrix_in_order(
    tiny_models: dict[str, bertscope.Model], family: str
) -> None:
    model = tiny_models[family]
    spec = model.spec(layers="all", combine="concat", long="window")
    texts = ["a short one", _long_text(400)]
    fitted = model.engine.prepare(texts, spec)
    whole = [matrix for _, matrix in model.engine.fitted_token_matrices(fitted, spec)]
    for tok, matrix in zip(fitted, whole, strict=True):
        blocks = list(model.engine.token_blocks(tok, spec, windows_per_block=2))
        assert (len(blocks) > 1) is (len(tok) > model.max_tokens)
        np.testing.assert_allclose(np.concatenate(blocks), matrix, atol=1e-6)


def test_layer_blocks_bound_a_long_text_and_give_layer_states_rows(
    tiny_models: dict[str, bertscope.Model],
) -> None:
    model = tiny_models["bert"]
    texts = ["a short one", _long_text(LONG_TOKENS + 500), "another short text"]
    blocks = list(layer_blocks(model, texts))
    assert [n for n, _, _, last in blocks if last] == [0, 1, 2]
    long_blocks = [states for n, _, states, _ in blocks if n == 1]
    assert len(long_blocks) > 1 and max(b.shape[1] for b in long_blocks) < LONG_TOKENS
    for number, (_, states) in enumerate(layer_states(model, texts)):
        joined = np.concatenate([s for n, _, s, _ in blocks if n == number], axis=1)
        np.testing.assert_allclose(joined, states, atol=1e-6)


@pytest.mark.parametrize("level", ["token", "sentence"])
def test_cka_of_a_long_text_equals_cka_of_its_whole_rows(
    tiny_models: dict[str, bertscope.Model], level: str
) -> None:
    from bertscope.research.cka import CkaLevel

    model, other = tiny_models["bert"], tiny_models["bert"]
    texts = [_long_text(LONG_TOKENS + 300), *(f"{w} and {v}" for w, v in zip(WORDS, WORDS[1:], strict=False))]
    whole = np.concatenate([_rows(states, CkaLevel(level)) for _, states in layer_states(model, texts)])
    expected = cka_of_arrays(whole)
    np.testing.assert_allclose(model.cka(texts, level=level).cka, expected, atol=1e-5)
    np.testing.assert_allclose(model.cka(texts, other, level=level).cka, expected, atol=1e-5)


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_late_chunks_of_a_long_document_are_pooled_block_by_block(
    tiny_models: dict[str, bertscope.Model], monkeypatch: pytest.MonkeyPatch, pooling: str
) -> None:
    from bertscope import chunk_embed

    model = tiny_models["bert"]
    docs = [_long_text(400), "a short one. And a second sentence.", _long_text(300)]
    options = {"chunks": "tokens", "chunk_size": 40, "chunk_overlap": 10, "pooling": pooling}
    whole = model.embed_chunks(docs, **options)  # each document's matrix held whole
    streamed: list[int] = []
    real = model.engine.token_blocks
    monkeypatch.setattr(
        model.engine, "token_blocks", lambda tok, spec, **kw: streamed.append(1) or real(tok, spec, **kw)
    )
    monkeypatch.setattr(chunk_embed, "LONG_TOKENS", 100)
    blocked = model.embed_chunks(docs, **options)
    assert streamed == [1, 1], "the two long documents ran a few windows at a time"
    for a, b in zip(whole, blocked, strict=True):
        assert a.spans == b.spans and np.array_equal(a.n_tokens, b.n_tokens)
        np.testing.assert_allclose(b.vectors, a.vectors, atol=1e-6)


def test_streamed_span_pooling_equals_pooling_the_whole_matrix() -> None:
    from bertscope.chunk_embed import _pool_streamed, pool_spans
    from bertscope.core._enums import Pooling

    matrix = np.random.default_rng(0).normal(size=(50, 6)).astype(np.float32)
    rows = [list(range(0, 12)), list(range(8, 20)), [21, 22, 24], list(range(24, 50)), list(range(30, 31))]
    blocks = [matrix[i : i + 7] for i in range(0, 50, 7)]
    for pooling in (Pooling.MEAN, Pooling.MAX, Pooling.MEAN_SQRT_LEN):
        np.testing.assert_array_equal(
            _pool_streamed(iter(blocks), rows, pooling), pool_spans(matrix, rows, pooling)
        )
