"""Options resolved to one embedding spec, with post-processing and provenance.

A public path kept: the code lives in `bertscope.core.spec`; `from bertscope.spec import ...` works as
the docs and earlier releases show it. Nothing inside bertscope imports this module.
"""

from .core.spec import (
    SENTENCE_OPTIONS,
    SPEC_KEYS,
    EmbedOptions,
    EmbedSpec,
    PostArg,
    Recipe,
    auto_refusal,
    named_elsewhere,
    refuse_sentence_options,
    reload_arg,
    resolve,
    resolve_spec,
    stored_settings,
    unknown_option,
    unnormalized_own_pooling,
    whole_number,
)

__all__ = [
    "auto_refusal",
    "EmbedOptions",
    "EmbedSpec",
    "Recipe",
    "PostArg",
    "resolve",
    "resolve_spec",
    "reload_arg",
    "stored_settings",
    "SPEC_KEYS",
    "SENTENCE_OPTIONS",
    "refuse_sentence_options",
    "whole_number",
    "unknown_option",
    "unnormalized_own_pooling",
    "named_elsewhere",
]
