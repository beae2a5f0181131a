"""Train/test leakage in the probes: the structural probe's held-out split keeps a repeated sentence on one
side, and both probes count (and warn of) test sentences that are also training sentences; the punctuation
rule (UPOS, or Hewitt & Manning's XPOS tags)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bertscope.cli import app
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.research.conllu import Tree, read_trees, with_punct
from bertscope.research.probe import probe
from bertscope.research.structural import held_out_split, structural_probe
from console import run_main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TREES = EXAMPLES / "trees.conllu"
TREES_TEST = EXAMPLES / "trees-test.conllu"
runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _one_blas_thread():  # type: ignore[no-untyped-def]
    """The structural fits multiply small NumPy matrices: OpenBLAS's threads on two busy cores cost more
    than they give (tests/test_structural.py measured 24 s against 9 s, the rows equal)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _blocks(path: Path) -> list[str]:
    """A CoNLL-U file's sentences, each its lines (comments included) ending in a blank line."""
    text = path.read_text(encoding="utf-8")
    return [block.strip("\n") + "\n\n" for block in text.split("\n\n") if "\t" in block]


def _write(path: Path, blocks: list[str]) -> Path:
    path.write_text("".join(blocks), encoding="utf-8")
    return path


def test_held_out_split_keeps_a_repeated_sentence_on_one_side(tmp_path: Path) -> None:
    """The audit's rep.conllu: 6 sentences, each written 5 times in a row. Every 5th *line* of that file
    is a copy of a training sentence; every 5th distinct sentence is not."""
    blocks = _blocks(TREES)[:6]
    trees = read_trees(_write(tmp_path / "rep.conllu", [b for b in blocks for _ in range(5)]))
    train, test = held_out_split(trees, "rep.conllu")
    assert {t.text for t in train}.isdisjoint({t.text for t in test})
    # distinct sentence 5 (index 4) is held out with its 5 copies; the other 5 x 5 train
    assert [t.text for t in test] == [trees[20].text] * 5
    assert len(train) == 25


def test_held_out_split_counts_distinct_sentences_in_its_error(tmp_path: Path) -> None:
    """Ten copies of one sentence are one sentence: nothing can be held out, and the error says so."""
    trees = read_trees(_write(tmp_path / "one.conllu", _blocks(TREES)[:1] * 10))
    with pytest.raises(InvalidInput, match=r"has 10 sentence\(s\): give test=.*\(1 distinct: a repeated"):
        held_out_split(trees, tmp_path / "one.conllu")


def test_structural_probe_on_repeats_scores_no_training_sentence(bundled, tmp_path: Path) -> None:
    blocks = _blocks(TREES)[:6]
    rep = _write(tmp_path / "rep.conllu", [b for b in blocks for _ in range(5)])
    result = structural_probe(bundled, rep, layers="0", epochs=1, rank=8)
    assert (result.n_train, result.n_test) == (25, 5)
    assert result.settings["test_overlap"] == 0
    assert result.settings["punct"] == "upos"


def test_structural_probe_counts_and_warns_of_shared_test_sentences(bundled) -> None:
    train = read_trees(TREES)
    test = read_trees(TREES_TEST) + train[:3]
    with pytest.warns(UserWarning, match=r"3 of the 23 distinct sentences of the test data also occur"):
        result = structural_probe(bundled, train, test, layers="0", epochs=1, rank=8)
    assert result.settings["test_overlap"] == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # disjoint files: no warning at all
        clean = structural_probe(bundled, TREES, TREES_TEST, layers="0", epochs=1, rank=8)
    assert clean.settings["test_overlap"] == 0


def test_structural_probe_says_a_test_set_inside_training(bundled) -> None:
    trees = read_trees(TREES)
    with pytest.warns(UserWarning, match=r"all 5 distinct sentences of the test data occur in the training"):
        result = structural_probe(bundled, trees, trees[:5] * 2, layers="0", epochs=1, rank=8)
    assert result.settings["test_overlap"] == 5 and result.n_test == 10


def test_label_probe_counts_and_warns_of_shared_test_sentences(bundled, tmp_path: Path) -> None:
    # Trained on 12 of the 46 sentences: the counts are of sentences, and a fit of every word of 46 (two
    # rows, static and layer 0, three times) was most of this test's time.
    train = _write(tmp_path / "train.conllu", _blocks(TREES)[:12])
    shared = _write(tmp_path / "test.conllu", _blocks(TREES_TEST) + _blocks(TREES)[:2])
    with pytest.warns(UserWarning, match=rf"2 of the 22 distinct sentences of {shared} also occur in"):
        result = probe(bundled, train, test=shared, label_field="upos", layers="0")
    assert result.settings["test_overlap"] == 2
    clean = probe(bundled, train, test=TREES_TEST, label_field="upos", layers="0")
    assert clean.settings["test_overlap"] == 0
    with pytest.warns(UserWarning, match=f"all 12 distinct sentences of {train} occur in {train}"):
        same = probe(bundled, train, test=train, label_field="upos", layers="0")
    assert same.settings["test_overlap"] == 12


def test_cli_says_the_overlap(tmp_path: Path) -> None:
    shared = _write(tmp_path / "test.conllu", _blocks(TREES_TEST) + _blocks(TREES)[:1])
    args = ["probe", "-i", str(TREES), "--task", "distance", "--layers", "0", "--epochs", "1"]
    ran = run_main(*args, "--test", str(shared))
    assert ran.code == 0, ran.stderr
    said, footer = " ".join(ran.stderr.split()), " ".join(ran.stdout.split())
    assert "warning: 1 of the 21 distinct sentences" in said
    assert "1 of its distinct sentences also in training" in footer
    assert "(rank 128, 1 epoch)" in footer  # one epoch, not "1 epochs"
    ran = run_main(*args, "--test", str(TREES), "--json")
    said = " ".join(ran.stderr.split())
    assert ran.code == 0 and json.loads(ran.stdout)["settings"]["test_overlap"] == 46
    assert f"warning: all 46 distinct sentences of {TREES} occur in {TREES}" in said


def test_cli_footer_says_one_sentence(tmp_path: Path) -> None:
    one = _write(tmp_path / "one.conllu", _blocks(TREES)[:1])
    args = ["probe", "-i", str(one), "--test", str(TREES_TEST), "--task", "depth", "--layers", "0"]
    ran = runner.invoke(app, [*args, "--epochs", "2"])
    assert ran.exit_code == 0, ran.output
    said = " ".join(ran.output.split())
    assert f"trained on 1 sentence of {one} (rank 128, 2 epochs)" in said


def test_json_carries_the_overlap(tmp_path: Path) -> None:
    args = ["probe", "-i", str(TREES), "--test", str(TREES_TEST), "--task", "depth", "--layers", "0"]
    ran = runner.invoke(app, [*args, "--epochs", "1", "--json"])
    assert ran.exit_code == 0, ran.output
    settings = json.loads(ran.stdout)["settings"]
    assert settings["test_overlap"] == 0 and settings["punct"] == "upos"


def test_cli_takes_the_punctuation_rule_and_refuses_it_for_label_probes() -> None:
    ewt = EXAMPLES / "ewt"
    args = ["probe", "-i", str(ewt / "train.conllu"), "--test", str(ewt / "dev.conllu"), "--task", "depth"]
    ran = runner.invoke(
        app, [*args, "--layers", "0", "--epochs", "1", "--rank", "8", "--punct", "xpos", "--json"]
    )
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.stdout)["settings"]["punct"] == "xpos"
    wrong = runner.invoke(app, [*args, "--punct", "ptb"])
    assert str(wrong.exception) == "unknown --punct 'ptb'; choose one of: upos, xpos"
    label = runner.invoke(app, ["probe", "-i", str(TREES), "--label-field", "upos", "--punct", "xpos"])
    assert str(label.exception).startswith("--punct: for structural probes (--task distance or depth)")


def test_punctuation_rules_differ_where_upos_and_ptb_tags_do() -> None:
    """A hyphen is UPOS PUNCT but XPOS HYPH (scored by H&M); a SYM tagged `,` is the reverse."""
    tree = Tree(
        ("well", "-", "known", ","),
        ("ADV", "PUNCT", "ADJ", "SYM"),
        (2, 2, -1, 2),
        xpos=("RB", "HYPH", "JJ", ","),
    )
    assert tree.kept.tolist() == [True, False, True, True]
    (ptb,) = with_punct([tree], "xpos")
    assert ptb.kept.tolist() == [True, True, True, False]
    with pytest.raises(InvalidInput, match=r"punct='xpos' reads Penn Treebank XPOS tags"):
        with_punct(read_trees(TREES)[:1], "xpos")  # its XPOS column is _
    with pytest.raises(InvalidSpec, match="unknown punctuation rule 'ptb'; choose one of: upos, xpos"):
        with_punct([tree], "ptb")


def test_xpos_rule_reads_the_treebanks_tags(bundled) -> None:
    """On EWT (PTB XPOS) the two rules leave out different words, and the probe records the one used."""
    trees = read_trees(EXAMPLES / "ewt" / "dev.conllu")
    upos = np.concatenate([t.kept for t in trees])
    xpos = np.concatenate([t.kept for t in with_punct(trees, "xpos")])
    assert upos.shape == xpos.shape and (upos != xpos).any()
    # the rule is recorded whatever the training side: its first 20 trees, not 150
    train = read_trees(EXAMPLES / "ewt" / "train.conllu")[:20]
    result = structural_probe(bundled, train, trees, layers="0", epochs=1, rank=8, punct="xpos")
    assert result.settings["punct"] == "xpos"
