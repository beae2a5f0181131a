"""Contextuality's contexts and provenance: identical sentences are one context (merged and counted), the
baseline pairs occurrences of distinct sentences, the seed and sample size are options recorded in the
settings (and in --json), progress is shown on stderr, and `Model.contextuality` is the same call."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.research.contextuality import contextuality
from console import run_main

# The audit's cdup.txt (3 + 2 copies), with one more sentence for each word so each has two contexts.
REPEATED = [
    "The bank is open today.",
    "The bank is open today.",
    "The bank is open today.",
    "I walked by the river.",
    "I walked by the river.",
    "The bank closed early on Friday.",
    "The river was cold in spring.",
]
DISTINCT = list(dict.fromkeys(REPEATED))


def test_repeated_sentences_are_one_context(bundled: bertscope.Model) -> None:
    """Before, each copy was a context of its own: bank's self-similarity was 1.0000 at every layer. Now
    the run is the run over the distinct sentences, figure for figure (the baseline's pairs included)."""
    merged = contextuality(bundled, REPEATED, words=["bank", "river"], baseline_pairs=50)
    alone = contextuality(bundled, DISTINCT, words=["bank", "river"], baseline_pairs=50)
    assert merged.records == alone.records and merged.per_word == alone.per_word
    assert merged.n_occurrences == {"bank": 2, "river": 2}
    s = merged.settings
    assert (s["n_sentences"], s["n_distinct_sentences"], s["repeats_merged"]) == (7, 4, 3)
    assert alone.settings["repeats_merged"] == 0
    by_layer = {r["layer"]: r for r in merged.records}
    assert by_layer[6]["self_similarity"] < 0.99 and by_layer[6]["mev"] < 0.99


def test_only_repeats_of_one_sentence_are_refused(bundled: bertscope.Model) -> None:
    """The audit's cdup.txt itself: bank and river each occur in one distinct sentence only."""
    cdup = ["The bank is open today."] * 3 + ["I walked by the river."] * 2
    with pytest.raises(
        bertscope.InvalidInput,
        match=r"no word to measure: bank \(in 1 distinct sentence\(s\), 2 needed\), river",
    ):
        contextuality(bundled, cdup, words=["bank", "river"])


def test_seed_and_baseline_pairs_are_options_and_recorded(bundled: bertscope.Model) -> None:
    texts = (Path(__file__).parent / "data" / "contexts.txt").read_text().splitlines()
    a = contextuality(bundled, texts, words=["bank"], baseline_pairs=30, seed=0)
    b = contextuality(bundled, texts, words=["bank"], baseline_pairs=30, seed=1)
    again = contextuality(bundled, texts, words=["bank"], baseline_pairs=30, seed=1)
    base = [[r["baseline"] for r in x.records] for x in (a, b, again)]
    assert base[1] == base[2] and not np.allclose(base[0], base[1])
    assert b.settings["seed"] == 1 and b.settings["baseline_pairs"] == 30
    assert b.settings["baseline_pairs_used"] == 30 and b.settings["model"] == bundled.loaded.source
    with pytest.raises(bertscope.InvalidInput, match="seed=-1: a seed is a whole number"):
        contextuality(bundled, texts, words=["bank"], seed=-1)


def test_the_model_method_is_the_function(bundled: bertscope.Model) -> None:
    got = bundled.contextuality(DISTINCT, words=["bank", "river"], baseline_pairs=40, seed=2)
    want = contextuality(bundled, DISTINCT, words=["bank", "river"], baseline_pairs=40, seed=2)
    assert got.to_dict() == want.to_dict()
    assert set(got.to_dict()) == {"records", "per_word", "n_occurrences", "settings", "note"}


def test_progress_lines_on_stderr(
    bundled: bertscope.Model, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """stderr a file (not a terminal): log lines; the clock is stepped by hand (11 s a reading), so every
    batch is past the interval, as tests/test_probe.py does."""
    from bertscope.core import progress

    readings = iter(range(0, 10**6, 11))
    monkeypatch.setattr(progress, "_clock", lambda: float(next(readings)))
    contextuality(bundled, DISTINCT, words=["bank", "river"], progress=True)
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("embedding")]
    assert lines and "4/4" in lines[-1], lines
    contextuality(bundled, DISTINCT, words=["bank", "river"])  # under 256 sentences: none by default
    assert "embedding" not in capfd.readouterr().err


def test_command_takes_seed_and_pairs_and_says_the_merge(tmp_path: Path) -> None:
    corpus = tmp_path / "cdup.txt"
    corpus.write_text("\n".join(REPEATED) + "\n")
    args = ["contextuality", "-i", str(corpus), "--words", "bank,river", "--no-plot"]
    ran = run_main(*args, "--seed", "3", "--baseline-pairs", "20", "--json")
    assert ran.code == 0, ran.stderr
    data = json.loads(ran.stdout)
    s = data["settings"]
    assert (s["seed"], s["baseline_pairs"], s["n_sentences"], s["n_distinct_sentences"]) == (3, 20, 7, 4)
    assert {"model", "repeats_merged", "baseline_pairs_used"} <= set(s)
    assert data["n_occurrences"] == {"bank": 2, "river": 2}
    said = " ".join(ran.stderr.split())
    assert "note: 3 repeated sentence(s) merged: identical sentences are one context" in said
    ran = run_main(*args, "--baseline-pairs", "0")
    assert ran.code == 1 and "--baseline-pairs must be a whole number of at least 1" in ran.stderr
