"""The embedding layer read from a model folder's weights without torch, for the light anatomy.

Only where the layer is exactly word + position + token-type rows, then one LayerNorm: BERT, RoBERTa,
XLM-R, DistilBERT, MPNet and ELECTRA without its projection. Any other weight inside the layer, or a
config that changes its arithmetic, gives None and the anatomy loads the PyTorch module instead. Every
rebuild is still proved against the runtime's own layer 0 (`anatomy.decompose`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .families import Family
from .safetensors_header import FloatRows

__all__ = ["LIGHT_FAMILIES", "EmbeddingWeights", "embedding_weights"]

# transformers' LayerNorm epsilon for each family: config.layer_norm_eps where its config class has one
# (this being the class's default), DistilBERT's is fixed in its code
_EPS_DEFAULT = {"bert": 1e-12, "roberta": 1e-12, "xlm-roberta": 1e-12, "mpnet": 1e-12, "electra": 1e-12}
_EPS_FIXED = {"distilbert": 1e-12}
LIGHT_FAMILIES = frozenset((*_EPS_DEFAULT, *_EPS_FIXED))
# Buffers some checkpoints keep inside the embedding layer; they hold ids, not weights.
_ID_BUFFERS = ("position_ids", "token_type_ids")


class TensorsFolder(Protocol):
    """What a reading of whole tensors needs of a model folder (core/folder.py's FolderView, which caches
    each reading): the embedding layer here, the trained pooler in pooler_weights.py."""

    family: Family
    config: dict[str, Any]

    @property
    def weight_names(self) -> list[str]:
        """The names of the tensors the safetensors files hold."""

    def weight(self, suffix: str) -> np.ndarray | None:
        """The one tensor whose name ends with `suffix`, widened exactly to float32; None where none or
        several do, or it is not float."""


class WeightsFolder(TensorsFolder, Protocol):
    """A folder whose word matrix is also read a row at a time (the embedding layer's reading)."""

    def weight_rows(self, suffix: str) -> FloatRows | None:
        """The one 2-D float tensor whose name ends with `suffix`, its rows read as indexed."""


@dataclass(frozen=True)
class EmbeddingWeights:
    """One model's embedding layer: rows to look up (read as indexed), then LayerNorm(weight, bias, eps)."""

    word: FloatRows
    position: FloatRows | None
    token_type: FloatRows | None
    norm_weight: np.ndarray
    norm_bias: np.ndarray | None
    eps: float

    @property
    def lacks(self) -> tuple[str, ...]:
        """The parts this layer has not, named as `EmbeddingParts.lacks` names them (a layer read here has
        no projection)."""
        parts = (("position", self.position), ("token_type", self.token_type))
        return tuple(name for name, part in parts if part is None) + ("projection",)

    def layer_norm(self, x: np.ndarray) -> np.ndarray:
        """LayerNorm over the last axis, as torch's, in float64 and then float32."""
        wide = x.astype(np.float64)
        centred = wide - wide.mean(axis=-1, keepdims=True)
        scaled = centred / np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + self.eps)
        out = scaled * self.norm_weight
        return (out + self.norm_bias if self.norm_bias is not None else out).astype(np.float32)


def embedding_weights(view: WeightsFolder) -> EmbeddingWeights | None:
    """The folder's embedding layer where it is rows and one LayerNorm, else None (the torch anatomy)."""
    family, config = view.family, view.config
    if family.name not in LIGHT_FAMILIES or family.embeddings_attr is None or family.norm_attr is None:
        return None
    eps = _EPS_FIXED.get(family.name, config.get("layer_norm_eps", _EPS_DEFAULT.get(family.name)))
    if not isinstance(eps, (int, float)):
        return None
    if config.get("position_embedding_type", "absolute") != "absolute":
        return None  # relative position keys inside attention: the torch anatomy says so
    prefix = family.embeddings_attr
    expected = {
        family.word_attr: True,
        "position_embeddings": True,
        "token_type_embeddings": family.uses_token_types,
        family.norm_attr: True,
    }
    names = view.weight_names
    if any("embeddings_project" in name or "embed_proj" in name for name in names):
        return None  # a projection around the norm (ELECTRA small, DeBERTa): the torch anatomy has it
    for name in names:
        part = _embedding_part(name, prefix)
        if part is not None and part not in _ID_BUFFERS and not expected.get(part, False):
            return None  # a weight of the layer this reading would leave out
    word = view.weight_rows(f"{prefix}.{family.word_attr}.weight")
    position = view.weight_rows(f"{prefix}.position_embeddings.weight")
    token_type = (
        view.weight_rows(f"{prefix}.token_type_embeddings.weight") if family.uses_token_types else None
    )
    norm_weight = view.weight(f"{prefix}.{family.norm_attr}.weight")
    norm_bias = view.weight(f"{prefix}.{family.norm_attr}.bias")
    if word is None or position is None or norm_weight is None:
        return None
    if family.uses_token_types and token_type is None:
        return None
    return EmbeddingWeights(word, position, token_type, norm_weight, norm_bias, float(eps))


def _embedding_part(name: str, prefix: str) -> str | None:
    """The part a weight name holds inside the embedding layer (`bert.embeddings.LayerNorm.weight`:
    LayerNorm), or None for a weight outside it."""
    pieces = name.split(".")
    for at in (0, 1):  # the bare encoder's names, or a head model's (`bert.`, `roberta.`, ...)
        if len(pieces) > at + 1 and pieces[at] == prefix:
            return pieces[at + 1]
    return None
