"""Cosine of every pair (`cos_sim`) and of row i with row i (`pairwise_cos_sim`).

A public path kept: the code lives in `bertscope.core.similarity`; `from bertscope.similarity import ...`
works as the docs and earlier releases show it. Nothing inside bertscope imports this module.
"""

from .core.similarity import (
    Hit,
    TopK,
    cos_sim,
    pairwise_cos_sim,
    row_cosines,
    unit,
)

__all__ = [
    "cos_sim",
    "pairwise_cos_sim",
    "row_cosines",
    "unit",
    "Hit",
    "TopK",
]
