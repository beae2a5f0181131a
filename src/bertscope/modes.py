"""The ways one model can run (float32, bfloat16, float16, ONNX Runtime, OpenVINO, int8) and their drift.

`compare_modes` embeds the same texts in each mode and reports its speed against float32 and the
cosine of its sentence vectors to float32's: the number to read before trusting a fast mode.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .core.similarity import unit
from .errors import InvalidSpec

__all__ = ["MODES", "ModeReport", "compare_modes", "mode_options"]

# name -> options of bertscope.load
MODES: dict[str, dict[str, Any]] = {
    "float32": {},
    "bfloat16": {"dtype": "bfloat16"},
    "float16": {"dtype": "float16"},
    "onnxruntime": {"backend": "onnxruntime"},
    "int8": {"quantize": "int8"},
    "openvino": {"backend": "openvino"},
    "openvino-int8": {"backend": "openvino", "quantize": "int8"},
}


@dataclass
class ModeReport:
    """One mode's speed and drift on the texts compared."""

    mode: str
    texts: int
    seconds: float
    texts_per_s: float
    vs_float32: float
    cos_min: float
    cos_mean: float
    max_abs: float

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able fields."""
        return dict(self.__dict__)


def mode_options(mode: str) -> dict[str, Any]:
    """The load options of a mode name, or InvalidSpec listing the names."""
    if mode not in MODES:
        raise InvalidSpec(f"unknown mode {mode!r}; choose from: {', '.join(MODES)}")
    return dict(MODES[mode])


def compare_modes(
    texts: Sequence[str],
    modes: Sequence[str] = ("float32", "onnxruntime", "int8"),
    *,
    model: str | os.PathLike[str] | None = None,
    device: str = "auto",
    repeats: int = 1,
    time_it: bool = True,
    **embed_options: Any,
) -> list[ModeReport]:
    """Embed `texts` in float32 and in each mode; speed ratio and cosine drift against float32.

    Each mode is loaded once (exports happen then, untimed), warmed up on a few texts, then timed as
    the best of `repeats` runs over all texts (`time_it=False`: one untimed run, drift only).
    """
    from .model import load

    if not texts:
        raise InvalidSpec("no texts to compare the modes on")
    for mode in modes:
        mode_options(mode)
    wanted = ["float32", *[m for m in modes if m != "float32"]]
    vectors: dict[str, np.ndarray] = {}
    seconds: dict[str, float] = {}
    for mode in wanted:
        m = load(model, device=device, **mode_options(mode))
        vectors[mode], seconds[mode] = _run(m, list(texts), repeats if time_it else 0, embed_options)
    reference = vectors["float32"]
    reports = []
    for mode in wanted:
        if mode not in modes:
            continue
        cos = (unit(vectors[mode]) * unit(reference)).sum(axis=1)
        took = seconds[mode]
        reports.append(
            ModeReport(
                mode=mode,
                texts=len(texts),
                seconds=took,
                texts_per_s=len(texts) / took if took else float("nan"),
                vs_float32=seconds["float32"] / took if took else float("nan"),
                cos_min=float(cos.min()),
                cos_mean=float(cos.mean()),
                max_abs=float(np.abs(vectors[mode] - reference).max()),
            )
        )
    return reports


def _run(m: Any, texts: list[str], repeats: int, options: dict[str, Any]) -> tuple[np.ndarray, float]:
    """(vectors, best seconds of `repeats` runs; 0.0 when not timed)."""
    if repeats <= 0:
        return np.asarray(m.embed(texts, progress=False, **options).vectors), 0.0
    m.embed(texts[:16], progress=False, **options)
    best = float("inf")
    vectors: Any = None
    for _ in range(repeats):
        start = time.perf_counter()
        vectors = m.embed(texts, progress=False, **options).vectors
        best = min(best, time.perf_counter() - start)
    return np.asarray(vectors), best
