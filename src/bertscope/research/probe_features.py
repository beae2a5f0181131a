"""A probe's inputs: each labelled item's vector per layer (and its static rows), read from a file or a
Python list, with the checks that make a bad file one clear line (see probe.py for the probe itself).

Word level: every labelled word's word pieces pooled (`subword`) at each asked layer, from one forward
pass per batch; sentence level: each text's mean over its tokens. Items keep their group (the sentence's
text: a repeated text is one group) and type (the word, or the text) for the folds and the control task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core._enums import LevelName, SubwordPooling
from ..core.pooling import pool_words
from ..errors import InvalidInput, InvalidSpec
from .probe_data import CONTEXT, LabelledSentence, as_sentences, no_pieces, read_sentences, read_words
from .states import layer_states, static_rows
from .word_pieces import word_pieces

if TYPE_CHECKING:
    from ..core.encoder import Encoder

__all__ = [
    "Features",
    "Level",
    "joined",
    "read_features",
    "sentence_features",
    "source_name",
    "word_features",
]


class Level(LevelName):
    """What a probe labels: a word in its sentence, or a whole sentence. Named as the corpus levels are
    (`words`, as `bertscope.Level.WORDS`); `word` reads as `words`, and `Level.WORD` is its old name."""

    WORDS = "words"
    SENTENCE = "sentence"
    WORD = "words"  # an alias: the old member name


@dataclass
class Features:
    """Probe inputs: static (n, e), layers (n, k, d) for `layer_numbers`, and per item its group and type;
    `n_texts` labelled sentences were given (repeats of one text are one group)."""

    static: np.ndarray
    layers: np.ndarray
    layer_numbers: list[int]
    labels: list[str]
    groups: list[str]
    types: list[str]
    n_texts: int = 0


def word_features(
    model: Encoder,
    sentences: Sequence[LabelledSentence],
    *,
    layers: Sequence[int],
    subword: SubwordPooling = SubwordPooling.MEAN,
    progress: bool | None = None,
    name: str = "the data given",
) -> Features:
    """Every labelled word's vector per layer (its pieces pooled by `subword`) and its static rows;
    `name` (the file, or "the data given") names the sentences in an error."""
    static, stacked, labels, groups, types = [], [], [], [], []
    n_texts = 0
    texts = (s.text for s in sentences)
    for number, (sentence, (tok, states)) in enumerate(
        zip(sentences, layer_states(model, texts, progress=progress, total=len(sentences)), strict=True)
    ):
        probed = [i for i, label in enumerate(sentence.labels) if label != CONTEXT]
        if not probed:
            continue
        n_texts += 1
        groups_of = _pieces(tok, sentence, probed, sentence.source or f"{name}: sentence {number + 1}")
        ids = [tok.ids[j] for group in groups_of for j in group]
        rows = static_rows(model, ids)
        start = 0
        offsets = []
        for group in groups_of:
            offsets.append(list(range(start, start + len(group))))
            start += len(group)
        static.append(pool_words(rows, offsets, subword))
        stacked.append(np.stack([pool_words(states[k], groups_of, subword) for k in layers], axis=1))
        labels += [sentence.labels[i] for i in probed]
        groups += [sentence.text] * len(probed)
        types += [sentence.words[i] for i in probed]
    if not labels:
        raise InvalidInput(
            f"{name} labels no word (every label is _): label the words to probe, _ marks context only"
        )
    return Features(
        np.concatenate(static), np.concatenate(stacked), list(layers), labels, groups, types, n_texts
    )


def _pieces(tok: Any, sentence: LabelledSentence, probed: list[int], where: str) -> list[list[int]]:
    """The token indices of each probed word (`word_pieces`); `where` names its sentence ("FILE:LINE" of
    its first word, or "the data given: sentence 4", counted from 1) where a word gets none, worded as
    the structural probe words it (`probe_data.no_pieces`)."""
    groups = word_pieces(tok, sentence.spans())
    for i in probed:
        if not groups[i]:
            raise no_pieces(where, sentence.words[i], i + 1)
    return [groups[i] for i in probed]


def sentence_features(
    model: Encoder,
    texts: Sequence[str],
    labels: Sequence[str],
    *,
    layers: Sequence[int],
    progress: bool | None = None,
) -> Features:
    """Each text's mean over its tokens (specials included) per layer, and the mean of its static rows."""
    static, stacked = [], []
    for tok, states in layer_states(model, texts, progress=progress, total=len(texts)):
        static.append(static_rows(model, tok.ids).mean(axis=0))
        stacked.append(states[list(layers)].mean(axis=1))
    return Features(
        np.stack(static), np.stack(stacked), list(layers), list(labels), list(texts), list(texts), len(texts)
    )


def source_name(data: Any) -> str:
    return str(data) if isinstance(data, (str, Path)) else "the data given"


def read_features(
    model: Encoder,
    data: Any,
    *,
    level: Level | str,
    layers: list[int],
    subword: SubwordPooling | str,
    label_field: str | None,
    progress: bool | None,
    folds: int | None,
    checked: bool = True,
) -> Features:
    """One file's (or list's) features; `checked`: it is a training side (two labels or more; with
    `folds`, as many distinct sentences), else a held-out probe's test side."""
    kind = Level.parse(level, what="level")
    how = SubwordPooling.parse(subword, what="subword pooling")
    name = source_name(data)
    if kind is Level.WORDS:
        sentences = (
            read_words(data, label_field=label_field, test=not checked)
            if isinstance(data, (str, Path))
            else as_sentences(data)
        )
        labels = [label for s in sentences for label in s.labels if label != CONTEXT]
        groups = {s.text for s in sentences if set(s.labels) != {CONTEXT}}
    else:
        _check_sentence_level(data, label_field, name)
        texts, labels = read_sentences(data) if isinstance(data, (str, Path)) else _pairs(data)
        groups = set(texts)
    if checked:
        _check_labels(labels, name, folds or 0)
    if folds is not None:
        _check_groups(groups, name, folds)
    if kind is Level.WORDS:
        return word_features(model, sentences, layers=layers, subword=how, progress=progress, name=name)
    return sentence_features(model, texts, labels, layers=layers, progress=progress)


def _check_sentence_level(data: Any, label_field: str | None, name: str) -> None:
    """A CoNLL-U file and `label_field` label words, so level='sentence' would read each token line as a
    text labelled by its last column: refused."""
    if label_field is not None:
        raise InvalidSpec(
            f"label_field={label_field!r} names a CoNLL-U column, a word's label; a sentence-level file is "
            "text<TAB>label lines: leave label_field out, or drop level='sentence' to probe words"
        )
    if isinstance(data, (str, Path)) and Path(data).suffix.lower() == ".conllu":
        raise InvalidSpec(
            f"{name} is a CoNLL-U file, labelled word by word: drop level='sentence' to probe its words, "
            "or give text<TAB>label lines"
        )


def joined(train: Features, test: Features) -> Features:
    """The training items, then the test items: one held-out split over both."""
    return Features(
        np.concatenate([train.static, test.static]), np.concatenate([train.layers, test.layers]),
        train.layer_numbers, train.labels + test.labels, train.groups + test.groups,
        train.types + test.types, train.n_texts,
    )  # fmt: skip


def _pairs(data: Sequence[Any]) -> tuple[list[str], list[str]]:
    if any(not isinstance(p, (tuple, list)) or len(p) != 2 for p in data):
        raise InvalidInput("sentence-level data in Python is a list of (text, label) pairs")
    return [str(t) for t, _ in data], [str(label) for _, label in data]


def _check_labels(labels: Sequence[str], name: str, folds: int) -> None:
    if not labels:
        raise InvalidInput(f"{name} labels no item (every label is _): label the words to probe")
    if len(set(labels)) < 2:
        raise InvalidInput(
            f"{name} has one label ({labels[0]!r}) on all {len(labels)} items; "
            "a probe needs two labels or more"
        )


def _check_groups(groups: set[str], name: str, folds: int) -> None:
    if len(groups) < folds:
        # folds= is at least 2 (probe() refuses fewer): lowering it is a fix only down to that floor
        fewest = "add sentences with other texts (2 folds, the fewest, need 2 distinct ones)"
        fix = f"add sentences or lower folds= to {len(groups)}" if len(groups) >= 2 else fewest
        raise InvalidInput(
            f"{name} has {len(groups)} distinct labelled sentence(s) but folds={folds} needs at least "
            f"{folds} (no sentence is split across folds); {fix}"
        )
