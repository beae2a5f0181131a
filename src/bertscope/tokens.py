"""Tokens of a text as the model sees them.

A public path kept: the code lives in `bertscope.core.tokens`; `from bertscope.tokens import ...` works
as the docs and earlier releases show it. Nothing inside bertscope imports this module.
"""

from .core.tokens import (
    Text,
    TextTokenizer,
    Tokens,
    Window,
    check_text,
    check_texts,
    is_pair,
    iter_checked,
    pad_batch,
    say_cut,
    stride_refusal,
    text_problem,
    window_width,
)

__all__ = [
    "stride_refusal",
    "window_width",
    "Text",
    "Tokens",
    "Window",
    "TextTokenizer",
    "pad_batch",
    "say_cut",
    "check_texts",
    "check_text",
    "iter_checked",
    "is_pair",
    "text_problem",
]
