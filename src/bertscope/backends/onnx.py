"""The ONNX Runtime backend: the model exported once (cached by its weights' hash), in float32 or int8.

float32 runs the same graph as torch (eager attention, every hidden state an output) and matches it to
1e-6. int8 is ONNX Runtime's dynamic quantization (per-channel int8 weights, per-tensor uint8
activations) with one change that keeps it usable: BERT's activations have a few outlier channels
(up to ~30 after LayerNorm and ~25 after GELU in all-MiniLM-L6-v2, against a median channel of ~2),
and one such channel sets the quantization step for the whole tensor. Quantizing every Linear naively
gives a min cosine of 0.91-0.98 to float32. Here each Linear is split: channels whose calibrated
max |activation| exceeds `OUTLIER_FACTOR` x the median channel's are zeroed before the int8 matmul and
multiplied in float32 on the side (the LLM.int8() decomposition with outliers chosen once, at
calibration). On all-MiniLM-L6-v2 that is ~7 channels per matmul, and the min cosine is ~0.995.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..core._enums import Backend, Quantize
from ..core.families import Family
from ..errors import BackendUnavailable, InvalidSpec, ModelLoadError

__all__ = [
    "BACKENDS",
    "EXPORT_FORMAT",
    "OUTLIER_FACTOR",
    "QUANTIZE",
    "OnnxRunner",
    "cache_dir",
    "export_onnx",
    "calibration_texts",
    "model_hash",
    "resolve_backend",
]

BACKENDS = tuple(member.value for member in Backend)
QUANTIZE = tuple(member.value for member in Quantize)
# Bumped whenever the exported graph changes, so stale cache files are never reused.
EXPORT_FORMAT = 1
OUTLIER_FACTOR = 3.0
_OUTLIER_WEIGHT = "outlier_weight"


def resolve_backend(
    backend: Backend | str, quantize: Quantize | str | None, dtype: torch.dtype, device: torch.device
) -> Backend:
    """The backend to run: `auto` is torch, or onnxruntime when int8 is asked; refuses what cannot run."""
    asked = Backend.parse(backend, what="backend")
    mode = Quantize.parse(quantize or Quantize.NONE, what="quantize")
    if asked is Backend.AUTO:
        chosen = Backend.ONNXRUNTIME if mode is Quantize.INT8 else Backend.TORCH
    else:
        chosen = asked
    if mode is Quantize.INT8 and chosen is Backend.TORCH:
        raise InvalidSpec(
            "quantize='int8' runs on ONNX Runtime: torch's dynamic int8 drops to a min cosine of 0.78 "
            "on BERT's outlier activations; use backend='onnxruntime' (or 'auto')"
        )
    if chosen == "onnxruntime":
        if device.type != "cpu":
            raise InvalidSpec(
                f"backend='onnxruntime' runs on the CPU; on {device.type} use backend='torch' "
                "(with dtype='float16' or 'bfloat16' for speed)"
            )
        if dtype is not torch.float32:
            raise InvalidSpec(
                "backend='onnxruntime' runs float32 (or int8 with quantize='int8'); "
                f"dtype={str(dtype).removeprefix('torch.')!r} needs backend='torch'"
            )
    return chosen


def require_onnxruntime() -> Any:
    """The onnxruntime module, or a clear error naming the extra that installs it."""
    try:
        import onnx  # noqa: F401
        import onnxruntime
    except ImportError as exc:
        raise BackendUnavailable(
            "backend='onnxruntime' needs onnxruntime and onnx: pip install 'bertscope[onnx]'"
        ) from exc
    return onnxruntime


def cache_dir() -> Path:
    """Where exported models are kept: $BERTSCOPE_CACHE, else $XDG_CACHE_HOME/bertscope, else ~/.cache."""
    from .recorded import cache_root

    return cache_root() / "onnx"


def model_hash(model: nn.Module) -> str:
    """SHA-256 of the model's config and every weight: a changed vocabulary or fine-tune is a new export.

    The folder the model came from is left out, so the same weights moved or reinstalled reuse the export.
    """
    digest = hashlib.sha256()
    config = dict(model.config.to_dict())  # type: ignore[union-attr,operator]
    config.pop("_name_or_path", None)
    digest.update(json.dumps(config, sort_keys=True, default=str).encode())
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def calibration_texts() -> list[str]:
    """The sentences shipped with bertscope for finding outlier channels when none are given."""
    text = resources.files("bertscope").joinpath("calibration.txt").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip()]


class OnnxRunner:
    """Runs the exported model on ONNX Runtime; called by the Engine in place of the torch forward."""

    def __init__(self, path: Path, uses_token_types: bool, n_outputs: int) -> None:
        ort = require_onnxruntime()
        options = ort.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self.path = path
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        # The exporter drops inputs the graph never reads (DeBERTa-v2 without segment embeddings).
        self.uses_token_types = uses_token_types and any(
            i.name == "token_type_ids" for i in self.session.get_inputs()
        )
        self.output_names = [f"hidden_{i}" for i in range(n_outputs)]

    def __call__(
        self, ids: np.ndarray, type_ids: np.ndarray, mask: np.ndarray, deepest: int
    ) -> tuple[torch.Tensor, ...]:
        """Hidden states 0..deepest as torch tensors."""
        feed = {
            "input_ids": ids.astype(np.int64, copy=False),
            "attention_mask": mask.astype(np.int64, copy=False),
        }
        if self.uses_token_types:
            feed["token_type_ids"] = type_ids.astype(np.int64, copy=False)
        # Asking only for the layers needed lets ONNX Runtime skip the ones past them.
        outputs = self.session.run(self.output_names[: deepest + 1], feed)
        return tuple(torch.from_numpy(o) for o in outputs)

    @classmethod
    def build(
        cls,
        model: nn.Module,
        family: Family,
        n_layers: int,
        *,
        quantize: str | None,
        calibrate: Callable[[Sequence[str]], None],
        calibration: Sequence[str] | None = None,
        log: Callable[[str], None] | None = None,
    ) -> OnnxRunner:
        """Export (or reuse the cached export of) `model` and open an ONNX Runtime session on it.

        `calibrate(texts)` must run the torch model over the texts; int8 watches those forwards to pick
        the outlier channels.
        """
        require_onnxruntime()
        path = export_onnx(
            model, family, quantize=quantize, calibrate=calibrate, calibration=calibration, log=log
        )
        return cls(path, family.uses_token_types, n_layers + 1)


def export_onnx(
    model: nn.Module,
    family: Family,
    *,
    quantize: str | None = None,
    calibrate: Callable[[Sequence[str]], None] | None = None,
    calibration: Sequence[str] | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """The cached ONNX export of `model` (every hidden state an output), made now when missing.

    float32 needs only torch's exporter (and onnx); int8 also needs `calibrate` and ONNX Runtime's quantizer.
    """
    int8 = (quantize or "none") == "int8"
    texts = list(calibration) if calibration is not None else calibration_texts()
    if int8 and not texts:
        raise InvalidSpec("calibration texts are empty; give some sentences of your corpus or None")
    variant = "float32"
    if int8:
        calib_hash = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:10]
        variant = f"int8-o{OUTLIER_FACTOR:g}-c{calib_hash}"
    name = f"{family.name}-{model_hash(model)[:20]}-{variant}-v{EXPORT_FORMAT}.onnx"
    path = cache_dir() / name
    if not path.exists():
        if log is not None:
            log(f"exporting the model to ONNX ({variant}) -> {path}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ModelLoadError(
                f"cannot create the ONNX cache folder {path.parent} ({exc.strerror}); "
                "set BERTSCOPE_CACHE to a writable folder"
            ) from None
        if int8 and calibrate is None:
            raise InvalidSpec("int8 export needs a calibrate function that runs the torch model")
        stats = _activation_maxima(model, calibrate, texts) if int8 and calibrate else None
        _export(model, family, path, stats)
    return path


class _HiddenStates(nn.Module):
    """The encoder with every hidden state as an output, the signature ONNX export traces."""

    def __init__(self, model: nn.Module, uses_token_types: bool) -> None:
        super().__init__()
        self.model = model
        self.uses_token_types = uses_token_types

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *rest: torch.Tensor) -> Any:
        """All hidden states, embedding output first."""
        extra = {"token_type_ids": rest[0]} if self.uses_token_types else {}
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            output_hidden_states=True,
            return_dict=True,
            **extra,
        )
        return tuple(out.hidden_states)


class _SplitLinear(nn.Module):
    """A Linear whose outlier input channels are multiplied in float32 beside the (to be int8) rest."""

    def __init__(self, linear: nn.Linear, outliers: torch.Tensor) -> None:
        super().__init__()
        self.linear = linear
        self.register_buffer("keep_mask", (~outliers).to(linear.weight.dtype))
        self.register_buffer("outlier_index", torch.nonzero(outliers).flatten())
        self.register_buffer(_OUTLIER_WEIGHT, linear.weight.detach()[:, outliers].T.contiguous())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """linear(x with outliers zeroed) + x[outliers] @ W[:, outliers]^T: the same as linear(x)."""
        index: torch.Tensor = self.outlier_index  # type: ignore[assignment]
        keep: torch.Tensor = self.keep_mask  # type: ignore[assignment]
        side = torch.matmul(x.index_select(-1, index), getattr(self, _OUTLIER_WEIGHT))
        return self.linear(x * keep) + side


def _quantizable(model: nn.Module) -> dict[str, nn.Linear]:
    """The Linear layers inside the traced graph: all but the pooler (it runs in torch, on the output)."""
    return {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and not name.split(".")[0].startswith("pooler")
    }


def _outliers(maxima: torch.Tensor) -> torch.Tensor:
    """The input channels whose calibrated max |activation| exceeds `OUTLIER_FACTOR` x the median's."""
    return maxima > OUTLIER_FACTOR * maxima.median()


def _activation_maxima(
    model: nn.Module, calibrate: Callable[[Sequence[str]], None], texts: Sequence[str]
) -> dict[str, torch.Tensor]:
    """Per input channel, the largest |activation| each Linear saw over the calibration texts."""
    maxima: dict[str, torch.Tensor] = {}

    def watch(name: str) -> Callable[..., None]:
        def hook(_module: nn.Module, inputs: tuple[torch.Tensor, ...], _output: torch.Tensor) -> None:
            seen = inputs[0].detach().float().abs().reshape(-1, inputs[0].shape[-1]).amax(0)
            maxima[name] = seen if name not in maxima else torch.maximum(maxima[name], seen)

        return hook

    handles = [module.register_forward_hook(watch(name)) for name, module in _quantizable(model).items()]
    try:
        calibrate(texts)
    finally:
        for handle in handles:
            handle.remove()
    return maxima


def _export(model: nn.Module, family: Family, path: Path, stats: dict[str, torch.Tensor] | None) -> None:
    """Export to `path` atomically: float32, or int8 (split outliers) when `stats` are given."""
    work = copy.deepcopy(model).float().cpu().eval()
    try:
        work.set_attn_implementation("eager")  # type: ignore[operator]
    except (AttributeError, ValueError):
        pass  # a model without the switch exports with what it has
    if stats is not None:
        for name, linear in _quantizable(work).items():
            if name not in stats:
                continue
            outliers = _outliers(stats[name])
            owner, _, attr = name.rpartition(".")
            setattr(work.get_submodule(owner) if owner else work, attr, _SplitLinear(linear, outliers))
    n_inputs = 3 if family.uses_token_types else 2
    input_names = ["input_ids", "attention_mask", "token_type_ids"][:n_inputs]
    sample = torch.ones(2, 8, dtype=torch.long)
    args = (sample, torch.ones_like(sample), torch.zeros_like(sample))[:n_inputs]
    n_layers = len(_HiddenStates(work, family.uses_token_types)(*args))
    output_names = [f"hidden_{i}" for i in range(n_layers)]
    axes = {name: {0: "batch", 1: "tokens"} for name in [*input_names, *output_names]}
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".export-") as tmp:
        float_path = Path(tmp) / "float32.onnx"
        try:
            with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
                warnings.simplefilter("ignore")
                torch.onnx.export(
                    _HiddenStates(work, family.uses_token_types),
                    args,
                    str(float_path),
                    input_names=input_names,
                    output_names=output_names,
                    dynamic_axes=axes,
                    opset_version=17,
                    dynamo=False,
                )
        except Exception as exc:  # the exporter raises many types; all mean "this model does not export"
            raise ModelLoadError(
                f"this {family.name} model could not be exported to ONNX ({type(exc).__name__}: {exc}); "
                "use backend='torch'"
            ) from exc
        final = float_path
        if stats is not None:
            final = Path(tmp) / "int8.onnx"
            _quantize(float_path, final)
        os.replace(final, path)
        _write_sidecar(path, stats)


def _quantize(source: Path, target: Path) -> None:
    """ONNX Runtime dynamic int8 with per-channel weights; the outliers' float32 side matmuls left alone."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(source)).graph
    side = [node.name for node in graph.node if node.op_type == "MatMul" and _OUTLIER_WEIGHT in node.input[1]]
    root = logging.getLogger()
    level = root.level
    # The quantizer logs a generic "consider pre-processing" advice on the root logger; it does not apply.
    root.setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantize_dynamic(
            str(source),
            str(target),
            weight_type=QuantType.QInt8,
            per_channel=True,
            nodes_to_exclude=side,
            extra_options={"MatMulConstBOnly": True},
        )
    root.setLevel(level)


def _write_sidecar(path: Path, stats: dict[str, torch.Tensor] | None) -> None:
    """A small JSON beside the export saying what it is (for people looking in the cache folder)."""
    about: dict[str, Any] = {"format": EXPORT_FORMAT, "torch": torch.__version__}
    if stats is not None:
        about["outlier_factor"] = OUTLIER_FACTOR
        about["outlier_channels"] = {
            name: int(_outliers(maxima).sum()) for name, maxima in sorted(stats.items())
        }
    path.with_suffix(".json").write_text(json.dumps(about, indent=1), encoding="utf-8")
