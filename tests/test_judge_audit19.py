"""Audit 19 of eval, calibrate, similarity and explain: a threshold file whose threshold is no cosine is
refused; a text of explain (and /explain) is named as given, "text b", not by its place among the texts
embedded alone ("text 0"), and attention's one text as anatomy names it ("the text", "the pair"); cells
whose cosines span less than float32's exactness have no correlation; eval's and the threshold's
messages say the real bound, the sweep's choices and the settings in the command line's words; calibrate
refuses rows that are not labelled pairs in one line; explain --json names the model, similarity --pair
--json the pair, a baseline's counts are n_*; one text to similarity is a usage error; a # line that
reads as a pair is named when skipped as a comment."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.research.baseline import load_threshold
from bertscope.server import create_app
from console import run_main

LONG = " ".join(["word"] * 300)  # 302 tokens, past the bundled model's 256

THRESHOLD = {
    "format": "bertscope-threshold/1",
    "precision": 1.0,
    "recall": 1.0,
    "f1": 1.0,
    "positives": 8,
    "negatives": 8,
    "model": "all-MiniLM-L6-v2 (bundled)",
    "settings": {"layers": [6], "combine": "mean", "pooling": "mean", "mask_special": False},
}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 5, -3, 1.01])
def test_a_threshold_that_is_no_cosine_is_a_damaged_file(tmp_path: Path, value: float) -> None:
    path = tmp_path / "threshold.json"
    path.write_text(json.dumps({**THRESHOLD, "threshold": value}))  # json.dump writes NaN and Infinity
    with pytest.raises(bertscope.InvalidInput, match=r"damaged threshold file .*no cosine in \[-1, 1\]"):
        load_threshold(path)
    path.write_text(json.dumps({**THRESHOLD, "threshold": -1.000001}))  # calibrate's cut under a -1 score
    assert load_threshold(path).threshold == -1.000001


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    with TestClient(create_app(bundled)) as c:
        yield c


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_explain_names_a_too_long_text_as_given(bundled: bertscope.Model, pooling: str) -> None:
    for a, b, name in (("a cat", LONG, "b"), (LONG, "a cat", "a")):
        with pytest.raises(bertscope.InputTooLong, match=f"^text {name} has 302 tokens"):
            bundled.explain(a, b, pooling=pooling, long="error")


def test_the_explain_command_names_a_too_long_text_b() -> None:
    ran = run_main("explain", "a cat", LONG, "-p", "mean", "--long", "error")
    assert ran.code == 1 and ran.stderr.startswith("error: text b has 302 tokens"), ran.stderr


def test_explain_route_names_its_texts_by_their_fields(client: TestClient) -> None:
    long_b = client.post("/explain", json={"a": "a cat", "b": LONG, "pooling": "mean", "long": "error"})
    assert long_b.status_code in (400, 413, 422) and "text b has 302 tokens" in long_b.text, long_b.text
    empty_b = client.post("/explain", json={"a": "a cat", "b": "", "pooling": "mean"})
    assert empty_b.status_code == 422 and "text b is empty" in empty_b.text, empty_b.text


def test_attention_names_its_one_text_as_anatomy_does() -> None:
    alone = run_main("attention", LONG, "--long", "error")
    assert alone.code == 1 and alone.stderr.startswith("error: the text has 302 tokens"), alone.stderr
    paired = run_main("attention", LONG, "--pair", "x", "--long", "error")
    assert paired.code == 1 and paired.stderr.startswith("error: the pair has 304 tokens"), paired.stderr


def test_cosines_apart_only_by_float32_rounding_have_no_correlation(bundled: bertscope.Model) -> None:
    from bertscope.research.analysis import correlations, read_pairs, sweep

    rng = np.random.default_rng(0)
    base = rng.normal(size=(1, 8))
    a = np.repeat(base, 30, axis=0)
    b = a + rng.normal(scale=1e-4, size=a.shape)  # cosines within ~1e-7 of 1: ordered by rounding
    gold = rng.random(30)
    assert np.isnan(correlations(a, b, gold)["spearman"])
    assert np.isfinite(correlations(a, b + rng.normal(scale=0.1, size=a.shape), gold)["spearman"])
    left, right, scores = read_pairs(Path(__file__).parent / "data" / "pairs.tsv")
    result = sweep(bundled, left, right, scores, layers=[1, 6], poolings=["cls", "mean"])
    cells = {(r["layer"], r["pooling"]): r["spearman"] for r in result.records}
    # MiniLM's layer-1 cls cosines all lie within 5e-6 of 1: their order is float32 rounding
    assert np.isnan(cells[1, "cls"]) and np.isfinite(cells[6, "cls"]) and np.isfinite(cells[1, "mean"])
    assert result.note is not None and "span less than 1e-5 (float32's exactness" in result.note


def test_a_threshold_mismatch_is_said_in_the_command_line_s_words() -> None:
    from bertscope.cli.wording import as_flags
    from bertscope.research.baseline import Threshold

    made = {"layers": [6], "combine": "mean", "pooling": "mean", "mask_special": False, "normalize": False}
    post = {"kind": "whitening", "dim_in": 384, "dim_out": 20, "fingerprint": "33a8e557f3e04b63", "n_fit": 60}
    threshold = Threshold(0.5, 1.0, 1.0, 1.0, 1, 1, "m", {**made, "post": post})
    with pytest.raises(bertscope.InvalidSpec) as refused:
        threshold.check("m", {**made, "mask_special": True, "post": None})
    said = as_flags(str(refused.value))
    assert "post: none here, whitening to 20 dims (fingerprint 33a8e557f3e0) in the file" in said, said
    assert "--mask-special: true here, false in the file" in said and "{" not in said, said
    # a 2-layer model scored against a 6-layer model's file: the model first, the settings go with it
    with pytest.raises(bertscope.InvalidSpec) as refused:
        threshold.check("tiny", {**made, "layers": [2], "post": post})
    said = as_flags(str(refused.value))
    assert (
        "to apply it, load the model it was calibrated with (m) by -m: it is another model than this one, "
        "and pass --layers 6" in said
    ), said


def test_eval_pairs_messages_say_the_real_bound_and_choices(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a cat\ta dog\t3\na car\ta bus\t1\na man\ta woman\t2\n")  # 6 distinct texts
    for dim in ("6", "7"):
        ran = run_main(
            "eval", "pairs", "-i", str(pairs), "--post", "whitening", "--post-dim", dim, "-p", "mean"
        )
        assert ran.code == 1 and f"--post-dim {dim} is out of range" in ran.stderr, ran.stderr
        assert "keep 1..5; give --post-dim 5 or fewer" in ran.stderr, ran.stderr
    bogus = run_main("eval", "pairs", "-i", str(pairs), "-p", "bogus")
    assert bogus.code == 1 and bogus.stderr.rstrip().endswith("one of: cls, mean, max, mean_sqrt_len"), (
        bogus.stderr
    )
    pairs.write_text("a cat\ta dog\thigh\na car\ta bus\t1\na man\ta woman\t2\ne\tf\t0\n")
    word = run_main("eval", "pairs", "-i", str(pairs), "-p", "mean")
    assert (
        "'high' is not a number; give each pair a gold score" in word.stderr and "decimal" not in word.stderr
    )


@pytest.mark.parametrize(
    ("pairs", "said"),
    [
        (
            [("a cat", "a dog")],
            r"^pair 0 is \('a cat', 'a dog'\), not a \(text, text, 0/1\) row; pass a list",
        ),
        ("not a list", r"^pairs is a str, not a list of \(text, text, 0/1\) rows; pass one$"),
        (5, r"^pairs is an int, not a list of \(text, text, 0/1\) rows; pass one$"),
        ([], r"^no labelled pairs given: pass a list of \(text, text, 0/1\) rows"),
    ],
)
def test_calibrate_refuses_rows_that_are_not_labelled_pairs(
    bundled: bertscope.Model, pairs: object, said: str
) -> None:
    from bertscope.research.baseline import calibrate

    with pytest.raises(bertscope.InvalidInput, match=said):
        calibrate(bundled, pairs, pooling="mean")  # type: ignore[arg-type]


def test_explain_json_names_the_model_and_similarity_json_the_pair() -> None:
    explained = run_main("explain", "a cat", "a dog", "-p", "mean", "--json")
    assert explained.code == 0 and json.loads(explained.stdout)["model"], explained.stderr
    paired = run_main("similarity", "How are you?", "How old are you?", "--pair", "Fine.", "--json")
    answer = json.loads(paired.stdout)
    assert answer["pair"] == "Fine." and answer["spec"]["pair"] == "Fine.", answer
    alone = json.loads(run_main("similarity", "a cat", "a dog", "--json").stdout)
    assert "pair" not in alone and "pair" not in alone["spec"]


def test_a_baseline_s_counts_are_n_keys(bundled: bertscope.Model) -> None:
    from bertscope.research.baseline import reference_sentences

    info = bundled.baseline(reference=reference_sentences()[:10], pooling="mean").describe()
    assert (info["n_pairs"], info["n_texts"]) == (45, 10) and "pairs" not in info and "reference" not in info


def test_similarity_of_one_text_is_a_usage_error() -> None:
    ran = run_main("similarity", "a")
    assert ran.code == 2 and "similarity needs at least two texts" in ran.stderr, ran.stderr
    assert "see `bertscope similarity --help`" in ran.stderr and ran.stderr.count("\n") == 1


def test_a_commented_line_that_reads_as_a_pair_is_said(tmp_path: Path) -> None:
    from bertscope.research.analysis import read_numbered_pairs

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(
        "#MeToo rally\ta protest\t4\n# a comment\na cat\ta dog\t3\na car\ta bus\t1\na man\ta woman\t2\n"
    )
    with pytest.warns(UserWarning, match=r"1 line\(s\) starting with # .* skipped as comments \(line 1\)"):
        left, _, _, numbers = read_numbered_pairs(pairs)
    assert left == ["a cat", "a car", "a man"] and numbers == [3, 4, 5]


def test_a_post_file_fitted_on_unit_vectors_is_applied_to_unit_vectors_in_the_sweep(
    bundled: bertscope.Model,
) -> None:
    """eval pairs --post FILE applied fit-post's default file (mean, normalized) to the sweep's raw mean
    vectors (audit 19d): its cell equals the file applied to the vectors it was fitted on."""
    from scipy.stats import pearsonr, spearmanr

    from bertscope.core.post import fit_post_on_texts
    from bertscope.research.analysis import read_pairs, sweep
    from bertscope.research.baseline import reference_sentences

    left, right, gold = read_pairs(Path(__file__).parent / "data" / "pairs.tsv")
    texts = reference_sentences()
    post = fit_post_on_texts(bundled, texts, "whitening", dim=32, pooling="mean", normalize=True)
    result = sweep(bundled, left, right, gold, layers="-1", poolings=["mean"], post=[post])
    cell = next(r for r in result.records if r["fitted"] == "file")
    spec = {"layers": "-1", "pooling": "mean", "normalize": True}
    a, b = (post.apply(bundled.embed(list(side), **spec).vectors) for side in (left, right))
    cos = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert abs(cell["spearman"] - spearmanr(cos, gold).statistic) < 1e-6
    assert abs(cell["pearson"] - pearsonr(cos, gold).statistic) < 1e-5
