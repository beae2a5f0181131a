"""Structural probes, audit 21: a SIGTERM cleans the word vectors up, a diverged fit is refused, long
sentences read in windows and large vector files are said, the table names what made it, `probe --help`
describes both probes, `--subword` is named in its refusal, one shared sentence is singular."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer

import bertscope
from bertscope.cli import app
from bertscope.errors import InvalidInput
from bertscope.research import structural
from bertscope.research.conllu import Tree, read_trees, tree_distances
from bertscope.research.probe_data import shared_sentences
from bertscope.research.structural import structural_probe
from bertscope.research.structural_fit import gradient, zero_map_loss
from console import run_main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TREES, TREES_TEST = EXAMPLES / "trees.conllu", EXAMPLES / "trees-test.conllu"


# --- 1. SIGTERM: the temporary word vectors go, exit 143 ---------------------------------------------------


def test_sigterm_removes_the_word_vectors_and_exits_143(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "HF_HUB_OFFLINE": "1"}
    command = [
        sys.executable, "-m", "bertscope", "probe", "-i", str(TREES), "--task", "distance", "--layers", "0",
        "--rank", "2", "--epochs", "1000000", "-m", str(tiny_dirs["bert"]),
    ]  # fmt: skip
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        # the condition: the probe's folder holds its train folder (its vectors are being written or
        # fitted; the folder alone may be caught inside tempfile's making of it, before its removal is
        # armed: a signal there left it behind, 1 run in 4 on a loaded machine); the child's exit ends
        # the wait too
        while not list(scratch.glob("bertscope-structural-*/train")) and child.poll() is None:
            assert time.monotonic() < deadline, "the probe made no temporary folder"
            try:
                child.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
        assert child.poll() is None, child.communicate()
        child.send_signal(signal.SIGTERM)
        _, said = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 143, said
    assert said.strip().splitlines()[-1] == "terminated"
    assert list(scratch.iterdir()) == []


def test_serve_and_explore_keep_uvicorns_own_sigterm() -> None:
    from bertscope.cli import _handle_sigterm

    before = signal.getsignal(signal.SIGTERM)
    for args in (["serve", "--port", "0"], ["--debug", "explore"]):
        assert _handle_sigterm(args, lambda *_: None) is None
        assert signal.getsignal(signal.SIGTERM) is before


# --- 2. a fit that diverged without overflowing is refused ------------------------------------------------


def test_zero_map_loss_is_the_loss_of_b_zero() -> None:
    trees = read_trees(TREES)[:6]
    rng = np.random.default_rng(0)
    vectors = [rng.normal(size=(len(t), 4)) for t in trees]
    for distance in (True, False):
        golds = [tree_distances(t.heads) if distance else np.arange(len(t), dtype=float) for t in trees]
        loss, _ = gradient(np.zeros((2, 4)), vectors, golds, distance=distance)
        assert zero_map_loss(golds, distance=distance) == pytest.approx(loss, rel=1e-12)


@pytest.mark.parametrize("task", ["distance", "depth"])
def test_a_diverged_fit_is_refused(bundled: bertscope.Model, task: str) -> None:
    # lr=5: the loss ends near 100 (distance) / 60 (depth), finite, where B = 0 scores 1.6 / 1.0
    with pytest.raises(InvalidInput) as caught:
        structural_probe(bundled, TREES, TREES_TEST, task=task, layers="3", epochs=20, lr=5, progress=False)
    said = str(caught.value)
    assert re.fullmatch(
        rf"the static row probe's training loss ended at [0-9.]+ with lr=5, above the [0-9.]+ of "
        rf"predicting every {task} 0: the steps diverged; give a lower lr= \(e\.g\. 0\.05\)",
        said,
    ), said


def test_a_good_fit_is_not_refused(bundled: bertscope.Model) -> None:
    result = structural_probe(bundled, TREES, TREES_TEST, layers="3", epochs=20, lr=0.05, progress=False)
    assert result.settings["train_loss"]["3"] < 0.1


# --- 3. sentences over the model's limit are said; large vector files are said --------------------------


def _chain(words: list[str]) -> Tree:
    return Tree(tuple(words), ("NOUN",) * len(words), tuple(range(-1, len(words) - 1)))


def test_windowed_sentences_are_said(bundled: bertscope.Model) -> None:
    short = [_chain(f"the cat number {i} sleeps here".split()) for i in range(5)]
    long = _chain([f"word{i}" for i in range(300)])  # over 256 tokens
    with pytest.warns(UserWarning) as said:
        structural_probe(bundled, [*short, long], short[:2], layers="0", epochs=1, rank=2, progress=False)
    lines = [str(w.message) for w in said]
    assert (
        "1 of the 6 training sentences is longer than the model's 256 tokens: read in overlapping windows "
        "(each token from the window it is most central in), never whole"
    ) in lines
    assert not any("test sentences" in line for line in lines)


def test_large_word_vectors_are_said_before_written(
    tiny_models: dict[str, bertscope.Model], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(structural, "LARGE_BYTES", 0)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    model = tiny_models["bert"]
    trees = read_trees(TREES)
    with pytest.warns(UserWarning, match="the word vectors take") as said:
        structural_probe(model, trees[:10], trees[10:12], layers="0", epochs=1, rank=2, progress=False)
    sizes = [str(w.message) for w in said if "word vectors take" in str(w.message)]
    words = sum(len(t) for t in trees[:10])
    width = model.info().hidden_size
    assert re.fullmatch(
        rf"the word vectors take 0\.0 GB in {re.escape(str(tmp_path))}/bertscope-structural-\w+/train until "
        rf"the probe ends \({words} words x {2 * width} floats over 2 rows x 4 bytes\); TMPDIR chooses the "
        "disk",
        sizes[0],
    ), sizes


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
