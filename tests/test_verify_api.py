"""verify's library calls refuse what they cannot take in one line naming the argument and what it takes
(texts, against, model, path, min_cosine), number the caller's texts from the caller's first, and the
refusal of an unfinished job reads right from verify. Each case raised a raw Python error, passed, or
named the wrong text before (found by the verify audit). Fast: refused before any forward, or the bundled
model with a stand-in reference."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bertscope.errors import CorpusError, InvalidInput, TruncatedTextsWarning
from bertscope.model import Model
from bertscope.verify import check_fingerprint, save_fingerprint, verify_model
from bertscope.verify import reference as reference_module
from bertscope.verify.reference import compare_to_reference
from bertscope.verify.store import verify_store

FINGERPRINT_TAKEN = r"give a fingerprint, a dict from fingerprint\(\) or the path of a file written by"


@pytest.mark.parametrize(
    ("texts", "told"),
    [(123, "got int"), (b"abc", r"not bytes: decode them first, such as texts\.decode\('utf-8'\)")],
)
def test_texts_that_are_no_list_of_strings_are_refused(bundled: Model, texts: Any, told: str) -> None:
    """123 raised "'int' object is not iterable"; b"abc" was read as three ints ("text 61 is a int")."""
    with pytest.raises(InvalidInput, match=rf"^texts must be a string or a list of strings, {told}$"):
        bundled.verify(texts)


def test_the_callers_texts_are_numbered_from_their_first(bundled: Model) -> None:
    """The second text given is text 1, as embed names it, not text 62 (after the reference texts)."""
    with pytest.raises(InvalidInput, match=r"^text 1 is empty: every text needs a non-space character$"):
        bundled.verify(["a fine text", " "])
    with pytest.raises(InvalidInput, match=r"^text 0 is an int, not a string"):
        verify_model(bundled, [7])


def test_a_problem_with_the_callers_text_names_it_from_their_first(
    bundled: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reference that reads the caller's one text with other ids: the problem names `text 0`, where it
    said `text 61`. The stand-in reference is the model itself (no Hugging Face forward), with the last
    text's last id changed."""

    def reference_states(model: Any, texts: list[str]) -> tuple[list[list[int]], list[np.ndarray]]:
        ids = [list(t.ids) for t in model.tokenize(texts)]
        with warnings.catch_warnings():  # the long canary is cut on purpose, as verify cuts it
            warnings.simplefilter("ignore", TruncatedTextsWarning)
            found = model.embed_tokens(texts, layers="all", combine="concat")
        states = [
            e.vectors.reshape(len(i), model.n_layers + 1, -1).transpose(1, 0, 2)
            for e, i in zip(found, ids, strict=True)
        ]
        ids[-1][-1] += 1
        return ids, states

    monkeypatch.setattr(reference_module, "reference_states", reference_states)
    report = bundled.verify(["one text of mine"])
    assert not report.ok
    assert "(first: text 0, 6 tokens, ids differ from token 5 on)" in report.problems[0], report.problems
    assert "1 of 62 texts" in report.problems[0]


@pytest.mark.parametrize("against", [123, [], 1.5])
def test_against_that_is_no_fingerprint_nor_path_is_refused(bundled: Model, against: Any) -> None:
    """A number or a list reached pathlib and raised its TypeError, naming neither the argument nor what
    it takes."""
    with pytest.raises(InvalidInput, match=rf"^against={re.escape(repr(against))}: {FINGERPRINT_TAKEN}"):
        bundled.verify(against=against)
    with pytest.raises(InvalidInput, match=rf"^expected={re.escape(repr(against))}: {FINGERPRINT_TAKEN}"):
        check_fingerprint(bundled, against)


def test_texts_or_min_cosine_beside_against_are_refused(bundled: Model, tmp_path: Path) -> None:
    """A fingerprint check reads neither: they were dropped unsaid (the command line refuses -i and
    --min-cosine with --against)."""
    saved = tmp_path / "fp.json"
    with pytest.raises(InvalidInput, match=r"^texts: for the check against the reference forward; against="):
        bundled.verify(["a text"], against=saved)
    with pytest.raises(InvalidInput, match=r"^texts and min_cosine: .*leave them out$"):
        verify_model(bundled, ["a text"], against=saved, min_cosine=0.99)


@pytest.mark.parametrize("model", [None, "bundled", 123])
def test_a_model_that_is_not_loaded_is_refused(model: Any, tmp_path: Path) -> None:
    """verify_model("bundled") and verify_model(None) raised AttributeError ('str' object has no attribute
    'loaded'); so did save_fingerprint and check_fingerprint given a name."""
    # a name is loaded as it is; None or 123 names no model, so the call shows a placeholder, not load(None)
    named = repr(model) if isinstance(model, str) else "'model name or folder'"
    said = rf"^model={model!r} is not a loaded model: give one, model=bertscope\.load\({named}\)$"
    for call in (
        lambda: verify_model(model),
        lambda: verify_model(model, against={}),
        lambda: check_fingerprint(model, {}),
        lambda: save_fingerprint(model, tmp_path / "fp.json"),
        lambda: compare_to_reference(model, ["a text"]),
    ):
        with pytest.raises(InvalidInput, match=said):
            call()
    assert not (tmp_path / "fp.json").exists()


def test_save_fingerprint_refuses_a_path_it_cannot_write_before_the_forward(
    bundled: Model, tmp_path: Path
) -> None:
    """A folder raised IsADirectoryError (after the forward), 123 pathlib's TypeError, a missing folder
    FileNotFoundError; `--save` refused them in one line already, and now the library does."""
    with pytest.raises(InvalidInput, match=r"^path=123: give the path of a JSON file to write"):
        save_fingerprint(bundled, 123)  # type: ignore[arg-type]
    with pytest.raises(
        InvalidInput, match=rf"is a folder; name a JSON file, e\.g\. {tmp_path / 'fingerprint.json'}$"
    ):
        save_fingerprint(bundled, tmp_path)
    missing = tmp_path / "no" / "fp.json"
    with pytest.raises(InvalidInput, match=r"the folder .*no does not exist; create it or save elsewhere$"):
        save_fingerprint(bundled, missing)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("floor", ["x", -1.0, 1.5, float("nan"), True])
def test_compare_to_reference_bounds_min_cosine_as_the_flag(bundled: Model, floor: Any) -> None:
    """compare_to_reference, the call under verify_model and the command line, took any floor: on float32
    (which reads none) it passed unread after a full forward. Refused before the forward, on every
    precision alike."""
    with pytest.raises(
        InvalidInput, match=r"^min_cosine=.*: give a number in \[0, 1\], such as 0\.99, or None$"
    ):
        compare_to_reference(bundled, ["a text"], min_cosine=floor)


def test_an_unfinished_job_is_refused_in_words_that_fit_verify(tmp_path: Path) -> None:
    """The refusal of a store whose job stopped ended "then search it", also from verify --store."""
    (tmp_path / "out.parquet.parts").mkdir()
    with pytest.raises(CorpusError) as caught:
        verify_store(tmp_path / "out.parquet")
    said = str(caught.value)
    assert said.endswith("run it again with --resume to finish it first"), said
    assert "search" not in said
