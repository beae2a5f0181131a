"""Structural probes, audit 21: a SIGTERM cleans the word vectors up, a diverged fit is refused, long
sentences read in windows and large vector files are said, the table names what made it, `probe --help`
describes both probes, `--subword` is named in its refusal, one shared sentence is singular."""

from __future__ import annotations

from pathlib import Path

import pytest

from bertscope.research.probe_data import shared_sentences

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TREES, TREES_TEST = EXAMPLES / "trees.conllu", EXAMPLES / "trees-test.conllu"


# --- 7. one shared sentence is said in the singular ----------------------------------------------------


def test_one_shared_sentence_is_singular() -> None:
    with pytest.warns(UserWarning) as said:
        assert shared_sentences(["A cat ."], ["A cat ."], train="a.conllu", test="b.conllu") == 1
    assert str(said[0].message).startswith("the 1 distinct sentence of b.conllu occurs in a.conllu: ")
