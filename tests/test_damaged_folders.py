"""Damaged model folders (settings files, weights, tokenizer) refused in one line naming the file, on the
light path and the torch path alike; a full disk on a first load said once."""

from __future__ import annotations

import json
import re
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

import bertscope
from bertscope.backends import exact
from bertscope.core.folder import FolderView
from bertscope.core.safetensors_header import FloatRows, safetensors_tensors
from bertscope.errors import ModelLoadError
from tiny_models import measure_like_a_real_model

_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
]


def _st_folder(tiny_dirs: dict[str, Path], dest: Path) -> Path:
    """The tiny BERT as a sentence-transformers folder: mean pooling, 16 tokens."""
    folder = Path(shutil.copytree(tiny_dirs["bert"], dest))
    (folder / "modules.json").write_text(json.dumps(_MODULES))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16}))
    return folder


def _no_path(folder: Path) -> None:
    modules = json.loads((folder / "modules.json").read_text())
    del modules[1]["path"]
    (folder / "modules.json").write_text(json.dumps(modules))


# what is broken -> the file the one line names and what it says of it
_BREAKAGES: dict[str, tuple[Callable[[Path], object], str, str]] = {
    "pooling config not JSON": (
        lambda f: (f / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": "yes"\n'),
        "1_Pooling/config.json",
        "is not valid JSON",
    ),
    "pooling config missing": (
        lambda f: (f / "1_Pooling" / "config.json").unlink(),
        "1_Pooling/config.json",
        "is missing",
    ),
    "modules.json not JSON": (
        lambda f: (f / "modules.json").write_text('[{"idx":0\n'),
        "modules.json",
        "is not valid JSON",
    ),
    "modules.json an object": (
        lambda f: (f / "modules.json").write_text('{"a": 1}'),
        "modules.json",
        "holds an object where sentence-transformers writes a list",
    ),
    "a modules.json entry not an object": (
        lambda f: (f / "modules.json").write_text('["0_Transformer"]'),
        "modules.json",
        "its entry 0 is not an object",
    ),
    "a Pooling entry without path": (_no_path, "modules.json", 'its Pooling entry (1) has no "path"'),
    "sentence_bert_config.json not JSON": (
        lambda f: (f / "sentence_bert_config.json").write_text('{"max_seq_length": 16,\n'),
        "sentence_bert_config.json",
        "is not valid JSON",
    ),
    "sentence_bert_config.json a list": (
        lambda f: (f / "sentence_bert_config.json").write_text("[16]"),
        "sentence_bert_config.json",
        "holds a list where sentence-transformers writes an object",
    ),
}


def _one_line(exc: pytest.ExceptionInfo[ModelLoadError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("breakage", list(_BREAKAGES))
def test_a_malformed_sentence_transformers_settings_file_is_named_on_both_paths(
    tiny_dirs: dict[str, Path], tmp_path: Path, breakage: str
) -> None:
    folder = _st_folder(tiny_dirs, tmp_path / "st")
    assert FolderView.open(folder) is not None  # whole, the folder opens light
    assert bertscope.load(folder, device="cpu", backend="torch").embed("hello").vectors.shape == (1, 32)
    damage, file, said = _BREAKAGES[breakage]
    damage(folder)
    with pytest.raises(ModelLoadError) as light:
        FolderView.open(folder)
    for backend in ("onnxruntime", "torch"):
        with pytest.raises(ModelLoadError) as loaded:
            bertscope.load(folder, device="cpu", backend=backend)
        assert _one_line(loaded) == _one_line(light)
    message = _one_line(light)
    assert message.startswith(str(folder / file)) and said in message
    assert "sentence-transformers settings" in message and "copy it again from the model's source" in message


def test_a_missing_pooling_config_on_the_command_line_is_a_model_error_not_a_store_one(
    tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    from console import run_main

    folder = _st_folder(tiny_dirs, tmp_path / "st")
    (folder / "1_Pooling" / "config.json").unlink()
    ran = run_main("tokens", "hello", "-m", str(folder))
    assert ran.code == 1 and "Traceback" not in ran.stderr
    assert ran.stderr.strip().splitlines() == [
        f"error: {folder / '1_Pooling' / 'config.json'} is missing (modules.json names it); it is one of "
        "the folder's sentence-transformers settings: fix it, or copy it again from the model's source"
    ]


def _cut_header(file: Path) -> None:
    file.write_bytes(file.read_bytes()[:1000])  # the header's JSON cut short


def _cut_data(file: Path) -> None:
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 3])  # header whole, a download cut short


def _header_not_json(file: Path) -> None:
    data = bytearray(file.read_bytes())
    data[8] = ord("[")  # the header's first byte: the JSON object's brace
    file.write_bytes(bytes(data))


def _shape_past_its_bytes(file: Path) -> None:
    """The word matrix's shape says more rows than its byte range holds (the header rewritten)."""
    raw = file.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    (word,) = [name for name in header if name.endswith("word_embeddings.weight")]
    header[word]["shape"][0] *= 2
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (size - len(text))  # the same length: every offset stays where it was
    assert len(text) == size
    file.write_bytes(raw[:8] + text + raw[8 + size :])


_WEIGHTS_DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "header cut short": (_cut_header, "its header says"),
    "data cut short": (_cut_data, "ends at byte"),
    "header not JSON": (_header_not_json, "its header is not JSON"),
}


@pytest.mark.parametrize("damage", list(_WEIGHTS_DAMAGE))
def test_a_damaged_safetensors_file_is_named_on_every_path(
    tiny_dirs: dict[str, Path], tmp_path: Path, damage: str
) -> None:
    folder = Path(shutil.copytree(tiny_dirs["bert"], tmp_path / "bert"))
    weights = folder / "model.safetensors"
    spoil, said = _WEIGHTS_DAMAGE[damage]
    spoil(weights)
    with pytest.raises(ModelLoadError) as read:
        safetensors_tensors(folder)  # what FolderView.open, static rows and the light anatomy read
    message = _one_line(read)
    start = f"{folder} could not be loaded as a model: its model.safetensors is damaged or cut short ("
    assert message.startswith(start) and said in message
    assert message.endswith("download the model again (or save it again where it was made)")
    for backend in ("onnxruntime", "torch"):
        with pytest.raises(ModelLoadError) as loaded:
            bertscope.load(folder, device="cpu", backend=backend)
        assert _one_line(loaded) == message


def test_a_shape_its_bytes_do_not_hold_is_damage_not_a_read_past_the_tensor(
    tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    folder = Path(shutil.copytree(tiny_dirs["bert"], tmp_path / "bert"))
    _shape_past_its_bytes(folder / "model.safetensors")
    (word,) = [
        s for name, s in safetensors_tensors(folder).items() if name.endswith("word_embeddings.weight")
    ]
    with pytest.raises(
        ModelLoadError,
        match=r"model.safetensors is damaged or cut short \(its header gives a tensor of shape",
    ):
        FloatRows(word)


@pytest.mark.parametrize("content", ["{}", "[1]", '{"added_tokens": []}'])
def test_a_tokenizer_json_that_holds_no_tokenizer_is_one_line(
    tiny_dirs: dict[str, Path], tmp_path: Path, content: str
) -> None:
    folder = Path(shutil.copytree(tiny_dirs["bert"], tmp_path / "bert"))
    (folder / "tokenizer.json").write_text(content)
    for backend in ("onnxruntime", "torch"):
        with pytest.raises(ModelLoadError) as loaded:
            bertscope.load(folder, device="cpu", backend=backend)
        message = _one_line(loaded)
        assert message.startswith(
            f"{folder} could not be loaded as a model: its tokenizer files hold no tokenizer"
        )
        assert message.endswith("copy tokenizer.json and tokenizer_config.json again from the model's source")


def test_a_full_disk_on_a_first_load_tries_the_export_once_and_says_so_once(
    tiny_dirs: dict[str, Path],
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tried: list[int] = []

    def disk_full(*_: object, **__: object) -> None:
        tried.append(1)
        raise OSError(28, "No space left on device")

    measure_like_a_real_model(monkeypatch)
    monkeypatch.setattr(exact, "_RUNNERS", {})  # no runtime another test of this process opened
    monkeypatch.setattr(torch.onnx, "export", disk_full)
    capsys.readouterr()
    m = bertscope.load(tiny_dirs["electra"], device="cpu")
    said = capsys.readouterr().err
    wanted = [label for label in exact.exact_candidates() if exact._backend(label) is not None]
    assert len(wanted) >= 1 and tried == [1], "one export tried, whichever runtimes read it"
    assert said.count("exporting the model to ONNX") == 1
    (line,) = [line for line in said.splitlines() if "left out this time" in line]
    assert line.startswith(f"exact default: {', '.join(wanted)} left out this time (")
    assert "No space left on device" in line
    assert m.info().backend == "torch"
    reference = bertscope.load(tiny_dirs["electra"], device="cpu", backend="torch")
    texts = ["one sentence", "and another one"]
    np.testing.assert_array_equal(m.embed(texts).vectors, reference.embed(texts).vectors)


def test_the_export_line_names_its_variant_alike_for_every_family(
    tiny_dirs: dict[str, Path], cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    bertscope.load(tiny_dirs["deberta-v2"], device="cpu", backend="onnxruntime")  # a family named with "-"
    said = capsys.readouterr().err
    (line,) = [line for line in said.splitlines() if line.startswith("exporting the model to ONNX")]
    assert re.match(r"exporting the model to ONNX \(float32-v\d+\) -> ", line), line
