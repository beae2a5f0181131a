"""An install without torch (as `pip uninstall torch` leaves it: the import finders find no torch, so
`importlib.util.find_spec("torch")` is None) runs what a run with torch recorded, and refuses the rest in
one line; the light engine decides the device without importing torch where no GPU can be there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bertscope.core.loading import TORCH_PIN

pytest.importorskip("onnxruntime")

# A meta_path finder that finds no torch: what an uninstalled torch looks like (sys.modules["torch"] = None
# is not: the finders still find torch's files, and the installed packages' key still stamps them).
_NO_TORCH = """
import importlib.util, sys
class _Hide:
    def __init__(self, finder): self.finder = finder
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."): return None
        find = getattr(self.finder, "find_spec", None)
        return find(name, path, target) if find else None
    def __getattr__(self, name): return getattr(self.finder, name)
sys.meta_path[:] = [_Hide(finder) for finder in sys.meta_path]
assert importlib.util.find_spec("torch") is None
"""
# The tiny test models are under exact.MIN_PARAMETERS, where torch stays: measured as a bigger model is.
_MEASURED_SMALL = "from bertscope.backends import exact; exact.MIN_PARAMETERS = 0\n"


def _python(code: str, *, torch: bool) -> subprocess.CompletedProcess[str]:
    """`code` run in a fresh Python, with or without torch installed as far as it can tell."""
    script = ("" if torch else _NO_TORCH) + _MEASURED_SMALL + code
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300, check=False
    )


_LOAD = """
import json, sys, bertscope
model = bertscope.load({folder!r})
model.embed("a cat")
print(json.dumps({{"backend": model.info().backend, "torch": "torch" in sys.modules}}))
"""


def test_without_torch_the_exact_default_runs_what_a_run_with_torch_measured(
    tiny_dirs: dict[str, Path], cache: Path
) -> None:
    folder = str(tiny_dirs["bert"])
    with_torch = _python(_LOAD.format(folder=folder), torch=True)
    assert with_torch.returncode == 0, with_torch.stderr
    assert "exact default: timing" in with_torch.stderr
    without = _python(_LOAD.format(folder=folder), torch=False)
    assert without.returncode == 0, without.stderr
    assert "timing" not in without.stderr  # nothing measured: it could not be
    ran = json.loads(without.stdout)
    assert ran["backend"] in ("onnxruntime", "openvino") and not ran["torch"]


def test_without_torch_and_no_measurement_the_exact_default_refuses_in_one_line(
    tiny_dirs: dict[str, Path], cache: Path
) -> None:
    without = _python(_LOAD.format(folder=str(tiny_dirs["bert"])), torch=False)
    assert without.returncode == 1
    assert "timing" not in without.stderr  # never announced: it cannot be made
    said = without.stderr.strip().splitlines()[-1]
    assert said.startswith("bertscope.errors.BackendUnavailable: torch is not installed here")
    assert "backend='onnxruntime'" in said and f"pip install 'torch=={TORCH_PIN}'" in said


def test_without_torch_a_measurement_that_found_no_exact_runtime_is_said(
    tiny_dirs: dict[str, Path], cache: Path
) -> None:
    """Where the run with torch measured every runtime off by more than 1e-5, the torch-less refusal said
    "no run with torch recorded which runtime is exact" and offered backend='onnxruntime' as if nothing
    were known: it says what was measured."""
    folder = str(tiny_dirs["bert"])
    assert _python(_LOAD.format(folder=folder), torch=True).returncode == 0
    (measured,) = [path for path in (cache / "fast").glob("*exact*.json") if "-r" in path.name]
    record = json.loads(measured.read_text())
    for row in record["measured"]:
        if row["mode"] != "torch float32":
            row["max_abs"] = 1e-3
    measured.write_text(json.dumps(record))
    without = _python(_LOAD.format(folder=folder), torch=False)
    assert without.returncode == 1 and "timing" not in without.stderr
    said = without.stderr.strip().splitlines()[-1]
    assert "found no runtime within 1e-5 of it: only torch runs it exactly" in said, said


class _CudaTorch:
    """A torch in sys.modules that counts the times it is asked for a GPU (and says one is there)."""

    def __init__(self) -> None:
        self.asked = 0
        self.cuda = self

    def is_available(self) -> bool:
        self.asked += 1
        return True


@pytest.fixture
def cuda_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> _CudaTorch:
    """torch found as a CUDA build (its lib folder holds libc10_cuda.so), and a stand-in imported."""
    from importlib.machinery import ModuleSpec

    from bertscope.core import folder

    package = tmp_path / "site" / "torch"
    (package / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "lib" / "libc10_cuda.so").write_bytes(b"")
    spec = ModuleSpec("torch", None, origin=str(package / "__init__.py"))
    monkeypatch.setattr(folder, "find_spec", lambda name: spec if name == "torch" else None)
    fake = _CudaTorch()
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake


def test_a_cuda_torch_on_a_machine_without_a_gpu_is_not_asked(
    cuda_torch: _CudaTorch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope.backends.light import opens_light
    from bertscope.core import folder

    monkeypatch.setattr(folder, "_GPU_SIGNS", (str(tmp_path / "dev" / "nvidia[0-9]*"),), raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    asked = {"device": None, "dtype": "float32", "backend": "onnxruntime", "quantize": None, "mode": "exact"}
    assert opens_light(asked, False, calibration=None, remeasure=False)
    assert folder.default_device() == "cpu" and cuda_torch.asked == 0
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia0").write_bytes(b"")  # a GPU's device node: torch tells
    assert folder.default_device() == "cuda" and cuda_torch.asked == 1
    for hidden in ("", "-1"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
        assert folder.default_device() == "cpu" and cuda_torch.asked == 1


@pytest.mark.parametrize(
    "node", ["dev/nvhost-ctrl-gpu", "dev/nvgpu", "sys/module/nvidia", "dev/dxg", "dev/kfd"]
)
def test_a_jetson_or_wsl_or_rocm_gpu_is_asked_of_torch(
    cuda_torch: _CudaTorch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, node: str
) -> None:
    """The driver signs that mean "ask torch" include Jetson's integrated GPU (no /dev/nvidia0 there; it was
    told "cpu" and ran on the CPU), a module loaded before its nodes are made, WSL and ROCm."""
    from bertscope.core import folder

    signs = tuple(str(tmp_path) + sign for sign in folder._GPU_SIGNS)
    monkeypatch.setattr(folder, "_GPU_SIGNS", signs)
    monkeypatch.setattr(sys, "platform", "linux")
    assert folder.default_device() == "cpu" and cuda_torch.asked == 0
    (tmp_path / node).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / node).write_bytes(b"")
    assert folder.default_device() == "cuda" and cuda_torch.asked == 1


_NEED_TORCH = {
    "encode tensor": lambda m: m.encode(["a cat"], convert_to_tensor=True),
    "encode tokens": lambda m: m.encode(["a cat"], output_value="token_embeddings"),
    "encode list": lambda m: m.encode(["a cat"], convert_to_numpy=False),
    "forward": lambda m: m.forward(["a cat"]),
    "verify": lambda m: m.verify(["a cat"]),
    "add_tokens": lambda m: m.add_tokens(["zorblax"]),
    "save": lambda m: m.save("unwritten"),
    "use_torch": lambda m: m.use_torch(),
}


def test_calls_that_need_torch_say_so_in_one_line_where_it_is_missing(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each names what to install (a bare ModuleNotFoundError before; use_torch() was taken and the error
    came at the next embed); the NumPy answers run on."""
    import bertscope
    from bertscope.errors import BackendUnavailable

    model = bertscope.load(tiny_dirs["bert"], device="cpu", backend="onnxruntime")
    monkeypatch.setitem(sys.modules, "torch", None)
    for name, call in _NEED_TORCH.items():
        with pytest.raises(BackendUnavailable, match=r"torch is not installed here: pip install 'torch=="):
            call(model)
        assert model.backend == "onnxruntime", name
    assert model.encode(["a cat"]).shape == model.embed(["a cat"]).vectors.shape
    assert model.encode([], convert_to_numpy=True).shape == (0,)


def test_a_damaged_export_is_named_for_what_is_wrong(
    tiny_dirs: dict[str, Path],
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A deleted record is said as missing (not as a size and SHA-256 the file fails); with torch gone, a
    cut-short export is said to be damaged before torch is asked for a new one."""
    import bertscope
    from bertscope.errors import BackendUnavailable

    bertscope.load(tiny_dirs["bert"], device="cpu", backend="onnxruntime")
    (export,) = (cache / "onnx").glob("bert-*-float32-v*.onnx")
    export.with_suffix(".json").unlink()
    capsys.readouterr()
    bertscope.load(tiny_dirs["bert"], device="cpu", backend="onnxruntime")
    said = capsys.readouterr().err
    assert f"the cached export {export} cannot be checked: its record {export.stem}.json is missing" in said
    assert "does not match" not in said
    export.write_bytes(export.read_bytes()[:100])
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(BackendUnavailable) as refused:
        bertscope.load(tiny_dirs["bert"], device="cpu", backend="onnxruntime")
    assert str(refused.value).startswith(
        f"the cached export {export} does not match its recorded size and SHA-256; exporting the model to "
        "ONNX needs the model's PyTorch module, and torch is not installed here"
    )


_OWN_INT8 = """
import bertscope
from bertscope.errors import InvalidSpec
texts = [f"sentence {{i}} of the caller's own corpus, about cats and the weather" for i in range(16)]
try:
    model = bertscope.load(
        {folder!r}, device="cpu", backend="onnxruntime", quantize="int8", calibration=texts
    )
    print("runs", model.quantize)
except InvalidSpec as exc:
    print("refused", exc)
"""


def test_without_torch_int8_on_own_texts_reads_the_verdict_a_run_with_torch_kept(
    tiny_dirs: dict[str, Path], cache: Path
) -> None:
    """Its drift against torch float32 was kept beside the graph under a key that stamped torch: an
    install without torch missed it and went to measure it again, which needs torch."""
    code = _OWN_INT8.format(folder=str(tiny_dirs["bert"]))
    with_torch = _python(code, torch=True)
    assert with_torch.returncode == 0, with_torch.stderr
    without = _python(code, torch=False)
    assert without.returncode == 0, without.stderr
    assert without.stdout == with_torch.stdout


# `bertscope embed --fast` as the console script runs it, its one-line error and exit code included
_EMBED_FAST = """
import sys
from bertscope.cli import main
sys.argv = ["bertscope", "embed", "--fast", "-m", {folder!r}, "a cat"]
main()
"""


def _fastest_only(cache: Path, fastest: str) -> None:
    """The measurement a run with torch kept, rewritten so `fastest` is the one way worth choosing (the
    tiny model's own timings decide nothing here)."""
    (path,) = (cache / "fast").glob("*.json")
    data = json.loads(path.read_text())
    for row in data["measured"]:
        row["vs_float32"] = 1.0 if row["mode"] == "torch float32" else 2.0 if row["mode"] == fastest else 0.5
        row["texts_per_s"] = 100.0 * row["vs_float32"]
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("fastest", ["onnxruntime float32", "torch float32"])
def test_without_torch_fast_runs_what_a_run_with_torch_measured(
    tiny_dirs: dict[str, Path], cache: Path, fastest: str
) -> None:
    """After `embed --fast` with torch, an install without torch said 'loading ... needs the model's
    PyTorch module': the measurement's name stamped torch, so nothing was found. It now reads the newest
    measurement a run with torch made for these runtimes (digest.runtimes_key in the name): a runtime it
    chose runs; a torch way chosen is refused in one line, nothing measured or announced."""
    code = _EMBED_FAST.format(folder=str(tiny_dirs["bert"]))
    with_torch = _python(code, torch=True)
    assert with_torch.returncode == 0, with_torch.stderr
    assert "fast mode: measuring" in with_torch.stderr
    _fastest_only(cache, fastest)
    without = _python(code, torch=False)
    assert "measuring" not in without.stderr  # it cannot be measured: never announced
    if fastest == "torch float32":
        assert without.returncode == 1 and without.stdout == ""
        (said,) = without.stderr.strip().splitlines()
        assert "that a run with torch measured is torch float32, which runs on torch" in said
        assert "--backend onnxruntime" in said and f"pip install 'torch=={TORCH_PIN}'" in said
    else:
        assert without.returncode == 0, without.stderr
        assert "fast mode: onnxruntime float32, 2.00x torch float32" in without.stderr
        assert without.stdout.strip()


def test_without_torch_and_no_measurement_fast_refuses_in_one_line(
    tiny_dirs: dict[str, Path], cache: Path
) -> None:
    without = _python(_EMBED_FAST.format(folder=str(tiny_dirs["bert"])), torch=False)
    assert without.returncode == 1 and without.stdout == ""
    assert "measuring" not in without.stderr
    (said,) = without.stderr.strip().splitlines()
    assert said.startswith("error: --fast is measured against torch, which is not installed here")
    assert "drop --fast and load with --backend onnxruntime" in said
    assert f"pip install 'torch=={TORCH_PIN}'" in said


def test_an_upgrade_changes_the_stamp_where_installs_share_one_file_time(tmp_path: Path) -> None:
    """The runtimes' key read only a file's time: under Nix (every file's time is 1) an upgraded
    onnxruntime kept its key, and an install without torch would trust the older version's measurement."""
    import os

    from bertscope.backends.digest import _stamp

    package = tmp_path / "site" / "onnxruntime"
    package.mkdir(parents=True)
    origin = package / "__init__.py"
    origin.write_text("")
    os.utime(origin, (1, 1))
    (tmp_path / "site" / "onnxruntime-1.32.0.dist-info").mkdir()
    before = _stamp(str(origin))
    (tmp_path / "site" / "onnxruntime-1.32.0.dist-info").rename(
        tmp_path / "site" / "onnxruntime-1.33.0.dist-info"
    )
    os.utime(origin, (1, 1))
    assert _stamp(str(origin)) != before and "onnxruntime-1.33.0.dist-info" in _stamp(str(origin))
    assert _stamp(None) == "-"
