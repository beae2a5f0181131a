"""Audit 19d: post-processing (fit-post, --post), senses and plot say what is wrong in one line, and early."""

from __future__ import annotations

from pathlib import Path

import pytest

import bertscope
from bertscope.core.post import fit_post_on_texts
from bertscope.errors import InvalidSpec
from tiny_models import build_tiny_model, config_variant

TEXTS = [
    "the cat ate the bread",
    "a dog saw the car",
    "she walked to the house",
    "the tree is very old",
    "we love good food",
    "he went out at night",
    "my book has new words",
    "they ran down the road",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny BERT of 2 layers and a copy of 3 layers (other weights, so other files)."""
    root = tmp_path_factory.mktemp("tiny19d")
    two = build_tiny_model("bert", root / "two")
    three = config_variant({"bert": two}, root / "three", "bert", num_hidden_layers=3)  # root/three/bert
    return {"two": two, "three": three}


def test_another_models_post_is_named_as_another_model_first(tiny: dict[str, Path], tmp_path: Path) -> None:
    """A post fitted on a 3-layer model at layer 3, given to a 2-layer model, said 'fitted on layers 3, not
    layers 2' (a layer that model lacks): the model is named first now."""
    deep = bertscope.load(tiny["three"], device="cpu")
    post = fit_post_on_texts(deep, TEXTS, "pca", dim=2, layers="3").save(tmp_path / "p.safetensors")
    shallow = bertscope.load(tiny["two"], device="cpu")
    with pytest.raises(InvalidSpec, match=r"fitted on the vectors of .*, not of this model"):
        shallow.embed(TEXTS[:2], post=post)
