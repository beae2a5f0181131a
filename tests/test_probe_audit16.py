"""Audit 16 (probes): the structural probes' note, picture, tree checks and refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from bertscope.cli import app
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.research.conllu import Tree, check_trees, tree_depths, tree_distances
from bertscope.research.structural import structural_probe

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


GOOD = Tree(("the", "cat", "sat", "down", "today"), ("DET", "NOUN", "VERB", "ADV", "NOUN"), (1, 2, -1, 2, 2))


def test_numpy_heads_are_read_as_a_tree_not_a_crash_after_the_work(bundled: Any) -> None:
    """Heads given as a NumPy array passed the checks, then Tree.root (heads.index) crashed the depth
    probe after every layer's vectors were computed."""
    arrayed = Tree(GOOD.words, GOOD.upos, np.array(GOOD.heads))  # type: ignore[arg-type]
    checked = check_trees([arrayed], "test")
    assert checked[0].heads == (1, 2, -1, 2, 2) and all(type(h) is int for h in checked[0].heads)
    with pytest.warns(UserWarning, match="occurs? in the training data"):
        result = structural_probe(bundled, [arrayed] * 6, [arrayed], task="depth", layers="3", epochs=1)
    assert result.rows[0]["root_acc"] is not None


@pytest.mark.parametrize(
    ("call", "heads", "said"),
    [
        (tree_distances, (1, 0), r"^the heads \(1, 0\): the tree has 0 roots"),
        (tree_distances, (5, -1), r"^the heads \(5, -1\): word 1 has head 5, no other word of the sentence"),
        (tree_depths, (5, -1), r"^the heads \(5, -1\): word 1 has head 5, no other word of the sentence"),
        (tree_depths, (1, 0, -1, 2, 2), r"^the heads \(1, 0, -1, 2, 2\) form a cycle, not a tree"),
        (tree_distances, "ab", r"^heads 'ab': give a sequence of 0-based word indices"),
    ],
)
def test_the_tree_helpers_refuse_what_is_no_tree_in_one_line(call: Any, heads: Any, said: str) -> None:
    """tree_distances gave distances for a cycle (that tree_depths refused); a head outside the sentence
    raised a raw ValueError or IndexError."""
    with pytest.raises(InvalidInput, match=said):
        call(heads)


@pytest.mark.parametrize("task", [[], ["--task", "depth", "--epochs", "1"]])
def test_a_treebank_without_its_text_is_refused_in_one_line(tmp_path: Path, task: list[str]) -> None:
    """Every FORM `_` (as some UD treebanks ship): the model read `_ _ _ _` and the probes scored it."""
    from console import run_main

    withheld = _conllu(tmp_path / "withheld.conllu", [["_"] * 5, ["_"] * 6] * 3)
    ran = run_main("probe", "-i", str(withheld), "--layers", "-1", *task)
    said = " ".join(ran.stderr.split())
    assert ran.code != 0 and "Traceback" not in ran.stderr
    assert f"{withheld}: its word forms are withheld (every FORM is _); get the treebank's text" in said


def test_the_readers_refuse_withheld_forms_but_read_a_few_underscore_words(tmp_path: Path) -> None:
    from bertscope.errors import CorpusError
    from bertscope.research.conllu import read_trees
    from bertscope.research.probe_data import read_words

    withheld = _conllu(tmp_path / "withheld.conllu", [["_"] * 5])
    for read in (read_trees, read_words):
        with pytest.raises(CorpusError, match="its word forms are withheld"):
            read(withheld)
    some = _conllu(tmp_path / "some.conllu", [["a", "_", "b", "_", "c"]])
    assert len(read_trees(some)) == 1 and len(read_words(some)) == 1


def test_a_conllu_file_of_comments_alone_has_no_sentence_not_empty(tmp_path: Path) -> None:
    """A label probe file of comment lines only was called empty; the structural reader says it has no
    sentence."""
    from console import run_main

    comments = tmp_path / "comments_only.conllu"
    comments.write_text("# sent_id = 1\n# text = withheld\n\n", encoding="utf-8")
    ran = run_main("probe", "-i", str(comments))
    said = " ".join(ran.stderr.split())
    assert ran.code != 0 and "Traceback" not in ran.stderr
    assert f"{comments} has no sentence" in said and "is empty" not in said


@pytest.mark.parametrize("field", ["1", "11"])
def test_a_label_field_that_is_no_label_names_the_fields_that_are(field: str) -> None:
    """--label-field 1 said "CoNLL-U field 1 does not exist", though field 1 is the ID column."""
    from console import run_main

    ran = run_main("probe", "-i", str(EXAMPLES / "trees.conllu"), "--label-field", field)
    said = " ".join(ran.stderr.split())
    assert ran.code != 0 and "Traceback" not in ran.stderr
    assert "a label is field 2..10 (2 form, 3 lemma, 4 upos," in said
    assert ("is the ID column" in said) == (field == "1")


@pytest.mark.parametrize("lr", ["a", None, True, [0.1]])
def test_a_learning_rate_of_another_type_is_refused_in_one_line(bundled: Any, lr: Any) -> None:
    """lr="a" raised Python's TypeError from `lr > 0` (and lr=True trained at 1)."""
    with pytest.raises(InvalidInput, match=r"^lr=.*: a learning rate is a number above 0 \(e.g. 0.005\)$"):
        structural_probe(bundled, EXAMPLES / "trees.conllu", lr=lr)


def test_tree_word_vectors_reads_subword_given_as_text(tiny_models: dict[str, Any], tmp_path: Path) -> None:
    """subword="first_last" (text, not the enum) pooled a mean into first_last's width: a broadcast error."""
    from bertscope.core._enums import SubwordPooling
    from bertscope.research.conllu import read_trees
    from bertscope.research.structural import tree_word_vectors

    model, trees = tiny_models["bert"], read_trees(EXAMPLES / "trees.conllu")[:2]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    got = tree_word_vectors(model, trees, tmp_path / "a", layers=[1], subword="first_last")
    want = tree_word_vectors(model, trees, tmp_path / "b", layers=[1], subword=SubwordPooling.FIRST_LAST)
    for a, b in [(got[0], want[0]), (got[1][0], want[1][0])]:
        with a, b:
            np.testing.assert_array_equal(a[0 : len(a)], b[0 : len(b)])
    with pytest.raises(InvalidSpec, match="unknown subword pooling .firstlast."):
        tree_word_vectors(model, trees, tmp_path / "a", layers=[1], subword="firstlast")


def test_label_field_zero_is_refused_and_form_is_listed(tmp_path: Path) -> None:
    from bertscope.research.probe_data import read_words

    path = tmp_path / "t.conllu"
    path.write_text("1\tcats\tcat\tNOUN\tNNS\t_\t0\troot\t_\t_\n\n")
    with pytest.raises(InvalidInput, match="field 0 does not exist"):
        read_words(path, label_field=0)
    with pytest.raises(InvalidInput, match="choose one of: form, lemma, upos"):
        read_words(path, label_field="nope")
