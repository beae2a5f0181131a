"""What `embed`, `embed_tokens`, `embed_words` and `embed_chunks` return.

A public path kept: the code lives in `bertscope.core.results`; `from bertscope.results import ...` works
as the docs and earlier releases show it. Nothing inside bertscope imports this module.
"""

from .core.results import (
    ChunkEmbeddings,
    SentenceEmbeddings,
    TokenEmbeddings,
    WordEmbeddings,
    per_text,
    plain,
    rows,
)

__all__ = [
    "SentenceEmbeddings",
    "TokenEmbeddings",
    "WordEmbeddings",
    "ChunkEmbeddings",
    "rows",
    "plain",
    "per_text",
]
