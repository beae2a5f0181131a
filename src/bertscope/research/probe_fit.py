"""The probes' fits: a standardised logistic regression per fold, in this process or in worker processes.

Kept apart from probe.py so that a worker process imports NumPy and scikit-learn only (no torch, no
model). Workers are joblib's loky processes, fresh interpreters rather than forks: the parent holds
torch's and the tokenizer's threads, and a fork could copy a lock one of them held. The fits are
deterministic, so the scores do not depend on how many processes ran them (tests/test_probe.py holds
parallel exactly equal to one process, in the library and from the command line).

Nor on the CPU. The fits run in float64: in float32 L-BFGS stops where rounding stalls it, ~3x short
of convergence, and which of two nearly equal classes wins depended on the CPU's kernels (the POS
probe's static macro-F1 was 0.759 on AVX2 and 0.770 on AVX-512). And rows that are identical (the
static row gives every occurrence of a word piece the same features) are one point to a linear
classifier: where the training rows at a test row's exact features tie between labels, the classifier's
preference among them is a rounding matter, so the tie is broken by rule (`tie_broken`).

An MLP's fit is another matter: its loss is not convex, and L-BFGS's path through it is chaotic. The
last bit of one product (OpenBLAS's AVX2 and AVX-512 kernels sum in different orders) sends two fits
from the same seed to different minima (weights apart by 0.3-1.8, converged or not, with any L2 penalty
tried), and a control accuracy moved by 0.012. So MLP fits run in a worker process whose arithmetic is
pinned (`pinned_env`): OpenBLAS's Haswell kernels and NumPy's AVX2 loops, the same code on every x86-64
CPU with AVX2 (tests/test_probe.py checks that the fits run there, and the JSON byte-equal, whichever
OpenBLAS kernel the caller runs: Sandybridge, Haswell or SkylakeX).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "LINEAR",
    "MLP_HIDDEN",
    "PARALLEL_MIN_ITEMS",
    "PROBE_TOLERANCE",
    "Classifier",
    "Split",
    "fit_workers",
    "pinned_env",
    "predict",
    "predictions",
    "row_scores",
    "scores_of_rows",
    "tie_broken",
]

Split = tuple[np.ndarray, np.ndarray]
PROBE_TOLERANCE = 1e-6
# Below this many items the fits take seconds and starting worker processes (~1-2 s each) costs more.
PARALLEL_MIN_ITEMS = 2000
MLP_MAX_ITER = 500
MLP_HIDDEN = 64
# The kernels every x86-64 CPU with AVX2 and FMA runs alike; OPENBLAS_CORETYPE names them.
PINNED_BLAS = "Haswell"
PINNED_MARK = "BERTSCOPE_PINNED_ARITHMETIC"


@dataclass(frozen=True)
class Classifier:
    """The probe fitted on standardised features: `linear` (a logistic regression; `capacity` a rank: the
    features are first projected on their top `capacity` principal components, None for all of them) or
    `mlp` (one hidden layer of `capacity` ReLU units, L-BFGS, weights drawn from `seed`)."""

    kind: str = "linear"
    capacity: int | None = None
    seed: int = 0


LINEAR = Classifier()


def fit_workers(n_jobs: int | None, n_items: int, n_rows: int) -> int:
    """Worker processes for `n_rows` rows of fits: n_jobs as scikit-learn reads it (-1: every CPU), or
    with None one per CPU for large probes (at least PARALLEL_MIN_ITEMS items) and 1 otherwise."""
    from joblib import cpu_count

    # joblib's count honours the CPU affinity and a container's CPU quota (a 2-CPU CI box that sees 16)
    cpus = cpu_count()
    if n_jobs is None:
        n_jobs = -1 if n_items >= PARALLEL_MIN_ITEMS else 1
    wanted = cpus if n_jobs == -1 else n_jobs
    return max(1, min(wanted, n_rows))


def row_scores(
    x: np.ndarray,
    y: np.ndarray,
    splits: Sequence[Split],
    fitted: Callable[[], None] | None = None,
    classifier: Classifier = LINEAR,
) -> np.ndarray:
    """(folds, 2) accuracy and macro-F1 of `classifier` (standardised features) on each fold."""
    from threadpoolctl import threadpool_limits

    out = np.empty((len(splits), 2))
    # One BLAS thread: the fits are small, and threads fighting over busy cores made them 10x slower.
    with threadpool_limits(limits=1):
        for row, (train, test) in enumerate(splits):
            out[row] = fold_scores(x, y, train, test, classifier)
            if fitted is not None:
                fitted()
    return out


def fold_scores(
    x: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray, classifier: Classifier = LINEAR
) -> tuple[float, float]:
    """Accuracy and macro-F1 on one fold's test side."""
    from sklearn.metrics import f1_score

    predicted = predict(x[train], y[train], x[test], classifier)
    f1 = f1_score(y[test], predicted, average="macro", zero_division=0)
    return float(np.mean(predicted == y[test])), float(f1)


def predict(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, classifier: Classifier = LINEAR
) -> np.ndarray:
    """The labels `classifier` fitted on (n, d) `x_train` (standardised) gives (m, d) `x_test`, ties
    among identical training rows broken by `tie_broken`."""
    if len(set(y_train)) == 1:
        # A fold whose training side holds one label can only predict it.
        return np.full(len(x_test), y_train[0])
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    pipeline = _pipeline(classifier, *x_train.shape)
    with warnings.catch_warnings():
        if classifier.kind == "mlp":
            # an MLP that memorises its training side stops at its iteration cap: that is its nature
            warnings.simplefilter("ignore", ConvergenceWarning)
        pipeline.fit(x_train.astype(np.float64), y_train)
    predicted = pipeline.predict(x_test.astype(np.float64))
    return tie_broken(predicted, x_train, y_train, x_test)


def _pipeline(classifier: Classifier, n: int, d: int) -> Any:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if classifier.kind == "mlp":
        from sklearn.neural_network import MLPClassifier

        mlp = MLPClassifier(
            hidden_layer_sizes=(classifier.capacity or MLP_HIDDEN,), solver="lbfgs", max_iter=MLP_MAX_ITER,
            tol=PROBE_TOLERANCE, random_state=classifier.seed,
        )  # fmt: skip
        return make_pipeline(StandardScaler(), mlp)
    # Converged (tol 1e-6, not scikit-learn's 1e-4) and in float64: stopped early, or stalled by float32
    # rounding, the fit ends where this CPU's rounding led it and a probe's scores moved between machines.
    probe = LogisticRegression(max_iter=2000, tol=PROBE_TOLERANCE)
    if classifier.capacity is None or classifier.capacity >= min(n, d):
        return make_pipeline(StandardScaler(), probe)
    from sklearn.decomposition import PCA

    # A rank-r linear probe: the top r principal components of the training side (exact SVD), then the
    # logistic regression on them (r at most the training items and the dimensions).
    return make_pipeline(StandardScaler(), PCA(classifier.capacity, svd_solver="full"), probe)


def predictions(
    x: np.ndarray, y: np.ndarray, splits: Sequence[Split], classifier: Classifier = LINEAR
) -> tuple[np.ndarray, np.ndarray]:
    """(true, predicted) labels of every tested item, fold after fold (each predicted by its own fold)."""
    from threadpoolctl import threadpool_limits

    env = pinned_env() if classifier.kind == "mlp" else None
    if env is not None:
        return _pinned_executor(1, env).submit(predictions, x, y, splits, classifier).result()

    with threadpool_limits(limits=1):
        found = [predict(x[train], y[train], x[test], classifier) for train, test in splits]
    return np.concatenate([y[test] for _, test in splits]), np.concatenate(found)


def tie_broken(
    predicted: np.ndarray, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray
) -> np.ndarray:
    """`predicted` with each exact tie decided by rule rather than by the solver's last bits.

    A test row whose features are exactly those of some training rows (a word piece's static row) is one
    point to the classifier; where those rows' most common labels tie (`light` once a NOUN, once a VERB)
    and the classifier picks one of them, the data at that point has no preference: the pick comes from
    the pull of other rows, often by a hair (1e-3 in the POS probe's log-odds) that the CPU's rounding
    decided. Such a row gets, of the tied labels, the one most frequent in the whole training side, then
    the first by name. Every other prediction is the classifier's own.
    """
    labels_at: dict[bytes, Counter[Any]] = {}
    for row, label in zip(np.ascontiguousarray(x_train), y_train, strict=True):
        labels_at.setdefault(row.tobytes(), Counter())[label] += 1
    prior = Counter(y_train.tolist())
    out = predicted.copy()
    for i, row in enumerate(np.ascontiguousarray(x_test)):
        counts = labels_at.get(row.tobytes())
        if counts is None:
            continue
        most = max(counts.values())
        tied = [label for label, n in counts.items() if n == most]
        if len(tied) > 1 and predicted[i] in tied:
            out[i] = min(tied, key=lambda label: (-prior[label], str(label)))
    return out


def scores_of_rows(
    rows: Sequence[tuple[np.ndarray, np.ndarray, Classifier]],
    splits: Sequence[Split],
    *,
    workers: int,
    fitted: Callable[[], None],
) -> list[np.ndarray]:
    """`row_scores` of each (x, y, classifier) in order, on `workers` worker processes when more than
    one (an MLP's: in pinned worker processes, see `pinned_env`); `fitted()` is called once per fold."""
    env = pinned_env() if any(c.kind == "mlp" for _, _, c in rows) else None
    if env is not None:
        executor = _pinned_executor(workers, env)
        futures = [executor.submit(row_scores, x, y, splits, None, c) for x, y, c in rows]
        pinned = []
        for future in futures:
            pinned.append(future.result())
            for _ in splits:
                fitted()
        return pinned
    if workers <= 1:
        return [row_scores(x, y, splits, fitted, c) for x, y, c in rows]
    from joblib import Parallel, delayed

    out = []
    # loky (scikit-learn's own backend): fresh interpreters, not forks, and no need for the caller's
    # script to guard itself with `if __name__ == "__main__"` as multiprocessing's spawn would.
    parallel = Parallel(n_jobs=workers, backend="loky", return_as="generator")
    for scores in parallel(delayed(row_scores)(x, y, splits, None, c) for x, y, c in rows):
        out.append(scores)
        for _ in splits:
            fitted()
    return out


def pinned_env() -> dict[str, str] | None:
    """The environment of a worker whose arithmetic is the same on every x86-64 CPU with AVX2 and FMA:
    OpenBLAS's Haswell kernels, NumPy's loops up to AVX2 (its AVX-512 ones turned off); None where the
    CPU lacks them (or another architecture) and in such a worker already."""
    import os

    if os.environ.get(PINNED_MARK):
        return None
    import importlib

    try:
        umath = importlib.import_module("numpy._core._multiarray_umath")
    except ImportError:  # NumPy 1.x
        umath = importlib.import_module("numpy.core._multiarray_umath")
    __cpu_dispatch__, __cpu_features__ = umath.__cpu_dispatch__, umath.__cpu_features__
    if not (__cpu_features__.get("AVX2") and __cpu_features__.get("FMA3")):
        return None
    wider = [f for f in __cpu_dispatch__ if f.startswith("AVX512") or f == "X86_V4"]
    off = " ".join(f for f in wider if __cpu_features__.get(f))
    return {"OPENBLAS_CORETYPE": PINNED_BLAS, "NPY_DISABLE_CPU_FEATURES": off, PINNED_MARK: "1"}


_PINNED: dict[int, Any] = {}


def _pinned_executor(workers: int, env: dict[str, str]) -> Any:
    """A loky executor of `workers` pinned processes, kept for the next probe. Not loky's reusable
    singleton: joblib's Parallel takes that one over and expects its own attributes on it."""
    from joblib.externals.loky.process_executor import ProcessPoolExecutor

    workers = max(1, workers)
    executor = _PINNED.get(workers)
    if executor is None or getattr(executor, "_broken", None) or getattr(executor, "_shutdown_thread", False):
        executor = _PINNED[workers] = ProcessPoolExecutor(max_workers=workers, env=env)
    return executor
