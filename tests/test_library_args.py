"""Library arguments refused in one line that used to fail deep inside or be coerced in silence: a prompt
that is not a str, encode's flags that are not bools, a set or dict of texts, threads above the CPUs, an
empty model name; and a layer given as a NumPy integer, taken like an int."""

from __future__ import annotations

import os

import numpy as np
import pytest

import bertscope
from bertscope.errors import InvalidInput, InvalidSpec


@pytest.mark.parametrize("prompt", [5, b"q: ", ["q"], 0.5])
def test_a_prompt_that_is_not_a_str_is_refused(bundled: bertscope.Model, prompt: object) -> None:
    for call in (
        lambda: bundled.encode(["a"], prompt=prompt),
        lambda: bundled.embed(["a"], prompt=prompt),
        lambda: bundled.encode(["a"], output_value="token_embeddings", prompt=prompt),
    ):
        with pytest.raises(InvalidSpec, match=r"^prompt must be a str .*, got ") as refused:
            call()
        assert "\n" not in str(refused.value)


@pytest.mark.parametrize("name", [5, ["query"], b"query"])
def test_a_prompt_name_that_is_not_a_str_is_refused(bundled: bertscope.Model, name: object) -> None:
    with pytest.raises(InvalidSpec, match=r"^prompt_name must be a str"):
        bundled.encode(["a"], prompt_name=name)


def test_a_str_prompt_still_works(bundled: bertscope.Model) -> None:
    with_prompt = bundled.encode(["a cat"], prompt="query: ")
    assert np.allclose(with_prompt, bundled.encode(["query: a cat"]), atol=1e-6)
    assert np.allclose(bundled.encode(["a cat"], prompt=""), bundled.encode(["a cat"]), atol=1e-6)


@pytest.mark.parametrize(
    "flag", ["normalize_embeddings", "convert_to_tensor", "convert_to_numpy", "show_progress_bar"]
)
@pytest.mark.parametrize("value", ["no", "false", "0", 0, 1, 0.5, [True]])
def test_encode_flags_take_bools_only(bundled: bertscope.Model, flag: str, value: object) -> None:
    with pytest.raises(InvalidSpec, match=rf"^{flag} must be True or False, not ") as refused:
        bundled.encode(["a"], **{flag: value})
    assert "\n" not in str(refused.value)


def test_encode_flags_take_bools_and_numpy_bools(bundled: bertscope.Model) -> None:
    plain = bundled.encode(["a cat"])
    for flag in ("normalize_embeddings", "convert_to_numpy", "show_progress_bar"):
        for value in (True, np.bool_(True)):
            assert np.allclose(np.asarray(bundled.encode(["a cat"], **{flag: value})), plain, atol=1e-6)
    assert isinstance(bundled.encode(["a cat"], convert_to_tensor=np.bool_(False)), np.ndarray)
    assert isinstance(bundled.encode(["a cat"], show_progress_bar=None), np.ndarray)


@pytest.mark.parametrize("texts", [{"a", "b"}, frozenset({"a"}), {"a": 1}])
def test_encode_refuses_a_set_or_dict(bundled: bertscope.Model, texts: object) -> None:
    with pytest.raises(InvalidInput, match=r"^encode takes a str or a list of str, not a (set|dict): "):
        bundled.encode(texts)


def test_encode_keeps_taking_sequences_arrays_and_generators(bundled: bertscope.Model) -> None:
    expected = bundled.encode(["a cat", "a dog"])
    for texts in (("a cat", "a dog"), np.array(["a cat", "a dog"]), (t for t in ["a cat", "a dog"])):
        assert np.allclose(bundled.encode(texts), expected, atol=1e-6)


def test_a_numpy_integer_layer_is_an_int(bundled: bertscope.Model) -> None:
    expected = bundled.embed(["a cat"], layers=2).vectors
    for layer in (np.int64(2), np.int32(2), np.argmax([0.1, 0.2, 0.9])):
        assert np.array_equal(bundled.embed(["a cat"], layers=layer).vectors, expected)
    assert np.array_equal(
        bundled.embed(["a cat"], layers=np.array([1, 2])).vectors,
        bundled.embed(["a cat"], layers=[1, 2]).vectors,
    )
    with pytest.raises(InvalidSpec, match="^layer 9 does not exist"):
        bundled.embed(["a cat"], layers=np.int64(9))


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@pytest.mark.parametrize("extra", [1, 10**6, 10**12])
def test_threads_above_the_cpus_are_refused_before_loading(extra: int) -> None:
    cpus = _cpus()
    with pytest.raises(
        InvalidSpec, match=rf"^threads={cpus + extra}, but this machine has {cpus} CPU"
    ) as refused:
        bertscope.load("/nonexistent/folder", threads=cpus + extra)  # refused before the name is read
    assert f"give at most {cpus}" in str(refused.value)


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_model_name_is_refused(name: str) -> None:
    with pytest.raises(InvalidSpec, match=r"^the model name .* is empty: leave it out"):
        bertscope.load(name)
