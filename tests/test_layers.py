"""Layer specs and how several selected layers combine (bertscope.core.layers)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import bertscope
from bertscope import Combine
from bertscope.core.layers import combine_layers, parse_layers

N_LAYERS = 6


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("-1", (6,)),
        ("-2", (5,)),
        ("0", (0,)),
        ("6", (6,)),
        ("-4:", (3, 4, 5, 6)),
        ("1:4", (1, 2, 3)),
        (":2", (0, 1)),
        ("0,6", (0, 6)),
        (" 0 , -1 ", (0, 6)),
        ("-7", (0,)),
        ("all", (0, 1, 2, 3, 4, 5, 6)),
        ("ALL", (0, 1, 2, 3, 4, 5, 6)),
        (0, (0,)),
        (3, (3,)),
        (-1, (6,)),
        ([0, -1], (0, 6)),
        ((1, 2, 3), (1, 2, 3)),
    ],
)
def test_parse_layers_gives_absolute_indices(
    spec: str | int | Sequence[int], expected: tuple[int, ...]
) -> None:
    assert parse_layers(spec, N_LAYERS) == expected


def test_parse_layers_on_other_depths() -> None:
    assert parse_layers("-1", 2) == (2,)
    assert parse_layers("all", 2) == (0, 1, 2)
    assert parse_layers("-4:", 12) == (9, 10, 11, 12)


@pytest.mark.parametrize(
    "spec", ["9", "7", "-8", "abc", "1:2:3", "", "1,,2", "1,", "x:2", 9, -8, [0, 9], "3:1"]
)
def test_parse_layers_rejects_bad_specs_naming_the_allowed_range(spec: object) -> None:
    with pytest.raises(bertscope.InvalidSpec) as info:
        parse_layers(spec, N_LAYERS)  # type: ignore[arg-type]
    message = str(info.value)
    assert "0..6" in message
    # a spec that is one layer is named once, as the layer
    assert repr(spec) in message or message.startswith(f"layer {int(spec)} does not exist;")  # type: ignore[call-overload]


def test_parse_layers_out_of_range_says_the_layer_does_not_exist() -> None:
    with pytest.raises(bertscope.InvalidSpec, match="layer 9 does not exist"):
        parse_layers("9", N_LAYERS)


@pytest.mark.parametrize(
    ("spec", "said"), [(99, "layer 99 does not exist;"), ("0,99", "layer 99 (in '0,99')")]
)
def test_an_unknown_layer_is_named_once_and_its_spec_only_when_it_says_more(spec: object, said: str) -> None:
    with pytest.raises(bertscope.InvalidSpec) as info:
        parse_layers(spec, N_LAYERS)  # type: ignore[arg-type]
    message = str(info.value)
    assert said in message
    assert message.count("99") == (1 if spec == 99 else 2)


def test_parse_layers_rejects_non_spec_types() -> None:
    with pytest.raises(bertscope.InvalidSpec, match="0..6"):
        parse_layers(1.5, N_LAYERS)  # type: ignore[arg-type]
    with pytest.raises(bertscope.InvalidSpec):
        parse_layers(True, N_LAYERS)  # type: ignore[arg-type]


def test_invalid_spec_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_layers("abc", N_LAYERS)


def _close(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal within float32 tolerances (torch.testing.assert_close's), same shape and dtype."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1.3e-6, atol=1e-5)


def _layers(k: int) -> list[np.ndarray]:
    """k distinct (batch=2, tokens=3, d=4) float32 arrays: layer i holds values i*100 + position."""
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    return [base + np.float32(100.0 * i) for i in range(k)]


def test_combine_mean() -> None:
    layers = _layers(3)
    out = combine_layers(layers, Combine.MEAN)
    assert out.shape == (2, 3, 4)
    _close(out, layers[0] + np.float32(100.0))


def test_combine_sum() -> None:
    layers = _layers(3)
    out = combine_layers(layers, Combine.SUM)
    assert out.shape == (2, 3, 4)
    _close(out, 3 * layers[0] + np.float32(300.0))


def test_combine_concat_keeps_layer_order() -> None:
    layers = _layers(3)
    out = combine_layers(layers, Combine.CONCAT)
    assert out.shape == (2, 3, 12)
    for i, layer in enumerate(layers):
        _close(out[..., 4 * i : 4 * (i + 1)], layer)


@pytest.mark.parametrize("combine", list(Combine))
def test_combine_one_layer_is_that_layer(combine: Combine) -> None:
    (layer,) = _layers(1)
    _close(combine_layers([layer], combine), layer)


def test_combine_parse_lists_choices() -> None:
    assert Combine.parse("CONCAT", what="combine") is Combine.CONCAT
    with pytest.raises(bertscope.InvalidSpec, match="mean, sum, concat"):
        Combine.parse("avg", what="combine")
