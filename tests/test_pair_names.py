"""A text of a pairs file that the model refuses (over its limit under long=error) is named by its pair and
column, on the command line by the file's line ("the first text of pairs.tsv:4"), never as "text 2" of the
distinct texts the evaluation embeds, which the user never saw."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.core.similarity import unit
from bertscope.errors import InputTooLong
from bertscope.research.analysis import evaluate_pairs, sweep
from bertscope.research.baseline import best_threshold, calibrate

LONG = " ".join(["word"] * 80)  # over the tiny models' 64 positions


@pytest.fixture(scope="module")
def tiny_bert(tiny_dirs: dict[str, Path]) -> bertscope.Model:
    return bertscope.load(str(tiny_dirs["bert"]), device="cpu")


def test_the_library_names_a_refused_text_by_its_pair_and_column(tiny_bert: bertscope.Model) -> None:
    left, right, gold = ["a cat", "a dog", "the sun"], ["a dog", LONG, "a cat"], [0.1, 0.5, 0.9]
    with pytest.raises(InputTooLong, match=r"^the second text of pair 1 has \d+ tokens"):
        evaluate_pairs(tiny_bert, left, right, gold, long="error")
    with pytest.raises(InputTooLong, match=r"^the second text of pair 1 has \d+ tokens"):
        sweep(tiny_bert, left, right, gold, layers="1", long="error")
    labelled = [("a cat", "a dog", 1), ("the sun", "a cat", 0), (LONG, "a dog", 1)]
    with pytest.raises(InputTooLong, match=r"^the first text of pair 2 has \d+ tokens"):
        calibrate(tiny_bert, labelled, long="error")


def test_calibrate_embeds_each_text_once_and_scores_as_before(tiny_bert: bertscope.Model) -> None:
    labelled = [
        ("a cat", "a dog", 1),
        ("the sun", "a cat", 0),
        ("a dog", "the sun", 1),
        ("a cat", "a cat", 1),
    ]
    threshold = calibrate(tiny_bert, labelled, pooling="mean")
    left = tiny_bert.embed([p[0] for p in labelled], pooling="mean").vectors
    right = tiny_bert.embed([p[1] for p in labelled], pooling="mean").vectors
    cosines = np.einsum("nd,nd->n", unit(left), unit(right))  # each column embedded on its own, as before
    cut, precision, recall, f1 = best_threshold(cosines, np.array([p[2] for p in labelled]))
    assert threshold.threshold == pytest.approx(cut, abs=1e-6) and threshold.f1 == pytest.approx(f1)
    assert threshold.n_positives == 3 and threshold.n_negatives == 1


def test_the_command_line_names_a_refused_text_by_its_line(
    tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    from console import run_main

    scored = tmp_path / "pairs.tsv"
    scored.write_text(
        f"text_a\ttext_b\tscore\n# a comment\na cat\ta dog\t0.1\n{LONG}\tthe sun\t0.5\nx\ty\t0.9\n"
    )
    swept = run_main("eval", "pairs", str(scored), "-m", str(tiny_dirs["bert"]), "--long", "error")
    assert swept.code == 1
    assert f"the first text of {scored}:4 has" in swept.stderr and "--long truncate" in swept.stderr
    labelled = tmp_path / "labelled.tsv"
    labelled.write_text(f"a cat\ta dog\t1\n\nthe sun\t{LONG}\t0\n")
    output = tmp_path / "threshold.json"
    cut = run_main(
        "calibrate", "-i", str(labelled), "-m", str(tiny_dirs["bert"]), "--long", "error", "-o", str(output)
    )
    assert cut.code == 1 and f"the second text of {labelled}:3 has" in cut.stderr
    assert not output.exists()


def test_pairs_files_read_standard_input_as_embed_does(
    tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    from console import run_main

    def stdin(text: str) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))

    model = str(tiny_dirs["bert"])
    stdin("a cat\ta dog\t1\nthe sun\ta cat\t0\na dog\tthe sun\t1\n")
    output = tmp_path / "threshold.json"
    cut = run_main("calibrate", "-i", "-", "-m", model, "-o", str(output), "--json")
    assert cut.code == 0, cut.stderr
    assert json.loads(output.read_text())["n_positives"] == 2
    stdin("a cat\ta dog\t0.1\nthe sun\ta cat\t0.5\nx\ty\t0.9\n")
    swept = run_main("eval", "pairs", "-", "-m", model, "--layers", "1", "-p", "mean", "--no-plot", "--json")
    assert swept.code == 0, swept.stderr
    assert json.loads(swept.stdout)["records"][0]["n_pairs"] == 3


def test_standard_input_is_named_as_embed_names_it(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of 4cfbdee: calibrate said '-:2' and 'stdin:2', embed '<stdin>:2'; one name, <stdin>."""
    import io
    import sys

    from console import run_main

    def stdin(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))

    model = str(tiny_dirs["bert"])
    stdin(b"a cat\ta dog\tmaybe\n")
    label = run_main("calibrate", "-i", "-", "-m", model, "-o", "t.json")
    assert label.code == 1 and "<stdin>:1: expected text<TAB>text<TAB>0 or 1" in label.stderr
    stdin(b"a cat\ta dog\t1\nbad \xff\tx\t0\n")
    byte = run_main("calibrate", "-i", "-", "-m", model, "-o", "t.json")
    assert byte.code == 1 and "<stdin>:2: not UTF-8 text" in byte.stderr
    stdin(b"a cat\ta dog\t0.1\nx\ty\tz\n")
    score = run_main("eval", "pairs", "-", "-m", model, "--no-plot")
    assert score.code == 1 and "<stdin>:2:" in score.stderr


def test_an_eval_record_counts_its_pairs_as_n_pairs(bundled: bertscope.Model) -> None:
    """eval's records and evaluate_pairs counted the pairs as "n" (audit 19h: names.md's n_pairs)."""
    from bertscope.research.analysis import evaluate_pairs

    left, right, gold = (
        ["a cat", "a car", "a dog"],
        ["a kitten", "a truck", "the stock market"],
        [4.0, 3.0, 0.0],
    )
    assert evaluate_pairs(bundled, left, right, gold, layers=6, pooling="mean")["n_pairs"] == 3
