"""Audit 24c (the changed docs run as a new user): is_decoder is read only where the family's layers read
it (verify called DistilBERT's causal), verify says PROBLEM, not DRIFT, for a setting while the vectors
agree, cross-attention weights an is_decoder config leaves out are unused, and a CamemBERT config is named
as it names itself."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

import bertscope
from bertscope.errors import ModelLoadError
from bertscope.verify import verify_model
from console import run_main


def _with(tmp_path: Path, tiny_dirs: dict[str, Path], family: str, **settings: object) -> Path:
    folder = shutil.copytree(tiny_dirs[family], tmp_path / family)
    config = json.loads((folder / "config.json").read_text())
    config.update(settings)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_is_decoder_on_a_family_that_ignores_it_is_no_problem(
    tmp_path: Path, tiny_dirs: dict[str, Path]
) -> None:
    """DistilBERT's layers never read is_decoder: its vectors are bidirectional, and verify says so."""
    folder = _with(tmp_path, tiny_dirs, "distilbert", is_decoder=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no is_decoder warning either, as the load gives none
        model = bertscope.load(str(folder), device="cpu", backend="torch")
    result = verify_model(model, ["a cat sat on the mat"])
    assert result.settings["attention"] == {"mask": "bidirectional", "is_decoder": False}
    assert result.ok and result.problems == [], result.problems


def test_verify_says_problem_not_drift_when_the_vectors_agree(
    tmp_path: Path, tiny_dirs: dict[str, Path]
) -> None:
    folder = _with(tmp_path, tiny_dirs, "bert", is_decoder=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ran = run_main("verify", "-m", str(folder), "--backend", "torch")
    assert ran.code == 1 and "PROBLEM: " in ran.stdout and "DRIFT" not in ran.stdout, ran


def test_unused_cross_attention_weights_left_out_are_not_refused(
    tmp_path: Path, tiny_dirs: dict[str, Path]
) -> None:
    """is_decoder + add_cross_attention: transformers builds cross-attention layers an encoder forward
    never runs; their weights absent were refused as 'run at random values'."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the is_decoder warning: said, and not what this test reads
        plain = bertscope.load(str(_with(tmp_path / "a", tiny_dirs, "bert", is_decoder=True)), device="cpu")
        both = _with(tmp_path / "b", tiny_dirs, "bert", is_decoder=True, add_cross_attention=True)
        model = bertscope.load(str(both), device="cpu", backend="torch")
        assert (model.embed(["a cat"]).vectors == plain.embed(["a cat"]).vectors).all()


def test_a_camembert_config_is_named_as_it_names_itself(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    folder = _with(tmp_path, tiny_dirs, "roberta", model_type="camembert", pad_token_id=None)
    with pytest.raises(ModelLoadError, match="the camembert embedding layer counts positions"):
        bertscope.load(str(folder), device="cpu")
