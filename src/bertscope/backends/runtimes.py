"""Switching an Encoder's forward to ONNX Runtime or OpenVINO, and one way of the mode table applied.

`Model.use_onnxruntime` / `use_openvino` (the facade) and the mode measurements (fast.py, modes.py) all
switch runtimes here, on the `Encoder` they are given; a way that needs other torch weights (bfloat16,
float16) gets them from the caller's `build`, so nothing here loads a model by name or needs the facade.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..core._enums import Backend, Quantize
from ..core.encoder import Encoder, stderr
from ..core.spec import EmbedSpec
from ..errors import InvalidSpec
from .onnx import OnnxRunner, encoder_digest, resolve_backend
from .quantize import calibration_or_shipped

if TYPE_CHECKING:
    import torch

__all__ = ["apply_way", "calibration_digest", "use_onnxruntime", "use_openvino"]

E = TypeVar("E", bound=Encoder)


def use_openvino(
    encoder: Encoder, precision: str = "float32", *, calibration: Sequence[str] | None = None
) -> None:
    """Run every forward of `encoder` on OpenVINO from now on: precision float32, bfloat16, int8 (int8
    weights, activations quantized per group at run time: no calibration texts) or int8_static (activation
    scales fitted once on `calibration`, default the shipped sentences, but the feed-forward outputs')."""
    from .openvino import OpenVinoRunner

    if encoder.torch_dtype_name != "float32" or encoder.device_type != "cpu":
        raise InvalidSpec(
            "backend='openvino' exports a float32 model on the CPU; load it with dtype='float32'"
        )
    runner = OpenVinoRunner.build(
        lambda: encoder.hf_model,
        encoder.family,
        digest=encoder_digest(encoder),
        precision=precision,
        log=stderr,
        calibration=encoder.calibration_batches,
        # read only where scales are fitted: the exact default opens float32 at every first load
        calibration_texts=calibration_or_shipped(calibration) if precision == "int8_static" else (),
    )
    encoder.engine.runner = runner
    encoder.backend = "openvino"
    encoder.calibration_digest = calibration_digest(calibration) if precision == "int8_static" else None
    encoder.quantize = precision if precision.startswith("int8") else None
    encoder.runtime_dtype = "float32" if encoder.quantize else precision


def use_onnxruntime(
    encoder: Encoder,
    *,
    quantize: Quantize | str | None = None,
    calibration: Sequence[str] | None = None,
) -> None:
    """Run every forward of `encoder` on ONNX Runtime from now on (float32, or int8 with quantize="int8",
    "int8_fused" or "int8_static")."""
    mode = Quantize.parse(quantize or Quantize.NONE, what="quantize")
    if encoder.torch_dtype_name != "float32" or encoder.device_type != "cpu":
        resolve_backend(Backend.ONNXRUNTIME, mode, next(encoder.hf_model.parameters()).dtype, encoder.device)
    encoder.engine.runner = None  # calibration watches the torch forward
    deepest = EmbedSpec(layers=(encoder.n_layers,))

    def calibrate(texts: Sequence[str]) -> None:
        encoder.engine.sentences_once(texts, deepest)

    encoder.engine.runner = OnnxRunner.build(
        # the engine's module: where it is loaded only now (a model opened light, its graph not cached),
        # its first, warming forward runs before int8's calibration watches, as on a model loaded with torch
        lambda: encoder.engine.model,
        encoder.family,
        encoder.n_layers,
        digest=encoder_digest(encoder),
        quantize="int8" if mode.int8_scheme else None,
        calibrate=calibrate,
        calibration=calibration,
        scheme=mode.int8_scheme or "dynamic",
        log=stderr,
    )
    encoder.backend = "onnxruntime"
    encoder.calibration_digest = calibration_digest(calibration) if mode.int8_scheme else None
    encoder.runtime_dtype = None
    encoder.quantize = None if mode is Quantize.NONE else mode.value


def calibration_digest(texts: Sequence[str] | None) -> str | None:
    """A short digest of the caller's own calibration texts (None for the shipped ones)."""
    if texts is None:
        return None
    return hashlib.sha256(json.dumps(list(texts)).encode()).hexdigest()[:12]


def apply_way(
    base: E,
    options: dict[str, Any],
    *,
    build: Callable[[torch.dtype], E],
    calibration: Sequence[str] | None = None,
) -> E:
    """`base` (float32 torch) switched to a mode's runtime, or `build(dtype)`: the other torch weights."""
    backend = options.get("backend", "torch")
    if backend == "onnxruntime":
        use_onnxruntime(base, quantize=options.get("quantize"), calibration=calibration)
        return base
    if backend == "openvino":
        from .openvino import resolve_precision

        precision = resolve_precision(options.get("dtype", "float32"), options.get("quantize"), base.device)
        use_openvino(base, precision, calibration=calibration)  # read by int8_static alone
        return base
    from ..core.loading import resolve_dtype

    return build(resolve_dtype(options.get("dtype", "float32"), base.device))
