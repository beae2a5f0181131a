"""Making the ONNX export of a PyTorch model (every hidden state an output), float32 or int8: the one part
of the exported runtimes that needs torch. backends/onnx.py keeps, finds and opens what this writes.
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
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..core.families import Family
from ..errors import ModelLoadError

__all__ = ["weights_hash", "write_export"]

_OUTLIER_WEIGHT = "outlier_weight"


def weights_hash(model: nn.Module) -> str:
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


def write_export(
    model: nn.Module,
    family: Family,
    path: Path,
    *,
    calibrate: Callable[[Sequence[str]], None] | None,
    texts: Sequence[str],
    outlier_factor: float,
) -> dict[str, Any]:
    """Export `model` to `path` atomically: float32, or int8 (the input channels past `outlier_factor` x
    the median's kept in float32) when `calibrate` is given. Returns what it made, for its record."""
    stats = _activation_maxima(model, calibrate, texts) if calibrate is not None else None
    outliers = {name: maxima > outlier_factor * maxima.median() for name, maxima in (stats or {}).items()}
    _export(model, family, path, outliers if stats is not None else None)
    about: dict[str, Any] = {"torch": torch.__version__}
    if stats is not None:
        about["outlier_factor"] = outlier_factor
        about["outlier_channels"] = {name: int(mask.sum()) for name, mask in sorted(outliers.items())}
    return about


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


def _export(model: nn.Module, family: Family, path: Path, outliers: dict[str, torch.Tensor] | None) -> None:
    """Export to `path` atomically: float32, or int8 (each Linear's `outliers` split off) when given."""
    work = copy.deepcopy(model).float().cpu().eval()
    try:
        work.set_attn_implementation("eager")  # type: ignore[operator]
    except (AttributeError, ValueError):
        pass  # a model without the switch exports with what it has
    if outliers is not None:
        for name, linear in _quantizable(work).items():
            if name not in outliers:
                continue
            split = outliers[name]
            owner, _, attr = name.rpartition(".")
            setattr(work.get_submodule(owner) if owner else work, attr, _SplitLinear(linear, split))
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
        if outliers is not None:
            final = Path(tmp) / "int8.onnx"
            _quantize(float_path, final)
        os.replace(final, path)  # the caller records it: a file without its record is never trusted


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
