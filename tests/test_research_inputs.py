"""The research calls read their texts as `embed` reads them: a lone string is one text, never its
characters; a model's name where a loaded model is taken, and None for the texts, are one-line refusals."""

from __future__ import annotations

import re

import numpy as np
import pytest

import bertscope
from bertscope.errors import InvalidInput

TEXT = "The bank raised its rates while the river bank flooded after a week of rain."
TEXTS = [TEXT, "A cat sat on the warm mat.", "Prices rose again in the spring.", "Rain fell all day."]


def test_a_lone_string_is_one_text_in_cka(bundled: bertscope.Model) -> None:
    alone = bundled.cka(TEXT, progress=False)
    listed = bundled.cka([TEXT], progress=False)
    assert alone.n_rows == listed.n_rows == len(bundled.tokenize(TEXT)) > len(TEXT.split())
    np.testing.assert_array_equal(alone.cka, listed.cka)


def test_a_lone_string_is_one_text_in_geometry(bundled: bertscope.Model) -> None:
    alone = bundled.geometry(TEXT, layers="5", progress=False).to_dict()
    assert alone == bundled.geometry([TEXT], layers="5", progress=False).to_dict()


def test_a_lone_string_is_one_text_in_verify(bundled: bertscope.Model) -> None:
    calibration = bundled.verify().texts
    assert bundled.verify(TEXT).texts == calibration + 1


@pytest.mark.parametrize(
    ("call", "told"),
    [
        (lambda m: m.cka(None), "texts must be a string or a list of strings, not None"),
        (lambda m: m.geometry(3), "texts must be a string or a list of strings, got int"),
        (
            lambda m: m.cka(TEXTS, other="bundled"),
            "other='bundled' is not a loaded model: give one, other=bertscope.load('bundled')",
        ),
        (
            lambda m: bertscope.compare(m, "bundled", TEXTS),
            "b='bundled' is not a loaded model: give one, b=bertscope.load('bundled')",
        ),
    ],
)
def test_what_is_not_texts_or_a_model_is_refused_in_one_line(bundled: bertscope.Model, call, told) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInput) as refused:
        call(bundled)
    assert str(refused.value) == told


def test_a_cka_result_reads_in_one_line(bundled: bertscope.Model) -> None:
    shown = repr(bundled.cka(TEXTS, progress=False))
    assert shown.startswith("CkaResult(7 x 7 layers, level='tokens', n_rows=") and "\n" not in shown


TAKEN = "texts must be a string or a list of strings"


@pytest.mark.parametrize(
    ("texts", "told"),
    [
        ({"a cat sat": 1, "a dog ran": 2}, "not a dict: it would embed the keys"),
        ({"a cat sat", "a dog ran"}, "not a set: a set's order is not one you chose"),
        ("table", "got a table (DataFrame, 2 x 1): pass its text column"),
    ],
)
def test_the_measures_refuse_what_embed_refuses(bundled: bertscope.Model, texts: object, told: str) -> None:
    """cka, geometry and compare streamed a dict's keys, a set in hash order and a DataFrame's column names
    (a measure of the word 'text'), where embed refuses all three."""
    import pandas as pd

    given = pd.DataFrame({"text": ["a cat sat", "a dog ran"]}) if texts == "table" else texts
    for call in (
        lambda: bundled.cka(given, progress=False),
        lambda: bundled.geometry(given, progress=False),
        lambda: bertscope.compare(bundled, bundled, given, progress=False),
    ):
        with pytest.raises(InvalidInput, match=f"^{re.escape(TAKEN)}, {re.escape(told)}"):
            call()
