"""Making the ONNX export of a PyTorch model (every hidden state an output), float32 or int8, and its
attention graph (every layer's attention probabilities, eager, as `output_attentions=True` gives them): the
one part of the exported runtimes that needs torch. backends/onnx.py keeps, finds and opens what this
writes; backends/quantize.py fuses and quantizes the float32 graph this traces for int8.
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
from .attention_proof import missed_message, missed_proof, record_missed_proof
from .quantize import fuse, quantize, same_answers, smooth_attention_inputs, spreads_outliers

__all__ = ["ATTENTION_GATE", "weights_hash", "write_export"]

# the model inputs of each calibration forward, as ONNX Runtime takes them
Feeds = list[dict[str, np.ndarray]]
# The most an attention graph's probabilities may differ from the module's own on the proof's texts before
# it is thrown away (and attention runs on the module): a fifth under the 1e-5 promised, as the exact
# default's gate, since the proof cannot see every text. The figure depends on the CPU (its kernels round
# differently): the tiny families read 3e-8 to 6e-8; the bundled MiniLM, on its 256 tokens of random ids
# and on the short batch, 5.4e-6 and 1.5e-6 on the 2-core AMD EPYC Zen 5 of docs/fast-modes.md (passing),
# 8.5e-6 and 2.0e-6 on a 2-core Intel Xeon with AMX (missing; ONNX Runtime 1.32, torch 2.13). A model that
# misses reads its attentions from the module (slower, not wrong), and the miss is recorded
# (backends/attention_proof.py) so that later processes go there without exporting again.
ATTENTION_GATE = 0.8e-5
# The proof's longest text (tokens): past ModernBERT's 128-token local window and the 8-token sample the
# graph is traced on, so a length the tracer froze shows; shorter where the model takes fewer positions.
# Not 512: a 24-layer, 16-head model's probabilities of one such text are 400 MB, each side.
_PROOF_TOKENS = 256


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
    attention_session: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """Export `model` to `path` atomically: float32, or int8 by `scheme` (backends/quantize.py; input
    channels past `outlier_factor` x the median's spread over several int8 columns) when `calibrate` is
    given; with `attention_session` (what opens an ONNX Runtime session on a graph file, as its readers
    open it), the float32 graph of every layer's attention probabilities, written only once it gives the
    module's own within `ATTENTION_GATE` there. Returns what it made, for its record."""
    if attention_session is not None:
        proof = _export_attentions(model, family, path, attention_session)
        return {"torch": torch.__version__, "outputs": "attentions", "max_abs": proof}
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


class _Outputs(nn.Module):
    """The encoder with every hidden state (`hidden_states`, embedding output first) or every layer's
    attention probabilities (`attentions`, eager, layer 1 first) as outputs: the signature ONNX export
    traces."""

    def __init__(self, model: nn.Module, uses_token_types: bool, outputs: str = "hidden_states") -> None:
        super().__init__()
        self.model = model
        self.uses_token_types = uses_token_types
        self.outputs = outputs

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *rest: torch.Tensor) -> Any:
        """The asked outputs, as a tuple of (batch, ...) tensors."""
        extra = {"token_type_ids": rest[0]} if self.uses_token_types else {}
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            return_dict=True,
            **{f"output_{self.outputs}": True},
            **extra,
        )
        return tuple(getattr(out, self.outputs) or ())


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
    work = _eager_copy(model)
    if outliers is not None:
        for name, linear in _quantizable(work).items():
            if name not in outliers or not bool(outliers[name].any()):
                continue
            owner, _, attr = name.rpartition(".")
            setattr(work.get_submodule(owner) if owner else work, attr, _SpreadLinear(linear, outliers[name]))
    input_names, args = _sample(family)
    wrapper = _Outputs(work, family.uses_token_types)
    n_layers = len(wrapper(*args))
    output_names = [f"hidden_{i}" for i in range(n_layers)]
    axes = {name: {0: "batch", 1: "tokens"} for name in [*input_names, *output_names]}
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".export-") as tmp:
        float_path = Path(tmp) / "float32.onnx"
        _trace(wrapper, family, args, float_path, input_names, output_names, axes)
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


def _eager_copy(model: nn.Module) -> nn.Module:
    """A float32 CPU copy of `model` in eval mode on eager attention (the one that reports its weights)."""
    work = copy.deepcopy(model).float().cpu().eval()
    try:
        work.set_attn_implementation("eager")  # type: ignore[operator]
    except (AttributeError, ValueError):
        pass  # a model without the switch exports with what it has
    return work


def _sample(family: Family) -> tuple[list[str], tuple[torch.Tensor, ...]]:
    """The graph's input names and the (2, 8) sample the exporter traces."""
    n_inputs = 3 if family.uses_token_types else 2
    sample = torch.ones(2, 8, dtype=torch.long)
    args = (sample, torch.ones_like(sample), torch.zeros_like(sample))[:n_inputs]
    return ["input_ids", "attention_mask", "token_type_ids"][:n_inputs], args


def _trace(
    wrapper: nn.Module,
    family: Family,
    args: tuple[torch.Tensor, ...],
    graph: Path,
    input_names: list[str],
    output_names: list[str],
    axes: dict[str, dict[int, str]],
) -> None:
    """Trace `wrapper` on `args` into the ONNX file `graph` (opset 17, batch and token axes dynamic)."""
    try:
        with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                wrapper,
                args,
                str(graph),
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


def _export_attentions(
    model: nn.Module, family: Family, path: Path, open_session: Callable[[str], Any]
) -> float:
    """Export the attention graph to `path` atomically once it gives the module's own probabilities within
    `ATTENTION_GATE` on the proof's texts; returns the largest difference seen. A graph that misses (a
    family the tracer cannot follow) is refused in one line and nothing is written but the miss
    (`record_missed_proof`): a miss recorded here already is refused without tracing again (a process that
    waited on the lock while another proved it)."""
    missed = missed_proof(path)
    if missed is not None:
        raise ModelLoadError(missed_message(family.name, missed["max_abs"], missed["gate"]))
    work = _eager_copy(model)
    input_names, args = _sample(family)
    # in eval mode: the exporter leaves the wrapper's mode on every module inside it, and the proof runs it
    wrapper = _Outputs(work, family.uses_token_types, "attentions").eval()
    with torch.no_grad():
        found = wrapper(*args)
    if not found or any(a is None for a in found):
        raise ModelLoadError(f"this {family.name} model reports no attention weights to export")
    # attentions_1 .. attentions_L, each (batch, heads, tokens, tokens)
    output_names = [f"attentions_{i}" for i in range(1, len(found) + 1)]
    axes = {name: {0: "batch", 1: "tokens"} for name in input_names}
    axes.update({name: {0: "batch", 2: "tokens", 3: "tokens"} for name in output_names})
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".export-") as tmp:
        graph = Path(tmp) / "attentions.onnx"
        _trace(wrapper, family, args, graph, input_names, output_names, axes)
        session = open_session(str(graph))
        worst = max(_attention_gap(wrapper, session, feed) for feed in _proof_feeds(work, family))
        if not worst <= ATTENTION_GATE:
            # kept, so a later process reads the module without exporting and proving again (the caller
            # says where its attentions come from)
            record_missed_proof(path, worst, ATTENTION_GATE)
            raise ModelLoadError(missed_message(family.name, worst, ATTENTION_GATE))
        os.replace(graph, path)  # the caller records it: a file without its record is never trusted
    return worst


def _proof_feeds(model: nn.Module, family: Family) -> list[tuple[torch.Tensor, ...]]:
    """The proof's inputs: one text of random ids as long as the model takes (up to `_PROOF_TOKENS`),
    and a padded batch of two short ones (7 and 13 tokens), each (ids, mask, token types)."""
    config: Any = model.config
    pad = getattr(config, "pad_token_id", None)
    positions = int(getattr(config, "max_position_embeddings", 0) or 0)
    if family.positions_after_padding:
        positions -= (1 if pad is None else int(pad)) + 1
    longest = min(_PROOF_TOKENS, positions) if positions > 0 else _PROOF_TOKENS
    vocab = int(config.vocab_size)
    generator = torch.Generator().manual_seed(0)
    feeds: list[tuple[torch.Tensor, ...]] = []
    for lengths in ((longest,), (7, 13)):
        ids = torch.randint(0, vocab, (len(lengths), max(lengths)), generator=generator)
        if pad is not None:
            ids[ids == int(pad)] = (int(pad) + 1) % vocab  # a pad id inside a text moves RoBERTa's positions
        mask = torch.zeros_like(ids)
        for row, n in enumerate(lengths):
            mask[row, :n] = 1
            ids[row, n:] = 0 if pad is None else int(pad)
        feeds.append((ids, mask, torch.zeros_like(ids)))
    return feeds


def _attention_gap(wrapper: _Outputs, session: Any, feed: tuple[torch.Tensor, ...]) -> float:
    """The largest |graph - module| over every layer's attention probabilities on `feed`, the graph run by
    the ONNX Runtime `session` (inf for a NaN or a missing layer)."""
    # the exporter drops inputs the graph never reads (DeBERTa-v2 without segment embeddings)
    taken = {i.name for i in session.get_inputs()}
    names = ("input_ids", "attention_mask", "token_type_ids")
    got = session.run(None, {n: t.numpy() for n, t in zip(names, feed, strict=False) if n in taken})
    with torch.no_grad():
        want = wrapper(*feed[: 3 if wrapper.uses_token_types else 2])
    if len(got) != len(want):
        return float("inf")
    gaps = [float(np.abs(g - w.float().numpy()).max()) for g, w in zip(got, want, strict=True)]
    return max(g if np.isfinite(g) else float("inf") for g in gaps)
