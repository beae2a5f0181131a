"""What a model is (`ModelInfo`): family, sizes, limits, special tokens, pooling and how it runs.

Read from the folder where the encoder was opened light (no torch), from the PyTorch module otherwise;
tests/test_light.py holds the two equal.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .renamed_fields import renamed_field

__all__ = ["ExactChoice", "ModelInfo", "hidden_size", "model_info", "resolved"]

# The exact default's older name of its speed against torch float32 (`vs_float32`, as `info().fast`,
# `ModeReport` and `bench --json` name it), still read from `info().exact`
_OLD_RATIO, _RATIO = "vs_torch", "vs_float32"


class ExactChoice(dict[str, Any]):
    """`info().exact`: what the exact default chose; its speed against torch float32 is `vs_float32`,
    and `vs_torch`, its older name, still reads (`["vs_torch"]`, `.get`) with a DeprecationWarning."""

    def __missing__(self, key: str) -> Any:
        if key == _OLD_RATIO and _RATIO in self:
            return _renamed_key(self[_RATIO])
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        """`dict.get`, the older `vs_torch` read as `vs_float32` with a DeprecationWarning."""
        if key == _OLD_RATIO and key not in self and _RATIO in self:
            return _renamed_key(self[_RATIO])
        return super().get(key, default)


def _renamed_key(value: Any) -> Any:
    # stacklevel 3: the line that read the key (through __missing__ or get)
    said = f'info().exact["{_OLD_RATIO}"] is deprecated; use ["{_RATIO}"] (the same value)'
    warnings.warn(said, DeprecationWarning, stacklevel=3)
    return value


@dataclass
class ModelInfo:
    """What a model is: family, sizes, limits, special tokens and its own sentence pooling."""

    source: str
    path: str | None
    family: str
    model_type: str
    n_layers: int  # transformers' num_hidden_layers (`layers` elsewhere is a layer spec)
    hidden_size: int
    embedding_size: int
    vocab_size: int
    max_positions: int
    max_tokens: int
    special_tokens: dict[str, str]
    pooling: str | None
    normalize: bool
    lacks: list[str]
    positions_in_attention: str | None  # "relative" or "rotary" where positions enter inside attention
    device: str
    dtype: str
    backend: str = "torch"
    quantize: str | None = None
    mode: str = "exact"
    fast: dict[str, Any] | None = None
    exact: dict[str, Any] | None = None

    @property
    def layers(self) -> int:
        """Deprecated: the old name of `n_layers` (`layers` everywhere else is a layer spec)."""
        return renamed_field(self.n_layers, owner="ModelInfo", name="n_layers", old="layers")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: every field above, by its name (`n_layers`, not the deprecated `layers`)."""
        return dict(self.__dict__)


def resolved(path: str | os.PathLike[str] | None) -> str | None:
    """A model folder's path made absolute (None stays None): the same folder says the same path from
    whatever folder it was named in (`-m m/bert`, BERTSCOPE_MODEL=m/bert), as the bundled model's does."""
    return None if path is None else str(Path(path).resolve())


def hidden_size(config: Any) -> int:
    """A transformers config's hidden size (DistilBERT's is `dim`)."""
    return int(config.hidden_size if hasattr(config, "hidden_size") else config.dim)


def model_info(encoder: Any) -> ModelInfo:
    """The ModelInfo of an Encoder (core/encoder.py, which imports this) as it runs now: backend,
    quantize, mode and the choices made."""
    runtime = {"backend": encoder.backend, "quantize": encoder.quantize, "mode": encoder.mode}
    runtime.update(fast=encoder.fast_choice, exact=encoder.exact_choice)
    if encoder.light:
        assert encoder.loaded.view is not None
        facts = {**(encoder.loaded.view.info() or {}), "source": encoder.loaded.source}
        facts.update(
            max_tokens=encoder.max_tokens, device=encoder.device_type, path=resolved(facts.get("path"))
        )
        return ModelInfo(**{**facts, **runtime, "dtype": encoder.runtime_dtype or "float32"})
    tok = encoder.loaded.tokenizer
    config = encoder.config
    return ModelInfo(
        source=encoder.loaded.source,
        path=resolved(encoder.loaded.path),
        family=encoder.family.name,
        model_type=config.model_type,
        n_layers=encoder.n_layers,
        hidden_size=hidden_size(config),
        embedding_size=int(encoder.input_embeddings.shape[1]),
        vocab_size=int(encoder.input_embeddings.shape[0]),
        max_positions=encoder.max_positions,
        max_tokens=encoder.max_tokens,
        special_tokens={k: str(v) for k, v in tok.special_tokens_map.items()},
        pooling=encoder.loaded.st_pooling,
        normalize=encoder.loaded.st_normalize,
        lacks=list(encoder.family.parts(encoder.hf_model).lacks),
        positions_in_attention=encoder.family.positions_in_attention(config),
        device=str(encoder.device),
        dtype=encoder.runtime_dtype or str(next(encoder.hf_model.parameters()).dtype).replace("torch.", ""),
        backend=encoder.backend,
        quantize=encoder.quantize,
        mode=encoder.mode,
        fast=encoder.fast_choice,
        exact=encoder.exact_choice,
    )
