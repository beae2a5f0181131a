"""Making the ONNX export of a PyTorch model (every hidden state an output), float32 or int8: the one part
of the exported runtimes that needs torch. backends/onnx.py keeps, finds and opens what this writes;
backends/quantize.py fuses and quantizes the float32 graph this traces for int8.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..core.families import Family
from ..errors import ModelLoadError
from .quantize import fuse, quantize, same_answers, smooth_attention_inputs, spreads_outliers

__all__ = ["weights_hash", "write_export"]

# the model inputs of each calibration forward, as ONNX Runtime takes them
Feeds = list[dict[str, np.ndarray]]


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
    scheme: str = "dynamic",
) -> dict[str, Any]:
    """Export `model` to `path` atomically: float32, or int8 by `scheme` (backends/quantize.py; input
    channels past `outlier_factor` x the median's spread over several int8 columns) when `calibrate` is
    given. Returns what it made, for its record."""
    feeds: Feeds = []
    stats = _activation_maxima(model, calibrate, texts, feeds) if calibrate is not None else None
    outliers = {
        name: _copies(maxima, outlier_factor * float(maxima.median()))
        for name, maxima in (stats or {}).items()
        if spreads_outliers(name, scheme)
    }
    fused, smoothed = _export(
        model, family, path, outliers if stats is not None else None, scheme=scheme, feeds=feeds
    )
    about: dict[str, Any] = {"torch": torch.__version__}
    if stats is not None:
        about.update(scheme=scheme, fused=fused, outlier_factor=outlier_factor, smoothed_channels=smoothed)
        about["outlier_channels"] = {name: int((n > 0).sum()) for name, n in sorted(outliers.items())}
        about["outlier_columns"] = {name: int(n.sum()) for name, n in sorted(outliers.items())}
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


def _copies(maxima: torch.Tensor, bound: float) -> torch.Tensor:
    """Per input channel, how many int8 columns it is spread over: 0 for a channel within `bound` (it
    stays where it is), else ceil(max / bound), so that each copy stays within the bound."""
    spread = torch.ceil(maxima / max(bound, 1e-12)).to(torch.long)
    return torch.where(maxima > bound, spread, torch.zeros_like(spread))


class _SpreadLinear(nn.Module):
    """A Linear whose outlier input channels are each spread over several columns of the (to be int8)
    matmul: channel j, zeroed where it was, is appended `copies[j]` times as x_j / copies[j] beside its
    weight row repeated as often. The same product in float; in int8 no column is past the bound that
    sets the step of the whole input, and the weights keep their own scale (smoothing would scale them up
    instead). On the bundled model dynamic int8 ran 946-976 texts/s against 836-876 with the float32 side
    matmul it replaced, with the held-out min cosine level (bench/BENCHMARKS.md)."""

    def __init__(self, linear: nn.Linear, copies: torch.Tensor) -> None:
        super().__init__()
        outliers = copies > 0
        index = torch.nonzero(outliers).flatten()
        repeated = index.repeat_interleave(copies[index])
        weight_t = linear.weight.detach().T.clone()
        original = weight_t[repeated]
        weight_t[outliers] = 0
        self.register_buffer("keep_mask", (~outliers).to(weight_t.dtype))
        self.register_buffer("spread_index", repeated)
        self.register_buffer("spread_scale", 1 / copies[repeated].to(weight_t.dtype))
        self.register_buffer("weight_t", torch.cat([weight_t, original]).contiguous())
        self.register_buffer("bias", linear.bias.detach() if linear.bias is not None else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[x with outliers zeroed, x[spread] / copies] @ [W^T; W^T[spread]] + b: the same as linear(x).

        The bias is added last, so the fuser still finds its Add next to the GELU or the residual.
        """
        index: torch.Tensor = self.spread_index  # type: ignore[assignment]
        keep: torch.Tensor = self.keep_mask  # type: ignore[assignment]
        scale: torch.Tensor = self.spread_scale  # type: ignore[assignment]
        spread = torch.cat([x * keep, x.index_select(-1, index) * scale], dim=-1)
        out = torch.matmul(spread, self.weight_t)  # type: ignore[arg-type]
        bias: torch.Tensor | None = self.bias  # type: ignore[assignment]
        return out if bias is None else out + bias


def _quantizable(model: nn.Module) -> dict[str, nn.Linear]:
    """The Linear layers inside the traced graph: all but the pooler (it runs in torch, on the output)."""
    return {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and not name.split(".")[0].startswith("pooler")
    }


def _activation_maxima(
    model: nn.Module, calibrate: Callable[[Sequence[str]], None], texts: Sequence[str], feeds: Feeds
) -> dict[str, torch.Tensor]:
    """Per input channel, the largest |activation| each Linear saw over the calibration texts; the
    model's inputs of each forward are appended to `feeds` (static int8 calibrates its scales on them)."""
    maxima: dict[str, torch.Tensor] = {}

    def keep_inputs(_module: nn.Module, _args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        names = ("input_ids", "attention_mask", "token_type_ids")
        feed = {k: kwargs[k] for k in names if isinstance(kwargs.get(k), torch.Tensor)}
        if "input_ids" in feed:
            feeds.append({k: np.asarray(v.detach().cpu(), dtype=np.int64) for k, v in feed.items()})

    def watch(name: str) -> Callable[..., None]:
        def hook(_module: nn.Module, inputs: tuple[torch.Tensor, ...], _output: torch.Tensor) -> None:
            seen = inputs[0].detach().float().abs().reshape(-1, inputs[0].shape[-1]).amax(0)
            maxima[name] = seen if name not in maxima else torch.maximum(maxima[name], seen)

        return hook

    handles = [module.register_forward_hook(watch(name)) for name, module in _quantizable(model).items()]
    handles.append(model.register_forward_pre_hook(keep_inputs, with_kwargs=True))
    try:
        calibrate(texts)
    finally:
        for handle in handles:
            handle.remove()
    return maxima


def _export(
    model: nn.Module,
    family: Family,
    path: Path,
    outliers: dict[str, torch.Tensor] | None,
    *,
    scheme: str = "dynamic",
    feeds: Sequence[dict[str, np.ndarray]] = (),
) -> tuple[bool, int]:
    """Export to `path` atomically: float32, or int8 by `scheme` (each Linear's `outliers` spread; the
    `fused` scheme's graph fused first, its attention inputs smoothed) when `outliers` is given. Returns
    whether the graph was fused and how many attention input channels were smoothed."""
    work = copy.deepcopy(model).float().cpu().eval()
    try:
        work.set_attn_implementation("eager")  # type: ignore[operator]
    except (AttributeError, ValueError):
        pass  # a model without the switch exports with what it has
    if outliers is not None:
        for name, linear in _quantizable(work).items():
            if name not in outliers or not bool(outliers[name].any()):
                continue
            owner, _, attr = name.rpartition(".")
            setattr(work.get_submodule(owner) if owner else work, attr, _SpreadLinear(linear, outliers[name]))
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
        except OSError:  # a full or failing disk says nothing of the model: the caller tells it apart
            raise
        except Exception as exc:  # the exporter raises many types; all mean "this model does not export"
            raise ModelLoadError(
                f"this {family.name} model could not be exported to ONNX ({type(exc).__name__}: {exc}); "
                "use backend='torch'"
            ) from exc
        final, fused, smoothed = float_path, False, 0
        if outliers is not None:
            fused_path, final = Path(tmp) / "fused.onnx", Path(tmp) / "int8.onnx"
            config = getattr(model, "config", None)
            heads, width = getattr(config, "num_attention_heads", 0), getattr(config, "hidden_size", 0)
            graph = float_path
            if scheme == "fused":
                fused = fuse(float_path, fused_path, num_heads=int(heads or 0), hidden_size=int(width or 0))
                graph = fused_path if fused else float_path
                smoothed_path = Path(tmp) / "smoothed.onnx"
                try:  # smoothing is a refinement: a graph it cannot read keeps its fused attention as is
                    scaled = smooth_attention_inputs(fused_path, smoothed_path, feeds) if fused else 0
                except Exception:
                    scaled = 0
                if scaled and same_answers(fused_path, smoothed_path):
                    graph, smoothed = smoothed_path, scaled
            quantize(graph, final, scheme=scheme, feeds=feeds)
        os.replace(final, path)  # the caller records it: a file without its record is never trusted
    return fused, smoothed
