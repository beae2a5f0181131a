"""Words and tokens (audit 21): a context word the truncation cut, decomposed accents, a zero-width space,
pre-split words and pairs, the layer spec's examples."""

from __future__ import annotations

import re

import pytest

import bertscope
from bertscope.core.layers import parse_layers
from bertscope.errors import InvalidSpec


def test_layer_spec_examples_are_specs_the_model_takes(tiny_models: dict[str, bertscope.Model]) -> None:
    model = tiny_models["bert"]
    with pytest.raises(InvalidSpec, match=r"layers are 0\.\.2 \(or -1\.\.-3\)") as refused:
        model.embed_tokens("hi", layers="9")
    examples = re.search(r"specs look like (.*)$", str(refused.value))
    assert examples is not None
    for spec in examples.group(1).split(", "):
        parse_layers(spec, model.n_layers)
    from bertscope.core.layers import spec_examples  # the examples of every model size

    for n_layers in (1, 2, 3, 6, 12, 24):
        for spec in spec_examples(n_layers).split(", "):
            parse_layers(spec, n_layers)
