"""Device and dtype choices that CI (CPU only) can check: the CUDA-only paths refuse clearly here."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bertscope.backends.onnx import resolve_backend
from bertscope.core.loading import machine_devices, resolve_device, resolve_dtype
from bertscope.errors import InvalidSpec

CPU = torch.device("cpu")
CUDA = torch.device("cuda")


def test_auto_device_is_cpu_without_a_gpu() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device(None).type == expected


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_cuda_without_a_gpu_is_a_clear_error() -> None:
    with pytest.raises(InvalidSpec, match="sees no CUDA GPU.*device='cpu'"):
        resolve_device("cuda")


def test_unknown_device_names_the_choices() -> None:
    with pytest.raises(InvalidSpec, match="auto, cpu, cuda"):
        resolve_device("tpu:7")


def test_float16_is_cuda_only_and_bfloat16_is_not() -> None:
    with pytest.raises(InvalidSpec, match="float16 runs on CUDA only"):
        resolve_dtype("float16", CPU)
    assert resolve_dtype("float16", CUDA) is torch.float16
    assert resolve_dtype("bfloat16", CUDA) is torch.bfloat16
    with pytest.raises(InvalidSpec, match="unknown dtype"):
        resolve_dtype("float8", CPU)


def test_bfloat16_on_a_cpu_without_it_warns_and_an_unknown_cpu_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import warnings

    from bertscope.core import loading

    monkeypatch.setattr(loading, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    monkeypatch.setattr(loading, "has_native_bf16", lambda: False)
    with pytest.warns(UserWarning, match="no native bfloat16"):
        assert resolve_dtype("bfloat16", CPU) is torch.bfloat16
    monkeypatch.setattr(loading, "cpu_flags", lambda: frozenset())  # no /proc/cpuinfo: we cannot tell
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_dtype("bfloat16", CPU) is torch.bfloat16


def test_backend_choice_on_each_device() -> None:
    assert resolve_backend("auto", None, torch.float32, CUDA) == "torch"
    assert resolve_backend("auto", "int8", torch.float32, CPU) == "onnxruntime"
    assert resolve_backend("auto", "none", torch.bfloat16, CPU) == "torch"
    with pytest.raises(InvalidSpec, match="runs on the CPU.*dtype='float16'"):
        resolve_backend("onnxruntime", None, torch.float32, CUDA)
    with pytest.raises(InvalidSpec, match="runs on the CPU"):
        resolve_backend("auto", "int8", torch.float16, CUDA)


@pytest.mark.parametrize("device", ["mps", "xpu", "meta"])
def test_a_device_this_machine_lacks_is_refused_naming_the_ones_it_has(device: str) -> None:
    here = machine_devices()
    if device in here:
        pytest.skip(f"this machine has {device}")
    with pytest.raises(InvalidSpec, match=f"sees no {device} device here; this machine has: cpu"):
        resolve_device(device)
    assert "cpu" in here and resolve_device("cpu") == CPU


def test_a_cuda_index_past_the_gpus_is_refused() -> None:
    with pytest.raises(InvalidSpec, match="cuda:99"):
        resolve_device("cuda:99")


def test_a_refused_bfloat16_load_is_refused_alone_without_the_bfloat16_warning(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """backend='onnxruntime' with dtype='bfloat16' is refused; on a CPU without native bfloat16 the
    refusal is the one line, with no warning about bfloat16's speed before it (CLI: two lines)."""
    import warnings

    import bertscope
    from bertscope.core import loading

    monkeypatch.setattr(loading, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    monkeypatch.setattr(loading, "has_native_bf16", lambda: False)
    with (
        warnings.catch_warnings(record=True) as heard,
        pytest.raises(InvalidSpec, match="needs backend='torch'"),
    ):
        warnings.simplefilter("always")
        bertscope.load(tiny_dirs["bert"], device="cpu", backend="onnxruntime", dtype="bfloat16")
    assert not [w for w in heard if "no native bfloat16" in str(w.message)]
    with pytest.warns(UserWarning, match="no native bfloat16") as caught:
        bertscope.load(tiny_dirs["bert"], device="cpu", backend="torch", dtype="bfloat16")
    assert [w.filename for w in caught if "no native bfloat16" in str(w.message)] == [__file__]
