"""ModernBERT against the plain Hugging Face forward: padded batches, local/global attention, long texts.

The tiny model (tests/tiny_models.py) has one global layer and one sliding-window layer whose window is
`MODERNBERT_WINDOW` tokens; the texts below reach well past it. The cross-family tests (engine, anatomy,
folder, ...) cover the rest of the family through the `tiny_models` parametrisation.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from fastapi.testclient import TestClient
from transformers import AutoModel, AutoTokenizer
from typer.testing import CliRunner

import bertscope
from bertscope.backends import exact
from bertscope.cli.app import app as cli_app
from bertscope.core.engine import as_array
from bertscope.core.tokens import pad_batch
from bertscope.server import create_app
from test_io import write_txt
from tiny_models import MODERNBERT_WINDOW, build_tiny_model

ATOL = 1e-5
SENTENCE = "the old man saw a big red car and the dog ran to the house"
LONG = " ".join([SENTENCE] * 4)  # 62 tokens: past the 16-token window, within the 64 positions
TEXTS = ["hi", LONG, "the cat ate bread", SENTENCE]


@pytest.fixture(scope="module")
def m(tiny_models: dict[str, bertscope.Model]) -> bertscope.Model:
    return tiny_models["modernbert"]


@pytest.fixture(scope="module")
def folder(tiny_dirs: dict[str, Path]) -> Path:
    return tiny_dirs["modernbert"]


@pytest.fixture(scope="module")
def hf(folder: Path) -> torch.nn.Module:
    return AutoModel.from_pretrained(str(folder)).eval()


def _hf_states(hf: torch.nn.Module, ids: list[int]) -> np.ndarray:
    """(layers + 1, tokens, d): one text alone (no padding) through the plain Hugging Face forward."""
    with torch.inference_mode():
        out = hf(input_ids=torch.tensor([ids]), output_hidden_states=True)
    return torch.stack(out.hidden_states)[:, 0].numpy()


def test_the_tiny_model_alternates_global_and_local_attention(m: bertscope.Model) -> None:
    assert m.hf_model.config.layer_types == ["full_attention", "sliding_attention"]
    assert len(m.tokenize(LONG)) > 3 * MODERNBERT_WINDOW


def test_a_padded_batch_of_very_different_lengths_equals_each_text_alone(
    m: bertscope.Model, hf: torch.nn.Module, folder: Path
) -> None:
    tokens = [m.tokenize(t) for t in TEXTS]
    ids, mask = pad_batch([t.ids for t in tokens], m.pad_id)
    assert mask.sum(axis=1).tolist() == [4, 62, 6, 17]  # 58 pads on the shortest row
    states = m.engine.forward(ids, np.zeros_like(ids), mask, m.n_layers)
    assert len(states) == m.n_layers + 1
    batch = AutoTokenizer.from_pretrained(str(folder))(TEXTS, padding=True, return_tensors="pt")
    with torch.inference_mode():
        hf_padded = hf(**batch, output_hidden_states=True).hidden_states
    for row, tok in enumerate(tokens):
        alone = _hf_states(hf, tok.ids)
        got = np.stack([as_array(s)[row, : len(tok)] for s in states])
        np.testing.assert_allclose(got, alone, atol=ATOL, rtol=0)
        padded = np.stack([s[row, : len(tok)].numpy() for s in hf_padded])
        np.testing.assert_allclose(got, padded, atol=ATOL, rtol=0)
    # the public path (length-sorted batches, pad trimmed) gives the same vectors
    for tok, result in zip(tokens, m.embed_tokens(TEXTS, layers="all", combine="stack"), strict=True):
        np.testing.assert_allclose(result.vectors.transpose(1, 0, 2), _hf_states(hf, tok.ids), atol=ATOL)


def test_early_stop_skips_the_final_norm(m: bertscope.Model, hf: torch.nn.Module) -> None:
    ids = m.tokenize(LONG).ids
    expected = _hf_states(hf, ids)
    layer1 = m.embed_tokens(LONG, layers=1)[0].vectors
    np.testing.assert_allclose(layer1, expected[1], atol=ATOL, rtol=0)
    last = m.embed_tokens(LONG, layers=-1)[0].vectors  # the final LayerNorm of layer 2's output
    with torch.inference_mode():
        np.testing.assert_allclose(last, hf(input_ids=torch.tensor([ids]))[0][0].numpy(), atol=ATOL)
    assert isinstance(m.hf_model.final_norm, torch.nn.LayerNorm)  # put back after the early stop


def test_attentions_equal_eager_output_attentions_and_show_the_window(
    m: bertscope.Model, folder: Path
) -> None:
    eager = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    ids = m.tokenize(LONG).ids
    with torch.inference_mode():
        expected = torch.stack(eager(input_ids=torch.tensor([ids]), output_attentions=True).attentions)
    got = m.attentions(LONG)
    np.testing.assert_allclose(got, expected[:, 0].numpy(), atol=ATOL, rtol=0)
    distance = np.abs(np.subtract.outer(np.arange(len(ids)), np.arange(len(ids))))
    outside = distance > MODERNBERT_WINDOW // 2
    assert (got[0][:, outside] > 0).all()  # layer 1: global
    assert (got[1][:, outside] == 0).all() and (got[1][:, ~outside] > 0).all()  # layer 2: local


def test_pooling_equals_the_hf_states_and_pooler_is_refused(m: bertscope.Model, hf: torch.nn.Module) -> None:
    texts = ["the cat ate bread", LONG]
    last = [_hf_states(hf, m.tokenize(t).ids)[-1] for t in texts]
    expected = {
        "cls": [s[0] for s in last],
        "mean": [s.mean(axis=0) for s in last],
        "max": [s.max(axis=0) for s in last],
    }
    for pooling, rows in expected.items():
        got = m.embed(texts, pooling=pooling, normalize=False).vectors
        np.testing.assert_allclose(got, np.stack(rows), atol=ATOL, rtol=0)
    with pytest.raises(bertscope.InvalidSpec, match="no trained pooler; use pooling='cls' or 'mean'"):
        m.embed("a cat", pooling="pooler")


def test_long_texts_truncate_and_window(m: bertscope.Model, hf: torch.nn.Module) -> None:
    text = " ".join([SENTENCE] * 10)
    full = m.tokenize(text, long="window")
    assert m.max_tokens == 64 and len(full) == 152
    cut = m.embed_tokens(text, long="truncate")[0]
    assert cut.n_dropped == 152 - 64 and cut.tokens[-1] == "[SEP]"
    np.testing.assert_allclose(cut.vectors, _hf_states(hf, m.tokenize(text).ids)[-1], atol=ATOL)
    window = m.embed_tokens(text, long="window")[0]
    assert window.tokens == full.tokens and window.vectors.shape == (152, 32) and window.n_dropped == 0
    np.testing.assert_allclose(window.vectors[:16], cut.vectors[:16], atol=ATOL, rtol=0)


def test_a_long_context_model_takes_its_whole_length(tmp_path: Path) -> None:
    folder = build_tiny_model("modernbert", tmp_path / "long", max_positions=8192)
    long_model = bertscope.load(folder, device="cpu")
    assert long_model.max_tokens == 8192 and long_model.info().max_positions == 8192
    text = " ".join([SENTENCE] * 150)  # 2,252 tokens in one forward, no window
    result = long_model.embed_tokens(text)[0]
    assert len(result.tokens) == 2252 and result.n_dropped == 0
    expected = _hf_states(AutoModel.from_pretrained(str(folder)).eval(), long_model.tokenize(text).ids)
    np.testing.assert_allclose(result.vectors, expected[-1], atol=ATOL, rtol=0)


def test_the_anatomy_says_positions_are_rotary(m: bertscope.Model, hf: torch.nn.Module) -> None:
    a = m.anatomy(LONG)
    assert a.lacks == ("position", "token_type", "projection") and a.position is None
    assert a.positions_in_attention == "rotary" and a.position_ids == list(range(62))
    assert any("rotary" in note for note in a.notes) and any("no bias" in note for note in a.notes)
    assert m.hf_model.embeddings.norm.bias is None
    # word rows -> LayerNorm (no bias) is the model's own embedding output
    with torch.inference_mode():
        own = hf.embeddings(input_ids=torch.tensor([a.tokens.ids]))[0].numpy()
    np.testing.assert_array_equal(a.word, hf.embeddings.tok_embeddings.weight.detach().numpy()[a.tokens.ids])
    np.testing.assert_allclose(a.normalized, own, atol=ATOL, rtol=0)
    assert a.max_abs_error < ATOL
    info = m.info()
    assert info.family == "modernbert" and info.positions_in_attention == "rotary"


def test_cli_anatomy_names_the_rotary_positions(folder: Path) -> None:
    result = CliRunner().invoke(cli_app, ["anatomy", "a cat ate bread", "-m", str(folder)])
    assert result.exit_code == 0, result.output
    assert "positions are rotary" in result.output and "LayerNorm has no bias" in result.output


def test_token_word_and_chunk_stores(tmp_path: Path, m: bertscope.Model, hf: torch.nn.Module) -> None:
    texts = ["the cat ate bread", LONG]
    source = write_txt(tmp_path, texts)
    tokens_out = tmp_path / "tokens.parquet"
    bertscope.embed_corpus(source, tokens_out, model=m, level="tokens", layers="1,2", combine="stack")
    table = pq.read_table(tokens_out)
    stored = {name: np.array(table.column(name).to_pylist()) for name in ("layer_1", "layer_2")}
    expected = np.concatenate([_hf_states(hf, m.tokenize(t).ids) for t in texts], axis=1)
    np.testing.assert_allclose(stored["layer_1"], expected[1], atol=ATOL, rtol=0)
    np.testing.assert_allclose(stored["layer_2"], expected[2], atol=ATOL, rtol=0)
    words_out = tmp_path / "words.parquet"
    bertscope.embed_corpus(source, words_out, model=m, level="words", subword="mean")
    words = m.embed_words(texts, subword="mean")
    assert pq.read_table(words_out).column("word").to_pylist() == [w for r in words for w in r.words]
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"id": "a", "text": f"{SENTENCE}. {LONG}. The cat ate bread."}) + "\n")
    chunks_out = tmp_path / "chunks.parquet"
    bertscope.embed_corpus(docs, chunks_out, model=m, id_field="id", level="chunks", chunks="sentence")
    chunks = m.embed_chunks([json.loads(docs.read_text())["text"]], chunks="sentence")[0]
    got = np.array(pq.read_table(chunks_out).column("embedding").to_pylist(), dtype=np.float32)
    np.testing.assert_allclose(got, chunks.vectors, atol=1e-6)


def test_the_service_serves_it(m: bertscope.Model) -> None:
    with TestClient(create_app(m)) as client:
        info = client.get("/v2/info").json()
        assert info["family"] == "modernbert" and info["positions_in_attention"] == "rotary"
        body = {"inputs": TEXTS, "pooling": "mean", "normalize": False}
        answer = client.post("/v2/embed", json=body)
        assert answer.status_code == 200, answer.text
        expected = m.embed(TEXTS, pooling="mean", normalize=False).vectors
        np.testing.assert_allclose(np.array(answer.json()["vectors"]), expected, atol=ATOL)
        tei = client.post("/embed", json={"inputs": ["a cat", SENTENCE]})
        assert tei.status_code == 200 and np.array(tei.json()).shape == (2, 32)
        anatomy = client.post("/anatomy", json={"inputs": "a cat"}).json()
        assert anatomy["positions_in_attention"] == "rotary" and anatomy["max_abs_error"] < ATOL


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_exported_runtimes_equal_torch_at_every_layer(
    backend: str, folder: Path, m: bertscope.Model, cache: Path
) -> None:
    pytest.importorskip(backend)
    other = bertscope.load(folder, device="cpu", backend=backend)
    assert other.info().backend == backend
    tokens = [m.tokenize(t) for t in TEXTS]
    ids, mask = pad_batch([t.ids for t in tokens], m.pad_id)
    want = m.engine.forward(ids, np.zeros_like(ids), mask, m.n_layers)
    got = other.engine.forward(ids, np.zeros_like(ids), mask, m.n_layers)
    for row, tok in enumerate(tokens):  # the sliding-window mask was traced, not frozen at the export's size
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(as_array(a)[row, : len(tok)], as_array(b)[row, : len(tok)], atol=ATOL)


def test_the_exact_default_chooses_an_exact_runtime(
    folder: Path, m: bertscope.Model, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exact, "MIN_PARAMETERS", 0)
    chosen = bertscope.load(folder, device="cpu")
    assert chosen.exact_choice is not None and chosen.exact_choice["max_abs"] <= ATOL
    assert chosen.info().backend == chosen.exact_choice["chosen"].split()[0]
    for a, b in zip(
        chosen.embed_tokens(TEXTS, layers="all"), m.embed_tokens(TEXTS, layers="all"), strict=True
    ):
        np.testing.assert_allclose(a.vectors, b.vectors, atol=ATOL, rtol=0)


def test_mean_pooling_equals_sentence_transformers(m: bertscope.Model, folder: Path) -> None:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(folder), device="cpu")  # a plain folder: Transformer + mean Pooling
    expected = st.encode(TEXTS, convert_to_numpy=True, batch_size=2)
    np.testing.assert_allclose(m.embed(TEXTS, pooling="mean", normalize=False).vectors, expected, atol=ATOL)


def test_a_byte_level_tokenizer_gives_words_without_their_space(tmp_path: Path) -> None:
    """ModernBERT ships a byte-level BPE whose offsets keep the space before a word ("Ġlike" at " like")."""
    folder = build_tiny_model("modernbert", tmp_path / "bpe", byte_level=True)
    bpe = bertscope.load(folder, device="cpu")
    text = "I like eating bread, tokenization!"
    tokens = bpe.tokenize(text)
    hf = AutoTokenizer.from_pretrained(str(folder))(text, return_offsets_mapping=True)
    assert tokens.ids == hf["input_ids"] and tokens.offsets == [tuple(o) for o in hf["offset_mapping"]]
    spaced = [i for i, t in enumerate(tokens.tokens) if t.startswith("Ġ")]
    assert spaced and all(text[tokens.offsets[i][0]] == " " for i in spaced)  # the space is in the piece
    words = bpe.embed_words(text)[0]
    assert words.words == ["I", "like", "eating", "bread", ",", "tokenization", "!"]
    assert all(text[s:e] == w for (s, e), w in zip(words.spans, words.words, strict=True))
    source = write_txt(tmp_path, [text])
    bertscope.embed_corpus(source, tmp_path / "words.parquet", model=bpe, level="words")
    table = pq.read_table(tmp_path / "words.parquet")
    assert table.column("word").to_pylist() == words.words
    assert table.column("start").to_pylist() == [s for s, _ in words.spans]
