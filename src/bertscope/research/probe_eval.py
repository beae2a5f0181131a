"""How a label probe is scored beside the grouped folds: held out on a second file, label by label, and
across probe capacity (Hewitt & Liang 2019).

- Held out: one split, trained on every item of one file and scored on every item of another; the
  accuracy's 95% interval is Wilson's score interval over the test items (the folds' t-interval needs
  several folds), macro-F1 has none. `wilson` is the one Wilson interval: the folds' rows use it too
  (probe_score), over their pooled out-of-fold predictions.
- The control task across two files: each word type of the training file gets its label as in the folds
  (`control_table`, one seeded draw per type in sorted order from the training labels' distribution); the
  types seen only in the test file then draw theirs from the same generator, sorted, so a type has one
  control label on both sides and the test file's new types are as random as the others.
- Per label: precision, recall, F1, support and the confusion matrix of one row's predictions
  (scikit-learn's metrics; the folds' out-of-fold predictions pooled, or the test file's).
- Capacity: `linear` (a logistic regression; a rank sweep projects the standardised features on their top
  r principal components first; a rank above the features' width or the smallest training side is
  refused, as its row would be the full-rank probe's) or `mlp` (one hidden layer); a sweep gives every
  layer a row per size, each with its control task, so selectivity shows whether a layer holds the
  property or a big probe memorises word identity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core._enums import StrEnum
from ..errors import InvalidSpec
from .probe_fit import MLP_HIDDEN, Classifier

__all__ = [
    "ProbeKind",
    "classifiers",
    "control_table",
    "held_out_summary",
    "label_report",
    "wilson",
]

SWEEPS = {"hidden": "mlp", "rank": "linear"}


class ProbeKind(StrEnum):
    """The classifier a probe fits: a logistic regression, or a one-hidden-layer perceptron."""

    LINEAR = "linear"
    MLP = "mlp"


def classifiers(kind: ProbeKind | str | None, sweep: str | None, *, seed: int) -> list[Classifier]:
    """The probes to fit, in row order: one (`kind`, linear by default) or one per size of `sweep`
    (`hidden=16,64,256`: MLPs of that many hidden units; `rank=8,32`: linear probes of that rank)."""
    chosen = None if kind is None else _kind(kind)
    if sweep is None:
        chosen = chosen or ProbeKind.LINEAR
        capacity = MLP_HIDDEN if chosen is ProbeKind.MLP else None
        return [Classifier(chosen.value, capacity, seed)]
    name, equals, values = sweep.partition("=")
    name = name.strip().lower()
    # keyword forms (sweep=, kind=): the command line reads them as its flags (cli.wording.as_flags)
    allowed = "hidden=16,64,256 (kind='mlp') or rank=8,32,128 (kind='linear')"
    if not equals or name not in SWEEPS:
        raise InvalidSpec(f"sweep={sweep!r}: give a size and its values, {allowed}")
    sizes = [v.strip() for v in values.split(",")]
    if not sizes or not all(v.isdigit() and int(v) >= 1 for v in sizes):
        raise InvalidSpec(f"sweep={sweep!r}: the {name} values are whole numbers from 1, e.g. {allowed}")
    if len(set(sizes)) != len(sizes):
        raise InvalidSpec(f"sweep={sweep!r}: a {name} is given twice; give each once")
    wanted = ProbeKind(SWEEPS[name])
    if chosen is not None and chosen is not wanted:
        raise InvalidSpec(
            f"sweep={sweep!r} sweeps a {wanted.value} probe, not kind={chosen.value!r}: give "
            f"kind={wanted.value!r} or drop kind="
        )
    return [Classifier(wanted.value, int(v), seed) for v in sizes]


def _kind(kind: ProbeKind | str) -> ProbeKind:
    try:
        return ProbeKind.parse(kind, what="kind")
    except InvalidSpec:
        choices = ", ".join(member.value for member in ProbeKind)
        raise InvalidSpec(f"unknown kind={kind!r}; choose one of: {choices}") from None


def control_table(
    types: Sequence[str], labels: Sequence[str], *, seed: int = 0, unseen: Sequence[str] = ()
) -> dict[str, str]:
    """Hewitt & Liang's control task: each type of `types` one label drawn from `labels`' distribution
    (seeded, types in sorted order), then each type of `unseen` not among them, from the same generator."""
    names, counts = np.unique(np.asarray(labels), return_counts=True)
    share = counts / counts.sum()
    rng = np.random.default_rng(seed)
    table: dict[str, str] = {}
    for batch in (sorted(set(types)), sorted(set(unseen) - set(types))):
        drawn = rng.choice(len(names), size=len(batch), p=share)
        table |= {t: str(names[i]) for t, i in zip(batch, drawn, strict=True)}
    return table


def wilson(correct: int, n: int, z: float = 1.959963984540054) -> list[float]:
    """Wilson's 95% score interval of a share `correct` / `n`."""
    if n == 0:
        return [0.0, 1.0]
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [float(max(0.0, centre - half)), float(min(1.0, centre + half))]


def held_out_summary(scores: np.ndarray, n_test: int) -> dict[str, Any]:
    """Accuracy (Wilson interval over the `n_test` items) and macro-F1 of one held-out split's (1, 2), with
    the keys of the folds' rows (probe_score._summary): no fold interval and no macro-F1 interval."""
    accuracy = float(scores[0, 0])
    items = wilson(round(accuracy * n_test), n_test)
    return {
        "accuracy": accuracy,
        "accuracy_ci": items,
        "accuracy_ci_folds": None,
        "accuracy_ci_items": items,
        "macro_f1": float(scores[0, 1]),
        "macro_f1_ci": None,
        "macro_f1_ci_zero_width": None,
    }


def label_report(y_true: np.ndarray, y_pred: np.ndarray, *, row: dict[str, Any]) -> dict[str, Any]:
    """Per label (sorted, every label true or predicted): precision, recall, F1, support, and the
    confusion matrix (rows true, columns predicted), for the probe of `row` (its layer, probe, capacity)."""
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support
    from sklearn.utils.multiclass import unique_labels

    labels = unique_labels(y_true, y_pred)
    precision, recall, f1, support = precision_recall_fscore_support(
        y_true, y_pred, labels=labels, zero_division=0
    )
    return {
        "layer": row["layer"],
        "probe": row["probe"],
        "capacity": row["capacity"],
        "labels": [str(label) for label in labels],
        "precision": [float(v) for v in precision],
        "recall": [float(v) for v in recall],
        "f1": [float(v) for v in f1],
        "support": [int(v) for v in support],
        "confusion": confusion_matrix(y_true, y_pred, labels=labels).tolist(),
    }
