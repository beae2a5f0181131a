"""Word senses: a word's occurrences in a token store, clustered.

A public path kept: the code lives in `bertscope.research.senses`; `from bertscope.senses import ...`
works as the docs and earlier releases show it. Nothing inside bertscope imports this module.
"""

from .research.senses import (
    Sense,
    Senses,
    word_senses,
)

__all__ = [
    "Sense",
    "Senses",
    "word_senses",
]
