"""Configs transformers cannot run, refused at load in one line (audit 23): an unknown activation, a field
of the wrong type, RoBERTa without pad_token_id, cross-attention without a decoder, a model_type
transformers does not know, a tokenizer that needs a package; is_decoder run as the config says, with a
warning in verify's words; a tokenizer id past the embedding rows named with its fixes."""

from __future__ import annotations

import importlib.util
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.core.families import family_for
from bertscope.core.given import row_id, row_ids
from bertscope.core.loading import _not_loadable
from bertscope.errors import ModelLoadError, UnknownToken

# the names added by this fix are imported in the tests that use them, so each test fails on the old code
# by its own assertion
from console import run_main
from tiny_models import build_tiny_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny BERT, RoBERTa and RoFormer folders, built once for this file."""
    root = tmp_path_factory.mktemp("tiny23")
    return {family: build_tiny_model(family, root / family) for family in ("bert", "roberta", "roformer")}


def _changed(source: Path, folder: Path, **config: Any) -> Path:
    """A copy of `source` with config.json's `config` values written as given (weights kept)."""
    shutil.copytree(source, folder)
    written = json.loads((folder / "config.json").read_text())
    written.update(config)
    (folder / "config.json").write_text(json.dumps(written))
    return folder


def _refusal(folder: Path, backend: str) -> str:
    """The one line a load of `folder` (and a first embed) is refused with."""
    with pytest.raises(ModelLoadError) as caught:
        bertscope.load(folder, device="cpu", backend=backend).embed("a cat")
    said = str(caught.value)
    assert "\n" not in said
    return said


def _info_refusal(folder: Path) -> str:
    """`bertscope info`'s one line for `folder`: an error, no table."""
    ran = run_main("info", "-m", str(folder))
    assert ran.code != 0 and "Traceback" not in ran.stderr and not ran.stdout.strip()
    return ran.stderr.strip()


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_an_unknown_activation_is_refused_at_load(
    tiny: dict[str, Path], tmp_path: Path, backend: str
) -> None:
    """hidden_act 'notanact' loaded (light) and failed at the first embed with transformers' KeyError."""
    folder = _changed(tiny["bert"], tmp_path / "act", hidden_act="notanact")
    said = _refusal(folder, backend)
    assert "hidden_act='notanact'" in said and "gelu" in said and "correct hidden_act in config.json" in said
    assert said.removeprefix("error: ") in _info_refusal(folder)


def test_the_activations_named_are_transformers_own() -> None:
    """Read without torch from transformers' activations.py: the names ACT2FN takes."""
    from transformers.activations import ACT2FN

    from bertscope.core.families import known_activations

    assert known_activations() == frozenset(ACT2FN)


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_a_field_of_the_wrong_type_is_named(tiny: dict[str, Path], tmp_path: Path, backend: str) -> None:
    """ "layer_norm_eps": "1e-12" raised huggingface_hub's StrictDataclassFieldValidationError traceback."""
    folder = _changed(tiny["bert"], tmp_path / "eps", layer_norm_eps="1e-12")
    said = _refusal(folder, backend)
    assert "config.json's layer_norm_eps is '1e-12'" in said and "expected float, got str" in said
    assert said.endswith("correct layer_norm_eps in config.json")


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_roberta_without_pad_token_id_is_refused(tiny: dict[str, Path], tmp_path: Path, backend: str) -> None:
    """pad_token_id null: transformers' RoBERTa failed at the first forward (ne() got NoneType)."""
    folder = _changed(tiny["roberta"], tmp_path / "nopad", pad_token_id=None)
    said = _refusal(folder, backend)
    assert said.startswith(f"{folder}: ") and "set pad_token_id in config.json" in said
    assert _info_refusal(folder) == f"error: {said}"
    roberta = family_for("roberta")
    with pytest.raises(ModelLoadError, match="pad_token_id"):  # it assumed 1
        roberta.position_pad({"pad_token_id": None})
    assert roberta.position_pad({}) == 1  # unset: RobertaConfig's default, as transformers reads it


def test_cross_attention_without_a_decoder_is_said(tiny: dict[str, Path], tmp_path: Path) -> None:
    """The load said only the first line of transformers' message, the repr's "BertLayer("."""
    folder = _changed(tiny["bert"], tmp_path / "cross", add_cross_attention=True)
    said = _refusal(folder, "torch")
    assert "add_cross_attention without is_decoder" in said and "remove add_cross_attention" in said
    assert _info_refusal(folder) == f"error: {said}"
    repr_first = ValueError("BertLayer(\n  (attention): BertAttention()\n) should be used as a decoder model")
    assert str(_not_loadable("m", folder, repr_first)).endswith("BertLayer should be used as a decoder model")


def _decoder(source: Path, folder: Path, **config: Any) -> Path:
    """A copy of `source` whose config sets `config`, weights made to fit it (cross-attention's)."""
    from transformers import AutoConfig, AutoModel

    shutil.copytree(source, folder)
    changed = AutoConfig.from_pretrained(folder, **config)
    AutoModel.from_config(changed).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("cross", [False, True])
def test_is_decoder_runs_as_configured_and_is_said(
    tiny: dict[str, Path], tmp_path: Path, cross: bool
) -> None:
    """is_decoder ran silently (a causal mask) while verify called it a problem: the load warns in the
    same words, once; the cross-attention layers are said to be unused."""
    from bertscope.core.families import decoder_note
    from bertscope.verify.reference import _setting_problems

    settings = {"is_decoder": True, "add_cross_attention": True} if cross else {"is_decoder": True}
    folder = _decoder(tiny["bert"], tmp_path / "decoder", **settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = bertscope.load(folder, device="cpu", backend="torch")
    said = [str(w.message) for w in caught if "is_decoder" in str(w.message)]
    note = decoder_note(model.config)
    assert note is not None and said == [f"{folder}: {note}"]
    assert "every layer runs a causal mask" in note and ("unused" in note) is cross
    assert _setting_problems({"attention": {"is_decoder": True}}, model) == [note]
    vectors = model.embed(["a cat sat", "the dog"])
    assert vectors.shape[0] == 2


def test_a_model_type_transformers_does_not_know_gets_the_list(tiny: dict[str, Path], tmp_path: Path) -> None:
    """'foobert' was refused in transformers' words ("your version of Transformers is out of date")."""
    folder = _changed(tiny["bert"], tmp_path / "foo", model_type="foobert")
    for backend in ("auto", "torch"):
        said = _refusal(folder, backend)
        assert (
            "model type 'foobert' is not a BERT-family encoder" in said and "supported: bert, roberta" in said
        )
        assert "out of date" not in said


@pytest.mark.skipif(importlib.util.find_spec("rjieba") is not None, reason="rjieba is installed here")
def test_a_tokenizer_needing_a_package_names_it(tiny: dict[str, Path], tmp_path: Path) -> None:
    """RoFormerTokenizer without rjieba was told to copy its tokenizer files again."""
    folder = tmp_path / "roformer"
    shutil.copytree(tiny["roformer"], folder)
    written = json.loads((folder / "tokenizer_config.json").read_text())
    written["tokenizer_class"] = "RoFormerTokenizer"
    written.pop("model_input_names", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(written))
    said = _refusal(folder, "torch")
    assert "rjieba" in said and said.endswith("pip install rjieba") and "copy" not in said


def test_a_tokenizer_id_past_the_rows_names_the_fixes() -> None:
    """static said "token id 100 is out of range: this vocabulary has ids 0..59", without a fix."""
    from bertscope.core.given import past_rows

    with pytest.raises(UnknownToken) as caught:
        row_id(100, 60, tokens=400)
    assert str(caught.value) == past_rows(100, 60)
    assert "resize the embeddings" in str(caught.value) and "bertscope vocab add" in str(caught.value)
    with pytest.raises(UnknownToken, match="past this model's 60 embedding rows"):
        row_ids([3, 100], 60, tokens=400)
    with pytest.raises(UnknownToken, match="out of range"):  # no token of the tokenizer either
        row_id(500, 60, tokens=400)
