"""Attention on a static model (rows, no layers): the static model's one-line refusal, never a layer range
of 1..0 from its zero layers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import bertscope
from bertscope.attention import attention_layer, attentions
from console import run_main

REFUSAL = "is a static model (model2vec) with no layers: attention needs a transformer"


def test_the_command_refuses_a_static_model_in_its_one_line(m2v_folder: Path) -> None:
    ran = run_main("attention", "a river bank", "-m", str(m2v_folder))
    assert ran.code == 1 and ran.stderr.startswith("error:") and ran.stderr.count("\n") == 1, ran.stderr
    assert REFUSAL in ran.stderr and "1..0" not in ran.stderr, ran.stderr


def test_the_library_refuses_it_alike(static_m2v: object) -> None:
    for call in (lambda: attention_layer(static_m2v, -1), lambda: attentions(static_m2v, "a river bank")):  # type: ignore[arg-type]
        with pytest.raises(bertscope.InvalidSpec, match=re.escape(REFUSAL)):
            call()
