"""The research calls read their texts as `embed` reads them: a lone string is one text, never its
characters; a model's name where a loaded model is taken, and None for the texts, are one-line refusals."""

from __future__ import annotations

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
        (lambda m: m.cka(None), "texts: give a list (or any iterable) of strings, not NoneType"),
        (lambda m: m.geometry(3), "texts: give a list (or any iterable) of strings, not int"),
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
