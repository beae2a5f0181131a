"""Counts are named n_* in every JSON a user reads (docs/names.md): eval words' coverage and records,
calibrate's positives and negatives, with an older threshold file still loading."""

from __future__ import annotations

import json

import pytest

from bertscope.research.baseline import load_threshold
from bertscope.research.static_kinds import compare_kinds
from console import run_main


def test_threshold_counts_named_n_and_an_older_file_still_loads(tmp_path, tiny_dirs):
    path = tmp_path / "t.json"
    made = run_main(
        "calibrate", "-i", str(_labelled(tmp_path)), "-m", str(tiny_dirs["bert"]), "-o", str(path), "--json"
    )
    assert made.code == 0, made.stderr
    shown = json.loads(made.stdout)
    assert (shown["n_positives"], shown["n_negatives"]) == (2, 2)
    assert "positives" not in shown and "negatives" not in shown
    written = json.loads(path.read_text())
    older = {
        k.removeprefix("n_") if k in ("n_positives", "n_negatives") else k: v for k, v in written.items()
    }
    path.write_text(json.dumps(older))
    threshold = load_threshold(path)
    assert (threshold.n_positives, threshold.n_negatives) == (2, 2)
    with pytest.deprecated_call(match=r"Threshold.positives is deprecated; use .n_positives"):
        assert threshold.positives == 2


def test_eval_words_counts_named_n(bundled):
    pairs = [
        ("car", "automobile", 9.0),
        ("cat", "dog", 6.0),
        ("sun", "tax", 1.0),
        ("xylophonist", "music", 5.0),
    ]
    result = compare_kinds(bundled, pairs, layers=[1])
    assert {"n_pairs_covered", "n_pairs_common"} <= set(result.records[0])
    assert not {"covered", "common"} & set(result.records[0])
    cov = result.coverage
    assert cov["n_words_whole"] + cov["n_words_split"] == cov["n_words"] and cov["n_words_split"] >= 1
    assert not {"whole", "split"} & set(cov)


def _labelled(tmp_path):
    path = tmp_path / "pairs.tsv"
    rows = [("a cat sat", "a cat sat down", 1), ("the sun", "the sun is up", 1),
            ("a cat sat", "tax law", 0), ("the sun", "stock prices", 0)]  # fmt: skip
    path.write_text("".join(f"{a}\t{b}\t{y}\n" for a, b, y in rows))
    return path
