"""The model's trained pooler run in NumPy from the folder's weights (core/pooler_weights.py): equal to the
plain Hugging Face model's `pooler_output` on the bundled model and on every tiny family that has one,
with the PyTorch pooler refused; a fresh `bertscope embed --pooling pooler` imports no torch; a pooler
not known exactly is left to the module; pooler weights that the family's AutoModel never builds (GTE,
Nomic BERT) are refused when the spec is resolved, light or not, before any forward."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

import bertscope
from bertscope.core.families import Family, PoolerLayout, family_for
from bertscope.core.loading import open_light
from bertscope.core.pooler_weights import PoolerWeights, pooler_weights
from bertscope.model import Model
from tiny_models import FAMILIES

TEXTS = ["I like eating bread", "The storm hit the coast at night.", "a cat"]
# The families whose AutoModel builds a trained pooler (transformers' *Pooler classes, AlbertModel's own)
WITH_POOLER = {"bert", "roberta", "xlm-roberta", "albert", "mpnet", "jina_embeddings_v3"}


def _hugging_face(folder: Path) -> tuple[np.ndarray, np.ndarray | None]:
    """The plain Hugging Face forward of TEXTS: last hidden state (batch, tokens, d), pooler_output."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, dtype=torch.float32).eval()
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.inference_mode():
        out = model(**batch)
    pooled = getattr(out, "pooler_output", None)  # BaseModelOutput where the model has no pooler
    return out.last_hidden_state.numpy(), None if pooled is None else pooled.numpy()


def _refuse_the_torch_pooler(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Family, model: Any) -> None:
        raise AssertionError(f"{self.name}: the pooler ran on the PyTorch module")

    monkeypatch.setattr(Family, "pooler", refuse)


def _light_pooled(folder: Path, monkeypatch: pytest.MonkeyPatch) -> np.ndarray:
    """bertscope's pooler vectors of TEXTS, the folder opened light and torch's pooler refused."""
    parts = open_light(folder)
    assert parts is not None
    model = Model(parts, device="cpu", max_tokens=None, token_budget=None)
    _refuse_the_torch_pooler(monkeypatch)
    return model.embed(TEXTS, pooling="pooler", normalize=False).vectors


@pytest.mark.parametrize("family", FAMILIES)
def test_the_light_pooler_is_the_hugging_face_pooler_output(
    family: str, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tiny_dirs[family]
    hidden, want = _hugging_face(folder)
    assert (want is not None) == (family in WITH_POOLER), family
    parts = open_light(folder)
    assert parts is not None and parts.view is not None
    weights = parts.view.pooler_weights
    assert (weights is not None) == (family in WITH_POOLER), family
    if weights is None or want is None:
        return
    np.testing.assert_allclose(weights(hidden), want, rtol=0, atol=1e-6, err_msg=family)
    got = _light_pooled(folder, monkeypatch)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5, err_msg=family)


def test_the_bundled_models_light_pooler_is_its_pooler_output(
    bundled_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hidden, want = _hugging_face(bundled_path)
    assert want is not None
    got = _light_pooled(bundled_path, monkeypatch)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    parts = open_light(bundled_path)
    assert parts is not None and parts.view is not None and parts.view.pooler_weights is not None
    np.testing.assert_allclose(parts.view.pooler_weights(hidden), want, rtol=0, atol=1e-6)


def test_a_fresh_command_line_pools_with_the_trained_pooler_without_torch(
    cache: Path, bundled_path: Path
) -> None:
    bertscope.load(bundled_path, backend="onnxruntime")  # the export, made here where torch is loaded
    code = (
        "import json, sys\nfrom bertscope.cli import main\n"
        f"sys.argv = ['bertscope', 'embed', *{TEXTS!r}, '--pooling', 'pooler', '--no-normalize',\n"
        "            '--backend', 'onnxruntime', '--json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(['torch' in sys.modules, 'transformers' in sys.modules]), file=sys.stderr)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BERTSCOPE_CACHE": str(cache)}
    env.pop("BERTSCOPE_MODEL", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert json.loads(done.stderr.strip().splitlines()[-1]) == [False, False], done.stderr
    _, want = _hugging_face(bundled_path)
    assert want is not None
    np.testing.assert_allclose(np.array(json.loads(done.stdout)["vectors"]), want, rtol=0, atol=1e-5)


def test_the_service_pools_with_the_trained_pooler_and_stays_light(cache: Path, bundled_path: Path) -> None:
    from fastapi.testclient import TestClient

    from bertscope.server import create_app

    bertscope.load(bundled_path, backend="onnxruntime")  # the export, made once
    model = bertscope.load(bundled_path, backend="onnxruntime")
    assert isinstance(model, Model) and model.light
    with TestClient(create_app(model)) as client:
        body = {"inputs": TEXTS, "pooling": "pooler", "normalize": False}
        answer = client.post("/v2/embed", json=body)
        assert answer.status_code == 200, answer.text[:300]
    assert model.light, "the pooler loaded the PyTorch module"
    _, want = _hugging_face(bundled_path)
    assert want is not None
    np.testing.assert_allclose(np.array(answer.json()["vectors"]), want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_checkpoints_pooler_is_widened_exactly_as_torch_widens_it(
    tmp_path: Path, tiny_dirs: dict[str, Path], dtype: torch.dtype
) -> None:
    source = tiny_dirs["bert"]
    for name in os.listdir(source):
        if not name.endswith(".safetensors"):
            shutil.copy(source / name, tmp_path / name)
    AutoModel.from_pretrained(source).to(dtype).save_pretrained(tmp_path, safe_serialization=True)
    parts = open_light(tmp_path)
    assert parts is not None and parts.view is not None
    weights = parts.view.pooler_weights
    assert weights is not None and weights.weight.dtype == np.float32
    module = AutoModel.from_pretrained(tmp_path, dtype=torch.float32)
    np.testing.assert_array_equal(weights.weight, module.pooler.dense.weight.detach().numpy())
    np.testing.assert_array_equal(weights.bias, module.pooler.dense.bias.detach().numpy())
    hidden, want = _hugging_face(tmp_path)
    assert want is not None
    np.testing.assert_allclose(weights(hidden), want, rtol=0, atol=1e-6)


@dataclass
class _Folder:
    """A model folder's weights as the reading sees them (FolderView's protocol), without files."""

    family: Family
    config: dict[str, Any]
    tensors: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def weight_names(self) -> list[str]:
        return list(self.tensors)

    def weight(self, suffix: str) -> np.ndarray | None:
        found = [t for k, t in self.tensors.items() if k == suffix or k.endswith("." + suffix)]
        return found[0] if len(found) == 1 else None


def _bert(**tensors: np.ndarray) -> _Folder:
    dense: dict[str, np.ndarray] = {
        "bert.pooler.dense.weight": np.eye(4, dtype=np.float32),
        "bert.pooler.dense.bias": np.ones(4, dtype=np.float32),
    }
    return _Folder(family_for("bert"), {"hidden_size": 4}, {**dense, **tensors})


def test_the_reading_takes_exactly_one_dense_layer_and_tanh() -> None:
    found = pooler_weights(_bert())
    assert isinstance(found, PoolerWeights)
    hidden = np.zeros((2, 3, 4), dtype=np.float32)
    hidden[:, 0] = np.array([[0.5, -1, 2, 0], [0, 0, 0, 0]])
    np.testing.assert_allclose(found(hidden), np.tanh(hidden[:, 0] + 1), rtol=0, atol=1e-7)


@pytest.mark.parametrize(
    "folder",
    [
        _bert(**{"bert.pooler.extra.weight": np.eye(4)}),  # a pooler with more than the dense layer
        _bert(**{"bert.pooler.dense.weight": np.eye(3)}),  # not (hidden, hidden)
        replace(_bert(), config={"hidden_size": 8}),  # a config that does not match the weights
        replace(_bert(), config={}),
        replace(_bert(), family=family_for("electra")),  # a family whose pooler is not known here
        replace(_bert(), family=replace(family_for("bert"), pooler_layout=PoolerLayout("a", "b", "gelu"))),
        _Folder(family_for("bert"), {"hidden_size": 4}),  # no pooler at all
    ],
    ids=["extra-tensor", "shape", "config", "no-hidden-size", "unknown-family", "activation", "none"],
)
def test_a_pooler_not_known_exactly_is_left_to_the_module(folder: _Folder) -> None:
    assert pooler_weights(folder) is None


def test_families_without_a_known_pooler_say_so() -> None:
    """Only the families whose AutoModel pooler is dense + tanh over the first token name its weights."""
    known = {name for name in FAMILIES if family_for(name).pooler_layout is not None}
    assert known == WITH_POOLER


def test_pooler_weights_the_module_never_builds_are_one_line(
    bundled_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder whose weights hold a pooler that transformers' class does not build (GTE, Nomic BERT ship
    such tensors) was opened light as having one, then hit an assert on the module: now an InvalidSpec."""
    parts = open_light(bundled_path)
    assert parts is not None
    model = Model(parts, device="cpu", max_tokens=None, token_budget=None)
    model.engine._light_pooler = None  # a family whose pooler is not read from the weights
    monkeypatch.setattr(Family, "pooler", lambda self, module: None)
    with pytest.raises(bertscope.InvalidSpec, match="transformers builds none for this family"):
        model.embed(TEXTS, pooling="pooler")


def _with_pooler_weights(source: Path, folder: Path) -> Path:
    """A copy of the tiny folder `source` whose weights also hold a dense pooler (hidden, hidden) and its
    bias, as GTE and Nomic BERT checkpoints ship them, though their AutoModel builds no pooler."""
    from safetensors.numpy import load_file, save_file

    shutil.copytree(source, folder)
    weights = load_file(folder / "model.safetensors")
    hidden = json.loads((folder / "config.json").read_text(encoding="utf-8"))["hidden_size"]
    weights["pooler.dense.weight"] = np.eye(hidden, dtype=np.float32)
    weights["pooler.dense.bias"] = np.zeros(hidden, dtype=np.float32)
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


@pytest.mark.parametrize("family", ["gte", "nomic_bert"])
def test_pooler_weights_the_family_never_builds_are_refused_when_the_spec_is_resolved(
    family: str, tmp_path: Path, tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Light and torch alike say the model has no trained pooler, in one line, before any forward: the light
    load builds no module and writes no graph; the torch module's forward never runs."""
    folder = _with_pooler_weights(tiny_dirs[family], tmp_path / family)
    parts = open_light(folder)
    assert parts is not None and parts.view is not None
    assert not family_for(family).builds_pooler and parts.view.has_pooler is False
    _refuse_the_torch_pooler(monkeypatch)  # the pooler at the forward, where it was refused before
    light = bertscope.load(folder)
    assert isinstance(light, Model) and light.light
    with pytest.raises(bertscope.InvalidSpec, match="no trained pooler; use pooling='cls' or 'mean'") as said:
        light.embed(TEXTS, pooling="pooler")
    assert light.light, "the refusal loaded the PyTorch module"
    assert not (cache / "onnx").exists() or not any((cache / "onnx").iterdir())  # no graph made
    monkeypatch.undo()
    full = bertscope.load(folder, backend="torch")
    assert isinstance(full, Model) and not full.light

    def never(*args: Any) -> None:
        raise AssertionError("the module's forward ran")

    full.hf_model.register_forward_pre_hook(never)
    with pytest.raises(bertscope.InvalidSpec) as torch_said:
        full.embed(TEXTS, pooling="pooler")
    assert str(torch_said.value) == str(said.value) and "\n" not in str(said.value)


def test_pooler_weights_count_where_the_family_builds_a_pooler(tiny_dirs: dict[str, Path]) -> None:
    """The folder says it has a pooler exactly where the module has one: the family builds one and the
    weights hold it (tests/test_light.py compares every tiny family's light and full engines)."""
    for family in FAMILIES:
        parts = open_light(tiny_dirs[family])
        if parts is not None and parts.view is not None:
            assert parts.view.has_pooler is (family in WITH_POOLER), family
        assert family_for(family).builds_pooler is (family in WITH_POOLER), family
