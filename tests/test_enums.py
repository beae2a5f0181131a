"""The strategy enums: parsed once from Enum or str, an unknown name lists the choices."""

from __future__ import annotations

import pytest

from bertscope import Backend, DType, Engine, InvalidSpec, Quantize


@pytest.mark.parametrize(
    ("kind", "text", "member"),
    [
        (Backend, "ONNXRuntime", Backend.ONNXRUNTIME),
        (Quantize, "int8", Quantize.INT8),
        (DType, "bfloat16", DType.BFLOAT16),
        (Engine, "ray", Engine.RAY),
        (Engine, Engine.LOCAL, Engine.LOCAL),
    ],
)
def test_parse_accepts_names_and_members(kind: type, text: str, member: object) -> None:
    assert kind.parse(text, what="x") is member


@pytest.mark.parametrize(
    ("kind", "what", "choices"),
    [
        (Backend, "backend", "auto, torch, onnxruntime"),
        (Quantize, "quantize", "none, int8"),
        (DType, "dtype", "float32, bfloat16, float16"),
        (Engine, "engine", "local, ray"),
    ],
)
def test_unknown_name_lists_the_choices(kind: type, what: str, choices: str) -> None:
    with pytest.raises(InvalidSpec, match=f"unknown {what} 'nope'; choose one of: {choices}"):
        kind.parse("nope", what=what)


def test_members_print_and_compare_as_their_names() -> None:
    assert f"{Backend.TORCH}" == "torch" and Quantize.INT8 == "int8"
