"""Early stop on ONNX Runtime: the graph cut at a layer is made once, kept beside the export, and opened
from there by later loads, without the whole graph; a damaged one is named and cut again."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

import bertscope
from bertscope.backends import cut_cache
from bertscope.backends import onnx as onnx_backend
from bertscope.backends.cut_cache import cut_path
from bertscope.backends.onnx import OnnxRunner
from tiny_models import build_tiny_model

TEXTS = ["the cat sat on the mat", "a dog ran after it", "bread"]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT folder (2 layers: hidden states 0..2)."""
    return build_tiny_model("bert", tmp_path_factory.mktemp("cut") / "bert")


@pytest.fixture
def cuts(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The outputs of every cut of an export (loaded whole into protobuf), counted as they are made."""
    made: list[list[str]] = []
    real = cut_cache.cut_graph

    def counted(path: Path, inputs: Any, outputs: Any) -> Any:
        made.append(list(outputs))
        return real(path, inputs, outputs)

    monkeypatch.setattr(cut_cache, "cut_graph", counted)  # a cut written to the cache
    monkeypatch.setattr(onnx_backend, "cut_graph", counted)  # a cut kept in memory
    return made


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The file name of every graph an OnnxRunner opens (`<bytes>` for one opened from memory)."""
    names: list[str] = []
    real: Callable[..., Any] = onnx_backend.open_session

    def counted(model: str | bytes, **kwargs: Any) -> Any:
        names.append(Path(model).name if isinstance(model, str) else "<bytes>")
        return real(model, **kwargs)

    monkeypatch.setattr(onnx_backend, "open_session", counted)
    return names


def _load(folder: Path) -> tuple[bertscope.Model, OnnxRunner]:
    model = bertscope.load(folder, backend="onnxruntime")
    runner = model.engine.runner
    assert isinstance(runner, OnnxRunner)
    return model, runner


def _identity(path: Path) -> tuple[int, int, int, int]:
    stat = path.stat()
    return (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)


def test_the_cut_graph_is_made_once_and_opened_alone_by_a_later_load(
    cache: Path, tiny_bert: Path, cuts: list[list[str]], opened: list[str]
) -> None:
    first, runner = _load(tiny_bert)
    layer0 = first.embed(TEXTS, layers=0).vectors
    assert cuts == [["hidden_0"]]
    cut = cut_path(runner.path, 0)
    assert cut.is_file() and cut.parent == runner.path.parent
    record = json.loads(cut.with_suffix(".json").read_text())
    assert record["source"] == json.loads(runner.path.with_suffix(".json").read_text())["sha256"]
    identity = _identity(cut)

    opened.clear()
    second, again = _load(tiny_bert)
    np.testing.assert_array_equal(second.embed(TEXTS, layers=0).vectors, layer0)
    assert cuts == [["hidden_0"]]  # not cut again
    assert opened == [cut.name]  # the cut graph alone: the whole export is never opened
    assert again.cut_depths == [0] and again._whole is None
    assert _identity(cut) == identity

    # the embedding layer's nodes alone: none of a transformer layer's, which the whole export holds
    nodes = [node.name for node in onnx.load(str(cut)).graph.node]
    whole = [node.name for node in onnx.load(str(runner.path)).graph.node]
    assert 0 < len(nodes) < len(whole)
    assert any("/layer.1/" in name for name in whole)
    assert not any("/layer." in name for name in nodes)


def test_the_cut_graph_gives_the_whole_graphs_layer_and_torchs(cache: Path, tiny_bert: Path) -> None:
    model, runner = _load(tiny_bert)
    batch = model.calibration_batches(TEXTS)[0]
    cut = runner(*batch, deepest=0)
    whole = runner(*batch, deepest=2)
    assert runner.cut_depths == [0]
    assert np.abs(cut[0] - whole[0]).max() <= 1e-5
    torch_model = bertscope.load(tiny_bert, backend="torch")
    for layers in (0, 1):
        got = model.embed(TEXTS, layers=layers).vectors
        assert np.abs(got - torch_model.embed(TEXTS, layers=layers).vectors).max() <= 1e-5


def test_a_damaged_cut_graph_is_named_and_cut_again(
    cache: Path, tiny_bert: Path, cuts: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    model, runner = _load(tiny_bert)
    layer0 = model.embed(TEXTS, layers=0).vectors
    cut = cut_path(runner.path, 0)
    data = bytearray(cut.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a byte flipped, the size kept
    cut.write_bytes(bytes(data))
    capsys.readouterr()

    again, _ = _load(tiny_bert)
    np.testing.assert_array_equal(again.embed(TEXTS, layers=0).vectors, layer0)
    assert len(cuts) == 2  # cut again, not read
    assert f"the cached export {cut} does not match its recorded size and SHA-256; cutting it again" in (
        capsys.readouterr().err
    )
    record = json.loads(cut.with_suffix(".json").read_text())
    assert record["bytes"] == cut.stat().st_size
    assert not list(cut.parent.glob("*.tmp"))


def test_a_cut_from_another_export_is_cut_again(cache: Path, tiny_bert: Path, cuts: list[list[str]]) -> None:
    model, runner = _load(tiny_bert)
    model.embed(TEXTS, layers=0)
    record = cut_path(runner.path, 0).with_suffix(".json")
    record.write_text(json.dumps({**json.loads(record.read_text()), "source": "0" * 64}))
    again, _ = _load(tiny_bert)
    again.embed(TEXTS, layers=0)
    assert len(cuts) == 2


def test_the_layer_before_the_last_runs_the_whole_graph_once_it_is_open(
    cache: Path, tiny_bert: Path, cuts: list[list[str]]
) -> None:
    """A cut that leaves out only the last layer is opened where the whole graph is not; where it is open,
    that layer runs on it (a second copy of the weights for one layer's work saved)."""
    model, runner = _load(tiny_bert)
    fresh = model.embed(TEXTS, layers=1).vectors  # nothing open yet: the cut graph alone
    assert runner.cut_depths == [1] and runner._whole is None

    other, whole_first = _load(tiny_bert)
    other.embed(TEXTS, layers=-1)
    np.testing.assert_array_equal(other.embed(TEXTS, layers=1).vectors, fresh)
    assert whole_first.cut_depths == []
    assert cuts == [["hidden_0", "hidden_1"]]


def test_a_cache_that_takes_no_file_cuts_in_memory(
    cache: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch, opened: list[str]
) -> None:
    model, runner = _load(tiny_bert)

    def refuse(*_args: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(onnx_backend, "write_cut", refuse)
    got = model.embed(TEXTS, layers=0).vectors
    assert opened[-1] == "<bytes>" and not cut_path(runner.path, 0).exists()
    whole = model.embed(TEXTS, layers="0,-1", combine="concat").vectors[:, : got.shape[1]]
    assert np.abs(got - whole).max() <= 1e-5
