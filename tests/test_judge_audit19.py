"""Audit 19 of eval, calibrate, similarity and explain: a threshold file whose threshold is no cosine is
refused, ..."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bertscope
from bertscope.research.baseline import load_threshold

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
