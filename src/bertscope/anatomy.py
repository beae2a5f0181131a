"""The embedding layer taken apart: word + segment + position, (projection,) LayerNorm, and its proof.

The parts are recomputed from the model's own modules and compared with the model's own layer 0
(`output_hidden_states[0]`, the encoder's input); `max_abs_error` is that comparison. A model opened
light (no PyTorch module loaded) is taken apart from its folder's weights with NumPy where its layer is
rows and one LayerNorm (core/embedding_layer.py), and proved against its runtime's layer 0 the same way;
a rebuild that misses it by more than `Anatomy.proof_bound` is done again from the PyTorch module. A family
whose positions enter inside attention (DeBERTa: relative; ModernBERT: rotary) has no position step: the
anatomy says where they go instead (`positions_in_attention`, `notes`). The rows are added in the order
the family's own code adds them (`Family.sum_order`, named by `Anatomy.sum_order`): in bfloat16 another
order misses the model's layer 0 by a rounding step, which the proof would call a wrong anatomy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .core.embedding_layer import EmbeddingWeights
from .core.engine import as_array
from .core.results import rows, texts_shown
from .core.tokens import Tokens, pad_batch, say_cut

if TYPE_CHECKING:
    import torch

    from .core.encoder import Encoder
    from .core.families import EmbeddingParts, Family

__all__ = ["Anatomy", "decompose", "lacked_parts", "lossy_runtime"]

PROOF_TOLERANCE = 1e-5  # the most a rebuild may miss the runtime's layer 0 by (`Anatomy.proof_bound`)
ROUNDING_STEPS = 8  # float32 steps of layer 0's largest value a rebuild may miss by, where more than 1e-5

_Rows = TypeVar("_Rows", "np.ndarray", "torch.Tensor")

STEPS = (
    "word",
    "position",
    "token_type",
    "summed",
    "projected",
    "normalized",
    "encoder_input",
    "model_output",
)


# The arrays of an Anatomy, in the order the model makes them (None where the family lacks the step).
_STEPS = ("word", "position", "token_type", "summed", "projected", "normalized", "encoder_input")


@dataclass
class Anatomy:
    """One text's embedding layer, step by step; each array is (tokens, width of that step)."""

    tokens: Tokens
    word: np.ndarray
    position: np.ndarray | None
    token_type: np.ndarray | None
    summed: np.ndarray
    projected: np.ndarray | None
    normalized: np.ndarray | None
    encoder_input: np.ndarray
    model_output: np.ndarray
    position_ids: list[int]
    lacks: tuple[str, ...] = field(default_factory=tuple)
    positions_in_attention: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # the parts `summed` adds, in the order the model adds them (word first)
    sum_order: tuple[str, ...] = ("word",)

    def __repr__(self) -> str:
        """The tokens' count, the steps the model has and their width, whether the proof holds and the
        text; never the floats (six (tokens, width) arrays)."""
        steps = [name for name in _STEPS if getattr(self, name) is not None]
        count = len(self.tokens)
        return (
            f"Anatomy({count} token{'' if count == 1 else 's'}, steps {', '.join(steps)}"
            f" (width {self.encoder_input.shape[-1]}), proof {'holds' if self.proof_holds else 'fails'}"
            + texts_shown(self.tokens.text, self.tokens.pair)
            + (f", {self.n_dropped} dropped" if self.n_dropped else "")
            + ")"
        )

    @property
    def max_abs_error(self) -> float:
        """Largest |rebuilt - model's own layer 0| over all tokens and dimensions."""
        return float(np.abs(self.encoder_input - self.model_output).max())

    @property
    def proof_bound(self) -> float:
        """The most the rebuild may miss layer 0 by: 1e-5, or 8 float32 rounding steps of layer 0's largest
        |value| where that is more (past 10.5: float32 steps by 1.5e-5 near 150, so an absolute 1e-5
        failed sound anatomies of models with large layer-0 values)."""
        scale = float(np.abs(self.model_output).max()) if self.model_output.size else 0.0
        return max(PROOF_TOLERANCE, ROUNDING_STEPS * float(np.finfo(np.float32).eps) * scale)

    @property
    def proof_holds(self) -> bool:
        """Whether the parts rebuild the model's own layer 0 within `proof_bound` (NaN fails)."""
        return self.max_abs_error <= self.proof_bound

    @property
    def n_dropped(self) -> int:
        """Tokens cut because the text is longer than the model's positions."""
        return self.tokens.n_dropped

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: text, pair, tokens, ids, token_type_ids, position_ids, lacks, positions_in_attention,
        notes, n_dropped, max_abs_error, proof_bound, proof_holds (whether max_abs_error is at most
        proof_bound: false where it is NaN), and `steps`.

        position_ids are the rotary positions where `positions_in_attention` is "rotary", [] where the
        family uses none the anatomy can show.

        `steps` maps each step name (word ... model_output, in order) to its (tokens, width) rows, or
        None where the family lacks that part. `projected` is a projection before the LayerNorm
        (DeBERTa-v2 with embedding_size != hidden_size); one after it (ALBERT, ELECTRA with a narrower
        embedding) is in `encoder_input`, so `projected` is None there while `lacks` names no projection.
        """
        return {
            "text": self.tokens.text,
            "pair": self.tokens.pair,
            "tokens": list(self.tokens.tokens),
            "ids": list(self.tokens.ids),
            "token_type_ids": list(self.tokens.token_type_ids),
            "position_ids": list(self.position_ids),
            "lacks": list(self.lacks),
            "positions_in_attention": self.positions_in_attention,
            "notes": list(self.notes),
            "n_dropped": self.n_dropped,
            "max_abs_error": self.max_abs_error,
            "proof_bound": self.proof_bound,
            "proof_holds": self.proof_holds,
            "steps": {s: None if getattr(self, s) is None else rows(getattr(self, s)) for s in STEPS},
        }


def decompose(model: Encoder, tokens: list[Tokens]) -> list[Anatomy]:
    """Rebuild layer 0 from its parts for a padded batch of texts and compare with the model's own; a text
    cut at the model's limit is said with a `TruncatedTextsWarning`."""
    # one window at most (long= truncate or error): the fix for a cut is a shorter text
    say_cut([t.n_dropped for t in tokens], model.max_tokens, "split the text to see its end")
    ids_np, mask_np = pad_batch([t.ids for t in tokens], model.pad_id)
    types_np, _ = pad_batch([t.token_type_ids for t in tokens], 0)
    model.engine.check_ids(ids_np, types_np)  # before the tables are indexed: a pair on a one-segment model
    view = model.loaded.view
    weights = view.embedding_weights if model.light and view is not None else None
    lossy = lossy_runtime(model)
    if weights is not None and view is not None:
        light = _decompose_light(model, view.config, weights, tokens, (ids_np, types_np, mask_np))
        # A lossy graph's layer 0 is missed by the module's parts as much (its rounding, not theirs).
        if lossy or all(anatomy.proof_holds for anatomy in light):
            return _said_lossy(light, lossy)
    return _said_lossy(_decompose_torch(model, tokens, ids_np, types_np, mask_np), lossy)


def lossy_runtime(model: Encoder) -> str | None:
    """The quantisation or reduced precision (int8_static, bfloat16) of the runtime that computes `model`'s
    layer 0, or None where it runs float32."""
    dtype = getattr(model, "runtime_dtype", None)
    return getattr(model, "quantize", None) or (dtype if dtype not in (None, "float32") else None)


def _said_lossy(anatomies: list[Anatomy], lossy: str | None) -> list[Anatomy]:
    """`anatomies` with a note saying, where the runtime is lossy and the rebuild misses its layer 0, why."""
    if lossy is None:
        return anatomies
    for anatomy in anatomies:
        if not anatomy.proof_holds:
            note = (
                f"the parts are the stored weights; model_output is this model's {lossy} runtime's layer 0, "
                f"which its rounding moves by {anatomy.max_abs_error:.1e}: load the model without "
                "quantize/dtype to see the proof hold"
            )
            anatomy.notes = (*anatomy.notes, note)
    return anatomies


def lacked_parts(model: Encoder) -> tuple[str, ...]:
    """The embedding-layer parts `model` lacks (`Anatomy.lacks`), read from the folder's weights while it
    is light, so that bounding an anatomy's answer loads no PyTorch module; a static model's one-line
    refusal comes from its `hf_model`."""
    view = model.loaded.view if getattr(model, "light", False) else None
    weights = view.embedding_weights if view is not None else None
    if weights is not None:
        return weights.lacks
    module = model.hf_model  # first: a static model's family has no parts to name
    return model.family.parts(module).lacks


def _layer0(model: Encoder, ids: np.ndarray, types: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The model's own layer 0 (float32) as its runtime computes it.

    An exported graph runs whole, fetching state 0 alone: its session is open already, where a graph cut
    at layer 0 would import onnx and open a second session (about 240 MB), more than the layers it spares
    cost on the few texts an anatomy takes apart. torch stops after the embedding layer."""
    engine = model.engine
    if engine.runner is None:
        return as_array(engine.forward(ids, types, mask, 0)[0])
    return as_array(engine.forward(ids, types, mask, model.n_layers, layers=(0,))[0])


def _decompose_light(
    model: Encoder,
    config: dict[str, Any],
    weights: EmbeddingWeights,
    tokens: list[Tokens],
    batch: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> list[Anatomy]:
    """The embedding layer taken apart with NumPy from the folder's weights (no PyTorch module)."""
    family = model.family
    ids_np, types_np, mask_np = batch
    position_ids = family.position_id_array(ids_np, family.position_pad(config))
    word = weights.word[ids_np]
    steps: dict[str, np.ndarray | None] = {"word": word}
    steps["position"] = weights.position[position_ids] if weights.position is not None else None
    steps["token_type"] = weights.token_type[types_np] if weights.token_type is not None else None
    order = _sum_order(family, steps)
    steps["summed"] = summed = _summed(steps, order)
    steps["projected"] = None
    steps["normalized"] = steps["encoder_input"] = weights.layer_norm(summed)
    steps["model_output"] = _layer0(model, ids_np, types_np, mask_np)
    lacks = weights.lacks
    where = family.positions_in_attention(config)
    notes = family.notes(config, True, weights.norm_bias is not None)
    return [
        Anatomy(
            tokens=tok,
            position_ids=position_ids[row, : len(tok)].tolist() if weights.position is not None else [],
            lacks=lacks,
            positions_in_attention=where,
            notes=notes,
            sum_order=order,
            **{name: None if step is None else step[row, : len(tok)] for name, step in steps.items()},  # type: ignore[arg-type]
        )
        for row, tok in enumerate(tokens)
    ]


def _decompose_torch(
    model: Encoder, tokens: list[Tokens], ids_np: np.ndarray, types_np: np.ndarray, mask_np: np.ndarray
) -> list[Anatomy]:
    """The embedding layer taken apart by the PyTorch module's own parts."""
    from .core.loading import require_torch

    require_torch("anatomy of this model")  # a family whose light anatomy does not serve: one line
    import torch

    family, hf = model.family, model.hf_model
    parts = family.parts(hf)
    ids = torch.from_numpy(ids_np).to(model.device)
    mask = torch.from_numpy(mask_np).to(model.device)
    types = torch.from_numpy(types_np).to(model.device)
    position_ids = family.position_ids(ids, family.position_pad(hf.config))
    with torch.inference_mode():
        word = parts.word(ids)
        steps: dict[str, torch.Tensor | None] = {"word": word}
        steps["position"] = parts.position(position_ids) if parts.position is not None else None
        steps["token_type"] = parts.token_type(types) if parts.token_type is not None else None
        order = _sum_order(family, steps)
        steps["summed"] = summed = _summed(steps, order)
        before = parts.projection_before_norm
        steps["projected"] = before(summed) if before is not None else None
        projected = steps["projected"]
        normed_input = projected if projected is not None else summed
        normalized = parts.layernorm(normed_input) if parts.layernorm is not None else normed_input
        if parts.zero_padding:
            normalized = normalized * mask.unsqueeze(-1).to(normalized.dtype)
        steps["normalized"] = normalized if parts.layernorm is not None else None
        after = parts.projection_after_norm
        steps["encoder_input"] = after(normalized) if after is not None else normalized
        steps["model_output"] = torch.from_numpy(_layer0(model, ids_np, types_np, mask_np))
    return [_one(tok, row, steps, position_ids, parts, order) for row, tok in enumerate(tokens)]


def _sum_order(family: Family, steps: dict[str, _Rows | None]) -> tuple[str, ...]:
    """The parts this model has, in the order its family's code adds them."""
    return tuple(name for name in family.sum_order if steps.get(name) is not None)


def _summed(steps: dict[str, _Rows | None], order: tuple[str, ...]) -> _Rows:
    """The rows of `order` (word first) added left to right, as the model adds them, rounding included."""
    parts = [part for name in order if (part := steps[name]) is not None]
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _one(
    tok: Tokens,
    row: int,
    steps: dict[str, torch.Tensor | None],
    position_ids: torch.Tensor,
    parts: EmbeddingParts,
    order: tuple[str, ...],
) -> Anatomy:
    n = len(tok)
    # Rotary positions are real position ids (the attention turns by them), though no row is added here.
    shown = parts.position is not None or parts.positions_in_attention == "rotary"

    def take(name: str) -> np.ndarray | None:
        step = steps[name]
        return None if step is None else step[row, :n].float().cpu().numpy()

    arrays = {name: take(name) for name in STEPS}
    return Anatomy(
        tokens=tok,
        position_ids=position_ids[row, :n].tolist() if shown else [],
        lacks=parts.lacks,
        positions_in_attention=parts.positions_in_attention,
        notes=parts.notes,
        sum_order=order,
        **arrays,  # type: ignore[arg-type]
    )
