"""The token limit follows the model's own config, as sentence-transformers reads it (core/folder.py's
`token_limit`): sentence_bert_config.json's `max_seq_length` where it sets one, whatever the tokenizer's
`model_max_length`, capped at the usable positions; else min(positions, model_max_length). Light path
(backend="onnxruntime", the folder opened without torch) and torch alike, against SentenceTransformer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from tiny_models import build_tiny_model

BACKENDS = ["onnxruntime", "torch"]
# 8 word pieces a repeat: 20 repeats run far past every limit here
LONG = " ".join(["the cat ate bread and the dog ate"] * 20)
TEXTS = [LONG, "a dog ate an apple"]


def _st_folder(tmp_path: Path, family: str, *, tokenizer_max: int, max_seq_length: int | None) -> Path:
    """A sentence-transformers folder (tiny `family`, mean pooling) whose tokenizer_config.json says
    `tokenizer_max` and whose sentence_bert_config.json says `max_seq_length` (None: no such key)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    tiny = build_tiny_model(family, tmp_path / f"tiny_{family}")
    transformer = Transformer(str(tiny))
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    folder = tmp_path / f"st_{family}"
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(folder))
    _edit(folder / "tokenizer_config.json", model_max_length=tokenizer_max)
    _edit(folder / "sentence_bert_config.json", max_seq_length=max_seq_length)
    return folder


def _edit(file: Path, **keys: Any) -> None:
    """Set `keys` in a JSON file (a None value removes its key)."""
    data = json.loads(file.read_text()) if file.exists() else {}
    data.update(keys)
    file.write_text(json.dumps({k: v for k, v in data.items() if v is not None}))


def _load(folder: Path, backend: str, **options: Any) -> bertscope.Model:
    if backend == "onnxruntime":
        pytest.importorskip("onnxruntime")
    model = bertscope.load(folder, device="cpu", backend=backend, **options)
    if backend == "onnxruntime":  # the first load exports the graph (torch); the next opens it light
        model = bertscope.load(folder, device="cpu", backend=backend, **options)
    assert isinstance(model, bertscope.Model)
    assert model.light == (backend == "onnxruntime")  # the light path is the one tested
    return model


def _reference(folder: Path, max_seq_length: int | None = None) -> tuple[np.ndarray, Any]:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(folder), device="cpu")
    if max_seq_length is not None:
        st.max_seq_length = max_seq_length
    return st.encode(TEXTS, convert_to_numpy=True), st


def _encode(model: bertscope.Model, texts: list[str] = TEXTS) -> np.ndarray:
    with pytest.warns(bertscope.TruncatedTextsWarning):
        return np.asarray(model.encode(texts))


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_seq_length_over_the_tokenizer_limit_is_sentence_transformers_limit(
    tmp_path: Path, backend: str, cache: Path
) -> None:
    folder = _st_folder(tmp_path, "bert", tokenizer_max=48, max_seq_length=60)
    want, st = _reference(folder)
    assert st.max_seq_length == 60
    model = _load(folder, backend)
    assert model.max_seq_length == 60 and model.max_tokens == 60
    info = model.info()
    assert (info.max_tokens, info.max_positions) == (60, 64)
    assert model.tokenize(LONG).n_dropped > 0 and len(model.tokenize(LONG)) == 60
    assert np.abs(_encode(model) - want).max() < 1e-5


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_seq_length_past_the_positions_is_capped_there(tmp_path: Path, backend: str, cache: Path) -> None:
    """RoBERTa's 66 positions less its padding offset leave 64: max_seq_length 100 runs as 64, which
    changes no text sentence-transformers can run (it fails on a longer one)."""
    folder = _st_folder(tmp_path, "roberta", tokenizer_max=48, max_seq_length=100)
    model = _load(folder, backend)
    assert model.max_seq_length == 64 and model.info().max_positions == 64
    words = LONG.split()
    fits = max(
        (" ".join(words[:n]) for n in range(1, len(words))),
        key=lambda text: (model.tokenize(text).n_dropped == 0, len(model.tokenize(text))),
    )  # the longest text that fits: past the tokenizer's 48, within the 64 positions
    assert model.tokenize(fits).n_dropped == 0 and len(model.tokenize(fits)) > 60
    from sentence_transformers import SentenceTransformer

    want = SentenceTransformer(str(folder), device="cpu").encode([fits, "a dog"], convert_to_numpy=True)
    assert np.abs(np.asarray(model.encode([fits, "a dog"])) - want).max() < 1e-5


@pytest.mark.parametrize("backend", BACKENDS)
def test_without_max_seq_length_the_tokenizer_limit_holds(tmp_path: Path, backend: str, cache: Path) -> None:
    """No max_seq_length: min(positions, the tokenizer's model_max_length), as before; `max_tokens=`
    may still go up to the model's positions (as sentence-transformers' max_seq_length may)."""
    folder = _st_folder(tmp_path, "bert", tokenizer_max=48, max_seq_length=None)
    assert "max_seq_length" not in json.loads((folder / "sentence_bert_config.json").read_text())
    want, st = _reference(folder)
    assert st.max_seq_length == 48
    model = _load(folder, backend)
    assert (model.max_seq_length, model.info().max_tokens, model.info().max_positions) == (48, 48, 64)
    assert np.abs(_encode(model) - want).max() < 1e-5
    wider = _load(folder, backend, max_tokens=60)
    assert wider.max_seq_length == 60
    want60, _ = _reference(folder, max_seq_length=60)
    assert np.abs(_encode(wider) - want60).max() < 1e-5
    with pytest.raises(bertscope.InvalidSpec, match="64 positions"):
        bertscope.load(folder, device="cpu", backend=backend, max_tokens=65)
