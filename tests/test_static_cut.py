"""A static model cuts a text past its max_length as model2vec does, and says so as `Model` does: one
`TruncatedTextsWarning` per call of embed, iter_embed or similarity, at the caller's line."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest

from bertscope.errors import TruncatedTextsWarning
from bertscope.static_model import StaticModel

SHORT = "a cat sat on the mat"


def _said(call: Callable[[], Any]) -> list[tuple[str, int, str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [
        (w.filename, w.lineno, str(w.message))
        for w in caught
        if issubclass(w.category, TruncatedTextsWarning)
    ]


@pytest.mark.parametrize("method", ["embed", "iter_embed", "similarity"])
def test_a_cut_is_said_once_per_call_at_the_callers_line(static_m2v: StaticModel, method: str) -> None:
    long = "cat dog " * (static_m2v.max_tokens + 10)
    calls: dict[str, Callable[[], Any]] = {
        "embed": lambda: static_m2v.embed([long, SHORT, long]),
        "iter_embed": lambda: list(static_m2v.iter_embed(iter([long, SHORT, long]))),
        "similarity": lambda: static_m2v.similarity([long, SHORT], [long]),
    }
    call = calls[method]
    [(filename, line, message)] = _said(call)
    assert (filename, line) == (call.__code__.co_filename, call.__code__.co_firstlineno)
    assert message.startswith(f"2 of 3 text(s) ran past the model's {static_m2v.max_tokens} tokens")
    assert "long='window' keeps every token" in message


def test_no_cut_no_warning_and_encode_says_it_once(static_m2v: StaticModel) -> None:
    long = "cat dog " * (static_m2v.max_tokens + 10)
    assert _said(lambda: static_m2v.embed([long], long="window")) == []
    assert _said(lambda: static_m2v.similarity([SHORT], [SHORT])) == []
    assert len(_said(lambda: static_m2v.encode([long]))) == 1
    assert static_m2v.embed_with([long], static_m2v._recipe({})).n_dropped[0] > 0
    assert _said(lambda: static_m2v.embed_with([long], static_m2v._recipe({}))) == []
