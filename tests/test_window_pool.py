"""A long text's sentence vector pooled window by window (core/segments.py `WindowPool`): the vector the
stitched matrix pooled gives, without the stitched matrix; and progress that counts a windowed text once."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.core import engine as engine_module
from bertscope.core.segments import WindowPool, stitch
from bertscope.core.tokens import Tokens
from tiny_models import config_variant

WORDS = "the cat sat on a mat and a dog ran to the house of an old man who was eating bread".split()


def _long_text(n_words: int, shift: int = 0) -> str:
    return " ".join(WORDS[(i * 7 + shift) % len(WORDS)] for i in range(n_words))


def _stitched_pooled(model: bertscope.Model, texts: list[str], **options: Any) -> np.ndarray:
    """The in-memory path: each text's windows stitched into its (tokens, d) matrix, then pooled whole."""
    spec = model.spec(**options)
    engine = model.engine
    fitted = engine.prepare(texts, spec)
    rows = []
    for tok, matrix in engine.fitted_token_matrices(fitted, spec):
        keep = np.array(
            [[0.0 if s and spec.mask_special else 1.0 for s in tok.special_tokens_mask]], np.float32
        )
        rows.append(engine._pool(matrix[None], keep, spec)[0])
    return np.stack(rows)


def _assert_close(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal within 1e-6 of each vector's scale (at least 1): float32 rounding of sums in another order
    (mean_sqrt_len's unnormalised vectors of the tiny model reach a length of ~85: float32 holds ~1e-5)."""
    assert got.shape == expected.shape
    scale = np.maximum(np.linalg.norm(expected, axis=1), 1.0)
    assert (np.abs(got - expected).max(axis=1) <= 1e-6 * scale).all(), np.abs(got - expected).max(axis=1)


@pytest.mark.parametrize("pooling", ["mean", "max", "cls", "mean_sqrt_len", "first_last_avg", "pooler"])
@pytest.mark.parametrize(("mask_special", "stride"), [(False, None), (True, 7)])
def test_windowed_sentence_vectors_equal_the_stitched_matrix_pooled(
    tiny_models: dict[str, bertscope.Model], pooling: str, mask_special: bool, stride: int | None
) -> None:
    model = tiny_models["bert"]
    texts = ["a short one", _long_text(150), _long_text(61, 3), _long_text(333, 5)]
    mask_special = mask_special and pooling not in ("cls", "pooler")  # those read the first token itself
    options: dict[str, Any] = dict(pooling=pooling, mask_special=mask_special, stride=stride, long="window")
    assert [len(model.tokenize(t, long="window")) > model.max_tokens for t in texts] == [0, 1, 0, 1]
    expected = _stitched_pooled(model, texts, **options)
    got = model.embed(texts, **options).vectors
    _assert_close(got, expected)


@pytest.mark.parametrize("pooling", ["auto", "cls", "max"])
def test_bundled_windowed_sentence_vectors_equal_the_stitched_matrix_pooled(
    bundled: bertscope.Model, pooling: str
) -> None:
    texts = [_long_text(700), "A short sentence."]
    assert len(bundled.tokenize(texts[0], long="window")) > 2 * bundled.max_tokens
    expected = _stitched_pooled(bundled, texts, pooling=pooling, long="window")
    got = bundled.embed(texts, pooling=pooling, long="window").vectors
    _assert_close(got, expected)


def test_sentence_vectors_of_a_long_text_never_stitch_its_matrix(
    tiny_models: dict[str, bertscope.Model], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The design property: a long text's windows go into running sums (d,) as they come; no stitched
    (tokens, d) matrix, no window kept past its batch."""
    model = tiny_models["bert"]
    expected = model.embed([_long_text(400)], long="window", pooling="mean").vectors

    def refused(*args: Any, **kwargs: Any) -> np.ndarray:
        raise AssertionError("a sentence vector stitched the text's whole matrix")

    held: list[int] = []
    real_add = WindowPool.add

    def add(pool: WindowPool, k: int, window: np.ndarray) -> None:
        real_add(pool, k, window)
        kept = [v for v in vars(pool).values() if isinstance(v, np.ndarray) and v is not pool.keep]
        held.append(sum(v.nbytes for v in kept if v is not pool.weights))

    monkeypatch.setattr(engine_module, "stitch", refused)
    monkeypatch.setattr(WindowPool, "add", add)
    got = model.embed([_long_text(400)], long="window", pooling="mean").vectors
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    assert len(held) > 10, "the text ran as many windows"
    assert max(held) <= model.engine.hidden_size * 8, (
        "a pool holds one (d,) running sum, whatever the text's length"
    )


def test_memory_of_a_long_text_is_bounded_by_its_batches(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    """Traced memory above the text's own tokens stays within a few batches of windows, far below the
    text's stitched matrix (and its windows, which overlap twice)."""
    wide = config_variant(
        tiny_dirs, tmp_path, "bert", hidden_size=512, intermediate_size=64, num_hidden_layers=1
    )
    model = bertscope.load(wide, device="cpu")
    spec = model.spec(long="window", pooling="mean")
    fitted = model.engine.prepare([_long_text(12000)], spec)
    n_tokens, d = len(fitted[0]), model.engine.hidden_size
    budget, min_rows = model.engine.forward_limits(len(spec.layers))
    batch_bytes = max(budget, min_rows * model.max_tokens) * d * 4
    # a few batches in flight, and what the text's windows cost as rows (ids, type ids, specials) and
    # its layout (the window of each token): tens of bytes a token, as its Tokens do
    bound = 4 * batch_bytes + 100 * n_tokens
    assert n_tokens * d * 4 > 2 * bound, "the text's matrix alone would pass the bound"
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        model.engine.fitted_sentences(fitted, spec)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert peak < bound, (peak, bound)


def test_stitch_keeps_each_token_from_its_most_central_window(
    tiny_models: dict[str, bertscope.Model],
) -> None:
    model = tiny_models["bert"]
    tok: Tokens = model.tokenize(_long_text(200), long="window")
    windows = tok.windows(model.max_tokens, 9)
    # each window's rows: the text's token positions, so the stitched matrix says which token each row is
    parts = []
    for w in windows:
        positions = [*range(w.n_prefix), *range(w.n_prefix + w.content_start, w.n_prefix + w.content_stop)]
        positions += list(range(len(tok) - tok.n_suffix, len(tok)))
        parts.append(np.array(positions, dtype=np.float32)[:, None])
    stitched = stitch(tok, parts, model.max_tokens, 9)
    assert stitched[:, 0].tolist() == list(range(len(tok)))


def test_progress_counts_a_windowed_text_once(tiny_models: dict[str, bertscope.Model]) -> None:
    model = tiny_models["bert"]
    texts = [_long_text(900), "a short one", _long_text(300, 2)]
    spec = model.spec(long="window")
    calls: list[tuple[int, int]] = []
    model.engine.fitted_sentences(
        model.engine.prepare(texts, spec), spec, on_batch=lambda n, t: calls.append((n, t))
    )
    assert len(calls) > 1, "the windows ran in several batches"
    assert sum(n for n, _ in calls) == len(texts), calls
    done = np.cumsum([n for n, _ in calls])
    assert done[-1] == len(texts) and (done <= len(texts)).all()


def test_token_blocks_report_tokens_as_they_run_and_the_text_once(
    tiny_models: dict[str, bertscope.Model],
) -> None:
    model = tiny_models["bert"]
    spec = model.spec(long="window")
    tok = model.engine.prepare([_long_text(900)], spec)[0]
    calls: list[tuple[int, int]] = []
    blocks = model.engine.token_blocks(
        tok, spec, windows_per_block=4, on_batch=lambda n, t: calls.append((n, t))
    )
    first = next(blocks)
    assert calls and sum(n for n, _ in calls) == 0 and sum(t for _, t in calls) > 0, "tokens before the end"
    rest = list(blocks)
    assert sum(len(b) for b in [first, *rest]) == len(tok)
    assert sum(n for n, _ in calls) == 1
    n_windows = tok.n_windows(model.max_tokens, None)
    assert sum(t for _, t in calls) == n_windows * model.max_tokens


def test_late_chunks_of_a_book_length_document_show_progress_before_the_end(
    tiny_models: dict[str, bertscope.Model], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope import chunk_embed

    model = tiny_models["bert"]
    monkeypatch.setattr(chunk_embed, "LONG_TOKENS", 100)
    calls: list[tuple[int, int]] = []
    spec = model.spec(long="window")
    docs = [(_long_text(900), [(0, 20), (30, 200)])]
    out = list(
        chunk_embed.iter_chunk_embeddings(
            model.engine, docs, spec, late=True, settings={}, on_batch=lambda n, t: calls.append((n, t))
        )
    )
    assert len(out) == 1
    assert len(calls) > 2 and calls[0][0] == 0 and sum(n for n, _ in calls) == 1
