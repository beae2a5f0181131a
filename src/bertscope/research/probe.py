"""Linear probes per layer (Tenney et al. 2019) with control tasks and selectivity (Hewitt & Liang 2019).

Each item (a labelled word in its sentence, or a labelled sentence) becomes one vector per layer from one
forward pass per batch: a row `static` (the input embedding rows alone, no position or segment), then
layer 0 (the embedding layer's output) to L. A logistic regression (scikit-learn, features standardised)
is scored by k-fold cross-validation grouped by sentence (no sentence in both train and test, labels
stratified where possible): accuracy and macro-F1 per layer, the mean over folds with a 95% t-interval
(cut to [0, 1]). The fits are CPU-independent (float64, converged, and exact ties on identical rows
broken by rule: see probe_fit).

`majority` is the same cross-validation's baseline: each fold predicts its training majority. The control
task gives each word type (sentence level: each distinct text) one fixed random label drawn from the
task's label distribution (seeded); selectivity = task accuracy - control accuracy. A high accuracy with
a high control accuracy says the probe memorised word identity, not that the layer encodes the property.

With `test` the probe is trained on one file and scored on another (held out, one split), and the probe
may be an MLP or a sweep of sizes (capacity): see probe_eval.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core._enums import StrEnum, SubwordPooling
from ..core.layers import LayerSpec, parse_layers
from ..core.pooling import pool_words
from ..core.progress import step_progress
from ..errors import InvalidInput
from .probe_data import CONTEXT, LabelledSentence, as_sentences, read_sentences, read_words
from .probe_eval import ProbeKind, classifiers, control_table, held_out_summary, label_report
from .probe_fit import LINEAR, Classifier, Split, fit_workers, predictions, scores_of_rows
from .states import layer_states, static_rows

if TYPE_CHECKING:
    from ..core.encoder import Encoder

__all__ = ["Level", "ProbeKind", "ProbeResult", "probe", "word_features", "sentence_features"]


class Level(StrEnum):
    """What a probe labels: a word in its sentence, or a whole sentence."""

    WORD = "word"
    SENTENCE = "sentence"


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


@dataclass
class ProbeResult:
    """Per row (static, then each layer): accuracy, macro-F1 (with 95% intervals), control and selectivity.

    `n_groups` distinct texts of the `n_sentences` labelled ones given: a repeated text is one group, so
    it is never on both sides of a fold. Held out (`n_test` > 0): `folds` is 0, `n_items` and `labels`
    count the training file, `n_test` and `test_labels` the test file. `per_label`: see
    probe_eval.label_report."""

    level: str
    n_items: int
    n_groups: int
    folds: int
    labels: dict[str, int]
    majority: float
    rows: list[dict[str, Any]]
    settings: dict[str, Any] = field(default_factory=dict)
    n_sentences: int = 0
    n_test: int = 0
    test_labels: dict[str, int] | None = None
    per_label: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: level, n_items, majority, rows, and how the probe was run."""
        return {
            "level": self.level,
            "n_items": self.n_items,
            "n_sentences": self.n_sentences,
            "n_groups": self.n_groups,
            "folds": self.folds,
            "labels": self.labels,
            "evaluation": "held_out" if self.n_test else "folds",
            "n_test": self.n_test,
            "test_labels": self.test_labels,
            "majority": self.majority,
            "rows": self.rows,
            "per_label": self.per_label,
            "settings": self.settings,
        }


def word_features(
    model: Encoder,
    sentences: Sequence[LabelledSentence],
    *,
    layers: Sequence[int],
    subword: SubwordPooling = SubwordPooling.MEAN,
    progress: bool | None = None,
) -> Features:
    """Every labelled word's vector per layer (its pieces pooled by `subword`) and its static rows."""
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
        spans = sentence.spans()
        groups_of = [_pieces(tok, spans[i], sentence.words[i], number) for i in probed]
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
            "no word is labelled (every label is _): label the words to probe, _ marks context only"
        )
    return Features(
        np.concatenate(static), np.concatenate(stacked), list(layers), labels, groups, types, n_texts
    )


def _pieces(tok: Any, span: tuple[int, int], word: str, number: int) -> list[int]:
    start, end = span
    found = [
        j
        for j, ((a, b), special) in enumerate(zip(tok.offsets, tok.special_mask, strict=True))
        if not special and b > a and start <= a < end
    ]
    if not found:
        raise InvalidInput(f"sentence {number}: the word {word!r} gives no word pieces; remove it or fix it")
    return found


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


def probe(
    model: Encoder,
    data: str | Path | Sequence[Any],
    *,
    level: Level | str = Level.WORD,
    layers: LayerSpec = "all",
    folds: int = 5,
    control: bool = False,
    subword: SubwordPooling | str = SubwordPooling.MEAN,
    column: str | None = None,
    seed: int = 0,
    progress: bool | None = None,
    n_jobs: int | None = None,
    test: str | Path | Sequence[Any] | None = None,
    kind: ProbeKind | str | None = None,
    sweep: str | None = None,
    per_label: bool = False,
    per_label_layer: int | str | None = None,
) -> ProbeResult:
    """Probes on every layer asked (plus `static`) for a labelled file or list: cross-validated by
    sentence, or with `test` trained on `data` and scored on `test` (held out, no folds).

    `data` is a path (word level: `word<TAB>label`, blank line between sentences, or CoNLL-U with
    `column`; sentence level: `text<TAB>label`), or in Python: word level a list of sentences of
    (word, label) pairs, sentence level a list of (text, label) pairs; `test` the same. `kind` (linear,
    mlp) and `sweep` (`hidden=16,64` or `rank=8,32`) choose the probes (see probe_eval); `per_label` adds
    per-label figures and the confusion matrix of the best row, or of layer `per_label_layer`. `n_jobs`
    processes run the fits (scikit-learn's convention, -1 every CPU; None: every CPU from 2,000 items,
    else this process).
    """
    chosen = list(dict.fromkeys(parse_layers(layers, model.n_layers)))
    if folds < 2:
        raise InvalidInput(f"--folds {folds}: cross-validation needs at least 2 folds")
    _check_seed(seed)
    probes = classifiers(kind, sweep, seed=seed)
    usable_jobs = isinstance(n_jobs, int) and not isinstance(n_jobs, bool) and (n_jobs == -1 or n_jobs >= 1)
    if n_jobs is not None and not usable_jobs:
        raise InvalidInput(f"n_jobs={n_jobs!r}: give a number of processes (1 or more), or -1 for every CPU")
    report_row = _report_row(per_label_layer, chosen, model.n_layers)
    read: dict[str, Any] = dict(level=level, layers=chosen, subword=subword, column=column, progress=progress)
    feats = _features(model, data, folds=None if test is not None else folds, **read)
    n_train = None
    if test is not None:
        tested = _features(model, test, folds=None, **read, checked=False)
        n_train = len(feats.labels)
        feats = _joined(feats, tested)
    if control:
        _check_types(feats, _name(data))
    how = SubwordPooling.parse(subword, what="subword pooling")
    settings = {"model": model.loaded.source, "subword": how.value, "seed": seed, "control": control}
    if test is not None:
        settings["test"] = _name(test)
    return evaluate(
        feats, Level.parse(level, what="probe level"), folds=folds, control=control, seed=seed,
        settings=settings, progress=progress, n_jobs=n_jobs, probes=probes, n_train=n_train,
        per_label=per_label, report_row=report_row,
    )  # fmt: skip


def _name(data: Any) -> str:
    return str(data) if isinstance(data, (str, Path)) else "the data given"


def _features(
    model: Encoder,
    data: Any,
    *,
    level: Level | str,
    layers: list[int],
    subword: SubwordPooling | str,
    column: str | None,
    progress: bool | None,
    folds: int | None,
    checked: bool = True,
) -> Features:
    """One file's (or list's) features; `checked`: it is a training side (two labels or more; with
    `folds`, as many distinct sentences)."""
    kind = Level.parse(level, what="probe level")
    how = SubwordPooling.parse(subword, what="subword pooling")
    name = _name(data)
    if kind is Level.WORD:
        sentences = read_words(data, column=column) if isinstance(data, (str, Path)) else as_sentences(data)
        labels = [label for s in sentences for label in s.labels if label != CONTEXT]
        groups = {s.text for s in sentences if set(s.labels) != {CONTEXT}}
    else:
        texts, labels = read_sentences(data) if isinstance(data, (str, Path)) else _pairs(data)
        groups = set(texts)
    if checked:
        _check_labels(labels, name, folds or 0)
    if folds is not None:
        _check_groups(groups, name, folds)
    if kind is Level.WORD:
        return word_features(model, sentences, layers=layers, subword=how, progress=progress)
    return sentence_features(model, texts, labels, layers=layers, progress=progress)


def _joined(train: Features, test: Features) -> Features:
    """The training items, then the test items: one held-out split over both."""
    return Features(
        np.concatenate([train.static, test.static]), np.concatenate([train.layers, test.layers]),
        train.layer_numbers, train.labels + test.labels, train.groups + test.groups,
        train.types + test.types, train.n_texts,
    )  # fmt: skip


def _report_row(layer: int | str | None, chosen: list[int], n_layers: int) -> int | str | None:
    """The row `--per-label-layer` names (a layer probed, or static); None: the best row."""
    if layer is None or str(layer).strip().lower() == "static":
        return None if layer is None else "static"
    rows = "static, " + ", ".join(str(k) for k in chosen)
    try:
        number = int(layer)
    except ValueError:
        number = None
    if number is not None and -n_layers - 1 <= number <= n_layers:
        number = number % (n_layers + 1)
        if number in chosen:
            return number
    raise InvalidInput(
        f"--per-label-layer {layer}: this probe's rows are {rows}; give one of them (or leave it out for "
        "the best row)"
    )


def _check_seed(seed: Any) -> None:
    # numpy and scikit-learn take seeds 0 .. 2**32 - 1 and fail deep inside with anything else
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise InvalidInput(f"--seed {seed!r}: a seed is a whole number from 0 to {2**32 - 1}")


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
        raise InvalidInput(
            f"{name} has {len(groups)} distinct labelled sentence(s) but --folds {folds} needs at least "
            f"{folds} (no sentence is split across folds); add sentences or lower --folds"
        )


def _check_types(feats: Features, name: str) -> None:
    if len(set(feats.types)) < 2:
        raise InvalidInput(
            f"the control task gives each word type one random label, and every probed item in {name} is "
            f"{feats.types[0]!r}: its control has one label; probe several word types, or leave out --control"
        )


def control_labels(types: Sequence[str], labels: Sequence[str], *, seed: int = 0) -> list[str]:
    """Hewitt & Liang's control task: each type one fixed label drawn from the labels' distribution."""
    table = control_table(types, labels, seed=seed)
    return [table[t] for t in types]


def fold_splits(labels: Sequence[str], groups: Sequence[str], folds: int, seed: int) -> list[Split]:
    """(train, test) index arrays: grouped (a group never on both sides), stratified by label."""
    from sklearn.model_selection import StratifiedGroupKFold

    y = np.asarray(labels)
    splitter = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "least populated class has fewer members than folds"
        return list(splitter.split(np.zeros(len(y)), y, np.asarray(groups)))


def evaluate(
    feats: Features,
    level: Level,
    *,
    folds: int,
    control: bool,
    seed: int,
    settings: dict[str, Any] | None = None,
    progress: bool | None = None,
    n_jobs: int | None = None,
    probes: Sequence[Classifier] = (LINEAR,),
    n_train: int | None = None,
    per_label: bool = False,
    report_row: int | str | None = None,
) -> ProbeResult:
    """Score every row of `feats` with every probe of `probes` on the same grouped folds, or with
    `n_train` on one held-out split (the first `n_train` items train, the others test), and the control
    task when asked; the fits run on `n_jobs` processes (see `probe_fit.fit_workers`). With `per_label`,
    the per-label figures of row `report_row` (a layer, "static", or None: the best row)."""
    y = np.asarray(feats.labels)
    if n_train is None:
        splits = fold_splits(feats.labels, feats.groups, folds, seed)
        y_control = np.asarray(control_labels(feats.types, feats.labels, seed=seed)) if control else None
    else:
        splits = [(np.arange(n_train), np.arange(n_train, len(y)))]
        table = control_table(
            feats.types[:n_train], feats.labels[:n_train], seed=seed, unseen=feats.types[n_train:]
        )
        y_control = np.asarray([table[t] for t in feats.types]) if control else None
    majority = float(np.mean([_majority_accuracy(y[train], y[test]) for train, test in splits]))
    named: list[tuple[str | int, np.ndarray]] = [("static", feats.static)]
    named += [(k, feats.layers[:, i]) for i, k in enumerate(feats.layer_numbers)]
    tasks = [y] if y_control is None else [y, y_control]
    fits = [(x, labels, c) for c in probes for _, x in named for labels in tasks]
    workers = fit_workers(n_jobs, len(y), len(fits))
    with step_progress(len(fits) * len(splits), "fitting probes", enabled=progress) as fitted:
        scores = iter(scores_of_rows(fits, splits, workers=workers, fitted=fitted))
    n_test = 0 if n_train is None else len(y) - n_train
    rows = []
    for c in probes:
        for layer, _ in named:
            task = next(scores)
            summary = _summary(task) if n_train is None else held_out_summary(task, n_test)
            row: dict[str, Any] = {"layer": layer, "probe": c.kind, "capacity": c.capacity, **summary}
            if y_control is not None:
                ctrl = next(scores)
                row["control_accuracy"] = float(ctrl[:, 0].mean())
                row["selectivity"] = row["accuracy"] - row["control_accuracy"]
            else:
                row["control_accuracy"] = row["selectivity"] = None
            rows.append(row)
    train_y = y if n_train is None else y[:n_train]
    result = ProbeResult(
        level=level.value,
        n_items=len(train_y),
        n_sentences=feats.n_texts or len(set(feats.groups)),
        n_groups=len(set(feats.groups if n_train is None else feats.groups[:n_train])),
        folds=folds if n_train is None else 0,
        labels=_counts(train_y),
        majority=majority,
        rows=rows,
        settings=settings or {},
        n_test=n_test,
        test_labels=None if n_train is None else _counts(y[n_train:]),
    )
    if per_label:
        result.per_label = _per_label(result, named, y, splits, probes, report_row)
    return result


def _counts(y: np.ndarray) -> dict[str, int]:
    names, counts = np.unique(y, return_counts=True)
    return {str(n): int(c) for n, c in zip(names, counts, strict=True)}


def _per_label(
    result: ProbeResult,
    named: list[tuple[str | int, np.ndarray]],
    y: np.ndarray,
    splits: list[Split],
    probes: Sequence[Classifier],
    layer: int | str | None,
) -> dict[str, Any]:
    """Per-label figures of `layer`'s best probe (None: the best row; the first of equals)."""
    candidates = [r for r in result.rows if layer is None or r["layer"] == layer]
    row = max(candidates, key=lambda r: r["accuracy"])  # max keeps the first of equals
    x = dict(named)[row["layer"]]
    probe_of = probes[[(c.kind, c.capacity) for c in probes].index((row["probe"], row["capacity"]))]
    y_true, y_pred = predictions(x, y, splits, probe_of)
    return label_report(y_true, y_pred, row=row)


def _majority_accuracy(train: np.ndarray, test: np.ndarray) -> float:
    names, counts = np.unique(train, return_counts=True)
    return float(np.mean(test == names[np.argmax(counts)]))


def _summary(scores: np.ndarray) -> dict[str, Any]:
    from scipy import stats

    k = len(scores)
    half = stats.t.ppf(0.975, k - 1) * scores.std(axis=0, ddof=1) / np.sqrt(k)
    mean = scores.mean(axis=0)
    # A score is a share: the t-interval is cut to [0, 1] (5 folds at 0.95 would reach past 1).
    low, high = np.clip(mean - half, 0.0, 1.0), np.clip(mean + half, 0.0, 1.0)
    return {
        "accuracy": float(mean[0]),
        "accuracy_ci": [float(low[0]), float(high[0])],
        "macro_f1": float(mean[1]),
        "macro_f1_ci": [float(low[1]), float(high[1])],
    }
