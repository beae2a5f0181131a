"""Review 25c of the light engine's cached graphs: an OpenVINO IR of another IR version is made again (its
version read from its head, as OpenVINO's words do not say it); ONNX Runtime's RuntimeException (memory)
and InvalidArgument (an empty file) are one line or a refused graph, never a raw exception; a graph gone
between check and open is made again as a missing one, nothing else removed and no runtime blamed."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.backends.onnx import refusal_reason
from bertscope.errors import ModelLoadError
from test_light_audit25 import TEXTS, _recorded_again

# ONNX Runtime 1.32's words for a session that ran out of memory while it was set up
BAD_ALLOC = "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Exception during initialization: std::bad_alloc"


def _load(folder: Path, **runtime: Any) -> Any:
    return bertscope.load(folder, device="cpu", **runtime)


def _state() -> Any:
    return pytest.importorskip("onnxruntime").capi.onnxruntime_pybind11_state


def _failing_once(
    monkeypatch: pytest.MonkeyPatch, fails: Callable[[str], bool], error: Callable[[str], BaseException]
) -> list[str]:
    """ONNX Runtime's InferenceSession raising `error(path)` at the first open of a path that `fails`."""
    import onnxruntime

    real = onnxruntime.InferenceSession
    tried: list[str] = []

    def session(model: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(model, str) and fails(model) and not tried:
            tried.append(model)
            raise error(model)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", session)
    return tried


def _gone(name: str) -> BaseException:
    """The graph removed by another process, and ONNX Runtime's NoSuchFile for it."""
    Path(name).unlink()
    return _state().NoSuchFile(
        f"[ONNXRuntimeError] : 3 : NO_SUCHFILE : Load model from {name} failed:Load model {name} failed. "
        "File doesn't exist"
    )


def test_an_int8_ir_of_another_ir_version_is_made_again(
    cache: Path, tiny_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """OpenVINO says only "Unable to read the model" of it, as of a file limit: the IR's version decides."""
    pytest.importorskip("nncf")
    int8 = {"backend": "openvino", "quantize": "int8"}
    expected = _load(tiny_dirs["bert"], **int8).embed(TEXTS).vectors
    (xml,) = (cache / "openvino").glob("bert-*-int8-weights-*.xml")
    text = xml.read_text(encoding="utf-8")
    edited = re.sub(r'(<net [^>]*version=")11"', r'\g<1>12"', text, count=1)
    assert edited != text
    xml.write_text(edited, encoding="utf-8")
    _recorded_again(xml)
    capsys.readouterr()
    again = _load(tiny_dirs["bert"], **int8).embed(TEXTS).vectors
    (note,) = [line for line in capsys.readouterr().err.splitlines() if "cannot open" in line]
    assert note.endswith("(its IR version 12, where this OpenVINO writes 11); making it again"), note
    assert 'version="11"' in xml.read_text(encoding="utf-8")[:200]
    np.testing.assert_allclose(again, expected, atol=1e-6)


def test_runtime_memory_at_session_set_up_is_one_line_and_the_graph_stays(
    cache: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ONNX Runtime's RuntimeException (std::bad_alloc) went through raw: a traceback at the CLI."""
    _load(tiny_dirs["bert"], backend="onnxruntime").embed(TEXTS)
    (path,) = (cache / "onnx").glob("bert-*-float32-v2.onnx")
    _failing_once(monkeypatch, lambda name: name == str(path), lambda _: _state().RuntimeException(BAD_ALLOC))
    model = _load(tiny_dirs["bert"], backend="onnxruntime")
    with pytest.raises(ModelLoadError, match="could not open the cached graph .*left in the cache") as got:
        model.embed(TEXTS)
    assert "std::bad_alloc" in str(got.value) and "RUNTIME_EXCEPTION" not in str(got.value)
    assert path.is_file() and "\n" not in str(got.value)


def test_an_empty_graph_file_is_refused_and_made_again(
    cache: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """InvalidArgument ("No graph was found in the protobuf") refuses the file itself: made again."""
    expected = _load(tiny_dirs["bert"], backend="onnxruntime").embed(TEXTS).vectors
    (path,) = (cache / "onnx").glob("bert-*-float32-v2.onnx")
    no_graph = "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : No graph was found in the protobuf."
    _failing_once(monkeypatch, lambda name: name == str(path), lambda _: _state().InvalidArgument(no_graph))
    capsys.readouterr()
    again = _load(tiny_dirs["bert"], backend="onnxruntime").embed(TEXTS).vectors
    (note,) = [line for line in capsys.readouterr().err.splitlines() if "cannot open" in line]
    assert note.endswith("(No graph was found in the protobuf.); making it again"), note
    np.testing.assert_allclose(again, expected, atol=1e-6)


@pytest.mark.parametrize("quantize", [None, "int8"])
def test_a_cut_gone_between_check_and_open_is_cut_again_and_its_export_kept(
    quantize: str | None, cache: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """NoSuchFile was a refusal: 'cannot open' blamed the runtime and the cut's export was removed."""
    runtime = {"backend": "onnxruntime", "quantize": quantize}
    expected = _load(tiny_dirs["bert"], **runtime).embed(TEXTS, layers="1").vectors
    graphs = sorted((cache / "onnx").glob("bert-*.onnx"))
    (cut,) = [graph for graph in graphs if "-to1-" in graph.name]
    exports = {graph: graph.stat().st_ino for graph in graphs if graph != cut}
    tried = _failing_once(monkeypatch, lambda name: name == str(cut), _gone)
    model = _load(tiny_dirs["bert"], **runtime)
    capsys.readouterr()
    again = model.embed(TEXTS, layers="1").vectors
    err = capsys.readouterr().err
    assert tried == [str(cut)] and cut.is_file(), err
    assert "cannot open" not in err and "reinstall" not in err and "exporting" not in err, err
    assert {graph: graph.stat().st_ino for graph in exports} == exports  # nothing else removed or remade
    np.testing.assert_allclose(again, expected, atol=1e-6)


def test_an_attention_graph_gone_between_check_and_open_is_exported_again_without_a_refusal(
    cache: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _load(tiny_dirs["bert"], backend="onnxruntime")
    model = _load(tiny_dirs["bert"], backend="onnxruntime")
    expected = model.attentions("a small cat")
    model = _load(tiny_dirs["bert"], backend="onnxruntime")
    tried = _failing_once(monkeypatch, lambda name: "-attentions-" in name, _gone)
    capsys.readouterr()
    again = model.attentions("a small cat")
    err = capsys.readouterr().err
    assert len(tried) == 1 and Path(tried[0]).is_file(), err
    assert "cannot open" not in err and "reinstall" not in err and "PyTorch module" not in err, err
    np.testing.assert_allclose(again, expected, atol=1e-5)


def test_the_refusal_drops_the_runtime_status_code() -> None:
    """ONNX Runtime's "1 : FAIL : " and "3 : NO_SUCHFILE : " say nothing a reader acts on."""
    said = refusal_reason(RuntimeError("[ONNXRuntimeError] : 1 : FAIL : Load model from x.onnx failed"))
    assert said == "Load model from x.onnx failed"
