"""Audit 25f of the light engine: a plain embed imports no pyarrow; cached graphs the runtime refuses, or
another model's IR under this model's name, are made again; BERTSCOPE_CACHE naming a file is refused in
the one line every command says."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.backends.onnx import export_stamp, read_record, record_export
from bertscope.core.fingerprint_facts import file_sha256
from bertscope.errors import InvalidSpec, ModelLoadError
from tiny_models import build_tiny_model

# The console entry point in a fresh interpreter, printing whether the command imported pyarrow.
PYARROW_AFTER = """
import sys
import threading
from bertscope.cli import main
sys.argv[0] = "bertscope"
try:
    main()
except SystemExit as stop:
    assert not stop.code, stop.code
print("pyarrow" in sys.modules, file=sys.stderr)
"""


def test_a_plain_embed_imports_no_pyarrow() -> None:
    """The corpus levels' pyarrow (40 MB of peak memory) is imported only where rows are built."""
    args = ["embed", "hello world", "--backend", "onnxruntime", "--json"]
    run = subprocess.run(
        [sys.executable, "-c", PYARROW_AFTER, *args], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr.strip().splitlines()[-1] == "False", run.stderr


def test_the_level_table_reads_the_chunks_row_on_demand() -> None:
    from bertscope import Level
    from bertscope.io.chunk_level import ChunkLevel
    from bertscope.io.level_table import LEVELS, level_of

    assert list(LEVELS) == [Level.SENTENCE, Level.TOKENS, Level.WORDS, Level.CHUNKS]
    assert LEVELS[Level.CHUNKS] is ChunkLevel and level_of("chunks") is ChunkLevel and len(LEVELS) == 4


TEXTS = ["a small test sentence", "another one, a little longer than the first one"]


def _load(folder: Path, **runtime: Any) -> bertscope.Model:
    return bertscope.load(folder, device="cpu", **runtime)


def _recorded_again(path: Path) -> None:
    """The record beside an edited graph (an export, or an IR's xml) rewritten: whole to every check but
    the runtime's own."""
    about = read_record(path)
    if path.suffix == ".xml":  # an IR's record is its bin's, with the xml's size and SHA-256 in it
        about["xml"] = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
        record_export(path.with_suffix(".bin"), about)
    else:
        record_export(path, {**about, "sha256": file_sha256(path), **export_stamp(path)})


def test_an_export_onnx_runtime_refuses_is_exported_again(
    cache: Path, tiny_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """An export made by another ONNX Runtime (a newer opset) is made again with a one-line note."""
    onnx = pytest.importorskip("onnx")
    expected = _load(tiny_dirs["bert"], backend="onnxruntime").embed(TEXTS).vectors
    (path,) = (cache / "onnx").glob("bert-*-float32-v2.onnx")
    graph = onnx.load(str(path))
    next(o for o in graph.opset_import if o.domain in ("", "ai.onnx")).version = 99
    onnx.save(graph, str(path))
    _recorded_again(path)
    capsys.readouterr()
    again = _load(tiny_dirs["bert"], backend="onnxruntime").embed(TEXTS).vectors
    said = capsys.readouterr().err
    assert f"the installed ONNX Runtime cannot open the cached graph {path} (" in said
    assert "; making it again" in said and "Traceback" not in said
    assert np.abs(again - expected).max() <= 1e-6


def _refused_ir(cache: Path) -> Path:
    (xml,) = (cache / "openvino").glob("bert-*-int8-weights-*.xml")
    text = xml.read_text(encoding="utf-8")
    assert 'version="opset1"' in text
    xml.write_text(text.replace('version="opset1"', 'version="opset99"', 1), encoding="utf-8")
    _recorded_again(xml)
    return xml


def test_an_ir_openvino_refuses_is_made_again(
    cache: Path, tiny_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("nncf")
    expected = _load(tiny_dirs["bert"], backend="openvino", quantize="int8").embed(TEXTS).vectors
    xml = _refused_ir(cache)
    capsys.readouterr()
    again = _load(tiny_dirs["bert"], backend="openvino", quantize="int8").embed(TEXTS).vectors
    said = capsys.readouterr().err
    assert f"the installed OpenVINO cannot open the cached graph {xml} (" in said and "opset99" in said
    assert "compressing the model's weights to int8" in said
    np.testing.assert_allclose(again, expected, atol=1e-6)


def test_an_ir_openvino_refuses_in_a_cache_that_takes_no_change_is_one_line(
    cache: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("nncf")
    _load(tiny_dirs["bert"], backend="openvino", quantize="int8")
    xml = _refused_ir(cache)
    unlink = Path.unlink

    def read_only(self: Path, missing_ok: bool = False) -> None:
        if self == xml:
            raise PermissionError(13, "Permission denied", str(self))
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", read_only)
    with pytest.raises(
        ModelLoadError, match=r"cannot open the cached graph .*bertscope cache --clear"
    ) as got:
        _load(tiny_dirs["bert"], backend="openvino", quantize="int8")
    assert "\n" not in str(got.value)


def test_another_models_ir_under_this_models_name_is_made_again(
    cache: Path, tiny_dirs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another model's IR and record copied under this model's name: whole, but not this model's graph."""
    pytest.importorskip("nncf")
    other = build_tiny_model("bert", tmp_path / "other", seed=1)
    expected = _load(tiny_dirs["bert"], backend="openvino", quantize="int8").embed(TEXTS).vectors
    (mine,) = (cache / "openvino").glob("bert-*-int8-weights-*.xml")
    _load(other, backend="openvino", quantize="int8")
    (theirs,) = [p for p in (cache / "openvino").glob("bert-*-int8-weights-*.xml") if p != mine]
    for suffix in (".xml", ".bin", ".json"):
        shutil.copy2(theirs.with_suffix(suffix), mine.with_suffix(suffix))
    capsys.readouterr()
    again = _load(tiny_dirs["bert"], backend="openvino", quantize="int8").embed(TEXTS).vectors
    said = capsys.readouterr().err
    assert f"is recorded as {theirs.with_suffix('.bin').name!r}, another model's; making it again" in said
    np.testing.assert_allclose(again, expected, atol=1e-6)


@pytest.mark.parametrize(
    "runtime", [{}, {"backend": "onnxruntime"}, {"backend": "openvino"}, {"mode": "fast"}], ids=str
)
def test_a_cache_that_names_a_file_is_refused_in_one_line_by_every_load(
    runtime: dict[str, str], bundled_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A setting to fix: the line `bertscope cache` says, never "cannot write the cache folder" and torch
    (the bundled model: a tiny one runs torch without asking the cache)."""
    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setenv("BERTSCOPE_CACHE", str(afile))
    said = f"BERTSCOPE_CACHE={afile} points at a file, not a folder: set BERTSCOPE_CACHE to a folder"
    with pytest.raises(InvalidSpec, match=re.escape(said)):
        bertscope.load(bundled_path, **runtime)


def test_a_process_waiting_on_anothers_export_says_so_once(
    cache: Path, tiny_models: dict[str, bertscope.Model]
) -> None:
    """The lock held by another (here: this test's own handle, as another process's would be) is said
    once before the wait; the export is then made as usual."""
    from filelock import FileLock

    from bertscope.backends.onnx import encoder_digest, export_onnx, export_path

    model = tiny_models["bert"]
    digest = encoder_digest(model)
    path = export_path(model.family.name, digest)
    path.parent.mkdir(parents=True)
    said: list[str] = []
    waiting = threading.Event()

    def log(line: str) -> None:
        said.append(line)
        if line.startswith("waiting for"):
            waiting.set()

    made: list[Path] = []
    other = FileLock(f"{path}.lock")
    other.acquire()
    worker = threading.Thread(
        target=lambda: made.append(export_onnx(lambda: model.hf_model, model.family, digest=digest, log=log))
    )
    try:
        worker.start()
        assert waiting.wait(timeout=120), said
    finally:
        other.release()
    worker.join(timeout=300)
    assert made == [path] and path.is_file()
    assert said[0] == (
        f"waiting for the export of {path.name} held by another process or thread "
        f"(its lock: {path.name}.lock)"
    )
    assert sum(line.startswith("waiting for") for line in said) == 1


def test_an_int8_graph_onnx_runtime_refuses_is_removed_and_refused_in_one_line(
    cache: Path, tiny_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """int8's graph is calibrated on the forward its runner answers: the next load makes it again (and no
    note says it is made again now)."""
    onnx = pytest.importorskip("onnx")
    expected = _load(tiny_dirs["bert"], backend="onnxruntime", quantize="int8").embed(TEXTS).vectors
    (path,) = (cache / "onnx").glob("bert-*-int8*.onnx")
    graph = onnx.load(str(path))
    next(o for o in graph.opset_import if o.domain in ("", "ai.onnx")).version = 99
    onnx.save(graph, str(path))
    _recorded_again(path)
    with pytest.raises(ModelLoadError, match="cannot open the cached graph .*load the model again") as got:
        _load(tiny_dirs["bert"], backend="onnxruntime", quantize="int8").embed(TEXTS)
    assert "\n" not in str(got.value) and not path.exists()
    assert "making it again" not in capsys.readouterr().err
    again = _load(tiny_dirs["bert"], backend="onnxruntime", quantize="int8").embed(TEXTS).vectors
    np.testing.assert_allclose(again, expected, atol=1e-6)


def test_a_cut_graph_onnx_runtime_refuses_is_cut_again(
    cache: Path, tiny_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A cut keeps its export's opset: the export is made again too, then the cut."""
    onnx = pytest.importorskip("onnx")
    expected = _load(tiny_dirs["bert"], backend="onnxruntime").embed(TEXTS, layers="1").vectors
    (cut,) = (cache / "onnx").glob("bert-*-float32-to1-v2.onnx")
    graph = onnx.load(str(cut))
    next(o for o in graph.opset_import if o.domain in ("", "ai.onnx")).version = 99
    onnx.save(graph, str(cut))
    _recorded_again(cut)
    capsys.readouterr()
    again = _load(tiny_dirs["bert"], backend="onnxruntime").embed(TEXTS, layers="1").vectors
    said = capsys.readouterr().err
    assert f"the installed ONNX Runtime cannot open the cached graph {cut} (" in said, said
    np.testing.assert_allclose(again, expected, atol=1e-6)
