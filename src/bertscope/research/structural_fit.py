"""Fitting a structural probe: a rank-k linear map B, trained with Adam on batches of sentences.

Distance (Hewitt & Manning 2019): minimise the mean over sentences of (1/n^2) sum_ij |d(i, j) -
||B(h_i - h_j)||^2|, d the path length in the tree. Depth: the mean of (1/n) sum_i |depth(i) -
||B h_i||^2|. |e| is read as the pseudo-Huber sqrt(e^2 + SMOOTH^2) - SMOOTH: the paper's L1 wherever a
prediction is off by more than a quarter of an edge, smooth near an exact fit. Only a batch of
sentences is in memory at once: `read(s)` hands over sentence s's word vectors (n, d), read from a
file (row_file.RowFile).

The gradients are written out (`gradient`; tests/test_structural.py holds them equal to PyTorch's
autograd), so the fit is NumPy alone: one BLAS thread, no torch start-up, a few milliseconds a batch.
With S_ij = e_ij / sqrt(e_ij^2 + SMOOTH^2) (the sign of the error, smoothed) and U = H B^T (n, k), the
distance loss's gradient is (4/n^2) U^T (diag(S 1) - S) H, the depth loss's (2/n) U^T diag(s) H.

It is deterministic (a seed draws B's start and the order of the sentences) and runs in float64, and
the scores are read from predictions rounded to 6 decimals. The plain L1 loss has a kink at every exact
fit, so vectors that differ in float32's last bits (another CPU's kernels, another runtime) sent two fits
apart by an edge or three of UUAS on the examples; smoothed within SMOOTH of a fit, with the learning rate
falling to 0, noise of 1e-6 and 1e-5 (relative) on every hidden state leaves every score of the examples'
table unchanged to 3 decimals, so the docs' figures are the same on every CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = [
    "DECIMALS",
    "SMOOTH",
    "fit_probe",
    "gradient",
    "predict_depths",
    "predict_distances",
    "zero_map_loss",
]

DECIMALS = 6
# The pseudo-Huber scale, in tree edges: L1 beyond it, quadratic within it.
SMOOTH = 0.25
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
            soft = np.sqrt(error * error + SMOOTH * SMOOTH)
            sign = error / soft
            laplacian = np.diag(sign.sum(axis=1)) - sign
            loss += float((soft - SMOOTH).sum()) / (n * n)
            grad += (4.0 / (n * n)) * (u.T @ laplacian @ h)
        else:
            error = squared - gold
            soft = np.sqrt(error * error + SMOOTH * SMOOTH)
            loss += float((soft - SMOOTH).sum()) / n
            grad += (2.0 / n) * ((u * (error / soft)[:, None]).T @ h)
    return loss / len(vectors), grad / len(vectors)


def zero_map_loss(golds: Sequence[np.ndarray], *, distance: bool) -> float:
    """The training loss of B = 0, which predicts every distance (depth) 0: the mean over sentences of
    `gradient`'s loss with every prediction 0. A fit whose last epoch ends above it has diverged."""
    total = 0.0
    for gold in golds:
        soft = np.sqrt(np.asarray(gold, dtype=np.float64) ** 2 + SMOOTH * SMOOTH) - SMOOTH
        n = len(gold)
        total += float(soft.sum()) / (n * n if distance else n)
    return total / max(len(golds), 1)


def predict_distances(b: np.ndarray, h: np.ndarray) -> np.ndarray:
    """(n, n) squared distances ||B(h_i - h_j)||^2 of one sentence's word vectors (n, d), rounded.

    From the Gram form |u_i|^2 + |u_j|^2 - 2 u_i . u_j of U = H B^T (n, k), as the fit's `gradient`
    reads them, built in place: memory is one (n, n) float64 array, never the (n, n, k) differences
    (1 GB for one sentence of 700 words at rank 128). Clipped at 0 (rounding can dip below it) with an
    exact 0 diagonal."""
    u = np.asarray(h, dtype=np.float64) @ b.T
    squared = (u * u).sum(axis=1)
    out = u @ u.T
    out *= -2.0
    out += squared[:, None]
    out += squared[None, :]
    np.maximum(out, 0.0, out=out)
    np.fill_diagonal(out, 0.0)
    return np.round(out, DECIMALS, out=out)


def predict_depths(b: np.ndarray, h: np.ndarray) -> np.ndarray:
    """(n,) squared norms ||B h_i||^2 of one sentence's word vectors (n, d), rounded."""
    u = np.asarray(h, dtype=np.float64) @ b.T
    return np.round((u * u).sum(-1), DECIMALS)
