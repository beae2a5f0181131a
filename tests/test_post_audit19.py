"""Audit 19d: post-processing (fit-post, --post), senses and plot say what is wrong in one line, and early."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.core.post import fit_post_on_texts
from bertscope.errors import InvalidSpec
from bertscope.server import ServerSettings, create_app
from console import run_main
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


@pytest.fixture(scope="module")
def pca_file(tiny: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PCA to 2 dimensions fitted on the 2-layer tiny BERT's layer 2, mean pooling, saved."""
    model = bertscope.load(tiny["two"], device="cpu")
    processor = fit_post_on_texts(model, TEXTS, "pca", dim=2, layers="2", pooling="mean")
    return processor.save(tmp_path_factory.mktemp("pca") / "pca.safetensors")


def test_settings_mismatch_is_said_in_keywords_flags_and_fields(
    tiny: dict[str, Path], pca_file: Path
) -> None:
    """The library said "fitted on {'layers': [2]}, not {'layers': (1,)}", a Python repr: keywords now, which
    the command line says as flags and the service as its JSON fields."""
    model = bertscope.load(tiny["two"], device="cpu")
    with pytest.raises(InvalidSpec) as said:
        model.embed(TEXTS[:2], post=pca_file, layers="1", pooling="cls")
    assert str(said.value) == (
        "this pca was fitted on layers=[2] and pooling='mean', not layers=[1] and pooling='cls'; "
        "embed with those options"
    )
    ran = run_main("embed", TEXTS[0], "-m", str(tiny["two"]), "--post", str(pca_file), "-l", "1")
    assert ran.code != 0 and "fitted on --layers 2, not --layers 1; embed with those options" in ran.stderr
    settings = ServerSettings(posts=(("pca", str(pca_file)),))
    with TestClient(create_app(model, settings=settings)) as client:
        answer = client.post("/v2/embed", json={"inputs": "a text", "post": "pca", "layers": "1"})
    assert answer.status_code == 422 and '"layers": [2], not "layers": [1]' in answer.json()["detail"]
