"""Checkpoints whose weights do not fit their config.json: refused at load in one line naming the tensors
(audit 20), by the full load and by the folder view `bertscope info` reads alike."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file

import bertscope
from bertscope.errors import ModelLoadError


def _with_config(tiny_dirs: dict[str, Path], tmp_path: Path, family: str, **changed: object) -> Path:
    """A copy of the tiny `family` folder with config.json's `changed` values, its weights kept."""
    folder = tmp_path / f"{family}-changed"
    shutil.copytree(tiny_dirs[family], folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(changed)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_tensors_shaped_otherwise_than_the_config_are_named(
    tiny_dirs: dict[str, Path], tmp_path: Path, backend: str
) -> None:
    """intermediate_size 37 -> 40 with the weights of 37: transformers' error said only "You set
    `ignore_mismatched_sizes` to `False`... look at the above report" (a report bertscope keeps quiet)."""
    folder = _with_config(tiny_dirs, tmp_path, "bert", intermediate_size=40)
    with pytest.raises(ModelLoadError) as caught:
        bertscope.load(folder, device="cpu", backend=backend).embed("a cat")
    said = str(caught.value)
    assert "\n" not in said and "ignore_mismatched_sizes" not in said
    assert "leave out or misshape" in said and "copy the whole checkpoint" in said
    assert "intermediate.dense.weight (37x32 in the file, 40x32 by config.json)" in said


def test_a_misshaped_pytorch_bin_checkpoint_is_named_too(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    """The same for a pytorch_model.bin checkpoint, which has no header to read: the full load says it."""
    import torch

    folder = _with_config(tiny_dirs, tmp_path, "bert", intermediate_size=40)
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"output\.dense\.weight \(32x37 in the file, 32x40 by config"):
        bertscope.load(folder, device="cpu")
