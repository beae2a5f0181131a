"""Audit 26e (structural and label probes): one reading of CoNLL-U word lines for both probes (IDs and
FORMs)."""

from __future__ import annotations

from pathlib import Path

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


def test_the_label_probe_refuses_a_bad_word_id_in_one_line(tmp_path: Path) -> None:
    from console import run_main

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
