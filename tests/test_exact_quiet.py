"""The exact default's timing run says nothing of its own calibration texts' truncation (backends/exact.py):
they run past the model's limit on purpose, and a warning about texts the user never gave read as theirs."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.backends import exact
from tiny_models import measure_like_a_real_model


def test_measuring_emits_no_truncation_warning_but_a_users_cut_is_still_said(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    measure_like_a_real_model(monkeypatch)
    cut: list[Any] = []
    real = exact._all_hidden

    def spy(model: Any, texts: list[str]) -> Any:  # the calibration texts really are cut
        cut.append(sum(t.n_dropped for t in model.tokenize(texts)))
        return real(model, texts)

    monkeypatch.setattr(exact, "_all_hidden", spy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = bertscope.load(tiny_dirs["bert"], device="cpu", remeasure=True)
    assert cut and max(cut) > 0  # measured, on texts past the model's limit
    assert m.exact_choice is not None and "chosen" in m.exact_choice
    assert not [w for w in caught if issubclass(w.category, bertscope.TruncatedTextsWarning)]
    with pytest.warns(bertscope.TruncatedTextsWarning):  # the user's own cut is still said
        m.embed(["word " * 2000])


def test_a_fingerprint_says_no_truncation_of_its_own_canary_texts(bundled: bertscope.Model) -> None:
    from bertscope.verify import canary_texts, check_fingerprint, fingerprint

    assert max(t.n_dropped for t in bundled.tokenize(canary_texts(bundled))) > 0  # one is cut
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert check_fingerprint(bundled, fingerprint(bundled)).ok
    assert not [w for w in caught if issubclass(w.category, bertscope.TruncatedTextsWarning)]
