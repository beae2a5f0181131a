"""FolderView: a model folder read without torch says what the loaded model says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch

import bertscope
from bertscope import static
from bertscope.backends.recorded import folder_info
from bertscope.core.folder import FolderView
from tiny_models import FAMILIES

TEXTS = ["I like eating bread", "Héllo WÖRLD naïve café  tabs\tand  spaces 🙂", "tokenization " * 400]


def _same_as_loaded(view: FolderView | None, model: bertscope.Model) -> None:
    assert view is not None
    assert folder_info(view) == model.info().to_dict()
    assert view.pad_id == model.pad_id and view.max_tokens == model.max_tokens
    assert view.tokenize(TEXTS) == model.tokenize(TEXTS)
    assert view.id_to_token == model.id_to_token
    _same_static_rows(view, model)


def _same_static_rows(view: FolderView, model: bertscope.Model) -> None:
    """The static functions answer from the folder's safetensors exactly as from the loaded model."""
    assert view.static_matrix is not None
    assert view.vocab == model.vocab and view.special_ids == model.special_ids
    assert view.static_shape == model.static_shape
    np.testing.assert_array_equal(view.static_matrix, model.input_embeddings.detach().numpy())
    pieces = [model.id_to_token[i] for i in static.first_words(model, 3)] or [model.id_to_token[0]]
    assert static.first_words(view, 3) == static.first_words(model, 3)
    for piece in pieces:
        assert static.lookup(view, piece, k=5) == static.lookup(model, piece, k=5)
        assert static.lookup(view, piece, k=5, include_special=True) == static.lookup(
            model, piece, k=5, include_special=True
        )
    word = "".join(pieces).replace("##", "")
    assert static.lookup(view, word, word=True, k=3) == static.lookup(model, word, word=True, k=3)


def test_bundled_folder_matches_the_loaded_model(bundled: bertscope.Model) -> None:
    _same_as_loaded(FolderView.open(None), bundled)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_matches_the_loaded_model(
    family: str, tiny_dirs: dict[str, Path], tiny_models: dict[str, bertscope.Model]
) -> None:
    _same_as_loaded(FolderView.open(tiny_dirs[family]), tiny_models[family])


def test_sharded_safetensors_are_read_from_the_index(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "bert")
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    index = {"weight_map": {"embeddings.word_embeddings.weight": "model-00001-of-00001.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    view = FolderView.open(folder)
    assert view is not None
    info = view.info()
    loaded = bertscope.load(tiny_dirs["bert"])
    assert info is not None and info["vocab_size"] == loaded.info().vocab_size
    np.testing.assert_array_equal(view.static_matrix, loaded.input_embeddings.detach().numpy())


def test_what_only_a_load_can_tell_returns_none(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "no_tokenizer_json")
    (folder / "tokenizer.json").unlink()
    assert FolderView.open(folder) is None
    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "bin_weights")
    (folder / "model.safetensors").unlink()
    view = FolderView.open(folder)
    assert view is not None and view.info() is None and view.static_matrix is None
    with pytest.raises(bertscope.ModelLoadError, match="no safetensors embedding matrix"):
        static.lookup(view, "[CLS]")
    for dtype in (torch.bfloat16, torch.float16):  # widened to float32 exactly, as a load widens them
        folder = shutil.copytree(tiny_dirs["bert"], tmp_path / f"{dtype}_weights")
        weights = safetensors.torch.load_file(folder / "model.safetensors")
        safetensors.torch.save_file(
            {k: v.to(dtype) for k, v in weights.items()}, folder / "model.safetensors"
        )
        view = FolderView.open(folder)
        loaded = bertscope.load(folder).input_embeddings.detach().numpy()
        assert view is not None and view.static_matrix is not None and loaded.dtype == np.float32
        np.testing.assert_array_equal(view.static_matrix, loaded)
    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "gpt2")
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    assert FolderView.open(folder) is None
    assert FolderView.open("someone/some-model") is None
