"""Baselines (a score's percentile among unrelated pairs) and calibrated thresholds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.research.baseline import (
    Threshold,
    best_threshold,
    calibrate,
    load_threshold,
    read_pairs,
    reference_sentences,
)


@pytest.fixture(scope="module")
def baseline(bundled: bertscope.Model) -> bertscope.research.baseline.Baseline:
    return bundled.baseline(pooling="mean")


def test_a_text_against_itself_is_the_top_percentile(bundled: bertscope.Model, baseline: object) -> None:
    text = "Heavy rain caused flooding in several suburbs."
    score = float(bundled.similarity(text, text, pooling="mean")[0, 0])
    assert baseline.percentile(score) == 1.0  # type: ignore[attr-defined]


def test_unrelated_pairs_sit_near_the_middle(bundled: bertscope.Model) -> None:
    texts = reference_sentences()
    half = len(texts) // 2
    base = bundled.baseline(reference=texts[:half], pooling="mean")
    rng = np.random.default_rng(1)
    others = texts[half:]
    shuffled = [others[i] for i in rng.permutation(len(others))]
    scores = np.diag(bundled.similarity(others, shuffled, pooling="mean"))
    scores = scores[[a != b for a, b in zip(others, shuffled, strict=True)]]
    assert abs(float(np.mean(base.percentile(scores))) - 0.5) < 0.15


def test_baseline_records_its_settings_and_pairs(baseline: object) -> None:
    info = baseline.describe()  # type: ignore[attr-defined]
    n = len(reference_sentences())
    assert info["n_pairs"] == n * (n - 1) // 2 and info["pooling"] == "mean" and info["layers"] == [6]
    assert info["median"] < info["p95"] < info["p99"] < 1


def test_best_threshold_separates_by_f1() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.4, 0.3, 0.75])
    labels = np.array([1, 1, 1, 0, 0, 0])
    cut, precision, recall, f1 = best_threshold(scores, labels)
    assert 0.4 < cut < 0.7 and recall == 1.0 and precision == 0.75
    assert f1 == pytest.approx(2 * 0.75 / 1.75)
    cut, precision, recall, f1 = best_threshold(np.array([0.9, 0.8, 0.2, 0.1]), np.array([1, 1, 0, 0]))
    assert (cut, precision, recall, f1) == (pytest.approx(0.5), 1.0, 1.0, 1.0)


def test_one_class_only_is_refused() -> None:
    with pytest.raises(bertscope.InvalidInput, match="both classes"):
        best_threshold(np.array([0.1, 0.2]), np.array([1, 1]))


def test_calibrate_saves_and_checks_its_settings(bundled: bertscope.Model, tmp_path: Path) -> None:
    pairs = [
        ("A man is playing a guitar.", "A man plays the guitar.", 1),
        ("A woman is slicing an onion.", "Someone cuts an onion.", 1),
        ("The stock market fell sharply.", "Shares dropped steeply today.", 1),
        ("A man is playing a guitar.", "A woman is slicing an onion.", 0),
        ("The stock market fell sharply.", "A cat sleeps on the sofa.", 0),
        ("Kids play football in the park.", "The recipe needs two eggs.", 0),
    ]
    t = calibrate(bundled, pairs, pooling="mean")
    assert t.f1 == 1.0 and t.n_positives == 3 and t.n_negatives == 3
    path = t.save(tmp_path / "threshold.json")
    loaded = load_threshold(path)
    assert loaded == t and json.loads(path.read_text())["settings"]["pooling"] == "mean"
    loaded.check(t.model, t.settings)
    with pytest.raises(bertscope.InvalidSpec, match="pooling: cls here, mean in the file"):
        loaded.check(t.model, {**t.settings, "pooling": "cls"})
    # Unit length leaves a cosine as it is: normalize differs harmlessly without a post-processor...
    loaded.check(t.model, {**t.settings, "normalize": not t.settings["normalize"]})
    # ...and counts where one reads the vectors.
    posted = {**t.settings, "post": {"kind": "whiten"}}
    fitted_with_post = Threshold(**{**t.to_dict(), "settings": posted})
    with pytest.raises(bertscope.InvalidSpec, match="normalize: "):
        fitted_with_post.check(t.model, {**posted, "normalize": not t.settings["normalize"]})
    # Nothing lost: a second save refuses, and leaves the first file as it was, until asked.
    before = path.read_bytes()
    with pytest.raises(bertscope.InvalidInput, match="exists; pass overwrite=True"):
        t.save(path)
    assert path.read_bytes() == before
    assert t.save(path, overwrite=True) == path


def test_calibrate_command_refuses_an_existing_threshold_before_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bertscope.cli.explain as cli_explain
    from console import run_main

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a cat\ta kitten\t1\na cat\ta stock\t0\n")
    kept = tmp_path / "threshold.json"
    kept.write_text("{}\n")

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded before the refusal")

    monkeypatch.setattr(cli_explain, "load_model", no_load)
    code, _, stderr = run_main("calibrate", str(pairs), "-o", str(kept))
    assert code != 0 and stderr.count("\n") == 1
    assert f"{kept} exists; pass --overwrite to replace it" in stderr
    assert kept.read_text() == "{}\n"


def test_a_file_that_is_not_a_threshold_names_where_one_comes_from(tmp_path: Path) -> None:
    for name, content in (("lines.txt", b"a cat\n"), ("latin.json", b"\xe9t\xe9"), ("other.json", b"{}")):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(bertscope.InvalidInput) as refused:
            load_threshold(tmp_path / name)
        assert str(refused.value) == (
            f"{tmp_path / name} is not a bertscope threshold file; make one with `bertscope calibrate`"
        )
    with pytest.raises(bertscope.InvalidInput, match=r"^cannot read the threshold file .*missing\.json"):
        load_threshold(tmp_path / "missing.json")


def test_read_pairs_skips_a_header_and_names_a_bad_line(tmp_path: Path) -> None:
    good = tmp_path / "pairs.tsv"
    good.write_text("a\tb\tlabel\nx\ty\t1\nu\tv\t0\n")
    assert read_pairs(good) == [("x", "y", 1), ("u", "v", 0)]
    bad = tmp_path / "bad.tsv"
    bad.write_text("x\ty\t1\nu\tv\t0.5\n")
    with pytest.raises(bertscope.InvalidInput, match="bad.tsv:2"):
        read_pairs(bad)


@pytest.mark.parametrize("missing", ["n/a", "NA", "-", ""])
def test_read_pairs_refuses_a_first_pair_whose_label_is_missing(tmp_path: Path, missing: str) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(f"x\ty\t{missing}\nu\tv\t0\n")
    with pytest.raises(bertscope.InvalidInput, match="pairs.tsv:1"):
        read_pairs(pairs)
