"""Sentence vectors pooled on torch's device (a GPU's path) equal NumPy's pooling of the copied-back states.

CI has no GPU, so the device path is switched on for the CPU (`Engine.device_pooling`): the same torch
tensors are pooled in torch instead of copied to NumPy first, which is what a CUDA device runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import bertscope
from bertscope.core import engine as engine_module
from bertscope.core._enums import Pooling
from bertscope.core.pooling import POOLINGS, pool_sentences

LONG = " ".join(["the river bank flooded after the storm and the town moved uphill"] * 60)
TEXTS = ["a short one", "The bank raised its rates again this spring.", LONG, "x y z"]


@pytest.fixture(scope="module")
def bert(tiny_dirs: dict[str, Path]) -> Iterator[bertscope.Model]:
    """The tiny BERT (it has a trained pooler) on torch, its engine's device pooling restored after."""
    model = bertscope.load(tiny_dirs["bert"], device="cpu", backend="torch")
    yield model
    model.engine.device_pooling = None


def both(model: bertscope.Model, **options: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """Vectors pooled in NumPy, then on the device, and how many batches `pool_tensor` pooled."""
    model.engine.device_pooling = False
    host = np.asarray(model.embed(TEXTS, progress=False, **options).vectors)
    calls = []
    real = engine_module.pool_tensor

    def counted(*args: Any, **kwargs: Any) -> np.ndarray:
        calls.append(1)
        return real(*args, **kwargs)

    engine_module.pool_tensor = counted  # type: ignore[assignment]
    try:
        model.engine.device_pooling = True
        device = np.asarray(model.embed(TEXTS, progress=False, **options).vectors)
    finally:
        engine_module.pool_tensor = real  # type: ignore[assignment]
        model.engine.device_pooling = None
    return host, device, len(calls)


@pytest.mark.parametrize("pooling", ["mean", "mean_sqrt_len", "max", "cls", "first_last_avg"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_each_pooling_equals_numpy(tiny_dirs: dict[str, Path], pooling: str, dtype: str) -> None:
    model = bertscope.load(tiny_dirs["bert"], device="cpu", backend="torch", dtype=dtype)
    host, device, pooled = both(model, pooling=pooling, long="window")
    assert pooled > 0  # the device path ran
    np.testing.assert_allclose(device, host, atol=1e-5, rtol=0)


@pytest.mark.parametrize("combine", ["mean", "sum", "concat"])
def test_combined_layers_equal_numpy(bert: bertscope.Model, combine: str) -> None:
    host, device, pooled = both(bert, layers="1,-1", combine=combine, normalize=False)
    assert pooled > 0
    assert host.shape == device.shape
    np.testing.assert_allclose(device, host, atol=1e-5, rtol=0)


def test_model_pooler_falls_back_to_numpy(bert: bertscope.Model) -> None:
    host, device, pooled = both(bert, pooling="pooler")
    assert pooled == 0  # the model's own pooler is run from NumPy's copy
    np.testing.assert_allclose(device, host, atol=1e-6, rtol=0)


def test_pool_tensor_matches_every_token_rule() -> None:
    rng = np.random.default_rng(0)
    hidden = rng.standard_normal((5, 9, 16)).astype(np.float32)
    mask = (rng.random((5, 9)) > 0.3).astype(np.float32)
    mask[:, 0] = 1
    assert set(POOLINGS) <= engine_module.TENSOR_POOLINGS  # a new token pooling needs its torch twin
    for pooling in [*POOLINGS, Pooling.CLS]:
        want = pool_sentences(hidden, mask, pooling)
        got = engine_module.pool_tensor(torch.from_numpy(hidden), mask, pooling)
        np.testing.assert_allclose(got, want, atol=1e-6, rtol=0, err_msg=pooling.value)


def test_only_torch_on_a_gpu_pools_on_the_device(bert: bertscope.Model) -> None:
    engine = bert.engine
    assert engine.pools_on_device is False  # a CPU tensor's copy to NumPy is free
    device = engine.device
    try:
        engine.device = torch.device("cuda", 0)
        assert engine.pools_on_device is True
        engine.runner = lambda *args: ()  # an exported graph's runner hands back NumPy arrays
        assert engine.pools_on_device is False
    finally:
        engine.device, engine.runner = device, None
