"""Post-processing that fixes cosine (whitening, all-but-the-top, PCA, standardize).

A public path kept: the code lives in `bertscope.core.post`; `from bertscope.post import ...` works as
the docs and earlier releases show it. Nothing inside bertscope imports this module.
"""

from .core.post import (
    PCA,
    AllButTheTop,
    PostKind,
    PostProcessor,
    Standardize,
    Whitening,
    as_post,
    check_post_count,
    check_post_path,
    fit_post,
    fit_post_on_texts,
    load_post,
)

__all__ = [
    "PostKind",
    "PostProcessor",
    "Whitening",
    "AllButTheTop",
    "PCA",
    "Standardize",
    "fit_post",
    "fit_post_on_texts",
    "load_post",
    "as_post",
    "check_post_path",
    "check_post_count",
]
