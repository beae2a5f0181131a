"""Attention weights: what each token reads from every other, per layer and head, as `output_attentions`.

The fast attention kernels (sdpa, flash) return no weights, so one call switches the model to the eager
implementation and back; the default path is never changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from .core._enums import LongText
from .core.tokens import Text, Tokens, is_pair, pad_batch
from .errors import InvalidInput

if TYPE_CHECKING:
    from .core.encoder import Encoder

__all__ = ["attentions", "attention_of"]


def attentions(model: Encoder, text: Text, *, long: LongText | str = "truncate") -> np.ndarray:
    """(layers, heads, tokens, tokens) float32 attention weights of one text or (A, B) pair.

    Row i of [layer - 1, head] is how token i's layer-`layer` vector weighs every token of layer - 1.
    """
    return attention_of(model, text, long=long)[1]


def attention_of(
    model: Encoder, text: Text, *, long: LongText | str = "truncate", tokens: Tokens | None = None
) -> tuple[Tokens, np.ndarray]:
    """The tokens of one text or pair, and its (layers, heads, tokens, tokens) attention weights.

    `tokens`: the text already tokenized with `long` (the service counts them first), not tokenized again.
    """
    if not (isinstance(text, str) or (isinstance(text, tuple) and is_pair(text))):
        raise InvalidInput("attentions takes one text or one (A, B) pair (a tuple of two strings)")
    if LongText.parse(long, what="long-text policy") is LongText.WINDOW:
        raise InvalidInput("attention is within one window: use long='truncate' or 'error', not 'window'")
    if tokens is None:
        tokens = model.tokenize(text, long=long)
    ids, mask = pad_batch([tokens.ids], model.pad_id)
    types, _ = pad_batch([tokens.type_ids], 0)
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    import torch  # attention weights are the PyTorch module's own

    from .core.forward import model_inputs

    with torch.inference_mode(), _eager(model.hf_model):
        out = model.hf_model(**model_inputs(model, batch), output_attentions=True, return_dict=True)
    weights = [a for a in (out.attentions or ()) if a is not None]
    if len(weights) != model.n_layers:
        raise InvalidInput(
            f"{model.loaded.source} gave {len(weights)} attention maps for {model.n_layers} layers; "
            "its attention implementation does not report weights"
        )
    return tokens, torch.stack([a[0] for a in weights]).float().cpu().numpy()


@contextmanager
def _eager(hf_model: Any) -> Iterator[None]:
    """The eager attention implementation for the block (sdpa and flash kernels return no weights)."""
    before = getattr(hf_model.config, "_attn_implementation", None)
    switch = before not in (None, "eager") and hasattr(hf_model, "set_attn_implementation")
    if switch:
        hf_model.set_attn_implementation("eager")
    try:
        yield
    finally:
        if switch:
            hf_model.set_attn_implementation(before)
