"""The graphs cut at a layer for early stop on ONNX Runtime: cut from the export's file, written beside it.

A forward that stops before the last layer runs the export cut to the nodes hidden_0..hidden_k need
(`OnnxRunner.session_for`). Cutting loads the whole export's protobuf (about twice the file's size in
memory, with the cut copy), so it is done once per export and depth: the cut graph is written beside the
export (`<family>-<digest>-<variant>-to<k>-v<format>.onnx`), atomically; backends/onnx.py's `cached_cut`
records its size and SHA-256 and the export's SHA-256 as an export's are recorded, and checks them before
a later process opens the file (and nothing else). Imports no torch and nothing of bertscope.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["cut_graph", "cut_path", "write_cut"]


def cut_graph(path: Path, inputs: Sequence[str] | None, outputs: Sequence[str]) -> Any:
    """The ONNX model at `path` cut to the nodes that `outputs` need (an `onnx.ModelProto`), with `inputs`
    as its inputs (None: the model's own)."""
    import onnx
    from onnx.utils import Extractor

    model = onnx.load(str(path))
    if inputs is None:
        weights = {tensor.name for tensor in model.graph.initializer}
        inputs = [i.name for i in model.graph.input if i.name not in weights]
    return Extractor(model).extract_model(list(inputs), list(outputs))


def cut_path(path: Path, deepest: int) -> Path:
    """Where the graph of the export at `path` cut after hidden state `deepest` is kept: beside it, named
    as it is with `-to<deepest>` before its format (`bert-<digest>-float32-to4-v2.onnx`)."""
    stem, _, version = path.name.rpartition("-v")
    return path.with_name(f"{stem}-to{deepest}-v{version}")


def write_cut(path: Path, cut: Path, inputs: Sequence[str] | None, outputs: Sequence[str]) -> None:
    """Cut the export at `path` (`cut_graph`) and write the graph to `cut` atomically: staged beside it,
    then moved into place; nothing staged is left where it fails."""
    import onnx

    staged = cut.with_suffix(f".{os.getpid()}.onnx.tmp")
    try:
        # the whole export's protobuf is freed once cut, before the cut graph is serialized
        onnx.save(cut_graph(path, inputs, outputs), str(staged))
        os.replace(staged, cut)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
