"""Audit 26e (structural and label probes): one reading of CoNLL-U word lines for both probes (IDs and
FORMs), and the structural picture when its scores are undefined."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bertscope.errors import CorpusError
from bertscope.research.conllu import read_trees
from bertscope.research.probe_data import read_words

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _write(path: Path, sentences: list[list[tuple[str, str]]]) -> Path:
    """A CoNLL-U file of chains from (ID, FORM) pairs: each word's head is the next word, the last root."""
    lines = []
    for words in sentences:
        for i, (word_id, form) in enumerate(words):
            head = 0 if i == len(words) - 1 else i + 2
            lines.append(f"{word_id}\t{form}\t_\tNOUN\t_\t_\t{head}\tdep\t_\t_")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("ids", "line", "said"),
    [
        (["1", "2-x", "3"], 2, "the ID '2-x' is neither a word range (3-4) nor an empty node (3.1)"),
        (["1", "2", "3."], 3, "the ID '3.' is neither a word range (3-4) nor an empty node (3.1)"),
        (["1", "3", "4"], 2, "word IDs run 1, 2, 3 ... in each sentence: found '3' where 2 was due"),
        (["1", "2", "2"], 3, "word IDs run 1, 2, 3 ... in each sentence: found '2' again where 3 was due"),
    ],
)
def test_both_readers_refuse_a_bad_word_id_in_the_same_line(
    tmp_path: Path, ids: list[str], line: int, said: str
) -> None:
    """The label probe's reader dropped a word whose ID was malformed ('2-x', '3.') and read skipped or
    repeated IDs, where the structural reader refused them at their line."""
    path = _write(tmp_path / "ids.conllu", [list(zip(ids, ["The", "cat", "sat"], strict=True))])
    refusals = []
    for read in (read_words, read_trees):
        with pytest.raises(CorpusError) as caught:
            read(path)
        refusals.append(str(caught.value))
    assert refusals[0] == refusals[1]
    assert refusals[0] == f"{path}:{line}: {said}; fix the ID column"


def test_the_label_probe_refuses_a_bad_word_id_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused before the model loads, so stderr is the one line whatever the cache holds (a cold cache's
    load prints its timing lines): a load here fails the test."""
    from bertscope.cli import layers
    from console import run_main

    monkeypatch.setattr(layers, "load_model", lambda *a, **k: pytest.fail("the model loaded first"))
    path = _write(tmp_path / "ids.conllu", [[("1", "The"), ("2-x", "cat"), ("3", "sat")]])
    ran = run_main("probe", "-i", str(path))
    assert ran.code != 0 and "Traceback" not in ran.stderr
    said = "the ID '2-x' is neither a word range (3-4) nor an empty node (3.1); fix the ID column"
    assert ran.stderr == f"error: {path}:2: {said}\n"


def test_both_readers_read_a_form_with_edge_spaces_as_the_same_text(tmp_path: Path) -> None:
    """A FORM ' a' was read by the structural probe as ' a' (the model read ' a cat') and by the label
    probe as 'a'; a space inside a FORM (UD's 'New York') is kept by both."""
    path = _write(tmp_path / "spaces.conllu", [[("1", " a"), ("2", "cat\u00a0 ")], [("1", "New York")]])
    trees, labelled = read_trees(path), read_words(path)
    assert [t.words for t in trees] == [s.words for s in labelled] == [("a", "cat"), ("New York",)]
    assert [t.text for t in trees] == [s.text for s in labelled] == ["a cat", "New York"]
    assert trees[0].spans() == labelled[0].spans() == [(0, 1), (2, 5)]


def test_a_form_of_spaces_alone_is_refused_by_both_readers(tmp_path: Path) -> None:
    path = _write(tmp_path / "blank.conllu", [[("1", "a"), ("2", "  ")]])
    for read in (read_words, read_trees):
        with pytest.raises(CorpusError, match=r":2: word 2 has an empty FORM; fix the FORM column$"):
            read(path)


def _keep_figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    from bertscope.research import structural_plots

    drawn: list[Any] = []

    def keep(figure: Any, path: str | Path, *, overwrite: bool) -> Path:
        drawn.append(figure)
        return Path(path)

    monkeypatch.setattr(structural_plots, "save_figure", keep)
    return drawn


def test_the_picture_says_why_no_score_is_drawn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test file of 1-2 word sentences: every score undefined, the table '-' with its reason in the
    note, and the picture blank (axes and a legend of lines with no point, no word of why)."""
    from console import run_main

    drawn = _keep_figures(monkeypatch)
    short = _write(tmp_path / "short.conllu", [[("1", "Hi")], [("1", "Yes")], [("1", "Oh")]])
    picture = tmp_path / "scores.png"
    args = ["-i", str(EXAMPLES / "trees.conllu"), "--test", str(short), "--task", "distance"]
    ran = run_main("probe", *args, "--layers", "-1", "--epochs", "1", "-o", str(picture))
    assert ran.code == 0, ran.stderr
    note = " ".join(ran.stdout.split())
    uuas = "no test sentence has two words that are not punctuation"
    dspr = "no test sentence has 5-50 words"
    assert f"UUAS -: {uuas}" in note and f"DSpr -: {dspr}" in note
    (axes,) = drawn[0].axes
    assert [line for line in axes.get_lines() if line.get_xydata().size] == []  # nothing to draw
    said = " ".join(" ".join(text.get_text() for text in axes.texts).split())
    assert said == f"UUAS undefined: {uuas} DSpr undefined: {dspr}"
    assert axes.get_legend() is None  # no legend of lines without a point


def test_the_picture_names_a_row_whose_score_is_undefined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope.research import structural_plots
    from bertscope.research.structural import StructuralResult

    drawn = _keep_figures(monkeypatch)
    rows: list[dict[str, Any]] = [
        {"layer": "static", "root_acc": 0.2, "nspr": 0.1},
        {"layer": 3, "root_acc": 0.5, "nspr": None},
    ]
    result = StructuralResult("depth", rows, {"name": "linear chain", "root_acc": 0.4, "nspr": 0.5}, 10, 5)
    structural_plots.plot_structural(result, tmp_path / "depth.png")
    said = " ".join(" ".join(text.get_text() for text in drawn[0].axes[0].texts).split())
    assert said == (
        "NSpr undefined: layer 3's predicted depths are constant on every 5-50-word test sentence "
        "(Spearman undefined)"
    )
