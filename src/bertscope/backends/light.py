"""Opening a model without torch: whether `load`'s options let a folder open light, and the opening.

`bertscope.load` asks `opens_light` first; where it says yes, `load_light` opens the folder as a
`FolderView` (core/loading.py `open_light`) and switches the encoder that `build` makes of it to the
runtime asked, an exported graph (ONNX Runtime, OpenVINO, the exact default's choice, or mode="fast"'s
recorded one), with the settings the full load records. The facade passes its own `build`, so the answer
is a `Model` and nothing here imports it. torch is loaded later, and only where a graph is not cached yet
or a feature needs the module (tests/test_light.py, tests/test_light_modes.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..core._enums import Backend, DType, Mode, Quantize
from ..core.encoder import Encoder
from . import runtimes

if TYPE_CHECKING:
    from ..core.loading import Loaded

__all__ = ["load_light", "opens_light"]

E = TypeVar("E", bound=Encoder)


def opens_light(
    asked: dict[str, Any], trust_remote_code: bool, *, calibration: Sequence[str] | None, remeasure: bool
) -> bool:
    """Whether `load`'s options let the folder open without torch: on the CPU, no model code to run, and
    a runtime that is an exported graph (or may be: the exact default): float32 on the exact default,
    ONNX Runtime or OpenVINO; ONNX Runtime's int8; OpenVINO's bfloat16, int8 or int8_static; or
    mode="fast" (read from its recorded measurement, `load_light`). int8 fitted on the caller's own
    `calibration` texts opens light as on the shipped ones: its graph's cache name carries the texts'
    digest (quantize.export_variant, openvino's int8-static IR key), so a cached one is theirs; so does
    mode="fast" with `calibration`, its measurement's file name carrying their digest too (fast.py
    `_cache_path`). mode="fast" with `remeasure` (it times torch's reference again) takes the full load.
    Whether torch is needed is decided later: to make an export or int8 graph that is not cached yet, to
    measure where nothing valid is recorded, or to run a forward on torch.

    `asked`: load's device, dtype, backend, quantize and mode, as given. `calibration` decides nothing
    (the caller's texts open light wherever the shipped ones do); `load` passes it all the same."""
    from ..core.folder import default_device

    device = str(asked["device"] or "auto")
    if trust_remote_code or not (device == "cpu" or (device == "auto" and default_device() == "cpu")):
        return False
    backend = Backend.parse(asked["backend"], what="backend")
    scheme = Quantize.parse(asked["quantize"] or Quantize.NONE, what="quantize")
    float32 = DType.is_float32(asked["dtype"])
    if Mode.parse(asked["mode"], what="mode") is Mode.FAST:  # load_fast refuses any other option
        plain = backend is Backend.AUTO and scheme is Quantize.NONE
        return float32 and plain and not remeasure
    if backend is Backend.TORCH:
        return False
    if backend is Backend.OPENVINO:  # float32, bfloat16 (float32 where the CPU lacks it), int8, int8_static
        if scheme is Quantize.NONE:
            name = str(asked["dtype"]).strip().lower().removeprefix("torch.")  # a name, or a torch dtype
            return float32 or name == DType.BFLOAT16.value
        return float32 and scheme in (Quantize.INT8, Quantize.INT8_STATIC)
    return float32  # the exact default or ONNX Runtime, float32 or int8 (any scheme)


def load_light(
    name: str | os.PathLike[str] | None,
    asked: dict[str, Any],
    *,
    build: Callable[[Loaded], E],
    precision: str | None,
    calibration: Sequence[str] | None,
    remeasure: bool,
    record: bool,
    min_cosine: float,
) -> E | None:
    """The encoder `build` makes of the folder opened without torch, on the runtime `asked` (`opens_light`
    said it may be), with the settings the full load records; None where only a full load can open it: a
    folder transformers alone reads, or mode="fast" with no valid measurement recorded (for these
    calibration texts) or a torch mode chosen.

    `build(loaded)`: the encoder (the facade's `Model`) of the light parts on the CPU, with load's limits.
    `precision`: OpenVINO's, resolved by the caller (it warns once). `calibration`: the caller's int8
    texts (None: the shipped ones), as the full load reads them. `record`: keep the exact default's choice
    for `bertscope info` (False where threads were asked)."""
    from ..core.loading import open_light

    loaded = open_light(name)
    if loaded is None:
        return None
    model = build(loaded)
    backend = Backend.parse(asked["backend"], what="backend")
    quantize = asked["quantize"]
    if Mode.parse(asked["mode"], what="mode") is Mode.FAST:
        from .fast import load_fast_recorded

        return load_fast_recorded(model, asked, min_cosine=min_cosine, calibration=calibration)
    if backend is Backend.OPENVINO:
        assert precision is not None
        runtimes.use_openvino(model, precision, calibration=calibration)
    elif (
        backend is Backend.ONNXRUNTIME
        or Quantize.parse(quantize or Quantize.NONE, what="quantize").int8_scheme
    ):
        runtimes.use_onnxruntime(model, quantize=quantize, calibration=calibration)
    else:
        from .exact import choose_exact

        choose_exact(model, remeasure=remeasure, record=record)
    return model
