"""Audit 16 (probes): the structural probes' note, picture, tree checks and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bertscope.cli import app

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
runner = CliRunner()


def _conllu(path: Path, sentences: list[list[str]]) -> Path:
    """A CoNLL-U file of chains: each word's head is the next word, the last word the root."""
    lines = []
    for words in sentences:
        n = len(words)
        for i, word in enumerate(words):
            head = 0 if i == n - 1 else i + 2
            lines.append(f"{i + 1}\t{word}\t_\tNOUN\t_\t_\t{head}\tdep\t_\t_")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("task", "name", "what"), [("distance", "DSpr", "distances"), ("depth", "NSpr", "depths")]
)
def test_the_note_names_constant_predictions_not_the_length(
    tmp_path: Path, task: str, name: str, what: str
) -> None:
    """One 5-word test sentence of one repeated word: the static row predicts the same for every word
    (Spearman undefined), and the note said no test sentence had 5-50 words."""
    test = _conllu(tmp_path / "same.conllu", [["dog"] * 5])
    args = ["probe", "-i", str(EXAMPLES / "trees.conllu"), "--test", str(test), "--task", task]
    got = runner.invoke(app, [*args, "--epochs", "1", "--layers", "-1"])
    assert got.exit_code == 0, got.output
    said = " ".join(got.stdout.split())
    assert (
        f"{name} -: the static row's predicted {what} are constant on every 5-50-word test sentence" in said
    )
    assert "no test sentence has 5-50 words" not in said


def test_the_note_keeps_the_length_reason_where_it_is_the_reason(tmp_path: Path) -> None:
    test = _conllu(tmp_path / "short.conllu", [["dogs", "bark"], ["cats", "sleep", "here"]])
    args = ["probe", "-i", str(EXAMPLES / "trees.conllu"), "--test", str(test), "--task", "depth"]
    got = runner.invoke(app, [*args, "--epochs", "1", "--layers", "-1"])
    assert got.exit_code == 0, got.output
    said = " ".join(got.stdout.split())
    assert "NSpr -: no test sentence has 5-50 words" in said and "constant" not in said


def test_the_picture_shows_a_negative_spearman_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The y axis ran from 0: a layer's NSpr of -0.181 was drawn off the picture."""
    from bertscope.research import structural_plots
    from bertscope.research.structural import StructuralResult

    drawn = []

    def keep(figure, path, *, overwrite):  # type: ignore[no-untyped-def]
        drawn.append(figure)
        return Path(path)

    monkeypatch.setattr(structural_plots, "save_figure", keep)
    rows = [{"layer": "static", "root_acc": 0.2, "nspr": -0.181}, {"layer": 0, "root_acc": 0.5, "nspr": 0.3}]
    baseline = {"name": "linear chain", "root_acc": 0.4, "nspr": 0.5}
    result = StructuralResult("depth", rows, baseline, 10, 5)
    structural_plots.plot_structural(result, tmp_path / "depth.png")
    low, high = drawn[0].axes[0].get_ylim()
    assert low < -0.181 and high == 1.05
