"""Audit 18d (probes): a word-level file at --level sentence, a text file read as words, the --punct
wording, tree errors that say the fix, and sweep ranks no probe can use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bertscope.errors import CorpusError, InvalidSpec
from bertscope.research.conllu import read_trees
from bertscope.research.probe import probe
from bertscope.research.probe_data import read_words
from console import run_main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TOPICS = "The soup needs more salt.\tfood\nThe team won the match.\tsport\n"


def _said(args: list[str]) -> str:
    """The one-line error of `bertscope ARGS...` (it must fail)."""
    ran = run_main(*args)
    assert ran.code != 0, ran.stdout
    return " ".join(ran.stderr.split())


@pytest.mark.parametrize("extra", [["--label-field", "upos"], []])
def test_a_conllu_file_at_sentence_level_is_refused_not_read_line_by_line(extra: list[str]) -> None:
    """Each token line was one "sentence" labelled by its MISC column, and a table printed."""
    args = ["probe", "-i", str(EXAMPLES / "pos.conllu"), "--level", "sentence", "--layers", "0", *extra]
    said = _said(args)
    assert "drop --level sentence" in said
    assert ("--label-field upos names a CoNLL-U column" in said) if extra else ("is a CoNLL-U file" in said)


def test_label_field_with_sentence_level_data_in_python_is_refused(bundled: Any) -> None:
    pairs = [("dogs bark", "a"), ("cats sleep", "b")] * 4
    with pytest.raises(
        InvalidSpec, match=r"label_field='upos' names a CoNLL-U column.*drop level='sentence'"
    ):
        probe(bundled, pairs, level="sentence", label_field="upos", layers="0", folds=2)


def test_a_sentence_level_file_read_as_words_names_level_sentence(tmp_path: Path) -> None:
    """The comment line's error gave the CoNLL-U fix alone; without it, whole texts became "words"."""
    commented = tmp_path / "topics.tsv"
    commented.write_text("# a sentence-level task\n" + TOPICS, encoding="utf-8")
    with pytest.raises(CorpusError, match=r"topics\.tsv:1: .*need level='sentence' \(--level sentence\)"):
        read_words(commented)
    plain = tmp_path / "plain.tsv"
    plain.write_text(TOPICS, encoding="utf-8")
    with pytest.raises(CorpusError, match=r"plain\.tsv:1: the word 'The soup needs more salt\.' has spaces"):
        read_words(plain)
    said = _said(["probe", "-i", str(plain), "--layers", "0"])
    assert "need --level sentence" in said


def test_the_punct_advice_is_in_flags_on_the_command_line() -> None:
    args = ["probe", "-i", str(EXAMPLES / "trees.conllu"), "--test", str(EXAMPLES / "trees-test.conllu")]
    said = _said([*args, "--task", "distance", "--punct", "xpos", "--layers", "0", "--epochs", "1"])
    assert "--punct xpos reads Penn Treebank XPOS tags" in said and "or --punct upos" in said
    assert "punct=" not in said


def test_a_cycle_under_a_root_names_its_word_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "cycle2.conllu"
    rows = ["1\ta\t_\tDET\tDT\t_\t0\troot\t_\t_", "2\tb\t_\tNOUN\tNN\t_\t3\tnsubj\t_\t_"]
    rows.append("3\tc\t_\tNOUN\tNN\t_\t2\tobj\t_\t_")
    path.write_text("\n".join(rows) + "\n\n", encoding="utf-8")
    with pytest.raises(
        CorpusError, match=r"cycle2\.conllu:2: the word 'b' \(ID 2\) never reaches the root"
    ) as e:
        read_trees(path)
    assert "(2 -> 3 -> 2)" in str(e.value) and "fix the HEAD column" in str(e.value)


def test_a_word_label_file_given_to_a_structural_probe_says_it_needs_heads() -> None:
    said = _said(["probe", "--task", "distance", "-i", str(EXAMPLES / "senses.tsv")])
    assert "found 2; a structural probe reads CoNLL-U with each word's HEAD" in said


def test_a_sweep_rank_above_what_a_probe_can_use_is_refused_not_relabelled() -> None:
    """rank=1000 gave a row 'linear rank 1000' identical to the full-rank probe, capacity 1000 in JSON."""
    args = ["probe", "-i", str(EXAMPLES / "trees.conllu"), "--label-field", "upos", "--layers", "0"]
    said = _said([*args, "--sweep", "rank=8,1000", "--control"])
    assert "a rank-1000 linear probe needs 1000 principal components" in said and "sweep ranks up to" in said
