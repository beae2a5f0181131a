"""The model's trained pooler read from a folder's weights and run in NumPy, without torch.

Only where the family's pooler is known exactly (families.py `PoolerLayout`: one dense layer (hidden,
hidden) and tanh over the first token, BERT, RoBERTa, XLM-R, MPNet, ALBERT and Jina v3 as transformers'
AutoModel builds them) and the folder holds exactly its weight and bias, float, of those shapes. Anything
else gives None and the engine runs the PyTorch module's own pooler. tests/test_light_pooler.py holds the
result equal to the module's `pooler_output`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .embedding_layer import TensorsFolder

__all__ = ["PoolerWeights", "pooler_weights"]


@dataclass(frozen=True)
class PoolerWeights:
    """A trained pooler: tanh(first token @ weight.T + bias), in float32 as torch's float32 module runs it."""

    weight: np.ndarray  # (hidden, hidden) float32, (out, in) as nn.Linear keeps it
    bias: np.ndarray  # (hidden,) float32

    def __call__(self, hidden: np.ndarray) -> np.ndarray:
        """(batch, hidden) float32 pooled vectors of the last layer's hidden (batch, tokens, hidden)."""
        first = np.asarray(hidden[:, 0], dtype=np.float32)
        return np.tanh(first @ self.weight.T + self.bias).astype(np.float32, copy=False)


def pooler_weights(view: TensorsFolder) -> PoolerWeights | None:
    """The folder's trained pooler where its family's is known exactly and the weights are all of it, else
    None (the PyTorch module's pooler runs)."""
    layout = view.family.pooler_layout
    if layout is None or layout.activation != "tanh":  # the one activation run here
        return None
    hidden = view.config.get("hidden_size")
    if isinstance(hidden, bool) or not isinstance(hidden, int):
        return None
    pooler_names = [name for name in view.weight_names if "pooler" in name.split(".")]
    if len(pooler_names) != 2:
        return None  # none (no pooler), or more than one dense layer and its bias: not this layout
    weight, bias = view.weight(layout.weight), view.weight(layout.bias)
    if weight is None or bias is None or weight.shape != (hidden, hidden) or bias.shape != (hidden,):
        return None
    return PoolerWeights(np.ascontiguousarray(weight), np.ascontiguousarray(bias))
