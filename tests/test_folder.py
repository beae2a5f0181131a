"""FolderView: a model folder read without torch says what the loaded model says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import bertscope
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
    info = FolderView.open(folder).info()  # type: ignore[union-attr]
    assert info is not None and info["vocab_size"] == bertscope.load(tiny_dirs["bert"]).info().vocab_size


def test_what_only_a_load_can_tell_returns_none(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "no_tokenizer_json")
    (folder / "tokenizer.json").unlink()
    assert FolderView.open(folder) is None
    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "bin_weights")
    (folder / "model.safetensors").unlink()
    view = FolderView.open(folder)
    assert view is not None and view.info() is None
    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "gpt2")
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    assert FolderView.open(folder) is None
    assert FolderView.open("someone/some-model") is None
