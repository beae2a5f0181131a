"""Sweeps, pair/word/document evaluation and contextuality on the bundled model and the test fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.cli import research as cli_research
from bertscope.core.post import fit_post
from bertscope.errors import CorpusError, InvalidInput, InvalidSpec
from bertscope.research.analysis import (
    evaluate_docsim,
    evaluate_pairs,
    evaluate_words,
    layer_vectors,
    read_pairs,
    sweep,
    word_dataset,
)
from bertscope.research.contextuality import contextuality
from bertscope.research.static_kinds import compare_kinds

DATA = Path(__file__).parent / "data"
CONTEXTS = (DATA / "contexts.txt").read_text().splitlines()


@pytest.fixture(scope="module")
def pairs() -> tuple[list[str], list[str], np.ndarray]:
    """The 30 scored sentence pairs of the fixture."""
    return read_pairs(DATA / "pairs.tsv")


@pytest.fixture(autouse=True)
def _cli_uses_bundled(bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_research, "load_model", lambda *a, **k: bundled)


def test_layer_vectors_equal_embed_at_every_layer(bundled: bertscope.Model) -> None:
    texts = ["I like eating bread", "The bank by the river is closed today", "a cat"]
    every = layer_vectors(bundled, texts, ["cls", "mean", "max", "mean_sqrt_len"], mask_special=True)
    assert every["mean"].shape == (3, 7, 384)
    every["cls"] = layer_vectors(bundled, texts, ["cls"])["cls"]
    for pooling, layer in [
        ("mean", 0),
        ("mean", 3),
        ("mean", 6),
        ("max", 2),
        ("mean_sqrt_len", 6),
        ("cls", 6),
    ]:
        options = {"mask_special": pooling != "cls", "normalize": False}
        one = bundled.embed(texts, layers=layer, pooling=pooling, **options)
        np.testing.assert_allclose(every[pooling][:, layer], one.vectors, atol=1e-5)


def test_sweep_runs_the_forward_once_per_text(
    bundled: bertscope.Model, pairs: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows: list[int] = []
    forward = bundled.engine.forward

    def counting(ids: np.ndarray, *args: object) -> object:
        rows.append(len(ids))
        return forward(ids, *args)

    monkeypatch.setattr(bundled.engine, "forward", counting)
    left, right, gold = pairs
    result = sweep(bundled, left, right, gold)
    assert sum(rows) == len(set(left) | set(right))
    assert len(result.records) == 7 * 3 and result.layers == list(range(7))


def test_sweep_grid_best_and_degenerate_cells(bundled: bertscope.Model, pairs: tuple) -> None:
    left, right, gold = pairs
    result = sweep(bundled, left, right, gold, layers="0,-1", poolings=["cls", "mean"])
    rows, layers, values = result.grid()
    assert rows == ["cls", "mean"] and layers == [0, 6]
    assert np.isnan(values[0, 0])  # layer 0 [CLS] is the same vector for every text: no ranking
    assert result.best["spearman"] == np.nanmax(values) and result.best["layer"] == 6
    assert result.best["spearman"] > 0.6
    single = evaluate_pairs(bundled, left, right, gold, layers=6, pooling="mean")
    cell = next(r for r in result.records if r["layer"] == 6 and r["pooling"] == "mean")
    assert single["spearman"] == pytest.approx(cell["spearman"], abs=1e-9)
    with pytest.raises(InvalidSpec, match="first_last_avg"):
        sweep(bundled, left, right, gold, poolings=["first_last_avg"])


def test_sweep_shows_the_effect_of_post_processing(bundled: bertscope.Model, pairs: tuple) -> None:
    left, right, gold = pairs
    vectors = layer_vectors(bundled, CONTEXTS, ["mean"])["mean"][:, 6]
    fitted = fit_post(vectors, "abtt", dim=2, name="abtt-ctx")
    result = sweep(
        bundled, left, right, gold, layers="6", poolings=["mean"], post=["whitening", fitted], post_dim=20
    )
    by_post = {r["post"]: r["spearman"] for r in result.records}
    assert set(by_post) == {"none", "whitening", "abtt-ctx"}
    assert by_post["whitening"] != pytest.approx(by_post["none"], abs=1e-4)
    assert by_post["abtt-ctx"] != pytest.approx(by_post["none"], abs=1e-4)
    rows, _, _ = result.grid()
    assert rows == ["mean", "mean+whitening", "mean+abtt-ctx"]


BAD_PAIRS = {
    "a\tb\t1\nc\td\n": "bad.tsv:2: expected 3",
    "a\tb\t1\nc\td\tx\n": "not a number",
    # every gold score the same: each correlation was nan, printed as a result with exit 0
    "a\tb\t1\nc\td\t1\ne\tf\t1.0\n": "all 3 gold scores are 1; a correlation needs at least two",
    # a first line in decimal commas was taken for a header and dropped in silence
    "a\tb\t0,5\nc\td\t1\ne\tf\t2\ng\th\t3\n": "bad.tsv:1: .*decimal point",
    "left\tright\tscore\na\tb\t1\n\tc\t2\n": "bad.tsv:3: a text of the pair is empty",
    # a first pair without a score was taken for a header and dropped in silence
    "a\tb\tn/a\nc\td\t1\ne\tf\t2\ng\th\t3\n": r"bad.tsv:1: the gold score is missing \('n/a'\); give the",
    "a\tb\tNA\nc\td\t1\ne\tf\t2\ng\th\t3\n": r"bad.tsv:1: the gold score is missing \('NA'\)",
    "a\tb\t\nc\td\t1\ne\tf\t2\ng\th\t3\n": r"bad.tsv:1: the gold score is missing \(''\)",
    "# from the sheet\na\tb\t-\nc\td\t1\ne\tf\t2\ng\th\t3\n": r"bad.tsv:2: the gold score is missing",
    "left\tright\tscore\na\tb\t1\nc\td\tN/A\ne\tf\t2\n": r"bad.tsv:3: the gold score is missing \('N/A'\)",
}


@pytest.mark.parametrize(("content", "said"), BAD_PAIRS.items())
def test_read_pairs_errors(tmp_path: Path, content: str, said: str) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text(content)
    with pytest.raises(CorpusError, match=said):
        read_pairs(bad)


@pytest.mark.parametrize(
    ("content", "first", "n"),
    [
        ("text_a\ttext_b\tscore\na\tb\t1\nc\td\t2\ne\tf\t3\n", "a", 3),  # a header: skipped
        ("# pairs\n\nleft\tright\tsim (0-5)\na\tb\t1\nc\td\t2\ne\tf\t3\n", "a", 3),  # after a comment
        ("x\ty\t0.5\na\tb\t1\nc\td\t2\ne\tf\t3\n", "x", 4),  # a numeric first line is a pair
        ("x\ty\t-1\na\tb\t1\nc\td\t2\n", "x", 3),
    ],
)
def test_read_pairs_skips_a_header_only(tmp_path: Path, content: str, first: str, n: int) -> None:
    """Only a first line whose score field is a column name is a header; every other line is a pair."""
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(content)
    left, _, gold = read_pairs(pairs)
    assert left[0] == first and len(left) == len(gold) == n


def test_equal_gold_scores_are_refused_before_the_model_is_read() -> None:
    with pytest.raises(InvalidInput, match="all 3 gold scores are 2"):
        compare_kinds(None, [("a", "b", 2.0), ("c", "d", 2.0), ("e", "f", 2.0)])


@pytest.mark.parametrize(
    ("gold", "told"),
    [
        ((1.0, float("nan"), 3.0), r"^word evaluation: pair 1 \('c', 'd'\) has the gold score nan: every"),
        ((2.0, 2.0, 2.0), "^all 3 gold scores are 2; a correlation needs at least two different scores$"),
    ],
)
def test_word_eval_refuses_a_gold_no_correlation_can_be_read_from(gold: tuple[float, ...], told: str) -> None:
    """evaluate_words answered nan for every layer (compare_kinds refused the same pairs); both read the
    pairs through one check now, before the model is read."""
    pairs = [(a, b, g) for (a, b), g in zip([("a", "b"), ("c", "d"), ("e", "f")], gold, strict=True)]
    for evaluate in (evaluate_words, compare_kinds):
        with pytest.raises(InvalidInput, match=told):
            evaluate(None, pairs)  # type: ignore[arg-type]


def test_word_eval_on_a_simlex_subset(bundled: bertscope.Model) -> None:
    data = word_dataset("simlex999")
    assert len(data) == 999 and data[0] == ("old", "new", 1.58)
    result = evaluate_words(bundled, data[:150])
    # one naming with compare_kinds and `eval words`: the rows' kind, then each layer's decontextualised
    assert [(r["kind"], r["layer"]) for r in result.records] == [
        ("rows", None),
        *[("decontextualized", k) for k in range(7)],
    ]
    static = np.stack([[bundled.static_word(w).vector for w in (a, b)] for a, b, _ in data[:150]])
    from scipy.stats import spearmanr

    unit = static / np.linalg.norm(static, axis=2, keepdims=True)
    expected = spearmanr((unit[:, 0] * unit[:, 1]).sum(1), [g for *_, g in data[:150]]).statistic
    assert result.records[0]["spearman"] == pytest.approx(expected, abs=1e-6)
    cov = result.coverage
    assert cov["n_pairs"] == 150 and cov["n_words_split"] >= 1
    assert cov["n_words_whole"] + cov["n_words_split"] == cov["n_words"]
    assert all(-1 <= r["spearman"] <= 1 for r in result.records)


def test_docsim_on_the_lee_corpus(bundled: bertscope.Model) -> None:
    result = evaluate_docsim(bundled, layers=-1, pooling="mean")
    assert result["n_documents"] == 50 and result["n_pairs"] == 1225
    assert result["pearson"] > 0.4 and result["spearman"] > 0.3


def test_contextuality_static_row_layer_zero_and_baseline(bundled: bertscope.Model) -> None:
    result = contextuality(bundled, CONTEXTS, words=["bank", "bread", "river", "money"])
    by_layer = {r["layer"]: r for r in result.records}
    assert list(by_layer) == ["static", 0, 1, 2, 3, 4, 5, 6]
    assert by_layer["static"]["self_similarity"] == pytest.approx(1.0, abs=1e-6)
    assert by_layer["static"]["mev"] == pytest.approx(1.0, abs=1e-6)
    assert 0.9 < by_layer[0]["self_similarity"] < 0.9999  # position alone moves layer 0
    assert by_layer[6]["self_similarity"] < by_layer[0]["self_similarity"]
    for r in result.records:
        assert r["self_adjusted"] == pytest.approx(r["self_similarity"] - r["baseline"])
        assert -1 < r["baseline"] < 1 and 0 < r["mev"] <= 1 + 1e-9
    assert result.n_occurrences["bank"] >= 12


def test_layer_zero_occurrences_differ_only_by_position(bundled: bertscope.Model) -> None:
    same_position = ["the bank is closed", "a bank was robbed", "my bank sent mail"]
    layer0 = np.stack([bundled.hidden_states(t)[0][2] for t in same_position])
    np.testing.assert_allclose(layer0, layer0[0:1].repeat(3, axis=0), atol=1e-5)
    moved = bundled.hidden_states("we sat on the bank")[0][5]
    assert not np.allclose(moved, layer0[0], atol=1e-3)


def test_contextuality_picks_frequent_words(bundled: bertscope.Model) -> None:
    result = contextuality(bundled, CONTEXTS, top=3, min_contexts=15)
    assert set(result.n_occurrences) <= {"the", "river", "money", "bank", "bread", "a"}
    assert len(result.n_occurrences) == 3 and all(n >= 15 for n in result.n_occurrences.values())


def test_long_texts_are_never_cut_in_silence(bundled: bertscope.Model) -> None:
    """A sweep says how many texts `long="truncate"` cut (none with "window"); contextuality windows long
    sentences, so a word past the model's limit still counts."""
    prefix = "the cat sat on a mat " * 60  # 361 tokens: over the 256 the bundled model takes
    endings = ["and then it slept", "a storm hit the coast", "prices rose again", "the team won"]
    left, right = [prefix + e for e in endings], [e + " today" for e in endings]
    gold = np.array([1.0, 0.0, 0.5, 0.2])
    cut = sweep(bundled, left, right, gold, layers="6", poolings=["mean"])
    assert cut.settings["n_truncated"] == 4 and cut.settings["n_dropped"] > 4 * 100
    whole = sweep(bundled, left, right, gold, layers="6", poolings=["mean"], long="window")
    assert whole.settings["n_truncated"] == whole.settings["n_dropped"] == 0
    sentences = ["the bank is closed", "a bank was robbed", prefix + "the bank was closed"]
    assert contextuality(bundled, sentences, words=["bank"]).n_occurrences["bank"] == 3


def test_eval_and_contextuality_commands(tmp_path: Path) -> None:
    runner = CliRunner()
    picture = tmp_path / "sweep.png"
    result = runner.invoke(
        app,
        [
            "eval",
            "pairs",
            str(DATA / "pairs.tsv"),
            "--layers",
            "5:",
            "--pooling",
            "mean",
            "-o",
            str(picture),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert len(data["records"]) == 2 and data["best"]["layer"] in (5, 6) and picture.stat().st_size > 5000
    table = runner.invoke(app, ["eval", "pairs", str(DATA / "pairs.tsv"), "--layers", "6", "--no-plot"])
    assert "best: layer 6" in table.stdout
    words = tmp_path / "words.tsv"
    words.write_text("bread\tloaf\t9\nbread\tcar\t1\nbank\tmoney\t7\nriver\tstream\t9\ncat\tdog\t6\n")
    result = runner.invoke(app, ["eval", "words", "--pairs", str(words), "--no-plot", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["coverage"]["n_pairs"] == 5
    result = runner.invoke(
        app,
        [
            "contextuality",
            str(DATA / "contexts.txt"),
            "--words",
            "bread,bank",
            "-o",
            str(tmp_path / "ctx.png"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "static" in result.stdout and "bread (15)" in result.stdout and (tmp_path / "ctx.png").exists()
