"""The probes' fits: a standardised logistic regression per fold, in this process or in worker processes.

Kept apart from probe.py so that a worker process imports NumPy and scikit-learn only (no torch, no
model). Workers are joblib's loky processes, fresh interpreters rather than forks: the parent holds
torch's and the tokenizer's threads, and a fork could copy a lock one of them held. The fits are
deterministic, so the scores do not depend on how many processes ran them (tests/test_probe.py holds
parallel exactly equal to one process, in the library and from the command line).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["PARALLEL_MIN_ITEMS", "PROBE_TOLERANCE", "Split", "fit_workers", "row_scores", "scores_of_rows"]

Split = tuple[np.ndarray, np.ndarray]
PROBE_TOLERANCE = 1e-6
# Below this many items the fits take seconds and starting worker processes (~1-2 s each) costs more.
PARALLEL_MIN_ITEMS = 2000


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
    x: np.ndarray, y: np.ndarray, splits: Sequence[Split], fitted: Callable[[], None] | None = None
) -> np.ndarray:
    """(folds, 2) accuracy and macro-F1 of a standardised logistic regression on each fold."""
    from threadpoolctl import threadpool_limits

    out = np.empty((len(splits), 2))
    # One BLAS thread: the fits are small, and threads fighting over busy cores made them 10x slower.
    with threadpool_limits(limits=1):
        for row, (train, test) in enumerate(splits):
            out[row] = fold_scores(x, y, train, test)
            if fitted is not None:
                fitted()
    return out


def fold_scores(x: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray) -> tuple[float, float]:
    """Accuracy and macro-F1 on one fold's test side."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if len(set(y[train])) == 1:
        # A fold whose training side holds one label can only predict it.
        predicted = np.full(len(test), y[train][0])
    else:
        # Converged (tol 1e-6, not scikit-learn's 1e-4): stopped early, the fit ends where this CPU's
        # rounding led it and a probe's scores moved by 0.01 between machines; converged, they agree.
        probe = LogisticRegression(max_iter=2000, tol=PROBE_TOLERANCE)
        classifier = make_pipeline(StandardScaler(), probe)
        predicted = classifier.fit(x[train], y[train]).predict(x[test])
    f1 = f1_score(y[test], predicted, average="macro", zero_division=0)
    return float(np.mean(predicted == y[test])), float(f1)


def scores_of_rows(
    rows: Sequence[tuple[np.ndarray, np.ndarray]],
    splits: Sequence[Split],
    *,
    workers: int,
    fitted: Callable[[], None],
) -> list[np.ndarray]:
    """`row_scores` of each (x, y) in order, on `workers` worker processes when more than one;
    `fitted()` is called once per fold fitted."""
    if workers <= 1:
        return [row_scores(x, y, splits, fitted) for x, y in rows]
    from joblib import Parallel, delayed

    out = []
    # loky (scikit-learn's own backend): fresh interpreters, not forks, and no need for the caller's
    # script to guard itself with `if __name__ == "__main__"` as multiprocessing's spawn would.
    parallel = Parallel(n_jobs=workers, backend="loky", return_as="generator")
    for scores in parallel(delayed(row_scores)(x, y, splits) for x, y in rows):
        out.append(scores)
        for _ in splits:
            fitted()
    return out
