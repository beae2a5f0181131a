"""The names from the tutorials: the padded batch (`input_ids`, `attention_mask`, `token_type_ids`) and the
plain forward's `last_hidden_state`, `hidden_states` and `pooler_output`, exactly as Hugging Face gives them.

    m.batch(["a cat", ("How are you?", "Fine.")])   # numpy, right-padded like tokenizer(..., padding=True)
    out = m.forward(["a cat"]); out["last_hidden_state"]   # or out.last_hidden_state
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from .tokens import Text, pad_batch

if TYPE_CHECKING:
    import torch

    from .encoder import Encoder

__all__ = ["ForwardOutput", "padded_batch", "forward", "model_inputs"]


@dataclass
class ForwardOutput(Mapping[str, Any]):
    """One padded batch through the model, by Hugging Face's names; reads as a dict or by attribute.

    input_ids, attention_mask, token_type_ids: (batch, tokens) int64 (token_type_ids None where the
    family has none); last_hidden_state: (batch, tokens, d); hidden_states: L+1 arrays (batch, tokens, d),
    0 the embedding output; pooler_output: (batch, d), or None where the model has no pooler.
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    token_type_ids: np.ndarray | None
    last_hidden_state: np.ndarray
    hidden_states: tuple[np.ndarray, ...]
    pooler_output: np.ndarray | None

    def __getitem__(self, key: str) -> Any:
        if key not in self._names():
            raise KeyError(f"{key!r}: a forward output has {', '.join(self._names())}")
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    @classmethod
    def _names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def __repr__(self) -> str:
        """Each field's shape and dtype, never its numbers (the dataclass repr printed every float)."""

        def said(value: Any) -> str:
            return "None" if value is None else f"{tuple(value.shape)} {value.dtype}"

        states = self.hidden_states
        shown = [f"{name} {said(getattr(self, name))}" for name in self._names() if name != "hidden_states"]
        layers = f"hidden_states {len(states)} x {said(states[0])}" if states else "hidden_states ()"
        return f"ForwardOutput({', '.join(shown[:4])}, {layers}, {shown[4]})"


def padded_batch(model: Encoder, texts: Text | Sequence[Text]) -> dict[str, np.ndarray]:
    """input_ids, attention_mask, token_type_ids (batch, tokens) int64, right-padded with the pad id."""
    tokens = model.tokenize(texts)
    rows = [tokens] if not isinstance(tokens, list) else tokens
    ids, mask = pad_batch([t.ids for t in rows], model.pad_id)
    types, _ = pad_batch([t.token_type_ids for t in rows], 0)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def model_inputs(model: Encoder, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """The batch as the tensors the model's forward takes (token_type_ids only where the family has them)."""
    import torch  # here, not above: `padded_batch` (Model.batch) answers without torch

    model.engine.check_ids(batch["input_ids"], batch["token_type_ids"])  # one line, not an IndexError
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if model.family.uses_token_types else [])
    return {name: torch.from_numpy(batch[name]).to(model.device) for name in names}


def forward(model: Encoder, texts: Text | Sequence[Text]) -> ForwardOutput:
    """The plain Hugging Face forward (output_hidden_states=True) of one padded batch, as numpy."""
    import torch

    batch = padded_batch(model, texts)
    with torch.inference_mode():
        out = model.hf_model(**model_inputs(model, batch), output_hidden_states=True, return_dict=True)
    pooled = getattr(out, "pooler_output", None)
    return ForwardOutput(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        token_type_ids=batch["token_type_ids"] if model.family.uses_token_types else None,
        last_hidden_state=_numpy(out.last_hidden_state),
        hidden_states=tuple(_numpy(h) for h in out.hidden_states),
        pooler_output=None if pooled is None else _numpy(pooled),
    )


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.float().cpu().numpy()
