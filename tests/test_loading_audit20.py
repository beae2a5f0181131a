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


def _without(tiny_dirs: dict[str, Path], tmp_path: Path, dropped: str) -> Path:
    """A copy of the tiny BERT folder whose safetensors leave out the tensor `dropped`."""
    from safetensors.torch import save_file

    folder = tmp_path / "bert-without"
    shutil.copytree(tiny_dirs["bert"], folder)
    weights = load_file(folder / "model.safetensors")
    save_file({k: v for k, v in weights.items() if k != dropped}, folder / "model.safetensors")
    return folder


def _misfit_folders(tiny_dirs: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    return {
        "a bias left out": _without(tiny_dirs, tmp_path, "encoder.layer.1.output.dense.bias"),
        "a layer past the config's": _with_config(tiny_dirs, tmp_path / "fewer", "bert", num_hidden_layers=1),
        "a layer the weights lack": _with_config(tiny_dirs, tmp_path / "more", "bert", num_hidden_layers=3),
        "another intermediate_size": _with_config(
            tiny_dirs, tmp_path / "wider", "bert", intermediate_size=40
        ),
        "another hidden_size": _with_config(tiny_dirs, tmp_path / "hidden", "bert", hidden_size=64),
        "another vocab_size": _with_config(tiny_dirs, tmp_path / "vocab", "bert", vocab_size=400),
    }


def test_info_refuses_the_folders_load_refuses(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    """`bertscope info` read the folder without torch and said n_layers 1 of a config of one layer over the
    weights of two, exit 0, where load() refuses it: the folder view holds the safetensors headers against
    config.json and refuses in the load's words (exit 1, one line)."""
    from console import run_main

    for case, folder in _misfit_folders(tiny_dirs, tmp_path).items():
        ran = run_main("info", "-m", str(folder))
        assert ran.code == 1 and ran.stdout == "", (case, ran)
        said = ran.stderr.strip()
        assert "\n" not in said and ("leave out or misshape" in said or "builds no place for" in said), case
        with pytest.raises(ModelLoadError) as caught:
            bertscope.load(folder, device="cpu", backend="torch")
        if case in ("a bias left out", "a layer past the config's", "a layer the weights lack"):
            assert said == f"error: {caught.value}", case  # the same tensors, in the same words


def test_the_light_check_names_the_tensors(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    from bertscope.core.folder import FolderView

    folders = _misfit_folders(tiny_dirs, tmp_path)
    said = {case: FolderView.open(folder).misfits() for case, folder in folders.items()}  # type: ignore[union-attr]
    assert said["a bias left out"].left_out == ["encoder.layer.1.output.dense.bias"]
    assert said["a layer past the config's"].extra[0] == "encoder.layer.1.attention.output.LayerNorm.bias"
    assert said["a layer the weights lack"].left_out[0] == "encoder.layer.2.attention.output.LayerNorm.bias"
    assert said["another intermediate_size"].left_out[:2] == [
        "encoder.layer.0.intermediate.dense.bias (37 in the file, 40 by config.json)",
        "encoder.layer.0.intermediate.dense.weight (37x32 in the file, 40x32 by config.json)",
    ]
    assert said["another hidden_size"].left_out[0] == (
        "encoder.layer.0.attention.output.LayerNorm.bias (32 in the file, 64 by config.json)"
    )
    assert said["another vocab_size"].left_out == [
        "embeddings.word_embeddings.weight (373x32 in the file, 400x32 by config.json)"
    ]


def test_every_family_and_the_bundled_model_still_open_light(
    tiny_dirs: dict[str, Path], bundled_path: Path
) -> None:
    """The check refuses no folder load() takes: every family the tiny models build, and the bundled model
    (ALBERT's shared layers are not read by it; its load checks them)."""
    from bertscope.core.folder import FolderView
    from bertscope.core.loading import open_light

    for name, folder in {**tiny_dirs, "bundled": bundled_path}.items():
        view = FolderView.open(folder)
        assert view is not None and view.misfits() == ([], []), name
        assert open_light(folder) is not None, name


def test_a_module_some_layers_lack_or_hold_alone() -> None:
    """Over four layers: a module three hold and one lacks is left out there; one held by one layer alone
    is extra; one only the first layer lacks is ModernBERT's design (no attn_norm there), not refused."""
    from bertscope.core.safetensors_header import Stored, config_misfits

    def header(*names: str) -> dict[str, Stored]:
        return {name: Stored(Path("m.safetensors"), "F32", [8, 8], 0, 0) for name in names}

    config = {"hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 4}
    base = [f"layers.{i}.{part}.weight" for i in range(4) for part in ("attn", "mlp")]
    norms = [f"layers.{i}.attn_norm.weight" for i in (1, 2, 3)]
    assert config_misfits(header(*base, *norms), config) == ([], [])
    lacked = [name for name in base if name != "layers.2.mlp.weight"]
    assert config_misfits(header(*lacked), config) == (["layers.2.mlp.weight"], [])
    alone = header(*base, "layers.3.distance_embedding.weight")
    assert config_misfits(alone, config) == ([], ["layers.3.distance_embedding.weight"])
    keys = {f"layers.{i}.k.weight": Stored(Path("m"), "F32", [4, 8], 0, 0) for i in range(4)}
    grouped = {**header(*base), **keys}  # 2 key heads of 4 wide: 4 rows, no size the config gives alone
    assert config_misfits(grouped, {**config, "num_attention_heads": 4, "num_key_value_heads": 2}) == ([], [])
    assert config_misfits(grouped, {**config, "num_attention_heads": 4})[0][0] == (
        "layers.0.k.weight (4x8 in the file, which config.json's hidden_size 8 and intermediate_size 8 do "
        "not give)"
    )


def _without_pooler(tiny_dirs: dict[str, Path], tmp_path: Path, **changed: object) -> Path:
    """A copy of the tiny BERT folder with no pooler tensors (as sentence-transformers exports often are)
    and config.json's `changed` values."""
    from safetensors.torch import save_file

    folder = _with_config(tiny_dirs, tmp_path, "bert", **changed)
    weights = load_file(folder / "model.safetensors")
    kept = {k: v for k, v in weights.items() if not k.startswith("pooler.")}
    assert len(kept) < len(weights)
    save_file(kept, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_a_misshaped_checkpoint_without_a_pooler_is_named(
    tiny_dirs: dict[str, Path], tmp_path: Path, backend: str
) -> None:
    """Review of dbd79f0: with the pooler missing, the weight check took its pooler shortcut before
    reading the mismatched keys, so backend="torch" raised transformers' bare 'You set
    `ignore_mismatched_sizes` to `False`...' line; the misshaped tensors are named now."""
    folder = _without_pooler(tiny_dirs, tmp_path, intermediate_size=40)
    with pytest.raises(ModelLoadError) as caught:
        bertscope.load(folder, device="cpu", backend=backend).embed("a cat")
    said = str(caught.value)
    assert "\n" not in said and "ignore_mismatched_sizes" not in said and "pooler" not in said
    assert "intermediate.dense.weight (37x32 in the file, 40x32 by config.json)" in said


def test_a_checkpoint_without_a_pooler_still_loads(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    """A missing pooler alone is no wrong weight: the model loads, with no pooler."""
    folder = _without_pooler(tiny_dirs, tmp_path)
    model = bertscope.load(folder, device="cpu", backend="torch")
    assert model.embed("a cat").vectors.shape == (1, 32)
    assert model.loaded.model.pooler is None


def _live_models(folder: Path) -> int:
    """How many transformers models loaded from `folder` are alive (gc run first)."""
    import gc

    import transformers

    gc.collect()
    return sum(
        1
        for o in gc.get_objects()
        if issubclass(type(o), transformers.PreTrainedModel) and str(o.name_or_path) == str(folder)
    )


def test_the_retry_naming_misshaped_weights_holds_one_model_at_a_time(
    tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of dbd79f0: the load again with ignore_mismatched_sizes ran while the first error's
    traceback kept the first model alive (two models at the peak), and the refusal kept the first
    error as its context and the second model in its own traceback. Now none is alive at the second load,
    nor while the caller holds the refusal."""
    import transformers

    folder = _with_config(tiny_dirs, tmp_path, "bert", intermediate_size=40)
    plain = transformers.AutoModel.from_pretrained
    alive: list[int] = []

    def counting(*args: object, **kwargs: object) -> object:
        if kwargs.get("ignore_mismatched_sizes"):
            alive.append(_live_models(folder))
        return plain(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", counting)
    with pytest.raises(ModelLoadError, match="misshape") as caught:
        bertscope.load(folder, device="cpu", backend="torch")
    assert alive == [0]
    assert caught.value.__context__ is None and caught.value.__cause__ is None
    assert _live_models(folder) == 0
