"""mode="fast": measure the modes this machine can run, keep the fastest within a cosine bound to float32.

The candidates are torch float32 (the exact default), ONNX Runtime and OpenVINO float32, their int8
variants and, where the CPU multiplies bfloat16 natively, torch and OpenVINO bfloat16 (on CUDA: torch
float32, bfloat16, float16), each only when its packages are installed. Each runs the calibration
sentences (best of 3, after a warm-up); the fastest whose min cosine to float32 is >= the bound wins.
The measurements are kept in the cache per model (weights' hash), machine (CPU model, flags, threads)
and calibration texts, so a second load does not measure again, and another bound reuses them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import InvalidSpec, ModelLoadError
from ..onnx_backend import cache_dir, calibration_texts, model_hash
from .cpu import cpu_name, has_native_bf16, machine_key

__all__ = ["FAST_FORMAT", "Measured", "candidates", "choose", "fast_cache_dir", "load_fast"]

FAST_FORMAT = 1
_REPEATS = 3
_FLOAT32 = "torch float32"


@dataclass
class Measured:
    """One mode's speed and drift on the calibration sentences."""

    mode: str
    options: dict[str, Any]
    texts_per_s: float
    vs_float32: float
    cos_min: float
    cos_mean: float


def fast_cache_dir() -> Path:
    """Where the measurements are kept, beside the exports ($BERTSCOPE_CACHE/fast)."""
    return cache_dir().parent / "fast"


def _installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(name) is not None for name in modules)


def candidates(device: torch.device) -> dict[str, dict[str, Any]]:
    """Mode name -> load options, for the modes this machine and these packages can run."""
    if device.type == "cuda":
        return {_FLOAT32: {}, "torch bfloat16": {"dtype": "bfloat16"}, "torch float16": {"dtype": "float16"}}
    ort, ov = _installed("onnxruntime", "onnx"), _installed("openvino", "onnx")
    found: dict[str, dict[str, Any]] = {_FLOAT32: {}}
    if ort:
        found["onnxruntime float32"] = {"backend": "onnxruntime"}
        found["onnxruntime int8"] = {"backend": "onnxruntime", "quantize": "int8"}
    if ov:
        found["openvino float32"] = {"backend": "openvino"}
        if _installed("nncf"):
            found["openvino int8"] = {"backend": "openvino", "quantize": "int8"}
    if has_native_bf16():
        found["torch bfloat16"] = {"dtype": "bfloat16"}
        if ov:
            found["openvino bfloat16"] = {"backend": "openvino", "dtype": "bfloat16"}
    return found


def choose(measured: Sequence[Measured], min_cosine: float) -> Measured:
    """The fastest mode whose min cosine to float32 is >= `min_cosine` (torch float32 always qualifies)."""
    allowed = [m for m in measured if m.mode == _FLOAT32 or m.cos_min >= min_cosine]
    return max(allowed, key=lambda m: m.texts_per_s)


def load_fast(
    name: str | os.PathLike[str] | None,
    asked: dict[str, Any],
    *,
    device: torch.device,
    max_tokens: int | None,
    token_budget: int | None,
    min_cosine: float,
    calibration: Sequence[str] | None,
) -> Any:
    """A Model in the fastest mode within `min_cosine`, measured once per model and machine (cached)."""
    from ..model import load

    if (
        str(asked["dtype"]).removeprefix("torch.") != "float32"
        or str(asked["backend"]) != "auto"
        or str(asked["quantize"] or "none") != "none"
    ):
        raise InvalidSpec(
            "mode='fast' picks the backend, dtype and quantize itself; leave them out, or drop mode='fast'"
        )
    if not 0.0 < min_cosine <= 1.0:
        raise InvalidSpec(f"fast_min_cosine must be in (0, 1], got {min_cosine}")
    texts = list(calibration) if calibration is not None else calibration_texts()
    if not texts:
        raise InvalidSpec("calibration texts are empty; give some sentences of your corpus or None")
    base = load(name, device=device, max_tokens=max_tokens, token_budget=token_budget)
    path = _cache_path(base, texts)
    wanted = candidates(device)
    measured = _read(path)
    if measured is None or set(wanted) - {m.mode for m in measured}:
        _say(f"fast mode: measuring {len(wanted)} modes on {len(texts)} sentences, once for this model "
             f"and machine ({cpu_name()}, {torch.get_num_threads()} threads)")  # fmt: skip
        measured = _measure_all(base, name, wanted, texts, device)
        _write(path, measured)
    best = choose(measured, min_cosine)
    if best.mode == _FLOAT32:
        _say(f"fast mode: nothing on this machine beats torch float32 with min cosine >= {min_cosine}; "
             "running float32")  # fmt: skip
        model = base
    else:
        _say(f"fast mode: {best.mode}, {best.vs_float32:.2f}x torch float32, min cosine {best.cos_min:.5f}")
        model = _apply(base, name, best.options, device, max_tokens, token_budget, texts)
    model.mode = "fast"
    model.fast_choice = {
        "chosen": best.mode,
        "min_cosine": min_cosine,
        "cos_min": round(best.cos_min, 6),
        "vs_float32": round(best.vs_float32, 3),
        "measured": str(path),
    }
    return model


def _cache_path(base: Any, texts: Sequence[str]) -> Path:
    calib = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:10]
    digest = model_hash(base.hf_model)[:20]
    return fast_cache_dir() / f"{base.family.name}-{digest}-{machine_key()}-c{calib}-f{FAST_FORMAT}.json"


def _read(path: Path) -> list[Measured] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [Measured(**row) for row in data["measured"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: Path, measured: Sequence[Measured]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelLoadError(
            f"cannot create the cache folder {path.parent} ({exc.strerror}); "
            "set BERTSCOPE_CACHE to a writable folder"
        ) from None
    about = {"cpu": cpu_name(), "threads": torch.get_num_threads(), "measured": [asdict(m) for m in measured]}
    staged = path.with_suffix(".tmp")
    staged.write_text(json.dumps(about, indent=1), encoding="utf-8")
    os.replace(staged, path)


def _apply(
    base: Any,
    name: Any,
    options: dict[str, Any],
    device: torch.device,
    max_tokens: int | None,
    token_budget: int | None,
    texts: Sequence[str],
) -> Any:
    """`base` switched to the mode's runtime, or a fresh load where the mode needs other torch weights."""
    from ..model import load

    backend = options.get("backend", "torch")
    if backend == "onnxruntime":
        base.use_onnxruntime(quantize=options.get("quantize"), calibration=texts)
        return base
    if backend == "openvino":
        precision = options.get("quantize") or options.get("dtype") or "float32"
        base.use_openvino(precision, calibration=texts)
        return base
    return load(name, device=device, max_tokens=max_tokens, token_budget=token_budget, **options)


def _measure_all(
    base: Any, name: Any, wanted: dict[str, dict[str, Any]], texts: Sequence[str], device: torch.device
) -> list[Measured]:
    """Every candidate timed on `texts` and compared with torch float32's vectors."""
    timed: dict[str, tuple[float, np.ndarray]] = {}
    for mode, options in wanted.items():
        model = base if mode == _FLOAT32 else _apply(base, name, options, device, None, None, texts)
        timed[mode] = measure_mode(model, texts)
        if model is base:
            base.use_torch()
    reference_speed, reference = timed[_FLOAT32]
    results = []
    for mode, (speed, vectors) in timed.items():
        cos = (_unit(vectors) * _unit(reference)).sum(axis=1)
        results.append(
            Measured(
                mode=mode,
                options=wanted[mode],
                texts_per_s=speed,
                vs_float32=speed / reference_speed,
                cos_min=float(cos.min()),
                cos_mean=float(cos.mean()),
            )
        )
    return results


def measure_mode(model: Any, texts: Sequence[str]) -> tuple[float, np.ndarray]:
    """(texts per second, best of 3 after a warm-up; the sentence vectors (n, d)) of one mode."""
    model.embed(list(texts[:8]), progress=False)
    best = float("inf")
    vectors = np.empty(0)
    for _ in range(_REPEATS):
        start = time.perf_counter()
        vectors = model.embed(list(texts), progress=False).vectors
        best = min(best, time.perf_counter() - start)
    return len(texts) / best, vectors


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
