"""Review 25b of the light engine's cached graphs: only a graph the runtime refuses (its opset, IR version,
an operator) is removed and made again, never one this process failed to open (a file or memory limit);
an int8 cut refused goes with its export; an OpenVINO model recorded before records named their file is
read, even from a cache that cannot be written; the whole refusal is said; a wait on a lock is said once."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.backends.onnx import read_record, refusal_reason
from bertscope.errors import ModelLoadError
from test_light_audit25 import TEXTS, _recorded_again

# ONNX Runtime's words for an open that ran out of file descriptors (RLIMIT_NOFILE), not a refused graph
FD_LIMIT = "[ONNXRuntimeError] : 1 : FAIL : Load model from {} failed:system error number 24"
# OpenVINO's, for the same
OV_FD_LIMIT = (
    "Exception from src/inference/src/cpp/core.cpp:84:\nException from src/inference/src/model_reader.cpp:"
    '148:\nUnable to read the model: "{}" Please check that model format: ".xml" is supported and the '
    "model is correct. Available frontends: \n"
)


def _load(folder: Path, **runtime: Any) -> Any:
    return bertscope.load(folder, device="cpu", **runtime)


def _opset_99(path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    graph = onnx.load(str(path))
    next(o for o in graph.opset_import if o.domain in ("", "ai.onnx")).version = 99
    onnx.save(graph, str(path))
    _recorded_again(path)


def _failing_sessions(monkeypatch: pytest.MonkeyPatch, error: Any, times: int = 1_000) -> list[str]:
    """ONNX Runtime's InferenceSession raising `error(path)` for its first `times` opens of a path."""
    import onnxruntime

    real = onnxruntime.InferenceSession
    tried: list[str] = []

    def session(model: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(model, str) and len(tried) < times:
            tried.append(model)
            raise error(model)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", session)
    return tried


def test_an_export_this_process_cannot_open_is_left_and_said_in_one_line(
    cache: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Out of file descriptors: the export is whole, so it stays (a torch-free install could not make it
    again), and the line names the cause."""
    import onnxruntime

    fail = onnxruntime.capi.onnxruntime_pybind11_state.Fail
    model = _load(tiny_dirs["bert"], backend="onnxruntime")
    expected = model.embed(TEXTS).vectors
    (path,) = (cache / "onnx").glob("bert-*-float32-v2.onnx")
    model.engine.runner.session = None  # opened again at the next forward
    tried = _failing_sessions(monkeypatch, lambda model: fail(FD_LIMIT.format(model)))
    capsys.readouterr()
    with pytest.raises(ModelLoadError) as got:
        model.embed(TEXTS)
    said = str(got.value)
    assert tried == [str(path)] and path.is_file() and read_record(path)
    assert f"could not open the cached graph {path} (" in said and "Too many open files" in said
    assert "it is left in the cache" in said and "\n" not in said
    assert "making it again" not in capsys.readouterr().err
    monkeypatch.undo()  # the limit lifted: the same graph answers
    monkeypatch.setenv("BERTSCOPE_CACHE", str(cache))
    np.testing.assert_allclose(model.embed(TEXTS).vectors, expected, atol=1e-6)


def test_a_graph_gone_between_check_and_open_is_made_again(
    cache: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Another process removed it as refused: ONNX Runtime's NoSuchFile is a missing graph, made again."""
    import onnxruntime

    missing = onnxruntime.capi.onnxruntime_pybind11_state.NoSuchFile
    model = _load(tiny_dirs["bert"], backend="onnxruntime")
    expected = model.embed(TEXTS).vectors
    (path,) = (cache / "onnx").glob("bert-*-float32-v2.onnx")
    model.engine.runner.session = None

    def gone(name: str) -> BaseException:
        Path(name).unlink()
        return missing(f"[ONNXRuntimeError] : 3 : NO_SUCHFILE : Load model from {name} failed")

    tried = _failing_sessions(monkeypatch, gone, times=1)
    capsys.readouterr()
    again = model.embed(TEXTS).vectors
    assert tried == [str(path)] and path.is_file()
    said = capsys.readouterr().err  # made again as a missing export is: no "cannot open" note (2818d12)
    assert "left the cache after this model loaded; exporting again" in said, said
    assert "cannot open" not in said, said
    np.testing.assert_allclose(again, expected, atol=1e-6)


class _FailingCore:
    """OpenVINO's Core whose read_model fails with `message` (the path formatted in) on `suffix` files."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, suffix: str, message: str) -> None:
        import openvino

        real = openvino.Core

        class Core(real):  # type: ignore[misc, valid-type]
            def read_model(self, model: Any, *args: Any, **kwargs: Any) -> Any:
                if isinstance(model, str) and model.endswith(suffix):
                    raise RuntimeError(message.format(model))
                return super().read_model(model, *args, **kwargs)

        monkeypatch.setattr(openvino, "Core", Core)


@pytest.mark.parametrize(
    "message",
    [OV_FD_LIMIT, "Exception from src/x.cpp:1:\nCannot create X layer from unsupported opset: opset99\n"],
    ids=["fd-limit", "opset"],
)  # fmt: skip
def test_openvino_never_removes_the_onnx_export_it_reads(
    message: str, cache: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """float32 on OpenVINO reads ONNX Runtime's export: whatever OpenVINO says of it, it stays."""
    pytest.importorskip("openvino")
    _load(tiny_dirs["bert"], backend="onnxruntime").embed(TEXTS)
    (path,) = (cache / "onnx").glob("bert-*-float32-v2.onnx")
    _FailingCore(monkeypatch, ".onnx", message)
    with pytest.raises(ModelLoadError, match="OpenVINO") as got:
        _load(tiny_dirs["bert"], backend="openvino")
    assert path.is_file() and read_record(path) and "\n" not in str(got.value)
    assert "reinstall" not in str(got.value) and str(path) in str(got.value)


def test_an_int8_ir_this_process_cannot_open_is_left(
    cache: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("nncf")
    _load(tiny_dirs["bert"], backend="openvino", quantize="int8")
    (xml,) = (cache / "openvino").glob("bert-*-int8-weights-*.xml")
    _FailingCore(monkeypatch, ".xml", OV_FD_LIMIT)
    with pytest.raises(ModelLoadError, match="could not open the cached graph .*left in the cache") as got:
        _load(tiny_dirs["bert"], backend="openvino", quantize="int8")
    assert xml.is_file() and "\n" not in str(got.value)


def test_an_int8_cut_refused_goes_with_its_export_in_one_line(
    cache: Path, tiny_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """int8 cannot be made again by the runner (its calibration runs the forward it answers), and a cut
    made again from the refused export would be refused again: both go, the next load makes them."""
    int8 = {"backend": "onnxruntime", "quantize": "int8"}
    expected = _load(tiny_dirs["bert"], **int8).embed(TEXTS, layers="1").vectors
    graphs = sorted((cache / "onnx").glob("bert-*-int8*.onnx"))
    assert len(graphs) == 2  # the export and its cut after layer 1
    for graph in graphs:
        _opset_99(graph)
    capsys.readouterr()
    with pytest.raises(ModelLoadError, match="cannot open the cached graph .*load the model again") as got:
        _load(tiny_dirs["bert"], backend="onnxruntime", quantize="int8").embed(TEXTS, layers="1")
    assert "\n" not in str(got.value) and "it was cut from" in str(got.value)
    assert not any(graph.exists() for graph in graphs)
    assert "making it again" not in capsys.readouterr().err
    again = _load(tiny_dirs["bert"], **int8).embed(TEXTS, layers="1").vectors
    np.testing.assert_allclose(again, expected, atol=1e-6)


def _old_record(cache: Path) -> Path:
    """The int8 OpenVINO model's record as written before records named their file."""
    (xml,) = (cache / "openvino").glob("bert-*-int8-weights-*.xml")
    about = read_record(xml)
    del about["file"]
    xml.with_suffix(".json").write_text(json.dumps(about), encoding="utf-8")
    return xml


def test_an_openvino_model_recorded_before_records_named_their_file_is_read(
    cache: Path, tiny_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Whole by its size and SHA-256: read, not made again, and its record names its file now."""
    pytest.importorskip("nncf")
    expected = _load(tiny_dirs["bert"], backend="openvino", quantize="int8").embed(TEXTS).vectors
    xml = _old_record(cache)
    capsys.readouterr()
    again = _load(tiny_dirs["bert"], backend="openvino", quantize="int8").embed(TEXTS).vectors
    assert "compressing" not in capsys.readouterr().err
    assert read_record(xml)["file"] == xml.with_suffix(".bin").name
    np.testing.assert_allclose(again, expected, atol=1e-6)


def test_an_old_openvino_record_in_a_cache_that_cannot_be_written_is_read(
    cache: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/fast-modes.md: a cache that cannot be written is read all the same; the record stays old."""
    pytest.importorskip("nncf")
    from bertscope.backends import onnx, openvino

    expected = _load(tiny_dirs["bert"], backend="openvino", quantize="int8").embed(TEXTS).vectors
    xml = _old_record(cache)

    def read_only(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, "Permission denied")

    def no_folder(folder: Path) -> None:
        raise ModelLoadError(f"cannot write the cache folder {folder} (Permission denied)")

    for module in (onnx, openvino):
        monkeypatch.setattr(module, "record_export", read_only)
        monkeypatch.setattr(module, "writable_folder", no_folder)
    again = _load(tiny_dirs["bert"], backend="openvino", quantize="int8").embed(TEXTS).vectors
    assert "file" not in read_record(xml)
    np.testing.assert_allclose(again, expected, atol=1e-6)


def test_the_refusal_keeps_what_the_runtime_supports(tmp_path: Path) -> None:
    """ONNX Runtime's refusal of a newer opset ends with the opset it supports: that part is kept."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from bertscope.backends.onnx import graph_refused, open_session

    value = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [value], [out])
    path = tmp_path / "newer.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 99)]), str(path))
    with pytest.raises(Exception) as got:
        open_session(str(path))
    reason = refusal_reason(got.value)
    assert graph_refused(got.value) and "Opset 99" in reason and "\n" not in reason
    assert "Current official support for domain ai.onnx is till opset" in reason
    assert "model_load_utils.h" not in reason


def test_a_wait_on_a_held_lock_is_said_once_over_several_polls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder here is another thread of this process: the note names both, and is said once however
    many times the waiter polls (filelock's sleep between polls counted, not slept)."""
    from filelock import FileLock
    from filelock._core import _acquire

    from bertscope.backends.onnx import held_lock

    polls = threading.Condition()
    polled = [0]

    def counted(_: float) -> None:
        with polls:
            polled[0] += 1
            polls.notify_all()  # the holder releases after a few polls

    monkeypatch.setattr(_acquire, "time", SimpleNamespace(perf_counter=time.perf_counter, sleep=counted))
    path = tmp_path / "model.onnx"
    said: list[str] = []
    entered = threading.Event()

    def waiter() -> None:
        with held_lock(path, f"export of {path.name}", said.append):
            entered.set()

    holder = FileLock(f"{path}.lock")
    holder.acquire()
    worker = threading.Thread(target=waiter)
    try:
        worker.start()
        with polls:
            assert polls.wait_for(lambda: polled[0] >= 3, timeout=60), polled
    finally:
        holder.release()
    worker.join(timeout=60)
    assert entered.is_set() and polled[0] >= 3
    assert said == [
        f"waiting for the export of {path.name} held by another process or thread "
        f"(its lock: {path.name}.lock)"
    ]
