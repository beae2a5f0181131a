"""Scoring a probe's features: every row (static, then each layer) with every probe, on grouped folds or
one held-out split, with the majority baseline and the control task (see probe.py for how to read them).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.progress import step_progress
from ..errors import InvalidSpec
from .probe_eval import control_table, held_out_summary, label_report, wilson
from .probe_features import Features, Level
from .probe_fit import LINEAR, Classifier, Split, fit_workers, predictions, scores_of_rows

__all__ = ["ProbeResult", "control_labels", "evaluate", "fold_splits"]


@dataclass
class ProbeResult:
    """Per row (static, then each layer): accuracy, macro-F1 (with 95% intervals), control and selectivity.

    `n_groups` distinct texts of the `n_sentences` labelled ones given: a repeated text is one group, so
    it is never on both sides of a fold. Held out (`n_test` > 0): `folds` is 0, `n_items` and `labels`
    count the training file, `n_test` and `test_labels` the test file. `per_label`: see
    probe_eval.label_report.

    A row's intervals: `accuracy_ci` is the union of `accuracy_ci_folds` (the folds' t-interval, cut to
    [0, 1]; None held out) and `accuracy_ci_items` (Wilson's over the items scored: the pooled out-of-fold
    predictions, or the test file's); `macro_f1_ci` is the folds' t-interval (None held out), and
    `macro_f1_ci_zero_width` says when the folds agreed and it has no width (not certainty)."""

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
    _check_ranks(probes, feats.static.shape[1], min(len(train) for train, _ in splits))
    majority = float(np.mean([_majority_accuracy(y[train], y[test]) for train, test in splits]))
    named: list[tuple[str | int, np.ndarray]] = [("static", feats.static)]
    named += [(k, feats.layers[:, i]) for i, k in enumerate(feats.layer_numbers)]
    tasks = [y] if y_control is None else [y, y_control]
    fits = [(x, labels, c) for c in probes for _, x in named for labels in tasks]
    workers = fit_workers(n_jobs, len(y), len(fits))
    with step_progress(len(fits) * len(splits), "fitting probes", enabled=progress) as fitted:
        scores = iter(scores_of_rows(fits, splits, workers=workers, fitted=fitted))
    n_test = 0 if n_train is None else len(y) - n_train
    sizes = np.array([len(test) for _, test in splits])
    rows = []
    for c in probes:
        for layer, _ in named:
            task = next(scores)
            summary = _summary(task, sizes) if n_train is None else held_out_summary(task, n_test)
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


def _check_ranks(probes: Sequence[Classifier], width: int, n_train: int) -> None:
    """A rank above min(`width`, `n_train`) is refused: the probe would be cut to full rank in silence and
    its row labelled with a rank it never had."""
    usable = min(width, n_train)
    over = [
        c.capacity for c in probes if c.kind == "linear" and c.capacity is not None and c.capacity > usable
    ]
    if over:
        why = (
            f"{width} feature dimensions"
            if width <= n_train
            else f"{n_train} items in the smallest training side"
        )
        raise InvalidSpec(
            f"a rank-{over[0]} linear probe needs {over[0]} principal components, and {why} give at most "
            f"{usable}: sweep ranks up to {usable} ({usable} is the full-rank probe)"
        )


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


def _summary(scores: np.ndarray, sizes: np.ndarray) -> dict[str, Any]:
    """Mean accuracy and macro-F1 of (folds, 2) `scores` on folds of `sizes` test items, with intervals.

    The folds' t-interval alone reads as certainty where the folds agree (5 folds at 1.000 give
    1.000-1.000 from 40 items), so the accuracy's interval is the union of it and Wilson's interval over
    the pooled out-of-fold predictions (every item is predicted once, by the fold that tests it: correct of
    `sizes.sum()`), as wide as the items allow. Macro-F1 is not a share of items: its interval stays the
    folds' t-interval, flagged `macro_f1_ci_zero_width` where the folds agree."""
    from scipy import stats

    k = len(scores)
    half = stats.t.ppf(0.975, k - 1) * scores.std(axis=0, ddof=1) / np.sqrt(k)
    mean = scores.mean(axis=0)
    # A score is a share: the t-interval is cut to [0, 1] (5 folds at 0.95 would reach past 1).
    low, high = np.clip(mean - half, 0.0, 1.0), np.clip(mean + half, 0.0, 1.0)
    # each fold's accuracy is its correct items over its test items: the pooled count, without a refit
    correct = int(np.rint(scores[:, 0] * sizes).sum())
    items = wilson(correct, int(sizes.sum()))
    folds = [float(low[0]), float(high[0])]
    return {
        "accuracy": float(mean[0]),
        "accuracy_ci": [min(folds[0], items[0]), max(folds[1], items[1])],
        "accuracy_ci_folds": folds,
        "accuracy_ci_items": items,
        "macro_f1": float(mean[1]),
        "macro_f1_ci": [float(low[1]), float(high[1])],
        "macro_f1_ci_zero_width": bool(high[1] - low[1] == 0.0),
    }
