"""Fitting a structural probe: a rank-k linear map B, trained with Adam on batches of sentences.

Distance (Hewitt & Manning 2019): minimise the mean over sentences of (1/n^2) sum_ij |d(i, j) -
||B(h_i - h_j)||^2|, d the path length in the tree. Depth: the mean of (1/n) sum_i |depth(i) -
||B h_i||^2|. Only a batch of sentences is in memory at once: `read(s)` hands over sentence s's word
vectors (n, d), from a file-backed array.

The gradients are written out (`gradient`; tests/test_structural.py holds them equal to PyTorch's
autograd), so the fit is NumPy alone: one BLAS thread, no torch start-up, a few milliseconds a batch.
With S_ij = sign(predicted - gold) and U = H B^T (n, k), the distance loss's gradient is
(4/n^2) U^T (diag(S 1) - S) H, the depth loss's (2/n) U^T diag(s) H.

It is deterministic (a seed draws B's start and the order of the sentences) and runs in float64, and
the scores are read from predictions rounded to 6 decimals. The loss has a kink at every exact fit, so
vectors that differ in float32's last bits (another CPU's kernels) can send two fits apart; the learning
rate falling to 0 lets each settle, which keeps DSpr and NSpr within 0.002 under such noise on the
examples, and UUAS within an edge or two of the test set's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["DECIMALS", "fit_probe", "gradient", "predict_depths", "predict_distances"]

DECIMALS = 6
BETAS = (0.9, 0.999)
EPSILON = 1e-8


def fit_probe(
    read: Callable[[int], np.ndarray],
    golds: Sequence[np.ndarray],
    *,
    distance: bool,
    rank: int,
    width: int,
    epochs: int,
    batch: int,
    lr: float,
    seed: int,
    step: Callable[[], None] | None = None,
) -> tuple[np.ndarray, float]:
    """(B (rank, width) float64, the last epoch's mean training loss) for sentences 0..len(golds)-1,
    `golds[s]` their (n, n) tree distances (distance) or (n,) depths. Adam (PyTorch's defaults), the
    learning rate falling linearly from `lr` to 0 over the epochs."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(seed)
    b = (rng.random((rank, width)) - 0.5) * 0.1
    moment, second = np.zeros_like(b), np.zeros_like(b)
    t, last = 0, float("nan")
    steps = epochs * -(-len(golds) // batch)
    with threadpool_limits(limits=1):
        for _ in range(epochs):
            order = rng.permutation(len(golds))
            total = 0.0
            for first in range(0, len(order), batch):
                chosen = order[first : first + batch].tolist()
                vectors = [np.asarray(read(s), dtype=np.float64) for s in chosen]
                loss, grad = gradient(b, vectors, [golds[s] for s in chosen], distance=distance)
                t += 1
                moment = BETAS[0] * moment + (1 - BETAS[0]) * grad
                second = BETAS[1] * second + (1 - BETAS[1]) * grad * grad
                corrected = moment / (1 - BETAS[0] ** t)
                # The rate falls linearly to 0: the fit settles instead of jittering at its last steps,
                # so a perturbation of the vectors at float32's last bits (another CPU) moves it little.
                rate = lr * (1.0 - (t - 1) / steps)
                b = b - rate * corrected / (np.sqrt(second / (1 - BETAS[1] ** t)) + EPSILON)
                total += loss * len(chosen)
            last = total / len(golds)
            if step is not None:
                step()
    return b, last


def gradient(
    b: np.ndarray, vectors: Sequence[np.ndarray], golds: Sequence[np.ndarray], *, distance: bool
) -> tuple[float, np.ndarray]:
    """(loss, d loss / d B (rank, width)) of one batch: the mean over its sentences, each given by its
    word vectors (n, width) and its gold (n, n) distances or (n,) depths."""
    loss, grad = 0.0, np.zeros_like(b)
    for h, gold in zip(vectors, golds, strict=True):
        n = len(h)
        u = h @ b.T
        squared = (u * u).sum(axis=1)
        if distance:
            error = squared[:, None] + squared[None, :] - 2.0 * (u @ u.T) - gold
            sign = np.sign(error)
            laplacian = np.diag(sign.sum(axis=1)) - sign
            loss += float(np.abs(error).sum()) / (n * n)
            grad += (4.0 / (n * n)) * (u.T @ laplacian @ h)
        else:
            error = squared - gold
            loss += float(np.abs(error).sum()) / n
            grad += (2.0 / n) * ((u * np.sign(error)[:, None]).T @ h)
    return loss / len(vectors), grad / len(vectors)


def predict_distances(b: np.ndarray, h: np.ndarray) -> np.ndarray:
    """(n, n) squared distances ||B(h_i - h_j)||^2 of one sentence's word vectors (n, d), rounded."""
    u = np.asarray(h, dtype=np.float64) @ b.T
    diff = u[:, None, :] - u[None, :, :]
    return np.round((diff * diff).sum(-1), DECIMALS)


def predict_depths(b: np.ndarray, h: np.ndarray) -> np.ndarray:
    """(n,) squared norms ||B h_i||^2 of one sentence's word vectors (n, d), rounded."""
    u = np.asarray(h, dtype=np.float64) @ b.T
    return np.round((u * u).sum(-1), DECIMALS)
