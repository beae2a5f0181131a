"""Review 25 of the light engine: a cached attention graph the installed ONNX Runtime refuses is made again
(or refused in one line), the note on loading PyTorch gives the reason it was loaded, and the command line
names an empty chunked input "document N" as every other chunk error does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.backends.onnx import export_stamp, read_record, record_export
from bertscope.core.fingerprint_facts import file_sha256
from console import run_main


def _light(folder: Path) -> bertscope.Model:
    """`folder` opened light on ONNX Runtime (its export made first, by a load that needs the module)."""
    bertscope.load(folder, device="cpu", backend="onnxruntime")
    model = bertscope.load(folder, device="cpu", backend="onnxruntime")
    assert isinstance(model, bertscope.Model) and model.light
    return model


def _refused_attention_graph(cache: Path) -> Path:
    """The cached attention graph stamped with an opset the installed ONNX Runtime refuses, its record
    rewritten to match: whole to every check but the runtime's own (a graph made by another version)."""
    onnx = pytest.importorskip("onnx")
    (path,) = (cache / "onnx").glob("*-attentions-v2.onnx")
    graph = onnx.load(str(path))
    next(o for o in graph.opset_import if o.domain in ("", "ai.onnx")).version = 99
    onnx.save(graph, str(path))
    record_export(path, {**read_record(path), "sha256": file_sha256(path), **export_stamp(path)})
    return path


def test_an_attention_graph_onnx_runtime_refuses_is_made_again(
    cache: Path, tiny_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    expected = _light(tiny_dirs["bert"]).attentions("a small cat")
    path = _refused_attention_graph(cache)
    model = _light(tiny_dirs["bert"])
    capsys.readouterr()
    again = model.attentions("a small cat")
    said = capsys.readouterr().err
    assert f"the installed ONNX Runtime cannot open the cached graph {path} (" in said, said
    assert "; making it again" in said and "Traceback" not in said and "PyTorch module" not in said
    np.testing.assert_allclose(again, expected, atol=1e-6)
    assert model.attentions("a small cat").shape == expected.shape  # the graph made again is whole


def test_an_attention_graph_refused_in_a_cache_that_takes_no_change_is_one_line(
    cache: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """The graph cannot be removed: said in one line naming the fix, and the module answers instead."""
    expected = _light(tiny_dirs["bert"]).attentions("a small cat")
    path = _refused_attention_graph(cache)
    unlink = Path.unlink

    def read_only(self: Path, missing_ok: bool = False) -> None:
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", read_only)
    model = _light(tiny_dirs["bert"])
    capsys.readouterr()
    again = model.attentions("a small cat")
    (line,) = [s for s in capsys.readouterr().err.splitlines() if "cannot open" in s]
    assert line.startswith(f"attention: the installed ONNX Runtime cannot open the cached graph {path} (")
    assert "run `bertscope cache --clear` as its owner" in line
    assert line.endswith("reading the weights from the PyTorch module") and path.is_file()
    np.testing.assert_allclose(again, expected, atol=1e-5)


# A fresh interpreter (the notice is said only where the load imports transformers first): a load on
# ONNX Runtime, then, opened light, the attention weights, with bertscope's INFO notices on stderr.
TORCH_NOTE = """
import logging, sys
import bertscope
logging.basicConfig(level=logging.INFO, format="%(message)s")
import bertscope.core.loading as loading
loading._SAY_AFTER_S = 0.0
model = bertscope.load(sys.argv[1], device="cpu", backend="onnxruntime")
if sys.argv[2] == "attentions":
    model.attentions("a small cat")
else:
    model.embed(["a small cat"])
"""


def _torch_note(folder: Path, cache: Path, asked: str) -> str:
    env = {**os.environ, "BERTSCOPE_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(
        [sys.executable, "-c", TORCH_NOTE, str(folder), asked],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    (note,) = [line for line in run.stderr.splitlines() if line.startswith("loaded PyTorch")]
    return note


def test_the_torch_load_note_of_a_first_export_says_that_reason_alone(
    tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """It said both reasons it might be (a first export, or a feature the graph does not serve)."""
    note = _torch_note(tiny_dirs["bert"], tmp_path / "cache", "embed")
    said = "s: for a first export, made once (the exported graph then computes the vectors)"
    assert note.endswith(said) and "feature" not in note, note
    # opened light, the attention graph's export loads the module: that reason, not the vectors'
    note = _torch_note(tiny_dirs["bert"], tmp_path / "cache", "attentions")
    said = "s: for the attention graph's first export, made once (the graph then gives the weights)"
    assert note.endswith(said), note


@pytest.mark.parametrize("chunked", [("--chunks", "sentence"), ("--level", "chunks")], ids=" ".join)
def test_an_empty_chunked_argument_is_a_document_as_a_long_one_is(chunked: tuple[str, ...]) -> None:
    """It said "text 2 is empty" where the same argument too long is "document 2 has 302 tokens"."""
    empty = run_main("embed", "ok.", " ", *chunked)
    assert empty.code != 0 and _error(empty.stderr).startswith("error: document 2 is empty: "), empty.stderr
    long = run_main("embed", "ok.", "hello " * 300, *chunked, "--long", "error")
    # the error line, not the first: a fresh cache says what the exact default timed before it
    assert long.code != 0 and _error(long.stderr).startswith("error: document 2 has 302 tokens "), long.stderr


def _error(stderr: str) -> str:
    """The line of `stderr` that the CLI's error is (empty where none is)."""
    return next((line for line in stderr.splitlines() if line.startswith("error:")), "")
