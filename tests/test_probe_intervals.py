"""A probe's intervals say what its item count can say: the folds' accuracy interval is the union of their
t-interval and Wilson's over the pooled out-of-fold predictions (40 items all right is not 1.000-1.000);
a zero-wide macro-F1 interval is flagged. With the small fixes beside them: the folds' error never asks
for fewer than 2 folds, a word<TAB>label test file read as CoNLL-U says why, `senses` names its score
`score` in its table as in --json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.errors import CorpusError, InvalidInput
from bertscope.research.probe import probe
from bertscope.research.probe_eval import wilson
from bertscope.research.probe_features import Features, Level
from bertscope.research.probe_fit import row_scores
from bertscope.research.probe_score import evaluate, fold_splits
from console import run_main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
KEYS = {
    "accuracy", "accuracy_ci", "accuracy_ci_folds", "accuracy_ci_items", "macro_f1", "macro_f1_ci",
    "macro_f1_ci_zero_width",
}  # fmt: skip


def _features(n: int, noise: float, seed: int) -> Features:
    """`n` items of two labels, one per sentence, on features that separate them less as `noise` grows."""
    rng = np.random.default_rng(seed)
    y = np.array(["a", "b"] * (n // 2))
    x = (y == "a").astype(float)[:, None] * np.ones((1, 4)) + noise * rng.standard_normal((n, 4))
    names = [f"s{i}" for i in range(n)]
    return Features(x, x[:, None, :], [1], list(y), names, names, n)


def test_forty_items_all_right_are_not_certainty() -> None:
    """5 folds at 1.000 on 40 items: the folds' t-interval has no width, Wilson's over 40 of 40 has."""
    row = evaluate(_features(40, 0.01, 0), Level.WORDS, folds=5, control=False, seed=0).rows[1]
    assert row["accuracy"] == 1.0 and row["accuracy_ci_folds"] == [1.0, 1.0]
    assert row["accuracy_ci"] == row["accuracy_ci_items"] == wilson(40, 40)
    assert row["accuracy_ci"][0] == pytest.approx(0.912, abs=0.001) and row["accuracy_ci"][1] == 1.0
    assert row["macro_f1_ci"] == [1.0, 1.0] and row["macro_f1_ci_zero_width"] is True


def test_folds_that_disagree_keep_their_t_interval_within_the_union() -> None:
    """Folds that disagree: the interval holds their whole t-interval (here its top, past Wilson's) and
    reaches down to Wilson's (here its bottom, past the t-interval's)."""
    from scipy import stats

    feats = _features(40, 0.8, 0)
    row = evaluate(feats, Level.WORDS, folds=5, control=False, seed=0).rows[1]
    splits = fold_splits(feats.labels, feats.groups, 5, seed=0)
    scores = row_scores(feats.layers[:, 0], np.asarray(feats.labels), splits)[:, 0]
    assert scores.std() > 0  # the folds disagree
    half = stats.t.ppf(0.975, 4) * scores.std(ddof=1) / np.sqrt(5)
    folds = [max(0.0, scores.mean() - half), min(1.0, scores.mean() + half)]
    correct = sum(round(s * len(test)) for s, (_, test) in zip(scores, splits, strict=True))
    items = wilson(correct, 40)
    assert row["accuracy_ci_folds"] == pytest.approx(folds) and row["accuracy_ci_items"] == items
    low, high = row["accuracy_ci"]
    assert low <= folds[0] and high >= folds[1]  # the t-interval is kept whole
    assert folds[1] > items[1] and high == pytest.approx(folds[1])  # its top, where it is wider
    assert items[0] < folds[0] and low == items[0]  # Wilson's bottom, where that is wider
    assert row["macro_f1_ci_zero_width"] is False


def test_held_out_rows_have_the_folds_keys() -> None:
    """One set of keys for --json whether folds or a test file scored the probe."""
    feats = _features(40, 0.8, 0)
    folds = evaluate(feats, Level.WORDS, folds=5, control=False, seed=0).rows[1]
    held = evaluate(feats, Level.WORDS, folds=5, control=False, seed=0, n_train=30).rows[1]
    assert KEYS <= set(folds) and set(held) == set(folds)
    assert held["accuracy_ci_folds"] is None and held["accuracy_ci"] == held["accuracy_ci_items"]
    assert held["macro_f1_ci"] is None and held["macro_f1_ci_zero_width"] is None


def test_the_table_and_json_show_the_same_interval(bundled: bertscope.Model) -> None:
    """The README's own probe: layer 4 is right on all 40 items and reads 0.912-1.000, in both outputs."""
    args = ("probe", "-i", str(EXAMPLES / "senses.tsv"), "--layers", "4")
    table, said = run_main(*args), run_main(*args, "--json")
    assert table.code == 0 and said.code == 0, (table.stderr, said.stderr)
    row = json.loads(said.stdout)["rows"][1]
    assert row["layer"] == 4 and row["accuracy"] == 1.0
    low, high = row["accuracy_ci"]
    shown = f"{low:.3f}-{high:.3f}"
    assert shown == "0.912-1.000" and shown in table.stdout and "1.000-1.000" not in table.stdout


def test_too_few_sentences_never_asks_for_fewer_than_two_folds(bundled: bertscope.Model) -> None:
    same = [("the same sentence", "a"), ("the same sentence", "b")] * 3
    with pytest.raises(InvalidInput, match="1 distinct labelled sentence") as refused:
        probe(bundled, same, level="sentence", folds=2)
    assert "lower folds" not in str(refused.value) and "add sentences" in str(refused.value)
    three = [(f"sentence number {i}", "ab"[i % 2]) for i in range(3)] * 2
    with pytest.raises(InvalidInput, match=r"add sentences or lower folds= to 3$"):
        probe(bundled, three, level="sentence", folds=5)


def test_the_command_line_says_so_too(tmp_path: Path) -> None:
    data = tmp_path / "six.tsv"
    data.write_text("the same sentence\ta\nthe same sentence\tb\n" * 3, encoding="utf-8")
    ran = run_main("probe", "-i", str(data), "--level", "sentence", "--folds", "2")
    assert ran.code != 0 and "--folds 2 needs at least 2" in ran.stderr
    assert "lower --folds" not in ran.stderr and "add sentences" in ran.stderr


CONLLU = """1\tI\tI\tPRON\t_\t_\t2\tnsubj\t_\t_
2\tread\tread\tVERB\t_\t_\t0\troot\t_\t_

1\tbooks\tbook\tNOUN\t_\t_\t2\tnsubj\t_\t_
2\tmatter\tmatter\tVERB\t_\t_\t0\troot\t_\t_
"""


def test_a_word_tab_label_test_file_read_as_conllu_says_why(bundled: bertscope.Model, tmp_path: Path) -> None:
    train, test = tmp_path / "train.conllu", tmp_path / "t.tsv"
    train.write_text(CONLLU, encoding="utf-8")
    test.write_text("book\tNOUN\nit\tPRON\n", encoding="utf-8")
    with pytest.raises(
        CorpusError, match=r"t\.tsv:1: a CoNLL-U line has 10 tab-separated fields, found 2; "
    ) as e:
        probe(bundled, train, label_field="upos", test=test)
    said = str(e.value)
    assert "reads the test file as CoNLL-U, as it reads the training file" in said
    assert "the label in field 4" in said and "word<TAB>label" in said
    ran = run_main("probe", "-i", str(train), "--label-field", "upos", "--test", str(test))
    assert (
        ran.code != 0
        and "give --test as CoNLL-U too" in ran.stderr
        and "leave --label-field out" in ran.stderr
    )


def test_senses_names_its_score_score_in_the_table(bundled: bertscope.Model, tmp_path: Path) -> None:
    corpus, store = tmp_path / "corpus.txt", tmp_path / "words.parquet"
    lines = ["the bank of the river", "the bank raised rates", "a bank by the water", "the bank lent money"]
    corpus.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    bertscope.embed_corpus(corpus, store, model=bundled, level="words")
    ran = run_main("senses", "bank", "--store", str(store), "-n", "2", "--examples", "1")
    assert ran.code == 0, ran.stderr
    header = next(line for line in ran.stdout.splitlines() if "sense" in line and "size" in line)
    assert "score" in header and "cosine" not in header
    said = json.loads(run_main("senses", "bank", "--store", str(store), "-n", "2", "--json").stdout)
    assert "score" in said["senses"][0]["examples"][0]
