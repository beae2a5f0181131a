"""The naming audit's N6 and N10: `load()` explains the transformers and sentence-transformers names users
bring (max_seq_length, torch_dtype, truncate_dim, backend='onnx') in one line before anything loads, and
`Pooling` reads sentence-transformers' own pooling names."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.core._enums import Backend, Pooling
from bertscope.core.pooling import POOLING_RULES
from bertscope.core.st_settings import _ST_LEGACY_KEYS, ST_POOLING_MODES
from bertscope.errors import InvalidSpec, UnknownOption

LOAD_OPTIONS = "the options are: device, dtype, threads, max_tokens, token_budget, backend, quantize"


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ({"max_seq_length": 128}, "bertscope calls the token limit max_tokens, set when loading: "),
        ({"max_length": 128}, "bertscope calls the token limit max_tokens, set when loading: "),
        ({"torch_dtype": "bfloat16"}, "bertscope calls it dtype: bertscope.load(..., dtype='bfloat16')"),
        ({"truncate_dim": 64}, "load and embed keep the model's full width: slice result.vectors[:, :N]"),
        ({"devise": "cpu"}, "did you mean device? "),
        ({"max_token": 64}, "did you mean max_tokens? "),
    ],
)
def test_load_names_the_bertscope_spelling_before_loading(
    tmp_path: Path, given: dict[str, Any], hint: str
) -> None:
    # a folder that is not there: the keyword is refused first, so a typo costs no load
    with pytest.raises(UnknownOption) as caught:
        bertscope.load(tmp_path / "absent", **given)
    message = str(caught.value)
    assert message.startswith(f"unknown option {next(iter(given))!r}: {hint}")
    assert LOAD_OPTIONS in message and "\n" not in message
    assert isinstance(caught.value, TypeError)  # still what Python's own refusal is


def test_an_unknown_keyword_runs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from bertscope.model import loader

    def loaded(*args: object, **kwargs: object) -> None:
        raise AssertionError("load read the name before refusing the keyword")

    monkeypatch.setattr(loader, "model_name", loaded)
    with pytest.raises(UnknownOption, match=r"^unknown option 'max_seq_length': "):
        bertscope.load(max_seq_length=128)  # type: ignore[call-arg]


def test_load_keeps_its_signature_for_ides() -> None:
    parameters = inspect.signature(bertscope.load).parameters
    assert list(parameters)[:3] == ["name", "device", "dtype"] and "max_tokens" in parameters
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def test_backend_onnx_points_to_onnxruntime(tmp_path: Path) -> None:
    hint = (
        r"unknown backend 'onnx'; sentence-transformers' 'onnx' is bertscope's 'onnxruntime'; choose one of"
    )
    with pytest.raises(InvalidSpec, match=hint):
        Backend.parse("onnx", what="backend")
    with pytest.raises(InvalidSpec, match=hint):
        bertscope.load(tmp_path / "absent", backend="onnx")
    with pytest.raises(InvalidSpec, match=r"^unknown backend 'onnnx'; choose one of: auto, torch"):
        Backend.parse("onnnx", what="backend")  # no hint where none is known


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        ("mean_sqrt_len_tokens", Pooling.MEAN_SQRT_LEN),
        ("MEAN-SQRT-LEN-TOKENS", Pooling.MEAN_SQRT_LEN),
        ("cls_token", Pooling.CLS),
        ("max_tokens", Pooling.MAX),
        ("mean_tokens", Pooling.MEAN),
    ],
)
def test_pooling_reads_sentence_transformers_names(theirs: str, ours: Pooling) -> None:
    assert Pooling.parse(theirs, what="pooling") is ours
    assert Pooling(theirs) is ours  # the constructor too (pydantic's path in the service)


def test_every_sentence_transformers_pooling_name_we_redo_parses() -> None:
    """Held to the pooling table's `st_mode` and to the legacy `pooling_mode_*` keys bertscope reads."""
    for pooling, rule in POOLING_RULES.items():
        if rule.st_mode is not None:
            assert Pooling.parse(rule.st_mode, what="pooling") is pooling
    for key, mode in _ST_LEGACY_KEYS.items():
        if mode in ST_POOLING_MODES:
            legacy = key.removeprefix("pooling_mode_")
            assert Pooling.parse(legacy, what="pooling").value == ST_POOLING_MODES[mode]


def test_poolings_bertscope_lacks_are_still_refused() -> None:
    for theirs in ("weightedmean", "lasttoken", "weightedmean_tokens", "pooler_tokens"):
        with pytest.raises(InvalidSpec, match=r"choose one of: cls, pooler, mean, max, mean_sqrt_len"):
            Pooling.parse(theirs, what="pooling")


@pytest.mark.parametrize(
    "name, said",
    [
        ("layer", "layers are chosen per call"),
        ("dimensions", "load and embed keep the model's full width"),
        ("truncate", "long= says what a text over the limit does"),
    ],
)
def test_embed_names_the_bertscope_spelling_of_other_apis_names(
    bundled: bertscope.Model, name: str, said: str
) -> None:
    """The names the service answers with a hint (TEI's truncate, OpenAI's dimensions, a singular layer)
    get one from the library too, not a bare list of options."""
    with pytest.raises(UnknownOption, match=f"unknown option '{name}': {said}"):
        bundled.embed(["a cat"], **{name: 3})
