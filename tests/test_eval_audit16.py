"""A threshold file and a fitted post-processing are matched to a model by its files, not by the path that
named it: another model of the same name and width is refused (its scores were compared with the file's
threshold, and whitening fitted on its vectors applied, in silence), the same model by another path is
taken. A damaged threshold file is refused in one line; calibrate refuses labels that are not 0 or 1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import bertscope
from bertscope.core.post import fit_post_on_texts
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.research.baseline import calibrate

WORDS = "cat dog car tree house river bank money road sky".split()
PAIRS = [
    (
        " ".join(WORDS[i % 7 : i % 7 + 3]),
        " ".join(WORDS[i % 7 : i % 7 + 3] if i % 2 else WORDS[::-1][:3]),
        i % 2,
    )
    for i in range(20)
]


@pytest.fixture()
def folders(tiny_dirs: dict[str, Path], tmp_path: Path) -> tuple[Path, Path]:
    """A tiny BERT, and a tiny RoBERTa in another folder of the same name (the same width)."""
    bert = shutil.copytree(tiny_dirs["bert"], tmp_path / "tinybert")
    roberta = shutil.copytree(tiny_dirs["roberta"], tmp_path / "other" / "tinybert")
    return bert, roberta


def test_a_threshold_is_matched_by_the_model_s_files(
    folders: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from console import run_main

    bert, roberta = folders
    monkeypatch.chdir(tmp_path)
    path = calibrate(bertscope.load("tinybert", device="cpu"), PAIRS, pooling="mean").save("threshold.json")
    assert json.loads(path.read_text())["model"] == "tinybert"
    scored = ["similarity", "a cat", "a dog", "-p", "mean", "--threshold-file", str(path.resolve())]
    monkeypatch.chdir(roberta.parent)  # where -m tinybert is the RoBERTa
    other = run_main(*scored, "-m", "tinybert")
    assert other.code == 1 and "model: tinybert (other files) here, tinybert in the file" in other.stderr
    monkeypatch.chdir(tmp_path)
    same = run_main(*scored, "-m", str(bert))  # the BERT by its whole path
    assert same.code == 0, same.stderr
    older = json.loads(path.read_text())
    del older["model_files"]  # a file from before they were recorded: the name decides, as before
    path.write_text(json.dumps(older))
    by_name = run_main(*scored, "-m", str(bert))
    assert by_name.code == 1 and "model:" in by_name.stderr


def test_a_post_processing_fitted_on_another_model_is_refused(
    folders: tuple[Path, Path], tmp_path: Path
) -> None:
    bert, roberta = folders
    texts = [" ".join(WORDS[i % 8 : i % 8 + 3]) + f" {i}" for i in range(40)]
    fitted = fit_post_on_texts(
        bertscope.load(str(roberta), device="cpu"), texts, "pca", dim=4, pooling="mean"
    )
    saved = fitted.save(tmp_path / "pca.safetensors")
    model = bertscope.load(str(bert), device="cpu")
    with pytest.raises(InvalidSpec, match="was fitted on the vectors of .*, not of this model"):
        model.embed(["a cat"], pooling="mean", post=saved)
    own = fit_post_on_texts(model, texts, "pca", dim=4, pooling="mean")
    assert model.embed(["a cat"], pooling="mean", post=own).vectors.shape == (1, 4)


def test_a_damaged_threshold_file_is_one_line(tmp_path: Path) -> None:
    from console import run_main

    for body in (
        {"threshold": 0.5},
        {
            "threshold": "0.5",
            "precision": 1,
            "recall": 1,
            "f1": 1,
            "positives": 1,
            "negatives": 1,
            "model": "m",
            "settings": {},
        },
    ):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({"format": "bertscope-threshold/1", **body}))
        ran = run_main("similarity", "a", "b", "--threshold-file", str(path))
        assert ran.code == 1 and ran.stderr.count("\n") == 1 and "damaged threshold file" in ran.stderr


def test_calibrate_refuses_labels_that_are_not_0_or_1(bundled: bertscope.Model) -> None:
    with pytest.raises(InvalidInput, match="labels must be 0 .* or 1 .*, got 0.5"):
        calibrate(bundled, [("a cat", "a dog", 1), ("a car", "a tree", 0.5)], pooling="mean")


def test_an_f1_tie_goes_to_the_higher_threshold() -> None:
    import numpy as np

    from bertscope.research.baseline import best_threshold

    scores = np.array([0.8, 0.1, 0.4, 0.3, 0.6, 0.7, 0.2, 0.5, 1.0, 0.0, 0.4, 0.3])
    labels = np.array([1, 1, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0])
    cut, precision, recall, f1 = best_threshold(scores, labels)  # 0.35 and 0.55 both give F1 2/3
    assert (cut, precision, recall) == (pytest.approx(0.55), 0.75, 0.6) and f1 == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "line", ["a cat\ta dog\t1\textra", "He said\thello\tShe said hi\t3.5"], ids=["a fourth field", "a tab"]
)
def test_eval_pairs_refuses_a_line_it_would_drop(tmp_path: Path, line: str) -> None:
    from bertscope.errors import CorpusError
    from bertscope.research.analysis import read_pairs

    rows = ["a man plays a guitar\tmusic\t4.2", line, "a dog runs\ta cat sleeps\t0.4", "x y\tz w\t1.0"]
    path = tmp_path / "pairs.tsv"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(CorpusError, match="pairs.tsv:2: expected 3 tab-separated fields, found 4"):
        read_pairs(path)


def test_a_first_line_is_a_header_only_beyond_doubt(tmp_path: Path) -> None:
    from bertscope.errors import CorpusError
    from bertscope.research.analysis import read_pairs

    rest = ["a dog runs\ta cat sleeps\t0.4", "x y\tz w\t1.0", "p q\tr s\t2.0"]
    path = tmp_path / "pairs.tsv"
    path.write_text("\n".join(["a cat\ta dog\tsimilar", *rest]) + "\n")
    with pytest.raises(CorpusError, match="pairs.tsv:1: .*name its third column 'score'"):
        read_pairs(path)
    for header in ("sentence1\tsentence2\tgold", "a text\tanother\tscore", "left\tright\tsim (0-5)"):
        path.write_text("\n".join([header, *rest]) + "\n")
        assert len(read_pairs(path)[0]) == 3, header


def test_a_pooling_named_twice_is_refused_as_a_layer_is() -> None:
    from console import run_main

    ran = run_main("eval", "pairs", "-i", "tests/data/pairs.tsv", "-l", "6", "-p", "mean,cls,MEAN")
    assert ran.code == 1 and ran.stderr == "error: pooling mean appears twice; name each pooling once\n"


def test_eval_pairs_without_a_file_says_what_a_line_holds() -> None:
    from console import run_main

    ran = run_main("eval", "pairs")
    assert ran.code == 2  # a missing input is a usage error, as click's own
    assert ran.stderr == (
        "error: name the pairs file with -i/--input FILE (text<TAB>text<TAB>score a line); see `bertscope "
        "eval pairs --help`\n"
    )


def test_a_post_file_that_fits_no_cell_of_the_sweep_is_refused(
    bundled: bertscope.Model, tmp_path: Path
) -> None:
    from console import run_main

    texts = [
        f"{w} and {v} number {i}" for i, (w, v) in enumerate(zip(WORDS * 4, WORDS[::-1] * 4, strict=True))
    ]
    saved = fit_post_on_texts(bundled, texts, "pca", dim=4, pooling="mean").save(tmp_path / "pca.safetensors")
    sweep = ["eval", "pairs", "-i", "tests/data/pairs.tsv", "-p", "mean,cls", "--post", str(saved)]
    ran = run_main(*sweep, "-l", "5")  # fitted on layer 6: it left the sweep in silence
    assert ran.code == 1 and "was fitted on layers [6], pooling mean" in ran.stderr, ran.stderr
    assert "no cell of this sweep" in ran.stderr
    fits = run_main(*sweep, "-l", "6", "--json")
    assert fits.code == 0, fits.stderr
    assert {(r["post"], r["fitted"]) for r in json.loads(fits.stdout)["records"]} >= {("pca", "file")}


def test_a_threshold_records_how_long_texts_were_read(tmp_path: Path) -> None:
    from console import run_main

    path = tmp_path / "window.json"
    made = run_main(
        "calibrate", "-i", "tests/data/labelled_pairs.tsv", "-p", "mean", "--long", "window", "-o", str(path)
    )
    assert made.code == 0, made.stderr
    assert json.loads(path.read_text())["settings"]["long"] == "window"
    scored = ["similarity", "a cat", "a dog", "-p", "mean", "--threshold-file", str(path)]
    cut = run_main(*scored)  # long='truncate', the default: another score for a text past the limit
    assert cut.code == 1 and "long: truncate here, window in the file" in cut.stderr
    assert run_main(*scored, "--long", "window").code == 0
    older = json.loads(path.read_text())
    del older["settings"]["long"], older["settings"]["stride"]  # a file from before: not checked
    path.write_text(json.dumps(older))
    assert run_main(*scored).code == 0


@pytest.mark.parametrize(
    ("left", "right", "gold", "said"),
    [
        (["a", "b"], ["c", "d"], [1.0, 2.0], "at least 3 scored pairs, got 2"),  # a Spearman of +-1, always
        (["a", "b", "e"], ["c", "d"], [1.0, 2.0, 3.0], "equally long"),
        (
            ["a", "b", "e"],
            ["c", "d", "f"],
            [1.0, float("nan"), 3.0],
            r"pair 1 \('b', 'd'\) has the gold score nan",
        ),
        (["a", "b", "e"], ["c", "d", "f"], [2.0, 2.0, 2.0], "all 3 gold scores are 2"),
    ],
)
def test_evaluate_pairs_refuses_what_gives_no_correlation(
    bundled: bertscope.Model, left: list[str], right: list[str], gold: list[float], said: str
) -> None:
    from bertscope.research.analysis import evaluate_pairs

    with pytest.raises(InvalidInput, match=said):
        evaluate_pairs(bundled, left, right, gold)
