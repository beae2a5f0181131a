"""Words and tokens (audit 21): a context word the truncation cut, decomposed accents, a zero-width space,
pre-split words and pairs, the layer spec's examples."""

from __future__ import annotations

import re

import pytest

import bertscope
from bertscope.core.layers import parse_layers
from bertscope.errors import InvalidInput, InvalidSpec


def test_pre_split_words_are_refused_saying_so(tiny_models: dict[str, bertscope.Model]) -> None:
    """A 2-list is a pair (the service's JSON, CrossEncoder's [[a, b]]); any other list says why it is not
    one, and a pair's B that is None is named."""
    model = tiny_models["bert"]
    assert model.embed_tokens([["New", "old"]])[0].tokens == ["[CLS]", "new", "[SEP]", "old", "[SEP]"]
    said = (
        r"^text 0 is a list of 3 texts, not a string: a pair is \(A, B\), two texts; pre-split words are "
        r"not taken: join them with spaces$"
    )
    with pytest.raises(InvalidInput, match=said):
        model.embed_tokens([["hello", "world", "again"]])
    with pytest.raises(InvalidInput, match=r"^pair 0's B is None, not a string: a pair is \(A, B\), two"):
        model.embed_tokens([("a", None)])
    with pytest.raises(
        InvalidInput, match=r"^text 0 is a list of 2 texts, not a string: pairs are not taken"
    ):
        model.embed_words([["New", "York"]])


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
