"""The families bertscope knows (`SUPPORTED`) and each one's embedding parts.

A public path kept: the code lives in `bertscope.core.families`; `from bertscope.families import ...`
works as the docs and earlier releases show it. Nothing inside bertscope imports this module.
"""

from .core.families import (
    SUPPORTED,
    EmbeddingParts,
    Family,
    PoolerLayout,
    family_for,
)

__all__ = [
    "EmbeddingParts",
    "Family",
    "PoolerLayout",
    "family_for",
    "SUPPORTED",
]
