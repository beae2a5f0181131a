"""The batched engine, proven against the reference implementations (transformers, sentence-transformers).

Hidden states equal the plain Hugging Face forward; pooling="auto" equals SentenceTransformer.encode;
results do not depend on batching; early stop runs no layer past the deepest one asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

import bertscope
from tiny_models import FAMILIES

LONG_PARAGRAPH = (
    "Word embeddings map each token of a vocabulary to a dense vector, and contextual models such as BERT "
    "refine those vectors layer by layer so that the same word gets a different vector in each sentence. "
)

MIXED_TEXTS = [
    "Hi",
    "The cat sat on the mat.",
    "Tokenization splits unusual words into several word pieces, like ##ization.",
    "A",
    LONG_PARAGRAPH * 2,
    "I am eating bread.",
]

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "The quick brown fox jumps over the lazy dog!",
    "Python 3.12 was released in October 2023.",
    "¿Dónde está la biblioteca? Je ne sais pas.",
    "東京は日本の首都です。",
    "emoji 🙂 and symbols #@%&*",
    "Supercalifragilisticexpialidocious tokenization",
    "ok",
    "    leading and trailing spaces    ",
    "Line one.\nLine two.\tTabbed.",
    "The bank raised interest rates; the river bank flooded.",
    LONG_PARAGRAPH * 8,  # well over 256 word pieces: both libraries truncate at 256
]


def _cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two (n, d) arrays."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.asarray((a * b).sum(axis=1))


def _reference_hidden(model: Any, tokenizer: Any, text: str, max_length: int | None = None) -> np.ndarray:
    """(L+1, tokens, d) hidden states of one unpadded text from the plain Hugging Face forward."""
    truncation = max_length is not None
    inputs = tokenizer(text, return_tensors="pt", truncation=truncation, max_length=max_length)
    with torch.inference_mode():
        out = model(**inputs, output_hidden_states=True)
    return torch.stack(out.hidden_states)[:, 0].numpy()


@pytest.fixture(scope="module")
def reference(bundled_path: Path) -> tuple[Any, Any]:
    """The bundled model and tokenizer loaded with plain transformers (eval mode, float32)."""
    model = AutoModel.from_pretrained(str(bundled_path)).eval()
    return model, AutoTokenizer.from_pretrained(str(bundled_path))


@pytest.fixture(scope="module")
def small_budget() -> bertscope.Model:
    """The bundled model with a token budget so small that almost every text gets its own batch."""
    return bertscope.load(device="cpu", token_budget=64)


# Parity with the reference forward --------------------------------------------------------------


def test_hidden_states_equal_transformers_for_a_mixed_batch(
    bundled: bertscope.Model, reference: tuple[Any, Any]
) -> None:
    model, tokenizer = reference
    results = bundled.embed_tokens(MIXED_TEXTS, layers="all", combine="concat")
    assert [r.text for r in results] == MIXED_TEXTS
    for text, result in zip(MIXED_TEXTS, results, strict=True):
        expected = _reference_hidden(model, tokenizer, text)
        assert result.tokens == tokenizer(text).tokens()
        n_tokens = expected.shape[1]
        assert result.vectors.shape == (n_tokens, 7 * 384)
        got = result.vectors.reshape(n_tokens, 7, 384).transpose(1, 0, 2)
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


def test_hidden_states_method_equals_transformers(
    bundled: bertscope.Model, reference: tuple[Any, Any]
) -> None:
    model, tokenizer = reference
    text = "Contextual vectors change from layer to layer."
    got = bundled.hidden_states(text)
    expected = _reference_hidden(model, tokenizer, text)
    assert got.shape == expected.shape == (7, len(tokenizer(text).input_ids), 384)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_family_hidden_states_equal_transformers(
    family: str, tiny_dirs: dict[str, Path], tiny_models: dict[str, bertscope.Model]
) -> None:
    model = AutoModel.from_pretrained(str(tiny_dirs[family])).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_dirs[family]))
    texts = ["the cat ate bread", "hello", "the old man saw a big red car and the dog ran to the house"]
    results = tiny_models[family].embed_tokens(texts, layers="all", combine="concat")
    n_states = tiny_models[family].n_layers + 1
    for text, result in zip(texts, results, strict=True):
        expected = _reference_hidden(model, tokenizer, text)
        n_tokens, width = expected.shape[1], expected.shape[2]
        assert result.vectors.shape == (n_tokens, n_states * width)
        got = result.vectors.reshape(n_tokens, n_states, width).transpose(1, 0, 2)
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_family_early_stop_equals_full_forward(
    family: str, tiny_models: dict[str, bertscope.Model]
) -> None:
    model = tiny_models[family]
    text = "the cat ate the bread"
    full = model.hidden_states(text)
    early = model.embed_tokens(text, layers="1")[0].vectors
    np.testing.assert_allclose(early, full[1], atol=1e-5, rtol=0)
    # and the model still gives every layer after an early-stopped call
    np.testing.assert_allclose(model.hidden_states(text), full, atol=1e-6, rtol=0)


def test_auto_pooling_equals_sentence_transformers(bundled: bertscope.Model, st_model: Any) -> None:
    assert st_model.max_seq_length == bundled.max_tokens == 256
    expected = st_model.encode(SENTENCES, convert_to_numpy=True, batch_size=8)
    result = bundled.embed(SENTENCES)
    assert result.vectors.dtype == np.float32
    assert result.vectors.shape == expected.shape == (len(SENTENCES), 384)
    assert _cosine_rows(result.vectors, expected).min() >= 0.99999
    assert np.abs(result.vectors - expected).max() <= 1e-5
    np.testing.assert_allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-5)
    assert result.n_dropped[-1] > 0 and (result.n_dropped[:-1] == 0).all()


# Batching -----------------------------------------------------------------------------------------


def _batch_texts() -> list[str]:
    """64 texts of very different lengths, in an order that length sorting must undo."""
    words = LONG_PARAGRAPH.split()
    return [" ".join(words[: 1 + (i * 37) % 40]) + f" number {i}" for i in range(64)]


def test_batch_invariance_and_order(bundled: bertscope.Model, small_budget: bertscope.Model) -> None:
    texts = _batch_texts()
    one_by_one = np.stack([bundled.embed(t).vectors[0] for t in texts])
    together = bundled.embed(texts)
    np.testing.assert_allclose(together.vectors, one_by_one, atol=1e-5, rtol=0)
    small = small_budget.embed(texts)
    np.testing.assert_allclose(small.vectors, one_by_one, atol=1e-5, rtol=0)
    # order: each text's vector is its own, not a neighbour's
    cos = one_by_one @ together.vectors.T
    assert (cos.argmax(axis=1) == np.arange(len(texts))).all()
    n_tokens = [len(bundled.tokenize(t)) for t in texts]
    assert together.n_tokens.tolist() == small.n_tokens.tolist() == n_tokens


def test_tiny_token_budget_forces_many_batches(
    bundled: bertscope.Model, small_budget: bertscope.Model
) -> None:
    texts = _batch_texts()
    sizes: list[tuple[int, int]] = []
    spec = small_budget.spec()
    chunks = list(small_budget.engine.sentences(texts, spec, on_batch=lambda n, t: sizes.append((n, t))))
    assert len(sizes) > 10
    assert sum(n for n, _ in sizes) == len(texts)
    vectors = np.concatenate([c.vectors for c in chunks])
    np.testing.assert_allclose(vectors, bundled.embed(texts).vectors, atol=1e-5, rtol=0)


def test_a_forward_fetching_every_layer_holds_its_states_within_the_bound(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token budget is sized for one hidden state: forwards that fetch all 7 of MiniLM's are cut so
    their float32 states stay within STATES_BYTES_PER_FORWARD (long rows too), one layer's are not, and
    every token's vectors are the same as under the engine's own budget."""
    from bertscope.core import engine as engine_module

    texts = _batch_texts()[:24] + [LONG_PARAGRAPH * 8]  # the last one is cut into windows of 256
    whole = bundled.embed_tokens(texts, layers="all", combine="concat", long="window")
    assert len(whole[-1].vectors) > 256
    per_token = 7 * 384 * 4
    monkeypatch.setattr(engine_module, "STATES_BYTES_PER_FORWARD", 300 * per_token)
    engine = bundled.engine
    assert engine.forward_limits(7) == (300, 1)  # one row of 256 fits 300 tokens, two do not
    assert engine.forward_limits(1) == (min(engine.token_budget, 2100), min(engine.min_rows, 2100 // 256))
    forwards: list[tuple[int, int]] = []  # (padded tokens, states fetched) of each forward
    original = engine_module.Engine.forward

    def spy(self: Any, ids: np.ndarray, type_ids: Any, mask: Any, deepest: int, layers: Any = None) -> Any:
        forwards.append((ids.size, len(layers)))
        return original(self, ids, type_ids, mask, deepest, layers)

    monkeypatch.setattr(engine_module.Engine, "forward", spy)
    cut = bundled.embed_tokens(texts, layers="all", combine="concat", long="window")
    assert forwards and all(states == 7 and tokens <= 300 for tokens, states in forwards)
    for a, b in zip(whole, cut, strict=True):
        np.testing.assert_allclose(b.vectors, a.vectors, atol=1e-5, rtol=0)
    forwards.clear()
    bundled.embed_tokens(texts[:24], layers="-1")
    assert max(tokens for tokens, _ in forwards) > 300  # one state: the engine's own budget


def test_token_vectors_do_not_depend_on_batching(
    bundled: bertscope.Model, small_budget: bertscope.Model
) -> None:
    texts = _batch_texts()[:16]
    together = bundled.embed_tokens(texts, layers="-2")
    small = small_budget.embed_tokens(texts, layers="-2")
    for text, a, b in zip(texts, together, small, strict=True):
        assert a.text == b.text == text
        single = bundled.embed_tokens(text, layers="-2")[0]
        np.testing.assert_allclose(a.vectors, single.vectors, atol=1e-5, rtol=0)
        np.testing.assert_allclose(b.vectors, single.vectors, atol=1e-5, rtol=0)


# Early stop and layer specs -----------------------------------------------------------------------


def test_layer_k_equals_full_forward_hidden_state(bundled: bertscope.Model) -> None:
    text = "Early stop must not change the vectors of the layers it runs."
    full = bundled.hidden_states(text)
    for k in (0, 1, 2, 5):
        got = bundled.embed_tokens(text, layers=str(k))[0].vectors
        np.testing.assert_allclose(got, full[k], atol=1e-5, rtol=0)


def test_early_stop_runs_no_layer_past_k() -> None:
    # the torch forward's own layers are watched: the runtime the exact default picks is not torch
    bundled = bertscope.load(device="cpu", backend="torch")
    layers = bundled.hf_model.encoder.layer
    assert len(layers) == 6
    calls = [0] * len(layers)

    def counter(index: int) -> Any:
        def hook(module: torch.nn.Module, args: Any, output: Any) -> None:
            calls[index] += 1

        return hook

    handles = [layer.register_forward_hook(counter(i)) for i, layer in enumerate(layers)]
    try:
        bundled.embed(["one text", "and another text"], layers="2", pooling="mean")
        bundled.embed_tokens("a third text", layers="2")
        stopped = list(calls)
        bundled.embed("all layers now", layers="-1")
    finally:
        for handle in handles:
            handle.remove()
    assert stopped[0] >= 2 and stopped[1] >= 2  # encoder layers 1 and 2 (hidden states 1, 2) ran
    assert stopped[2:] == [0, 0, 0, 0]  # encoder layers 3..6 never ran
    assert all(c > s for c, s in zip(calls, stopped, strict=True))
    assert len(bundled.hf_model.encoder.layer) == 6  # the full layer list is restored


def test_last_four_layers_mean_and_concat(bundled: bertscope.Model) -> None:
    text = "Several layers combine into one vector."
    full = bundled.hidden_states(text)
    mean = bundled.embed_tokens(text, layers="-4:", combine="mean")[0].vectors
    np.testing.assert_allclose(mean, full[3:7].mean(axis=0), atol=1e-5, rtol=0)
    total = bundled.embed_tokens(text, layers="-4:", combine="sum")[0].vectors
    np.testing.assert_allclose(total, full[3:7].sum(axis=0), atol=1e-4, rtol=0)
    concat = bundled.embed_tokens(text, layers="-4:", combine="concat")[0].vectors
    assert concat.shape == (full.shape[1], 4 * 384)
    np.testing.assert_allclose(concat, np.concatenate(list(full[3:7]), axis=-1), atol=1e-5, rtol=0)
    sentence = bundled.embed(text, layers="-4:", combine="concat", pooling="mean", normalize=False).vectors
    assert sentence.shape == (1, 4 * 384)
    np.testing.assert_allclose(sentence[0], concat.mean(axis=0), atol=1e-5, rtol=0)
    sentence_mean = bundled.embed(text, layers="-4:", pooling="mean", normalize=False).vectors[0]
    np.testing.assert_allclose(sentence_mean, full[3:7].mean(axis=0).mean(axis=0), atol=1e-5, rtol=0)


def test_first_last_avg(bundled: bertscope.Model) -> None:
    text = "First and last layers, averaged."
    full = bundled.hidden_states(text)
    got = bundled.embed(text, pooling="first_last_avg").vectors[0]
    np.testing.assert_allclose(got, ((full[1] + full[6]) / 2).mean(axis=0), atol=1e-5, rtol=0)
    with pytest.raises(bertscope.InvalidSpec, match="first_last_avg"):
        bundled.embed(text, pooling="first_last_avg", layers="-2")


# Words -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("subword", ["first", "last", "mean", "first_last"])
def test_word_pooling_joins_word_pieces(bundled: bertscope.Model, subword: str) -> None:
    text = "Good tokenization matters"
    tokens = bundled.embed_tokens(text, layers="-2")[0]
    assert tokens.tokens == ["[CLS]", "good", "token", "##ization", "matters", "[SEP]"]
    words = bundled.embed_words(text, subword=subword, layers="-2")[0]
    assert words.words == ["Good", "tokenization", "matters"]
    assert words.pieces == [["good"], ["token", "##ization"], ["matters"]]
    assert [text[s:e] for s, e in words.spans] == words.words
    rows = tokens.vectors
    expected = {
        "first": rows[2],
        "last": rows[3],
        "mean": rows[2:4].mean(axis=0),
        "first_last": np.concatenate([rows[2], rows[3]]),
    }[subword]
    width = 768 if subword == "first_last" else 384
    assert words.vectors.shape == (3, width)
    np.testing.assert_allclose(words.vectors[1], expected, atol=1e-6, rtol=0)
    np.testing.assert_allclose(words.vectors[0][:384], rows[1], atol=1e-6, rtol=0)


def test_word_spans_map_back_to_text(bundled: bertscope.Model) -> None:
    text = "  Héllo,   wonderful world-building!  "
    words = bundled.embed_words(text)[0]
    assert len(words.words) == len(words.spans) == words.vectors.shape[0]
    assert [text[s:e] for s, e in words.spans] == words.words
    assert "wonderful" in words.words
    starts = [s for s, _ in words.spans]
    assert starts == sorted(starts)


# Every family --------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_family_runs_every_entry_point(family: str, tiny_models: dict[str, bertscope.Model]) -> None:
    model = tiny_models[family]
    hidden = model.info().hidden_size
    texts = ["the cat ate bread", "tokenization is good"]
    sentences = model.embed(texts, pooling="mean")
    assert sentences.vectors.shape == (2, hidden) and sentences.vectors.dtype == np.float32
    assert np.isfinite(sentences.vectors).all()
    tokens = model.embed_tokens(texts)
    for text, tok in zip(texts, tokens, strict=True):
        assert tok.vectors.shape == (len(tok.tokens), hidden)
        assert np.isfinite(tok.vectors).all()
        assert len(tok.tokens) == len(model.tokenize(text))
    words = model.embed_words(texts, subword="first_last")
    for text, word in zip(texts, words, strict=True):
        assert len(word.words) >= 3
        assert word.vectors.shape == (len(word.words), 2 * hidden)
        assert np.isfinite(word.vectors).all()
        assert all(text[s:e] == w for (s, e), w in zip(word.spans, word.words, strict=True))


# Long texts ----------------------------------------------------------------------------------------


def test_truncate_reports_dropped_tokens_per_text(bundled: bertscope.Model) -> None:
    long_text = LONG_PARAGRAPH * 8
    full = len(bundled.tokenize(long_text, long="window"))
    assert full > 256
    result = bundled.embed(["short", long_text, "also short"], long="truncate")
    assert result.n_dropped.tolist() == [0, full - 256, 0]
    assert result.n_tokens.tolist()[1] == 256
    assert result.n_truncated == 1
    tokens = bundled.embed_tokens(long_text)[0]
    assert tokens.n_dropped == full - 256 and tokens.vectors.shape[0] == 256
    assert tokens.tokens[-1] == "[SEP]"


def test_long_error_raises(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InputTooLong) as info:
        bundled.embed(["short", LONG_PARAGRAPH * 8], long="error")
    assert "text 1" in str(info.value) and "256" in str(info.value)
    assert bundled.embed("short", long="error").vectors.shape == (1, 384)


def test_window_gives_a_vector_for_every_token(bundled: bertscope.Model) -> None:
    text = LONG_PARAGRAPH * 15
    full = bundled.tokenize(text, long="window")
    assert 2.2 * 256 < len(full) < 2.8 * 256
    window = bundled.embed_tokens(text, long="window")[0]
    assert window.tokens == full.tokens
    assert window.vectors.shape == (len(full), 384)
    assert window.n_dropped == 0
    assert np.isfinite(window.vectors).all()
    # the start comes from the first window, which is exactly the truncated text
    truncated = bundled.embed_tokens(text, long="truncate")[0]
    np.testing.assert_allclose(window.vectors[:64], truncated.vectors[:64], atol=1e-5, rtol=0)
    # sentence vectors pool over all the stitched tokens
    sentence = bundled.embed(text, long="window", pooling="mean", normalize=False)
    np.testing.assert_allclose(sentence.vectors[0], window.vectors.mean(axis=0), atol=1e-5, rtol=0)
    assert sentence.n_dropped.tolist() == [0]
    assert sentence.n_tokens.tolist() == [len(full)]


def test_window_equals_truncate_for_short_texts(bundled: bertscope.Model) -> None:
    texts = ["A short text fits in one window.", LONG_PARAGRAPH]
    window = bundled.embed(texts, long="window").vectors
    truncate = bundled.embed(texts, long="truncate").vectors
    np.testing.assert_array_equal(window, truncate)
    for a, b in zip(bundled.embed_tokens(texts, long="window"), bundled.embed_tokens(texts), strict=True):
        np.testing.assert_array_equal(a.vectors, b.vectors)


# Streaming -----------------------------------------------------------------------------------------


def test_iter_embed_streams_in_bounded_chunks(tiny_models: dict[str, bertscope.Model]) -> None:
    model = tiny_models["bert"]
    vocabulary = ["the", "cat", "dog", "ate", "bread", "good", "car", "tree", "house", "day"]
    texts = [
        f"{vocabulary[i % 10]} {vocabulary[(i // 10) % 10]} {vocabulary[(i // 100) % 10]}"
        for i in range(5000)
    ]
    consumed = 0

    def stream() -> Iterator[str]:
        nonlocal consumed
        for text in texts:
            consumed += 1
            yield text

    chunks = model.iter_embed(stream(), pooling="mean")
    first = next(chunks)
    assert consumed <= 4096 + 1  # the generator is not drained to make the first chunk
    rest = list(chunks)
    sizes = [len(first)] + [len(c) for c in rest]
    assert len(sizes) > 1
    assert max(sizes) <= 4096
    assert sum(sizes) == 5000
    vectors = np.concatenate([first.vectors] + [c.vectors for c in rest])
    picks = [0, 1, 999, 4095, 4096, 4999]
    expected = model.embed([texts[i] for i in picks], pooling="mean").vectors
    np.testing.assert_allclose(vectors[picks], expected, atol=1e-5, rtol=0)


def test_iter_embed_rejects_bad_items_in_a_stream(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InvalidInput, match="text 1"):
        list(bundled.iter_embed(iter(["fine", 42])))  # type: ignore[list-item]


# Similarity ----------------------------------------------------------------------------------------


def test_similarity_is_cosine_of_embed_vectors(bundled: bertscope.Model) -> None:
    a = ["A man is eating food.", "The stock market fell today."]
    b = ["Someone eats a meal."]
    sims = bundled.similarity(a, b, pooling="mean", normalize=False)
    assert sims.shape == (2, 1)
    assert ((sims >= -1.0) & (sims <= 1.0 + 1e-6)).all()
    left = bundled.embed(a, pooling="mean", normalize=False).vectors
    right = bundled.embed(b, pooling="mean", normalize=False).vectors
    left = left / np.linalg.norm(left, axis=1, keepdims=True)
    right = right / np.linalg.norm(right, axis=1, keepdims=True)
    np.testing.assert_allclose(sims, left @ right.T, atol=1e-5, rtol=0)
    assert sims[0, 0] > sims[1, 0]
    square = bundled.similarity(a)
    assert square.shape == (2, 2)
    np.testing.assert_allclose(np.diag(square), 1.0, atol=1e-5)


# Bad input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"layers": "9"}, "0..6"),
        ({"layers": 9}, "0..6"),
        ({"layers": "1:2:3"}, "0..6"),
        ({"layers": "two"}, "0..6"),
        ({"pooling": "average"}, "mean_sqrt_len"),
        ({"combine": "avg"}, "concat"),
        ({"long": "chop"}, "window"),
    ],
)
def test_bad_options_raise_invalid_spec(
    bundled: bertscope.Model, options: dict[str, Any], needle: str
) -> None:
    with pytest.raises(bertscope.InvalidSpec) as info:
        bundled.embed("hello", **options)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("texts", "needle"),
    [
        ([], "at least one"),
        ("", "empty"),
        ("   ", "empty"),
        (["ok", ""], "text 1"),
        (["ok", 3], "not a string"),
        ([None], "not a string"),
        (b"bytes", "string"),
        (42, "string"),
    ],
)
def test_bad_texts_raise_invalid_input(bundled: bertscope.Model, texts: Any, needle: str) -> None:
    for call in (bundled.embed, bundled.embed_tokens, bundled.embed_words):
        with pytest.raises(bertscope.InvalidInput) as info:
            call(texts)
        assert needle in str(info.value)


# Faster modes ----------------------------------------------------------------------------------------


def test_bfloat16_stays_close_to_float32(bundled: bertscope.Model) -> None:
    bf16 = bertscope.load(device="cpu", dtype="bfloat16")
    assert bf16.info().dtype == "bfloat16"
    texts = SENTENCES[:-1]  # short ones: bfloat16 matmuls are slow on CPU
    low = bf16.embed(texts).vectors
    high = bundled.embed(texts).vectors
    assert low.dtype == np.float32 and low.shape == high.shape
    assert _cosine_rows(low, high).min() >= 0.999
    assert not np.array_equal(low, high)


def test_long_documents_take_fewer_forwards_results_unchanged(tiny_dirs: dict[str, Path]) -> None:
    # 8 documents of the full 64 tokens under a default budget of 128 tokens (the tiny model's scale of
    # 8 x 512 tokens under 2,048): 4 forwards of 2 before the budget adapted to long rows, 1 forward now;
    # the vectors equal one document per forward.
    docs = [" ".join(f"word{i} number{j}" for j in range(40)) for i in range(8)]
    m = bertscope.load(tiny_dirs["bert"], device="cpu")
    m.engine.token_budget = 128
    calls: list[int] = []
    forward = m.engine.forward
    m.engine.forward = lambda ids, *rest: calls.append(len(ids)) or forward(ids, *rest)  # type: ignore[method-assign]
    got = m.embed(docs, long="truncate").vectors
    assert calls == [8]
    one = bertscope.load(tiny_dirs["bert"], device="cpu", token_budget=64)
    one.engine.max_batch = 1
    np.testing.assert_allclose(got, np.stack([one.embed([d]).vectors[0] for d in docs]), atol=1e-5, rtol=0)
