"""Linear probes per layer (Tenney et al. 2019) with control tasks and selectivity (Hewitt & Liang 2019).

Each item (a labelled word in its sentence, or a labelled sentence) becomes one vector per layer from one
forward pass per batch: a row `static` (the input embedding rows alone, no position or segment), then
layer 0 (the embedding layer's output) to L. A logistic regression (scikit-learn, features standardised)
is scored by k-fold cross-validation grouped by sentence (no sentence in both train and test, labels
stratified where possible): accuracy and macro-F1 per layer, the mean over folds with a 95% t-interval
(cut to [0, 1]); accuracy's interval is widened to Wilson's over the pooled out-of-fold predictions, so
folds that agree do not read as certainty (probe_score). The fits are CPU-independent (float64,
converged, and exact ties on identical rows broken by rule: see probe_fit).

`majority` is the same cross-validation's baseline: each fold predicts its training majority. The control
task gives each word type (sentence level: each distinct text) one fixed random label drawn from the
task's label distribution (seeded); selectivity = task accuracy - control accuracy. A high accuracy with
a high control accuracy says the probe memorised word identity, not that the layer encodes the property.

With `test` the probe is trained on one file and scored on another (held out, one split), and the probe
may be an MLP or a sweep of sizes (capacity): see probe_eval.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core._enums import SubwordPooling
from ..core.cpu import usable_cpus
from ..core.layers import LayerSpec, parse_layers
from ..core.renamed import renamed_keyword
from ..errors import InvalidInput
from .probe_data import LABEL_FIELD, shared_sentences, unseen_labels
from .probe_eval import ProbeKind, classifiers
from .probe_features import (
    Features,
    Level,
    joined,
    read_features,
    sentence_features,
    source_name,
    word_features,
)
from .probe_score import ProbeResult, control_labels, evaluate, fold_splits
from .states import layered

if TYPE_CHECKING:
    from ..core.encoder import Encoder

# The features, the scoring and the result live in probe_features and probe_score; their public names
# stay importable from here, where the probe has always been.
__all__ = [
    "Features",
    "Level",
    "ProbeKind",
    "ProbeResult",
    "control_labels",
    "evaluate",
    "fold_splits",
    "probe",
    "sentence_features",
    "word_features",
]


def probe(
    model: Encoder,
    data: str | Path | Sequence[Any],
    *,
    level: Level | str = Level.WORDS,
    layers: LayerSpec = "all",
    folds: int = 5,
    control: bool = False,
    subword: SubwordPooling | str = SubwordPooling.MEAN,
    label_field: str | None = None,
    seed: int = 0,
    progress: bool | None = None,
    n_jobs: int | None = None,
    test: str | Path | Sequence[Any] | None = None,
    kind: ProbeKind | str | None = None,
    sweep: str | None = None,
    per_label: bool = False,
    per_label_layer: int | str | None = None,
    column: str | None = None,
) -> ProbeResult:
    """Probes on every layer asked (plus `static`) for a labelled file or list: cross-validated by
    sentence, or with `test` trained on `data` and scored on `test` (held out, no folds: the distinct
    test sentences also in `data` are counted in settings `test_overlap` and warned of; test items with
    a label `data` never has are warned of, and refused when every test item has one).

    `data` is a path (word level: `word<TAB>label`, blank line between sentences, or CoNLL-U with the
    label in the field `label_field`, e.g. upos: `column` is its deprecated old name; sentence level:
    `text<TAB>label`), or in Python: word level a list of sentences of (word, label) pairs, sentence
    level a list of (text, label) pairs; `test` the same. `kind` (linear, mlp) and `sweep` (`hidden=16,64`
    or `rank=8,32`) choose the probes (see probe_eval); `per_label` adds per-label figures and the
    confusion matrix of the best row, or of layer `per_label_layer`. `n_jobs` processes run the fits
    (scikit-learn's convention, -1 every CPU; None: every CPU from 2,000 items, else this process).
    """
    layered(model, "probing layers")
    label_field = renamed_keyword(
        label_field, column, name="label_field", old="column", caller="probe", meaning=LABEL_FIELD
    )
    chosen = list(dict.fromkeys(parse_layers(layers, model.n_layers)))
    if folds < 2:
        raise InvalidInput(f"folds={folds}: cross-validation needs at least 2 folds")
    _check_seed(seed)
    probes = classifiers(kind, sweep, seed=seed)
    usable_jobs = isinstance(n_jobs, int) and not isinstance(n_jobs, bool) and (n_jobs == -1 or n_jobs >= 1)
    if n_jobs is not None and not usable_jobs:
        raise InvalidInput(f"n_jobs={n_jobs!r}: give a number of processes (1 or more), or -1 for every CPU")
    if n_jobs is not None and n_jobs > (cpus := usable_cpus()):  # as threads= is bounded
        word = "CPU" if cpus == 1 else "CPUs"
        raise InvalidInput(f"n_jobs={n_jobs}: this machine has {cpus} {word}; give at most {cpus}, or -1")
    report_row = _report_row(per_label_layer, chosen, model.n_layers)
    read: dict[str, Any] = dict(
        level=level, layers=chosen, subword=subword, label_field=label_field, progress=progress
    )
    feats = read_features(model, data, folds=None if test is not None else folds, **read)
    n_train = None
    overlap = 0
    if test is not None:
        tested = read_features(model, test, folds=None, **read, checked=False)
        overlap = shared_sentences(feats.groups, tested.groups, train=data, test=test)
        unseen_labels(feats.labels, tested.labels, train=data, test=test)
        n_train = len(feats.labels)
        feats = joined(feats, tested)
    if control:
        _check_types(feats, source_name(data))
    how = SubwordPooling.parse(subword, what="subword pooling")
    settings = {"model": model.loaded.source, "subword": how.value, "seed": seed, "control": control}
    if test is not None:
        settings["test"] = source_name(test)
        settings["test_overlap"] = overlap
    return evaluate(
        feats, Level.parse(level, what="level"), folds=folds, control=control, seed=seed,
        settings=settings, progress=progress, n_jobs=n_jobs, probes=probes, n_train=n_train,
        per_label=per_label, report_row=report_row,
    )  # fmt: skip


def _report_row(layer: int | str | None, chosen: list[int], n_layers: int) -> int | str | None:
    """The row `per_label_layer` names (a layer probed, or static); None: the best row."""
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
        f"per_label_layer={layer!r}: this probe's rows are {rows}; give one of them (or leave it out for "
        "the best row)"
    )


def _check_seed(seed: Any) -> None:
    # numpy and scikit-learn take seeds 0 .. 2**32 - 1 and fail deep inside with anything else
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise InvalidInput(f"seed={seed!r}: a seed is a whole number from 0 to {2**32 - 1}")


def _check_types(feats: Features, name: str) -> None:
    if len(set(feats.types)) < 2:
        raise InvalidInput(
            f"the control task gives each word type one random label, and every probed item in {name} is "
            f"{feats.types[0]!r}: its control has one label; probe several word types, or drop control=True"
        )
