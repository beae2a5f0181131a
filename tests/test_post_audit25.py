"""Audit 25b: abtt removed directions the vectors do not span (arbitrary, by the rows' order); repeated
texts turned the too-few-texts refusal into a warning blaming constant dimensions; standardize and
whitening called different dimensions constant; fit_post_on_texts / fit-post could not take a prompt
(recorded, not compared: tests/test_post_review25.py); apply passed NaN on; load errors said their fix
twice."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.core.post import check_post_count, fit_post, fit_post_on_texts, load_post
from bertscope.errors import InvalidInput, InvalidSpec
from console import run_main

TEXTS = [f"the {w} sat on mat number {i}" for i, w in enumerate("abcdefghij")]


def _rows(n: int, d: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, d))


def test_abtt_refuses_to_remove_directions_the_vectors_do_not_span() -> None:
    # 5 distinct rows, each 10 times: the centred rows span 4 directions; the 4 more were arbitrary
    repeated = np.repeat(_rows(5, 20), 10, axis=0)
    with pytest.raises(
        InvalidSpec, match=r"dim=8 is out of range: .*5 distinct texts \(of 50 rows\) span 4 .*dim=0\.\.4$"
    ):
        fit_post(repeated, "abtt", dim=8)
    assert fit_post(repeated, "abtt", dim=4).settings["remove"] == 4


def test_abtt_default_count_past_the_rank_removes_the_rank_with_a_warning_whatever_the_order() -> None:
    # width 500: the default removes 5; 3 distinct rows span 2
    rows = np.repeat(_rows(3, 500), 4, axis=0)
    shuffled = rows[np.random.default_rng(1).permutation(len(rows))]
    with pytest.warns(UserWarning, match="abtt removes 2 directions, not the default 5"):
        first = fit_post(rows, "abtt")
    with pytest.warns(UserWarning, match="abtt removes 2 directions"):
        second = fit_post(shuffled, "abtt")
    new = _rows(6, 500, seed=2)
    np.testing.assert_allclose(first.apply(new), second.apply(new), atol=1e-4)


def test_check_post_count_bounds_abtt_by_the_distinct_texts() -> None:
    with pytest.raises(InvalidSpec, match=r"the 5 distinct texts span at most 4 directions .*dim=0\.\.4"):
        check_post_count("abtt", 8, n_texts=5)


def test_repeated_rows_are_refused_as_the_same_rows_once_each_are() -> None:
    once = _rows(10, 20)
    with pytest.raises(InvalidInput, match=r"^10 texts span only 9 directions"):
        fit_post(once, "whitening")
    with pytest.raises(
        InvalidInput, match=r"^10 distinct texts \(of 50 rows\) span only 9 directions .*at least 21 distinct"
    ):
        fit_post(np.repeat(once, 5, axis=0), "whitening")


def test_fit_post_on_texts_counts_the_distinct_texts(tiny_models: dict[str, bertscope.Model]) -> None:
    # every row is fitted on (tests/test_post_review25.py); the distinct texts are counted beside them
    model = tiny_models["bert"]
    post = fit_post_on_texts(model, TEXTS * 3, "pca", dim=3)
    assert (post.settings["n_fit"], post.settings["n_distinct_texts"]) == (3 * len(TEXTS), len(TEXTS))
    once = fit_post_on_texts(model, TEXTS, "pca", dim=3)  # each text equally often: the same fit
    np.testing.assert_allclose(np.abs(post.matrix), np.abs(once.matrix), atol=1e-5)


def test_standardize_and_whitening_call_the_same_dimensions_constant() -> None:
    x = _rows(200, 6)
    x[:, 0] = 2e-8 + 1e-9 * np.random.default_rng(3).normal(size=200)  # noise: 1e-9 of the others' spread
    x[:, 1] = 0.5  # constant outright
    with pytest.warns(UserWarning, match="2 of the 6 dimensions are constant"):
        standardize = fit_post(x, "standardize")
    assert standardize.settings["constant"] == 2 and standardize.matrix[0, 0] == 1.0
    with pytest.warns(UserWarning, match="2 of their 6 directions are constant"):
        assert fit_post(x, "whitening").settings["dim"] == 4


def test_a_post_records_its_prompt_and_applies_to_vectors_of_another(
    tiny_models: dict[str, bertscope.Model],
) -> None:
    # the prompt is recorded, not compared: a search's query has the query prompt, its store another
    model = tiny_models["bert"]
    plain = fit_post_on_texts(model, TEXTS, "pca", dim=3)
    assert plain.settings["spec"]["prompt"] == ""
    assert model.embed(TEXTS[:2], post=plain, prompt="query: ").vectors.shape == (2, 3)
    prompted = fit_post_on_texts(model, TEXTS, "pca", dim=3, prompt="query: ")
    assert prompted.settings["spec"]["prompt"] == "query: "
    assert model.embed(TEXTS[:2], post=prompted).vectors.shape == (2, 3)


def test_fit_post_takes_a_prompt_and_says_the_repeats(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{t}\n" for t in TEXTS * 2))
    out = tmp_path / "pca.safetensors"
    args = ["fit-post", "-i", str(corpus), "--kind", "pca", "--dim", "2", "-m", str(tiny_dirs["bert"])]
    ran = run_main(*args, "--prompt", "query: ", "-o", str(out))
    assert ran.code == 0, ran.stderr
    assert "fitted on 20 texts (10 distinct)" in ran.stderr
    assert load_post(out).settings["spec"]["prompt"] == "query: "


def test_apply_refuses_vectors_that_are_not_finite() -> None:
    post = fit_post(_rows(30, 8), "pca", dim=3)
    bad = _rows(4, 8, seed=5)
    bad[2, 1] = np.nan
    with pytest.raises(
        InvalidInput,
        match=r"^pca needs finite vectors; NaN or infinite values in 1 of the 4 rows \(the first: row 2\)",
    ):
        post.apply(bad)


def test_a_load_error_says_its_fix_once(tmp_path: Path) -> None:
    post = fit_post(_rows(30, 8), "pca", dim=3)
    post.mean[0] = np.nan
    path = post.save(tmp_path / "nan.safetensors")
    with pytest.raises(InvalidInput) as caught:
        load_post(path)
    said = str(caught.value)
    assert said.count("fit it again") == 1 and "bertscope fit-post)" not in said, said


def test_cli_words_for_dim_are_flags(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{t}\n" for t in TEXTS))
    args = [
        "fit-post",
        "-i",
        str(corpus),
        "-m",
        str(tiny_dirs["bert"]),
        "-o",
        str(tmp_path / "x.safetensors"),
    ]
    said = run_main(*args, "--kind", "standardize", "--dim", "2").stderr
    assert "leave --dim out" in said and "(--dim)" not in said, said
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whitening = run_main(*args, "--kind", "whitening").stderr
    assert "with --dim 1..9" in whitening and "dim<=" not in whitening, whitening


def test_fit_post_json_records_the_prompt(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{t}\n" for t in TEXTS))
    out = tmp_path / "s.safetensors"
    ran = run_main(
        "fit-post",
        "-i",
        str(corpus),
        "--kind",
        "standardize",
        "-m",
        str(tiny_dirs["bert"]),
        "-o",
        str(out),
        "--json",
    )
    assert ran.code == 0, ran.stderr
    assert json.loads(ran.stdout)["spec"]["prompt"] == ""
