"""An export's record names the file it was made as: another model's export copied in with its record under
this model's name is whole, but not this model's graph, so it is made again, never read."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import bertscope
from tiny_models import config_variant


def test_another_models_export_copied_in_with_its_record_is_made_again(
    tiny_dirs: dict[str, Path], tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = config_variant(tiny_dirs, tmp_path, "bert", initializer_range=0.5)  # other weights, same family
    texts = ["a cat sat", "the storm hit the coast"]
    bertscope.load(tiny_dirs["bert"], device="cpu", backend="onnxruntime").embed(texts)
    bertscope.load(other, device="cpu", backend="onnxruntime").embed(texts)
    exports = sorted((cache / "onnx").glob("bert-*-float32-v*.onnx"))
    assert len(exports) == 2
    capsys.readouterr()
    # every export swapped for the other's, record and all: each file whole, under the wrong name
    staged = [(path, path.with_suffix(".json")) for path in exports]
    for (graph, record), (foreign, foreign_record) in zip(staged, staged[::-1], strict=True):
        shutil.copyfile(foreign, graph.with_suffix(".swap"))
        shutil.copyfile(foreign_record, record.with_suffix(".swapjson"))
    for graph, record in staged:
        graph.with_suffix(".swap").replace(graph)
        record.with_suffix(".swapjson").replace(record)
    reference = bertscope.load(other, device="cpu", backend="torch").embed(texts).vectors
    again = bertscope.load(other, device="cpu", backend="onnxruntime").embed(texts).vectors
    np.testing.assert_allclose(again, reference, atol=1e-5)
    assert "another model's; exporting it again" in capsys.readouterr().err
