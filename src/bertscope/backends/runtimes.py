"""Switching an Encoder's forward to ONNX Runtime or OpenVINO, and one way of the mode table applied.

`Model.use_onnxruntime` / `use_openvino` (the facade) and the mode measurements (fast.py, modes.py) all
switch runtimes here, on the `Encoder` they are given; a way that needs other torch weights (bfloat16,
float16) gets them from the caller's `build`, so nothing here loads a model by name or needs the facade.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..core._enums import Backend, Quantize
from ..core.cpu import cpu_flags, has_vnni, machine_key
from ..core.encoder import Encoder, stderr
from ..core.loading import asked_mode, spelled_mode
from ..core.spec import EmbedSpec
from ..errors import InvalidSpec, caller_level
from .digest import installed_key, runtimes_key, settings_digest
from .int8_gate import check_own_calibration, kept_key
from .onnx import OnnxRunner, encoder_digest, resolve_backend
from .quantize import calibration_or_shipped

if TYPE_CHECKING:
    import torch

__all__ = [
    "apply_way",
    "calibration_digest",
    "openvino_options",
    "runs_as_asked",
    "use_onnxruntime",
    "use_openvino",
]

E = TypeVar("E", bound=Encoder)


def warn_int8_without_vnni(asked: str) -> None:
    """Warn where int8 is asked of a CPU without int8 dot products (VNNI): the drift buys no speed there.
    `asked`: load's keywords; where modes are compared (`mode_asked`) the mode is named instead.

    On the AVX2 machine of bench/BENCHMARKS.md ONNX Runtime's int8 ran 0.90x the exact default and
    OpenVINO's 0.38x; mode="fast" offers no int8 way there. Silent where the CPU cannot be read."""
    if cpu_flags() and not has_vnni():
        compared = asked_mode()
        fix = (
            "leave quantize out for the exact default"
            if compared is None
            else f"use {spelled_mode('float32')}"
        )
        warnings.warn(
            "this CPU has no int8 dot-product instructions (AVX-512 VNNI, AVX-VNNI or AMX): "
            f"{compared or asked} runs no faster than float32 here and drifts (min cosine ~0.99); {fix}",
            UserWarning,
            stacklevel=caller_level(),
        )


def openvino_options(precision: str) -> tuple[str, str | None]:
    """(dtype, quantize) of an OpenVINO way named in one word (`Model.use_openvino(precision=)`'s old
    spelling): 'int8' and 'int8_static' (any case, `-` for `_`) are quantize's, anything else dtype's, so
    `resolve_precision` reads it as load's `dtype=` and `quantize=`; a word that is none of
    openvino.PRECISIONS is refused as `precision`'s, the keyword the caller gave."""
    from .openvino import PRECISIONS, openvino_refusal

    said = str(precision).strip().lower().replace("-", "_")
    if said not in PRECISIONS:
        raise openvino_refusal("precision", precision)
    if said.startswith("int8"):
        return "float32", precision
    return precision, None


def use_openvino(
    encoder: Encoder,
    precision: str = "float32",
    *,
    calibration: Sequence[str] | None = None,
    drift_gate: bool = True,
) -> None:
    """Run every forward of `encoder` on OpenVINO from now on, on the way `precision` (one of
    openvino.PRECISIONS, as `resolve_precision` names load's dtype= and quantize=): float32, bfloat16,
    int8 (int8 weights, activations quantized per group at run time: no calibration texts) or int8_static
    (activation scales fitted once on `calibration`, default the shipped sentences, but the feed-forward
    outputs').
    int8_static fitted on the caller's own texts is refused under int8's bound (`drift_gate`,
    int8_gate.check_own_calibration); mode="fast" measures its candidates itself and turns it off."""
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
    if drift_gate and precision.startswith("int8"):  # asked by name, not a fast-mode candidate
        warn_int8_without_vnni(f"backend='openvino', quantize='{precision}'")
    if drift_gate and calibration is not None and precision == "int8_static" and runner.path is not None:
        _gate(encoder, runner, runner.path, calibration, "backend='openvino', quantize='int8_static'")
    runs_as_asked(encoder)
    encoder.backend = "openvino"
    encoder.calibration_digest = calibration_digest(calibration) if precision == "int8_static" else None
    encoder.quantize = precision if precision.startswith("int8") else None
    encoder.runtime_dtype = "float32" if encoder.quantize else precision


def use_onnxruntime(
    encoder: Encoder,
    *,
    quantize: Quantize | str | None = None,
    calibration: Sequence[str] | None = None,
    drift_gate: bool = True,
) -> None:
    """Run every forward of `encoder` on ONNX Runtime from now on (float32, or int8 with quantize="int8",
    "int8_fused" or "int8_static"); int8 fitted on the caller's own `calibration` texts is refused under
    int8's bound (`drift_gate`, int8_gate.check_own_calibration; mode="fast" measures its own)."""
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
    if drift_gate and mode.int8_scheme:  # asked by name, not a fast-mode candidate
        warn_int8_without_vnni(f"quantize='{mode.value}'")
    if drift_gate and calibration is not None and mode.int8_scheme:
        runner = encoder.engine.runner
        _gate(encoder, runner, runner.path, calibration, f"quantize='{mode.value}'")
    runs_as_asked(encoder)
    encoder.backend = "onnxruntime"
    encoder.calibration_digest = calibration_digest(calibration) if mode.int8_scheme else None
    encoder.runtime_dtype = None
    encoder.quantize = None if mode is Quantize.NONE else mode.value


def runs_as_asked(encoder: Encoder) -> None:
    """`encoder` switched to a runtime by name: what `mode="fast"` or the exact default chose at load no
    longer runs, so `info()` drops that choice and says mode "exact" (the mode that runs what was asked),
    as for a model loaded with this runtime asked. The choosers record theirs after switching."""
    encoder.mode = "exact"
    encoder.fast_choice = None
    encoder.exact_choice = None


def _gate(encoder: Encoder, runner: Any, graph: Path, calibration: Sequence[str], asked: str) -> None:
    """int8_gate.check_own_calibration on `graph`'s record, keyed by the model's pooling settings and limit,
    this machine and the installed runtimes (int8 kernels differ by CPU: AVX2's saturate where VNNI's do
    not); a refused graph leaves `encoder` on torch, as before the switch."""
    settings = settings_digest(getattr(encoder.loaded, "path", None))
    base, runtimes = f"s{settings}-t{encoder.max_tokens}-m{machine_key()}-", f"-r{runtimes_key()}"
    key = f"{base}{installed_key()}{runtimes}"
    if importlib.util.find_spec("torch") is None:  # nothing can be measured: a verdict taken with torch
        key = kept_key(graph.with_suffix(".json"), base, runtimes) or key
    try:
        check_own_calibration(encoder, runner, graph.with_suffix(".json"), calibration, asked=asked, key=key)
    except InvalidSpec:
        encoder.engine.runner = None
        raise


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
    quantize = options.get("quantize")
    if backend == "onnxruntime":
        # mode="fast" reads each way's drift itself, under its own bound
        use_onnxruntime(base, quantize=quantize, calibration=calibration, drift_gate=False)
    elif backend == "openvino":
        from .openvino import resolve_precision

        precision = resolve_precision(options.get("dtype", "float32"), quantize, base.device)
        use_openvino(base, precision, calibration=calibration, drift_gate=False)  # read by int8_static alone
    if backend in ("onnxruntime", "openvino"):
        if quantize and asked_mode():  # a mode compared by name is said slow as a load asked by name is
            warn_int8_without_vnni(f"quantize='{quantize}'")
        return base
    from ..core.loading import resolve_dtype

    return build(resolve_dtype(options.get("dtype", "float32"), base.device))
