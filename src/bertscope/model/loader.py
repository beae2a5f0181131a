"""`load()`: a name (or the bundled default) to a `Model` or a `StaticModel`, on the runtime its options ask.

The options are checked (model/load_checks.py) before anything loads; the model built is model/facade.py's.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from ..backends import light as _light
from ..backends.onnx import resolve_backend
from ..core._enums import Backend, DType, Mode, Quantize
from ..core.folder import model_name
from ..core.loading import load_parts, require_torch, resolve_device, resolve_dtype, warn_slow_bfloat16
from ..core.spec import unknown_option
from ..errors import InvalidSpec
from ..static_model import StaticModel, is_model2vec, load_static
from .facade import Model
from .load_checks import check_counts, check_threads, refuse_unread_options

if TYPE_CHECKING:
    import torch

    from ..core.loading import Loaded

__all__ = ["load"]


_DEFAULT_MIN_COSINE = 0.999  # mode="fast"'s drift bound: the least cosine to float32 it keeps

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _named_options(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """`function`, where a keyword it lacks is bertscope's one-line UnknownOption (a TypeError too)
    before anything loads, naming what bertscope calls it where transformers or sentence-transformers
    users bring it (max_seq_length, torch_dtype, ...: core/spec.py's table, which embed's refusals read)
    or else the nearest option, instead of Python's bare TypeError. The signature IDEs, type checkers
    and `inspect.signature` see stays the function's own."""
    parameters = inspect.signature(function).parameters
    options = [p.name for p in parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]

    @functools.wraps(function)
    def checked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        for keyword in kwargs:
            if keyword not in parameters:
                raise unknown_option(keyword, options)
        return function(*args, **kwargs)

    return checked


@_named_options
def load(
    name: str | os.PathLike[str] | None = None,
    *,
    device: str | torch.device | None = "auto",
    dtype: DType | str | torch.dtype = DType.FLOAT32,
    threads: int | None = None,
    max_tokens: int | None = None,
    token_budget: int | None = None,
    backend: Backend | str = Backend.AUTO,
    quantize: Quantize | str | None = None,
    calibration: Sequence[str] | None = None,
    mode: Mode | str = Mode.EXACT,
    fast_min_cosine: float | None = None,
    remeasure: bool = False,
    trust_remote_code: bool = False,
) -> Model | StaticModel:
    """Load a model: None (or BERTSCOPE_MODEL) for the bundled all-MiniLM-L6-v2, a folder, or a hub id.

    A model2vec folder (what `bertscope distill` writes) loads as a `StaticModel`: sentence vectors,
    similarity, encode, info and static rows, no layers. Which of the two a name gives is known only when
    its folder is read, so the type is the union; narrow it with `isinstance(m, Model)` before a
    layer-level feature (embed_tokens, hidden_states, anatomy, ...), which a static model refuses.

    `device`: "auto" (CUDA where present, else the CPU), "cpu", "cuda", "cuda:N" or a torch.device.
    `dtype`: "float32" (default), "bfloat16", "float16" (CUDA only) or a torch.dtype. `max_tokens`: the
    tokens a text may take (at least 2; default the model's own limit, max_seq_length where it sets one;
    `long=` in embed says what a longer text does). `token_budget`: padded tokens per forward, the batch
    size in tokens (default 1,024 to 8,192 on a CPU by its threads, 65,536 on CUDA): speed and memory,
    never the vectors. `threads`: CPU threads for the whole process, not this model alone: torch's (or
    OMP_NUM_THREADS before torch loads) and every runtime of every model loaded after, until another
    `load(threads=)`; at most this machine's CPUs; default torch's own (OMP_NUM_THREADS, else the
    physical cores).

    `backend` is "torch", "onnxruntime" (CPU, float32 or int8; exported once and cached), "openvino"
    (below) or "auto": the exact default below for float32, onnxruntime for `quantize="int8"`, torch for
    another dtype. `quantize="int8"` runs ONNX Runtime's int8 with BERT's outlier
    channels spread over extra int8 columns, found on `calibration` texts (default: sentences shipped
    with bertscope). "openvino" runs the same exported graph on OpenVINO: float32, bfloat16 (CPUs with
    it natively), int8 (int8 weights, each activation quantized per group of 64 channels as it runs;
    no calibration) or int8_static (activation scales fitted once on `calibration`, but the feed-forward
    outputs'). `mode="fast"` measures the modes this machine runs and keeps the fastest whose min
    cosine to float32 is >= `fast_min_cosine`, remembered per model and machine (backends/fast.py).
    With no backend, dtype or quantize asked, the exact default runs the fastest runtime equal to torch
    within 1e-5 (torch, ONNX Runtime or OpenVINO float32; measured once, backends/exact.py).
    `info().mode` is "fast" only for a model `mode="fast"` chose; "exact" names the mode that runs what
    was asked (int8 and bfloat16 included: read `quantize` and `dtype` for lossy arithmetic), and is
    kept so stores and resumed jobs compare as before. `remeasure=True` measures either choice again.
    `trust_remote_code=True` runs the model code a folder ships (config.json `auto_map`), as
    transformers' own option does; without it such a folder is refused, never run as another class.
    """
    check_counts(threads=threads, max_tokens=max_tokens, token_budget=token_budget)
    if threads is not None:
        check_threads(threads)
    if isinstance(name, str) and not name.strip():
        raise InvalidSpec(
            f"the model name {name!r} is empty: leave it out for the bundled model, or name a folder "
            "(such as '.') or a hub id"
        )
    if isinstance(device, str) and not device.strip():
        raise InvalidSpec(
            f"the device {device!r} is empty: leave it out for 'auto' (CUDA where present, else the CPU), "
            "or name cpu, cuda or cuda:N"
        )
    name = model_name(name)
    if is_model2vec(name):  # a static model (what `bertscope distill` writes): rows, no layers, no forward
        if threads is not None:  # process-wide, as for any other model (its ONNX or OpenVINO runtime)
            from ..core.cpu import ask_threads

            ask_threads(threads)
        return load_static(
            name, max_tokens=max_tokens, token_budget=token_budget, device=device, dtype=dtype,
            backend=backend, quantize=quantize, mode=mode, trust_remote_code=trust_remote_code,
            calibration=calibration, fast_min_cosine=fast_min_cosine, remeasure=remeasure,
        )  # fmt: skip
    refuse_unread_options(
        backend=backend, quantize=quantize, mode=mode, calibration=calibration,
        fast_min_cosine=fast_min_cosine, remeasure=remeasure,
    )  # fmt: skip
    if threads is not None:
        from ..core.cpu import ask_threads

        ask_threads(threads)
    asked = {"device": device, "dtype": dtype, "backend": backend, "quantize": quantize, "mode": mode}
    precision = None  # OpenVINO's, resolved (and warned of) once, here, on either path
    if _light.opens_light(asked, trust_remote_code, calibration=calibration, remeasure=remeasure):
        if Backend.parse(backend, what="backend") is Backend.OPENVINO:
            from ..backends.openvino import resolve_precision

            precision = resolve_precision(dtype, quantize, "cpu")

        def build_light(parts: Loaded) -> Model:
            return Model(parts, device="cpu", max_tokens=max_tokens, token_budget=token_budget)

        light = _light.load_light(
            name, asked, build=build_light, precision=precision, calibration=calibration, remeasure=remeasure,
            record=threads is None,
            min_cosine=_DEFAULT_MIN_COSINE if fast_min_cosine is None else fast_min_cosine,
        )  # fmt: skip
        if light is not None:
            return light
    require_torch(f"loading {name}")  # one line where torch cannot be imported
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    torch_device = resolve_device(device)
    if Mode.parse(mode, what="mode") is Mode.FAST:
        from ..backends.fast import load_fast

        def build(torch_dtype: torch.dtype) -> Model:
            # A fresh torch Model of the same folder and limits: the fast modes switch its runtime.
            trusted = trust_remote_code
            parts = load_parts(name, dtype=torch_dtype, device=torch_device, trust_remote_code=trusted)
            return Model(parts, device=torch_device, max_tokens=max_tokens, token_budget=token_budget)

        asked = {"dtype": dtype, "backend": backend, "quantize": quantize}
        return load_fast(
            asked, device=torch_device, calibration=calibration,
            min_cosine=_DEFAULT_MIN_COSINE if fast_min_cosine is None else fast_min_cosine,
            remeasure=remeasure, build=build,
        )  # fmt: skip
    if Backend.parse(backend, what="backend") is Backend.OPENVINO:
        from ..backends.openvino import resolve_precision
        from ..backends.runtimes import use_openvino

        precision = precision or resolve_precision(dtype, quantize, torch_device)
        loaded = load_parts(
            name, dtype=torch.float32, device=torch_device, trust_remote_code=trust_remote_code
        )
        model = Model(loaded, device=torch_device, max_tokens=max_tokens, token_budget=token_budget)
        use_openvino(model, precision, calibration=calibration)  # resolved (and warned of) above
        return model
    torch_dtype = resolve_dtype(dtype, torch_device, warn=False)
    chosen = resolve_backend(backend, quantize, torch_dtype, torch_device)  # refused: no warning first
    warn_slow_bfloat16(torch_dtype, torch_device)
    loaded = load_parts(name, dtype=torch_dtype, device=torch_device, trust_remote_code=trust_remote_code)
    model = Model(loaded, device=torch_device, max_tokens=max_tokens, token_budget=token_budget)
    if chosen is Backend.ONNXRUNTIME:
        model.use_onnxruntime(quantize=quantize, calibration=calibration)
    elif Backend.parse(backend, what="backend") is Backend.AUTO:
        from ..backends.exact import choose_exact

        # only what a plain load would choose is kept for `bertscope info` (no threads, float32 asked)
        choose_exact(model, remeasure=remeasure, record=threads is None and torch_dtype is torch.float32)
    return model
