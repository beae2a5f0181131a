"""Model: the facade over one loaded encoder, a method per feature; `load()` makes one.

Every method's body lives in the module of its concept (static, anatomy, contextual, chunk_embed, encode,
explain, attention, vocab, research/...), each of which takes the `Encoder` (core/encoder.py) this class
extends, so no module below this one imports it. The methods that read what each layer holds (probe,
cka, geometry, ...) come from `research.methods.ResearchMethods`, the Encoder that Model extends.

This package keeps the one import path, `bertscope.model`: the class in `facade.py`, `load()` in `loader.py`,
what it refuses before anything loads in `load_checks.py`.
"""

from __future__ import annotations

from ..core.encoder import CPU_TOKEN_BUDGET, CUDA_TOKEN_BUDGET, ModelInfo, cpu_token_budget
from .facade import Model
from .load_checks import refuse_unread_options as refuse_unread_options
from .loader import load

__all__ = ["CPU_TOKEN_BUDGET", "CUDA_TOKEN_BUDGET", "Model", "ModelInfo", "cpu_token_budget", "load"]
