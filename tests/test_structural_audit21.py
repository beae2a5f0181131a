"""Structural probes, audit 21: a SIGTERM cleans the word vectors up, a diverged fit is refused, long
sentences read in windows and large vector files are said, the table names what made it, `probe --help`
describes both probes, `--subword` is named in its refusal, one shared sentence is singular."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

from bertscope.cli import app
from bertscope.research.probe_data import shared_sentences
from console import run_main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TREES, TREES_TEST = EXAMPLES / "trees.conllu", EXAMPLES / "trees-test.conllu"


# --- 4. the table names its subword pooling, punctuation rule and seed -------------------------------------


def test_the_summary_names_subword_punct_and_seed() -> None:
    ran = run_main(
        "probe", "-i", str(EXAMPLES / "ewt" / "dev.conllu"), "--task", "distance", "--punct", "xpos",
        "--subword", "first_last", "--seed", "3", "--layers", "0", "--epochs", "1", "--rank", "2",
    )  # fmt: skip
    assert ran.code == 0, ran.stderr
    text = " ".join(ran.stdout.split())
    assert "(rank 2, 1 epoch) with --subword first_last, --punct xpos and --seed 3, tested on" in text
    assert "gold undirected edges (Penn Treebank XPOS punctuation left out)" in text


# --- 5. probe --help describes both probes -------------------------------------------------------------


def test_probe_help_describes_both_probes() -> None:
    command: Any = typer.main.get_command(app).commands["probe"]  # type: ignore[attr-defined]
    helps = {param.name: param.help or "" for param in command.params}
    assert command.help.startswith("Probes per layer: labels (default), or the parse tree with --task")
    assert "a structural probe holds out every 5th distinct sentence" in helps["test"]
    assert "Structural probes: B's start and the sentence order" in helps["seed"]
    assert "Structural probes (--task distance|depth): CoNLL-U with heads" in helps["input_path"]
    assert "--task depth" in command.help and "--label-field upos" in command.help


# --- 6. --subword's refusal names the flag -----------------------------------------------------------------


@pytest.mark.parametrize("task", ["distance", "label"])
def test_an_unknown_subword_names_the_flag(task: str) -> None:
    ran = run_main("probe", "-i", str(TREES), "--task", task, "--subword", "bogus")
    assert ran.code == 1
    assert (
        ran.stderr.strip() == "error: unknown --subword 'bogus'; choose one of: first, last, mean, first_last"
    )


# --- 7. one shared sentence is said in the singular ----------------------------------------------------


def test_one_shared_sentence_is_singular() -> None:
    with pytest.warns(UserWarning) as said:
        assert shared_sentences(["A cat ."], ["A cat ."], train="a.conllu", test="b.conllu") == 1
    assert str(said[0].message).startswith("the 1 distinct sentence of b.conllu occurs in a.conllu: ")
