"""Labelled data for probes: words in sentences (`word<TAB>label`, or CoNLL-U) and whole sentences
(`text<TAB>label`).

A word-level file holds one word per line and a blank line between sentences; a word labelled `_` is
context only (it is read by the model but not probed), so a sense task can label just its ambiguous word.
"""

from __future__ import annotations

import re
import sys
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.renamed import renamed_keyword
from ..core.text_files import STDIN, closed_stdin, shown_path
from ..errors import CorpusError, InvalidInput

__all__ = [
    "JoinedWords", "LabelledSentence", "LABEL_FIELD", "read_words", "read_sentences", "text_lines",
    "CONLLU_COLUMNS", "CONTEXT", "conllu_sentences", "shared_sentences", "unseen_labels", "no_pieces",
    "withheld_forms",
]  # fmt: skip

CONTEXT = "_"
CONLLU_COLUMNS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")


class JoinedWords:
    """A sentence given as words, read by the model as the words joined by single spaces."""

    words: tuple[str, ...]

    @property
    def text(self) -> str:
        """The words joined by single spaces: the text the model reads."""
        return " ".join(self.words)

    def spans(self) -> list[tuple[int, int]]:
        """Each word's (start, end) character span in `text`."""
        spans, start = [], 0
        for word in self.words:
            spans.append((start, start + len(word)))
            start += len(word) + 1
        return spans


@dataclass(frozen=True)
class LabelledSentence(JoinedWords):
    """One sentence's words and their labels (`_` = context only, not probed); `source` is where it was
    read ("path:line" of its first word, "" when given in Python), for errors, as a Tree's is."""

    words: tuple[str, ...]
    labels: tuple[str, ...]
    source: str = field(default="", compare=False)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 file (`-`: standard input), a byte-order mark dropped; a bad byte is
    named at its line."""
    stdin = str(path) == STDIN
    if not stdin and not path.is_file():
        what = "it is a folder: give a file inside it" if path.is_dir() else "no such file"
        raise CorpusError(f"cannot read {path}: {what}")
    if stdin and sys.stdin is None:  # started with stdin closed (`<&-`)
        raise CorpusError(closed_stdin("the lines"))
    shown = shown_path(path)  # as the corpus readers name it
    with nullcontext(sys.stdin.buffer) if stdin else path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise CorpusError(
                    f"{shown}:{number}: not UTF-8 text ({exc.reason}); convert the file to UTF-8 "
                    f"(e.g. iconv -f latin1 -t utf-8)"
                ) from None
            yield number, line.rstrip("\n").rstrip("\r")


text_lines = _lines  # public: analysis.py reads its files the same way


# UD: a multiword token's range (3-4), an empty node (3.1; 0.1 before the first word)
_SKIPPED_ID = re.compile(r"[1-9][0-9]*-[1-9][0-9]*|(0|[1-9][0-9]*)\.[1-9][0-9]*")


def conllu_sentences(path: Path, *, width_fix: str = "") -> Iterator[list[tuple[int, list[str]]]]:
    """Each sentence of a CoNLL-U file as its word lines, (line number, the 10 fields), FORM stripped of
    surrounding whitespace: the one reading of the label and the structural probes. Comments, multiword
    ranges and empty nodes are skipped; a malformed, skipped or repeated word ID, an empty FORM or a line
    without 10 fields is refused at its line (`width_fix` ends the last refusal: what the reader needs)."""
    rows: list[tuple[int, list[str]]] = []
    for number, line in _lines(path):
        if not line.strip():
            if rows:
                yield rows
                rows = []
            continue
        fields = line.split("\t")
        if line.startswith("#"):
            continue
        if "-" in fields[0] or "." in fields[0]:
            if not _SKIPPED_ID.fullmatch(fields[0]):
                raise CorpusError(
                    f"{path}:{number}: the ID {fields[0]!r} is neither a word range (3-4) nor an empty "
                    "node (3.1); fix the ID column"
                )
            continue
        if len(fields) != len(CONLLU_COLUMNS):
            raise CorpusError(
                f"{path}:{number}: a CoNLL-U line has 10 tab-separated fields, found {len(fields)}{width_fix}"
            )
        due = len(rows) + 1
        if fields[0] != str(due):  # a repeated or skipped ID would point a head at the wrong word
            again = " again" if fields[0] in {str(k) for k in range(1, due)} else ""
            raise CorpusError(
                f"{path}:{number}: word IDs run 1, 2, 3 ... in each sentence: found {fields[0]!r}{again} "
                f"where {due} was due; fix the ID column"
            )
        # UD forms hold no edge spaces; the model reads the words joined by single spaces
        fields[1] = fields[1].strip()
        if not fields[1]:
            raise CorpusError(f"{path}:{number}: word {due} has an empty FORM; fix the FORM column")
        rows.append((number, fields))
    if rows:
        yield rows


def withheld_forms(path: Path, forms: Iterable[str]) -> None:
    """Refuse a CoNLL-U file whose every FORM is `_`: some UD treebanks ship without their text, and the
    model would read `_ _ _` for every sentence, each probe scoring the underscores."""
    if all(form == CONTEXT for form in forms):
        raise CorpusError(
            f"{path}: its word forms are withheld (every FORM is _); get the treebank's text (UD's tools "
            "restore it) or use another treebank"
        )


def _empty(path: Path, layout: str) -> CorpusError:
    return CorpusError(f"{path} is empty: a probe file holds one {layout} per line")


def _field_index(field: str | int) -> int:
    if isinstance(field, int) or field.isdigit():
        index = int(field) - 1
        if not 1 <= index < len(CONLLU_COLUMNS):
            what = "is the ID column, no label" if index == 0 else "does not exist (a line has 10)"
            named = ", ".join(f"{k + 1} {name}" for k, name in enumerate(CONLLU_COLUMNS) if k)
            raise InvalidInput(
                f"CoNLL-U field {field} {what}; a label is field 2..10 ({named}), by number or name"
            )
        return index
    if field.lower() not in CONLLU_COLUMNS[1:]:
        raise InvalidInput(f"unknown CoNLL-U field {field!r}; choose one of: {', '.join(CONLLU_COLUMNS[1:])}")
    return CONLLU_COLUMNS.index(field.lower())


# What label_field= is, said where column=, its old name, is still given (`core.renamed.renamed_keyword`):
# `column` is a vector column elsewhere (`build_index(column=)`).
LABEL_FIELD = "the CoNLL-U field holding the label"


def read_words(
    path: str | Path,
    *,
    label_field: str | int | None = None,
    column: str | int | None = None,
    test: bool = False,
) -> list[LabelledSentence]:
    """Sentences of labelled words from `word<TAB>label` lines, or from CoNLL-U (`label_field`, default
    upos; `column` is its deprecated old name).

    A `.conllu` file, or any file when `label_field` is given, is read as CoNLL-U, as the structural
    probes read it (`conllu_sentences`): comment lines, multiword ranges (1-2) and empty nodes (1.1) are
    skipped, word IDs run 1, 2, 3 ..., the word is FORM without edge whitespace and the label the field
    asked. `test`: the file is a held-out probe's test file (an error says it is read as the training
    file is).
    """
    label_field = renamed_keyword(
        label_field, column, name="label_field", old="column", caller="read_words", meaning=LABEL_FIELD
    )
    path = Path(path)
    conllu = label_field is not None or path.suffix.lower() == ".conllu"
    index = _field_index("upos" if label_field is None else label_field) if conllu else 1  # 0 is refused
    if conllu:
        width_fix = _test_as_conllu(label_field, index) if test and label_field else ""
        sentences = [_labelled(path, rows, index) for rows in conllu_sentences(path, width_fix=width_fix)]
    else:
        sentences = _word_label_sentences(path)
    if not sentences:
        if conllu and any(line.strip() for _, line in _lines(path)):  # comments, ranges or empty nodes alone
            raise CorpusError(f"{path} has no sentence: a CoNLL-U probe file needs word lines (ID 1, 2, ...)")
        raise _empty(path, "CoNLL-U token" if conllu else "word<TAB>label")
    if conllu:
        withheld_forms(path, (word for sentence in sentences for word in sentence.words))
    return sentences


def _labelled(path: Path, rows: list[tuple[int, list[str]]], index: int) -> LabelledSentence:
    """A CoNLL-U sentence's words (FORM, as `conllu_sentences` gives it) labelled by field `index`."""
    for number, fields in rows:
        if not fields[index].strip():
            raise CorpusError(f"{path}:{number}: an empty label; write _ for a context word's label")
    words = tuple(fields[1] for _, fields in rows)
    labels = tuple(fields[index].strip() for _, fields in rows)
    return LabelledSentence(words, labels, source=f"{path}:{rows[0][0]}")


def _word_label_sentences(path: Path) -> list[LabelledSentence]:
    """The sentences of a `word<TAB>label` file: one word a line, a blank line between sentences."""
    sentences: list[LabelledSentence] = []
    words: list[str] = []
    labels: list[str] = []
    first = 0  # the line of the sentence's first word
    for number, line in _lines(path):
        if not line.strip():
            if words:
                sentences.append(LabelledSentence(tuple(words), tuple(labels), source=f"{path}:{first}"))
                words, labels = [], []
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise CorpusError(
                f"{path}:{number}: expected word<TAB>label (label _ for a context word), found "
                f"{len(fields)} field(s); text<TAB>label lines (a label per text) need "
                "level='sentence' (--level sentence); a CoNLL-U file needs label_field= (--label-field), "
                "e.g. upos"
            )
        word, label = fields
        if len(word.split()) > 1:  # a text<TAB>label file would be read as one "word" a text
            raise CorpusError(
                f"{path}:{number}: the word {word.strip()!r} has spaces, and a word<TAB>label file has "
                "one word a line; text<TAB>label lines (a label per text) need level='sentence' "
                "(--level sentence)"
            )
        if not word.strip() or not label.strip():
            raise CorpusError(f"{path}:{number}: an empty word or label; write _ for a context word's label")
        if not words:
            first = number
        words.append(word.strip())
        labels.append(label.strip())
    if words:
        sentences.append(LabelledSentence(tuple(words), tuple(labels), source=f"{path}:{first}"))
    return sentences


def _test_as_conllu(label_field: str | int, index: int) -> str:
    """Why a test file is read as CoNLL-U, and the fix: label_field= reads every file of a probe so."""
    return (
        f"; label_field={label_field!r} reads the test file as CoNLL-U, as it reads the training file: give "
        f"test= as CoNLL-U too (10 fields, the word in field 2, the label in field {index + 1}), or write "
        "both files as word<TAB>label lines and leave label_field= out"
    )


def read_sentences(path: str | Path) -> tuple[list[str], list[str]]:
    """Texts and labels from `text<TAB>label` lines (blank lines and # comments skipped)."""
    path = Path(path)
    texts, labels = [], []
    for number, line in _lines(path):
        if not line.strip() or line.startswith("#"):
            continue
        text, tab, label = line.rpartition("\t")
        if not tab or not text.strip() or not label.strip():
            raise CorpusError(f"{path}:{number}: expected text<TAB>label")
        texts.append(text.strip())
        labels.append(label.strip())
    if not texts:
        raise _empty(path, "text<TAB>label")
    return texts, labels


def as_sentences(data: Sequence[Any]) -> list[LabelledSentence]:
    """Sentences given in Python: each a list of (word, label) pairs."""
    out = []
    for number, sentence in enumerate(data):
        pairs = list(sentence)
        if not pairs or any(len(p) != 2 or not str(p[0]).strip() for p in pairs):
            raise InvalidInput(f"sentence {number} must be a non-empty list of (word, label) pairs")
        out.append(LabelledSentence(tuple(str(w) for w, _ in pairs), tuple(str(label) for _, label in pairs)))
    return out


def shared_sentences(train_texts: Iterable[str], test_texts: Iterable[str], *, train: Any, test: Any) -> int:
    """How many distinct test sentences (by the text the model reads) are training sentences too, said
    in a warning when any is (all of them: the scores are training scores). `train`, `test`: what was
    given, named in the message (a path, or data given in Python)."""
    tested = set(test_texts)
    shared = len(tested & set(train_texts))
    if shared:
        test_name = str(test) if isinstance(test, (str, Path)) else "the test data"
        train_name = str(train) if isinstance(train, (str, Path)) else "the training data"
        which = (
            f"the 1 distinct sentence of {test_name} occurs"
            if shared == len(tested) == 1
            else f"all {shared} distinct sentences of {test_name} occur"
            if shared == len(tested)
            else f"{shared} of the {len(tested)} distinct sentences of {test_name} also occur"
        )
        warnings.warn(
            f"{which} in {train_name}: the probe is scored on sentences it trained on; give a test file "
            "of other sentences (or drop the shared ones from one file) for a held-out score",
            stacklevel=3,
        )
    return shared


def unseen_labels(train_labels: Iterable[str], test_labels: Sequence[str], *, train: Any, test: Any) -> int:
    """How many test items carry a label no training item has (no probe can predict it), said in a
    warning; refused when every test item does (the scores would be 0 by construction, not a result).
    `train`, `test`: what was given, named in the message (a path, or data given in Python)."""
    known = set(train_labels)
    unseen = Counter(label for label in test_labels if label not in known)
    n_unseen = sum(unseen.values())
    if not n_unseen:
        return 0
    test_name = str(test) if isinstance(test, (str, Path)) else "the test data"
    train_name = str(train) if isinstance(train, (str, Path)) else "the training data"
    counted = ", ".join(
        f"{label}: {n}" for label, n in sorted(unseen.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    if n_unseen == len(test_labels):
        raise InvalidInput(
            f"no label of {test_name} ({counted}) occurs in {train_name} (labels: "
            f"{', '.join(sorted(known))}): a probe predicts only labels it trained on; give a test file "
            "labelled with the training file's labels"
        )
    warnings.warn(
        f"{n_unseen} of the {len(test_labels)} items of {test_name} carry labels {train_name} never has "
        f"({counted}); no probe can predict them (they count as errors)",
        stacklevel=3,
    )
    return n_unseen


def no_pieces(where: str, word: str, number: int) -> InvalidInput:
    """The refusal of a word (`number`, from 1, in its sentence at `where`: FILE:LINE of the sentence's
    first word) the tokenizer gives no pieces: one wording for the label and the structural probes."""
    return InvalidInput(
        f"{where}: word {number} of this sentence, {word!r}, gives no word pieces to the model's "
        "tokenizer; fix or remove it"
    )
