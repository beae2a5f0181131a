"""Layer specs ("-1", "-2", "0", "6", "-4:", "1:4", "0,6", "all") and how several layers combine.

Layer 0 is the embedding layer's output (as `output_hidden_states` numbers it), 1..L the encoder
layers; negative numbers count from the end (-1 is the last layer).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidSpec
from ._enums import Combine

__all__ = ["parse_layers", "combine_layers", "spec_examples"]

LayerSpec = str | int | Sequence[int]


def parse_layers(spec: LayerSpec, n_layers: int) -> tuple[int, ...]:
    """Absolute hidden-state indices (0..n_layers) selected by `spec` for a model of n_layers layers."""
    count = n_layers + 1
    allowed = f"layers are 0..{n_layers} (or -1..-{count}); specs look like {spec_examples(n_layers)}"
    if isinstance(spec, np.integer):  # a layer picked by np.argmax over a sweep, say
        spec = int(spec)
    elif isinstance(spec, np.ndarray) and spec.ndim == 1 and np.issubdtype(spec.dtype, np.integer):
        spec = [int(i) for i in spec]
    if isinstance(spec, int) and not isinstance(spec, bool):
        parts: list[str] = [str(spec)]
    elif isinstance(spec, str):
        text = spec.strip().lower()
        if text == "all":
            return tuple(range(count))
        parts = [p.strip() for p in text.split(",")]
    elif isinstance(spec, Sequence):
        parts = [str(p) for p in spec]
    else:
        raise InvalidSpec(f"layer spec {_short(spec)} is not a string, int or list of ints; {allowed}")
    if not parts or any(not p for p in parts):
        raise InvalidSpec(f"layer spec {_short(spec)} is malformed; {allowed}")
    chosen: list[int] = []
    for part in parts:
        for layer in _one(part, count, spec, allowed):
            if layer in chosen:
                # Repeats add nothing to a mean and only size to a concat; unbounded, they exhaust memory.
                raise InvalidSpec(f"layer {layer} appears twice in {_short(spec)}; name each layer once")
            chosen.append(layer)
    if not chosen:
        raise InvalidSpec(f"layer spec {_short(spec)} selects no layer; {allowed}")
    return tuple(chosen)


def spec_examples(n_layers: int) -> str:
    """Layer specs valid on a model of `n_layers` layers, one of each form: "-1, 0, 6, -4:, 1:4, 0,6, all"
    on six or more, "-1, 0, 2, -2:, 1:3, 0,2, all" on two (a refusal's examples must be specs it takes)."""
    if n_layers < 1:
        return "-1, 0, all"
    middle, tail, span = min(6, n_layers), min(4, max(2, n_layers)), min(3, n_layers)
    return f"-1, 0, {middle}, -{tail}:, 1:{1 + span}, 0,{middle}, all"


def _short(spec: object) -> str:
    text = repr(spec)
    return text if len(text) <= 60 else text[:57] + "..."


def _one(part: str, count: int, spec: object, allowed: str) -> list[int]:
    try:
        bounds = [int(b) if b.strip() else None for b in part.split(":")] if ":" in part else []
        if ":" in part and len(bounds) != 2:
            raise ValueError
        index = 0 if bounds else int(part)
    except ValueError:
        raise InvalidSpec(f"layer spec {_short(spec)} is malformed at {part!r}; {allowed}") from None
    if bounds:  # checked outside the try: an InvalidSpec is a ValueError, which read as "malformed"
        for bound in bounds:
            if bound is not None and not -count <= bound <= count:
                raise InvalidSpec(f"layer {bound} in {_short(spec)} is out of range; {allowed}")
        return list(range(count))[slice(*bounds)]
    if not -count <= index < count:
        # Of a spec that is this one layer, "layer 99 does not exist in 99" would say it twice.
        within = "" if part.strip() == str(spec).strip() else f" (in {_short(spec)})"
        raise InvalidSpec(f"layer {index}{within} does not exist; {allowed}")
    return [index % count]


def combine_layers(selected: Sequence[Any], combine: Combine) -> Any:
    """One (batch, tokens, d or d*k) array from k selected (batch, tokens, d) layers (stack: d*k).

    NumPy arrays, or torch tensors on a GPU, where the engine pools them before they leave it."""
    if len(selected) == 1:
        return selected[0]
    if not isinstance(selected[0], np.ndarray):
        import torch

        if combine in (Combine.CONCAT, Combine.STACK):
            return torch.cat(list(selected), dim=-1)
        stacked_tensor = torch.stack(list(selected), dim=0)
        return stacked_tensor.sum(dim=0) if combine is Combine.SUM else stacked_tensor.mean(dim=0)
    if combine in (Combine.CONCAT, Combine.STACK):
        # Stack is concat here; the corpus levels split the (.., k*d) rows back into k per-layer vectors.
        return np.concatenate(list(selected), axis=-1)
    stacked = np.stack(list(selected), axis=0)
    return stacked.sum(axis=0) if combine is Combine.SUM else stacked.mean(axis=0)
