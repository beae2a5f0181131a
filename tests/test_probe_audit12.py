"""The probes' audit 12: held-out test labels the training file never has (warned of, refused when every
test label is one), an all-`_` test file named, a non-finite lr and an overflowed structural fit refused,
a structural probe trained on almost no word pairs noted, and one wording (with the line) for a word that
gives no word pieces in the label and the structural probes."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from bertscope.errors import InvalidInput
from bertscope.research.conllu import Tree
from bertscope.research.probe import probe
from bertscope.research.structural import structural_probe
from console import run_main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TREES = EXAMPLES / "trees.conllu"
TREES_TEST = EXAMPLES / "trees-test.conllu"
NOUNS = ["cat", "dog", "bird", "fish", "cow", "horse"]
VERBS = ["runs", "sleeps", "eats", "sings", "jumps", "swims"]


@pytest.fixture(scope="module", autouse=True)
def _one_blas_thread():  # type: ignore[no-untyped-def]
    """The structural fits multiply small matrices: one BLAS thread is faster on two busy cores."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _words_file(path: Path, sentences: list[list[tuple[str, str]]]) -> Path:
    path.write_text("\n".join("".join(f"{w}\t{lab}\n" for w, lab in s) for s in sentences), encoding="utf-8")
    return path


def _train() -> list[list[tuple[str, str]]]:
    return [[("the", "_"), (n, "NOUN"), (v, "VERB")] for n, v in zip(NOUNS, VERBS, strict=True)]


def _conllu(path: Path, sentences: list[list[tuple[str, str]]]) -> Path:
    blocks = []
    for sentence in sentences:
        rows = [
            f"{i}\t{w}\t_\t{u}\t_\t_\t{0 if i == 1 else 1}\tdep\t_\t_" for i, (w, u) in enumerate(sentence, 1)
        ]
        blocks.append("\n".join(rows) + "\n")
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path


# --- 1: test labels the training file never has


def test_unseen_test_labels_are_warned_of_and_all_unseen_refused(tiny_models: dict[str, Any]) -> None:
    model = tiny_models["bert"]
    test = [
        [("a", "_"), ("cow", "NOUN"), ("sleeps", "VERB")],
        [("a", "ADJ"), ("red", "ADJ"), ("hen", "NOUN")],
    ]
    with pytest.warns(UserWarning) as said:
        result = probe(model, _train(), test=test, layers="0", progress=False)
    told = [str(w.message) for w in said if "never has" in str(w.message)]
    assert told == [
        "2 of the 5 items of the test data carry labels the training data never has (ADJ: 2); no probe can "
        "predict them (they count as errors)"
    ]
    assert result.n_test == 5
    with pytest.raises(
        InvalidInput, match=r"^no label of the test data \(ADJ: 2\) occurs in the training data"
    ):
        probe(model, _train(), test=[[("red", "ADJ"), ("big", "ADJ")]], layers="0", progress=False)


def test_cli_names_both_files_when_no_test_label_is_a_training_label(tmp_path: Path) -> None:
    train = _words_file(tmp_path / "tr.tsv", _train())
    test = _words_file(
        tmp_path / "te.tsv", [[("the", "_"), ("bank", "park")], [("a", "_"), ("bank", "park")]]
    )
    ran = run_main("probe", "-i", str(train), "--test", str(test), "--layers", "0")
    assert ran.code == 1
    assert ran.stderr.strip() == (
        f"error: no label of {test} (park: 2) occurs in {train} (labels: NOUN, VERB): a probe predicts "
        "only labels it trained on; give a test file labelled with the training file's labels"
    )


def test_conllu_label_field_warns_of_unseen_upos_as_one_line(tmp_path: Path) -> None:
    train = _conllu(
        tmp_path / "tr.conllu", [[(n, "NOUN"), (v, "VERB")] for n, v in zip(NOUNS, VERBS, strict=True)]
    )
    test = _conllu(tmp_path / "te.conllu", [[("cow", "NOUN"), ("sleeps", "VERB"), ("!", "PUNCT")]])
    ran = run_main("probe", "-i", str(train), "--test", str(test), "--label-field", "upos", "--layers", "0")
    assert ran.code == 0, ran.stderr
    lines = [line for line in ran.stderr.splitlines() if "never has" in line]
    assert lines == [
        f"warning: 1 of the 3 items of {test} carry labels {train} never has (PUNCT: 1); no probe can "
        "predict them (they count as errors)"
    ]


# --- 2: a test file with no labelled word is named


def test_an_all_context_test_file_is_named(tiny_models: dict[str, Any], tmp_path: Path) -> None:
    test = _words_file(tmp_path / "none.tsv", [[("the", "_"), ("cat", "_")]])
    with pytest.raises(InvalidInput, match="^" + re.escape(f"{test} labels no word (every label is _)")):
        probe(tiny_models["bert"], _train(), test=test, layers="0", progress=False)


# --- 3 and 4: the structural probe's lr, overflowed fits, and almost no word pairs


@pytest.mark.parametrize("lr", [float("inf"), float("nan")])
def test_a_non_finite_lr_is_refused(tiny_models: dict[str, Any], lr: float) -> None:
    with pytest.raises(InvalidInput, match=r"^lr=(inf|nan): a learning rate is a finite number above 0"):
        structural_probe(tiny_models["bert"], TREES, TREES_TEST, lr=lr, epochs=1)


def test_an_overflowed_training_loss_is_refused_not_scored(bundled: Any) -> None:
    """One line says it (NumPy's overflow warnings do not precede it), not a UUAS of 0 as a score."""
    told = r"^the static row probe's training loss became nan with lr=1e\+200: .* lower lr= \(e.g. 1e\+198\)$"
    with warnings.catch_warnings(), pytest.raises(InvalidInput, match=told):
        warnings.simplefilter("error", RuntimeWarning)
        structural_probe(bundled, TREES, TREES_TEST, layers="0", lr=1e200, epochs=1, rank=8, progress=False)


@pytest.mark.parametrize(("task", "told"), [("distance", "give 1 word pairs"), ("depth", "give 3 words")])
def test_training_on_almost_no_word_pairs_is_noted(tiny_models: dict[str, Any], task: str, told: str) -> None:
    train = [Tree(("Hi",), ("INTJ",), (-1,)), Tree(("Go", "!"), ("VERB", "PUNCT"), (-1, 0))]
    with pytest.warns(UserWarning, match=f"the training sentences of the training trees {told} to fit"):
        structural_probe(tiny_models["bert"], train, TREES_TEST, task=task, layers="0", epochs=1, rank=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a real treebank: no note
        structural_probe(tiny_models["bert"], TREES, TREES_TEST, task=task, layers="0", epochs=1, rank=4)


# --- 5: a word with no word pieces, one wording in both probes


def test_a_word_without_pieces_is_worded_alike_with_its_line(bundled: Any, tmp_path: Path) -> None:
    path = _words_file(tmp_path / "zw.tsv", [*_train()[:2], [("the", "_"), ("cat", "NOUN"), ("\u200b", "X")]])
    with pytest.raises(InvalidInput) as label:
        probe(bundled, path, layers="0", folds=2, progress=False)
    tail = (
        "word 3 of this sentence, '\\u200b', gives no word pieces to the model's tokenizer; fix or remove it"
    )
    assert str(label.value) == f"{path}:9: {tail}"
    with pytest.raises(InvalidInput) as given:
        probe(bundled, [[("a", "X"), ("\u200b", "Y")], *_train()], layers="0", folds=2, progress=False)
    assert str(given.value) == "the data given: sentence 1: " + tail.replace("word 3", "word 2")
    trees = tmp_path / "zw.conllu"
    _conllu(trees, [[("Hi", "INTJ")], [("the", "DET"), ("cat", "NOUN"), ("\u200b", "X")]])
    with pytest.raises(InvalidInput) as tree:
        structural_probe(bundled, TREES_TEST, trees, layers="0", epochs=1)
    assert str(tree.value) == f"{trees}:3: {tail}"
