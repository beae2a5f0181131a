"""The shape of the space, per layer, over the token vectors of the non-special tokens of many texts.

    IsoScore       (Rudman et al. 2022) how evenly the variance spreads over the d dimensions: 1 when
                   isotropic, 0 when it all lies in one direction. From the covariance's singular values,
                   as the `isoscore` package's `IsoScore.IsoScore` computes it.
                   The sample covariance of n tokens has rank at most n - 1, so the score is capped below
                   1 unless n >> d: isotropic noise scores about (n-1)/(n-1+d) (1/2 at n = d, 0.91 at
                   n = 10 d). Under `FEW_TOKENS` x d tokens the result carries a `note` that says so.
    rogue dims     (Timkey & van Schijndel 2021) the expected cosine of two different random tokens, the
                   mean of u_s . u_t over the n(n-1) ordered pairs s != t of unit-normalised token vectors:
                   (|S|^2 - n) / (n(n-1)), S the sum of the u_t (the n self pairs add sum |u_t|^2 = n).
                   Dimension i's share of it is (S_i^2 - sum_t u_ti^2) / (|S|^2 - n). A few
                   dimensions holding most of it are rogue: they decide cosine.
    intrinsic dim  TwoNN (Facco et al. 2017) with scikit-dimension's `skdim.id.TwoNN()` defaults: the ratio
                   mu = r2 / r1 of each point's second to first neighbour distance, the largest 10% of the
                   ratios discarded, the slope of -log(1 - F(mu)) against log mu by least squares through
                   the origin, on the distinct points: a repeated vector (the same piece at the same
                   position in layer 0) is one point, as `skdim.id.TwoNN().fit(np.unique(x, axis=0))`
                   takes it (a twin kept as a neighbour gives ratio 1 and lifts the estimate). Under
                   `FEW_POINTS` distinct points the result carries a `twonn_note` that says it is rough.
                   On token vectors the estimate depends on the number of points it is computed on
                   and moves from sample to sample well past FEW_POINTS (examples/news.txt, layer 3:
                   11.1 to 14.9 over three seeds at 100 points, 10.1 to 11.9 at 300, 9.1 on all 677):
                   each record says its `n_points`, and `twonn_sample_note`, always set, says so.

Texts that tokenize to the same ids (a text given twice, or in another case to an uncased model) have
the same vectors at every layer: they are one text, merged as contextuality merges repeated sentences
(`settings["repeats_merged"]` counts them), so no token is counted twice.

Streamed, memory bounded whatever the number and length of the texts (a book-length line comes a few
windows at a time): per layer a running mean and d x d scatter (IsoScore), the sums of the unit vectors
and of their squares (rogue), and, because TwoNN needs points, a seeded uniform sample (reservoir
sampling) of at most `max_tokens_sampled` tokens whose vectors of every chosen layer are kept:
(layers, max_tokens_sampled, d) float32 (54 MB for the bundled model at the default 5,000). The one
thing that grows with the texts is the set that finds repeats: a 16-byte digest of each distinct text's
token ids (about 100 bytes a text in a Python set: 100 MB at a million texts).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.layers import LayerSpec, parse_layers
from ..core.progress import step_progress
from ..core.renamed import top_k_given
from ..core.spec import whole_number
from ..errors import InvalidInput, InvalidSpec
from .states import check_seed, layer_blocks, layered, special_pieces, text_stream, tokens_key

if TYPE_CHECKING:
    from ..core.encoder import Encoder

__all__ = [
    "FEW_POINTS",
    "FEW_TOKENS",
    "GeometryResult",
    "MIN_TOKENS",
    "Reservoir",
    "few_points_note",
    "few_tokens_note",
    "sample_size_note",
    "geometry",
    "isoscore",
    "isotropic_isoscore",
    "rogue_shares",
    "rogue_shares_of_sums",
    "twonn",
]

MIN_TOKENS = 3  # TwoNN keeps 90% of the ratios and fits a line through at least 2 of them
# Tokens per dimension under which IsoScore is said to be capped by the sample: isotropic Gaussian noise of
# n tokens in d dimensions scores about (n-1)/(n-1+d), under 0.91 below 10 d (measured: 0.50 at n = d,
# 0.66 at 2 d, 0.83 at 5 d, 0.91 at 10 d, 0.95 at 20 d, for d = 64, 384 and 768 alike).
FEW_TOKENS = 10
DISCARD_FRACTION = 0.1  # scikit-dimension's TwoNN default
# Points under which TwoNN's estimate is said to be rough: from one sample of n points to another it moves
# by about 1.1 / sqrt(n) of itself (one standard deviation; measured over 60 seeds of Gaussian clouds of
# intrinsic dimension 4, 8 and 16 in 64: 0.35 at n = 10, 0.15 at 50, 0.11 at 100, 0.08 at 200, 0.05 at
# 500), so under 100 points one run is not within 10% of the next.
FEW_POINTS = 100
_FLUSH = 2048  # token rows gathered before one update of the sums


def isoscore(points: np.ndarray) -> float:
    """IsoScore of (n, d) points: equal to `IsoScore.IsoScore(points)` of the `isoscore` package."""
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or len(x) < 2:
        raise InvalidInput(f"IsoScore needs (n, d) points with n >= 2; got shape {tuple(x.shape)}")
    finite_points(x, "IsoScore")
    return isoscore_of_covariance(np.cov(x, rowvar=False))


def isoscore_of_covariance(cov: np.ndarray) -> float:
    """IsoScore from a (d, d) covariance matrix (its scale does not matter)."""
    # The package takes the singular values; of a symmetric matrix they are its eigenvalues' sizes.
    pcs = np.abs(np.linalg.eigvalsh(np.atleast_2d(cov)))
    n = float(len(pcs))
    total = float(np.linalg.norm(pcs))
    if n < 2 or total == 0.0:
        return float("nan")  # one dimension, or every point the same: isotropy is undefined
    normed = pcs * np.sqrt(n) / total
    defect = np.linalg.norm(normed - 1.0) / np.sqrt(2 * (n - np.sqrt(n)))
    return float(((n - defect**2 * (n - np.sqrt(n))) ** 2 - n) / (n * (n - 1)))


def isotropic_isoscore(n: int, d: int) -> float:
    """About what isotropic Gaussian noise of `n` points in `d` dimensions scores: the ceiling the sample
    puts on IsoScore. IsoScore is ((sum l)^2 / sum l^2 - 1) / (d - 1) of the covariance's eigenvalues l;
    for noise they follow Marchenko-Pastur with ratio g = d / (n - 1), and (sum l)^2 / sum l^2 -> d / (1 + g).
    """
    if n < 2 or d < 2:
        return float("nan")
    return (d / (1 + d / (n - 1)) - 1) / (d - 1)


def few_tokens_note(n_tokens: int, width: int) -> str | None:
    """What to say of IsoScore over `n_tokens` tokens `width` wide: None when they are enough."""
    if n_tokens >= FEW_TOKENS * width:
        return None
    return (
        f"{n_tokens} tokens for {width} dimensions ({n_tokens / width:.1f} per dimension, fewer than "
        f"{FEW_TOKENS}): IsoScore is capped by the sample, isotropic noise of this shape scores about "
        f"{isotropic_isoscore(n_tokens, width):.2f}, not 1; compare layers on one input, not numbers across "
        "inputs, or give more texts"
    )


def few_points_note(n_points: int, *, sampled: bool = False) -> str | None:
    """What to say of TwoNN's intrinsic dimension from `n_points` distinct points (`sampled`: the sample
    held fewer tokens than the texts gave): None when they are enough."""
    if n_points >= FEW_POINTS:
        return None
    if n_points < MIN_TOKENS:  # twonn's nan: too few ratios to fit
        return (
            f"TwoNN has {n_points} distinct points (repeated vectors merged) on a layer, fewer than "
            f"{MIN_TOKENS}: no intrinsic dimension there (-); give texts with more different words"
        )
    more = "give more text, or sample more tokens (max_tokens_sampled)" if sampled else "give more text"
    return (
        f"TwoNN's intrinsic dimension rests on {n_points} points (fewer than {FEW_POINTS}; repeated "
        "vectors merged): "
        f"from one sample of so few to another it moves by about {1.1 / np.sqrt(max(n_points, 1)):.0%}, "
        f"so read it as rough; {more}"
    )


def rogue_shares(points: np.ndarray) -> tuple[float, np.ndarray]:
    """(expected cosine of two different points, each dimension's share of it) of (n, d) points, n >= 2:
    the mean of u_s . u_t over the ordered pairs s != t of the unit-normalised points, and per dimension
    the mean of u_si u_ti over those pairs divided by it (the shares sum to 1; all 0 when it is not > 0)."""
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or len(x) < 2:
        raise InvalidInput(
            f"rogue_shares takes the (n, d) vectors themselves, n >= 2 (pairs of different points); got "
            f"shape {tuple(x.shape)}"
        )
    finite_points(x, "rogue_shares")
    unit = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return rogue_shares_of_sums(unit.sum(axis=0), (unit**2).sum(axis=0), len(unit))


def rogue_shares_of_sums(
    unit_sum: np.ndarray, unit_square_sum: np.ndarray, n: int
) -> tuple[float, np.ndarray]:
    """`rogue_shares` from streamed sums over n unit vectors u_t: S = sum u_t and Q = sum u_t**2 (both (d,)).
    Over the pairs s != t, sum u_si u_ti = S_i^2 - Q_i, and there are n(n-1) of them."""
    s = np.asarray(unit_sum, dtype=np.float64)
    per_dim = s**2 - np.asarray(unit_square_sum, dtype=np.float64)
    total = float(per_dim.sum())
    expected = total / (n * (n - 1)) if n >= 2 else float("nan")
    return expected, per_dim / total if total > 0 else np.zeros_like(per_dim)


def twonn(points: np.ndarray, *, discard_fraction: float = DISCARD_FRACTION) -> tuple[float, int]:
    """(intrinsic dimension, points merged as repeats) of (n, d) points by TwoNN on their distinct points:
    equal to `skdim.id.TwoNN(discard_fraction).fit(np.unique(points, axis=0)).dimension_`."""
    from sklearn.neighbors import NearestNeighbors

    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or len(x) < MIN_TOKENS:
        raise InvalidInput(f"TwoNN needs (n, d) points with n >= {MIN_TOKENS}; got shape {tuple(x.shape)}")
    finite_points(x, "TwoNN")
    # A repeated vector is one point: kept as its twin's neighbour it gives that neighbour's r1 = r2
    # (ratio 1) and lifts the estimate (17% at 1 token in 6 repeated), so duplicates are collapsed first.
    distinct = np.unique(x, axis=0)
    merged = len(x) - len(distinct)
    if len(distinct) < MIN_TOKENS:
        return float("nan"), merged
    _, index = NearestNeighbors(n_neighbors=2).fit(distinct).kneighbors()
    # The two distances again, each as one difference: never the 0 that rounding can give two close points.
    r1 = np.linalg.norm(distinct - distinct[index[:, 0]], axis=1)
    r2 = np.linalg.norm(distinct - distinct[index[:, 1]], axis=1)
    ratios = np.sort(r2 / r1)
    total = len(ratios)
    keep = int(total * (1 - discard_fraction))
    if keep < 2:
        return float("nan"), merged
    log_mu = np.log(ratios[:keep])
    target = -np.log(1 - np.arange(1, keep + 1) / total)
    denominator = float(log_mu @ log_mu)
    slope = float(log_mu @ target) / denominator if denominator > 0 else float("nan")
    return slope, merged


def finite_points(x: np.ndarray, measure: str) -> None:
    """Refuse points holding NaN or infinity in one line (the libraries below fail in several)."""
    if not np.isfinite(x).all():
        bad = int((~np.isfinite(x)).any(axis=1).sum())
        raise InvalidInput(
            f"{measure} takes finite vectors; {bad} of the {len(x)} points hold NaN or infinity: drop "
            "or fix those rows"
        )


class Reservoir:
    """A uniform sample of at most `size` rows of a stream (Algorithm R), the same whatever the batches:
    row t (0-based) past the first `size` replaces slot floor(u_t (t + 1)) when that is < size, u_t the
    t-th draw of a seeded generator."""

    def __init__(self, size: int, *, seed: int = 0) -> None:
        if isinstance(size, bool) or not isinstance(size, int | np.integer):
            # a float or a string of digits would fail in the first comparison or in NumPy, mid-stream
            whole_number(
                size, "max_tokens_sampled", least=MIN_TOKENS, meaning="tokens TwoNN samples per layer"
            )
        if size < MIN_TOKENS:
            raise InvalidSpec(f"max_tokens_sampled={size} is too small: TwoNN needs at least {MIN_TOKENS}")
        self.size, self.seen = int(size), 0
        self.rng = np.random.default_rng(seed)
        self.rows: np.ndarray | None = None

    def add(self, rows: np.ndarray) -> None:
        """Offer (n, ...) rows, in stream order."""
        count = len(rows)
        fill = max(0, min(count, self.size - self.seen))
        if fill:
            self._grow(self.seen + fill, rows)
            assert self.rows is not None
            self.rows[self.seen : self.seen + fill] = rows[:fill]
        rest = count - fill
        if rest:
            assert self.rows is not None
            position = np.arange(self.seen + fill, self.seen + count)
            slot = np.floor(self.rng.random(rest) * (position + 1)).astype(np.int64)
            taken = np.flatnonzero(slot < self.size)
            # Of the rows that land on one slot in this batch, the last one stays (as one at a time would).
            slots, last = np.unique(slot[taken][::-1], return_index=True)
            self.rows[slots] = rows[fill + taken[::-1][last]]
        self.seen += count

    def sample(self) -> np.ndarray:
        """The rows kept: (min(seen, size), ...)."""
        if self.rows is None:
            return np.zeros((0,))
        return self.rows[: min(self.seen, self.size)]

    def _grow(self, needed: int, like: np.ndarray) -> None:
        capacity = 0 if self.rows is None else len(self.rows)
        if needed <= capacity:
            return
        grown = np.empty((min(self.size, max(needed, 2 * capacity)), *like.shape[1:]), dtype=like.dtype)
        if self.rows is not None:
            grown[:capacity] = self.rows
        self.rows = grown


class _Moments:
    """Per layer: token count, running mean and scatter (d x d), sum of the unit vectors and of their
    squares; merged batch by batch (Chan et al.), so float64 sums of large-mean BERT vectors stay exact."""

    def __init__(self) -> None:
        self.n = 0
        self.mean: np.ndarray | None = None
        self.scatter: np.ndarray | None = None
        self.unit_sum: np.ndarray | None = None
        self.unit_square_sum: np.ndarray | None = None

    def add(self, rows: np.ndarray) -> None:
        """rows: (layers, n, d)."""
        x = rows.astype(np.float64)
        count = x.shape[1]
        mean = x.mean(axis=1)
        centred = x - mean[:, None, :]
        scatter = centred.transpose(0, 2, 1) @ centred
        units = x / np.maximum(np.linalg.norm(x, axis=2, keepdims=True), 1e-12)
        unit, unit_square = units.sum(axis=1), (units**2).sum(axis=1)
        if self.mean is None or self.scatter is None or self.unit_sum is None or self.unit_square_sum is None:
            self.n, self.mean, self.scatter = count, mean, scatter
            self.unit_sum, self.unit_square_sum = unit, unit_square
            return
        total = self.n + count
        delta = mean - self.mean
        self.scatter += scatter + delta[:, :, None] * delta[:, None, :] * (self.n * count / total)
        self.mean += delta * (count / total)
        self.unit_sum += unit
        self.unit_square_sum += unit_square
        self.n = total


@dataclass
class GeometryResult:
    """One record per layer: layer, isoscore, intrinsic_dim, expected_cosine, rogue [{dim, share}],
    twins (tokens TwoNN merged into another with the same vector); `settings` says how it was measured
    (n_texts, n_distinct_texts, n_tokens, the vectors' dimension, tokens_per_dimension, and
    repeats_merged: texts that tokenize as one before);
    `note` says when the tokens were too few for IsoScore to reach 1, `twonn_note` when TwoNN's points
    (on the layer with the fewest distinct ones) were too few for its estimate to be steady (else None);
    `twonn_sample_note`, always, that the intrinsic dimension depends on the number of points (each
    record's `n_points`) and the seed, so only figures of one run compare.
    """

    layers: list[dict[str, Any]]
    settings: dict[str, Any] = field(default_factory=dict)
    note: str | None = None
    twonn_note: str | None = None
    twonn_sample_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: {"layers": [...], "settings": {...}, "note": ..., "twonn_note": ...,
        "twonn_sample_note": ...} (NaN as null)."""
        return {
            "layers": [{k: _plain(v) for k, v in row.items()} for row in self.layers],
            "settings": self.settings,
            "note": self.note,
            "twonn_note": self.twonn_note,
            "twonn_sample_note": self.twonn_sample_note,
        }


def _plain(value: Any) -> Any:
    """`value` as JSON says it: NaN as null, a float to 7 significant digits, what measures of float32
    states hold. The 7th digit can still differ between runtimes (onnxruntime against torch: 8.949845 and
    8.949844), so the docs' figures are generated on the torch backend, as their blocks say."""
    if isinstance(value, float):
        return float(f"{value:.7g}") if np.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def geometry(
    model: Encoder,
    texts: Iterable[str] | str,
    *,
    layers: LayerSpec = "all",
    top_k: int | None = None,
    max_tokens_sampled: int = 5000,
    seed: int = 0,
    progress: bool | None = None,
    total: int | None = None,
    top: int | None = None,
) -> GeometryResult:
    """IsoScore, rogue dimensions (the `top_k` largest shares, default 3; `top=` is its older spelling,
    still read) and TwoNN intrinsic dimension of each chosen layer's non-special token vectors (0 = the
    embedding layer's output .. L), streamed."""
    layered(model, "layer geometry")
    top = top_k_given(top_k, top, old="top", default=3, least=0, meaning="rogue dimensions to name")
    check_seed(seed)
    chosen = list(dict.fromkeys(parse_layers(layers, model.n_layers)))
    texts = text_stream(texts)
    moments, reservoir = _Moments(), Reservoir(max_tokens_sampled, seed=seed)
    pending: list[np.ndarray] = []
    gathered = 0
    position = 0  # where the block starts in its text: a long text comes a few windows at a time
    seen: set[bytes] = set()  # a digest of each text's token ids: 16 bytes a text, not the text
    given = repeats = 0
    skipping = False
    for _, tok, states, last in layer_blocks(model, texts, progress=progress, total=total):
        if position == 0:  # a text's first block
            # A text that tokenizes as one before (given twice, or in another case to an uncased model) has
            # the same vectors at every layer: one text, as contextuality merges repeated sentences.
            key = tokens_key(tok.ids)
            given += 1
            skipping = key in seen
            repeats += skipping
            seen.add(key)
        width = states.shape[1]
        keep = ~np.asarray(tok.special_tokens_mask[position : position + width], dtype=bool)
        position = 0 if last else position + width
        if skipping:
            continue
        pending.append(states[chosen][:, keep])
        gathered += int(keep.sum())
        if gathered >= _FLUSH:
            _flush(pending, moments, reservoir)
            pending, gathered = [], 0
    if gathered:
        _flush(pending, moments, reservoir)
    if moments.n < MIN_TOKENS or moments.mean is None:
        named = special_pieces(model)
        raise InvalidInput(
            f"geometry needs at least {MIN_TOKENS} tokens that are not special ({named}); the texts gave "
            f"{moments.n}: give more text"
        )
    assert (
        moments.scatter is not None and moments.unit_sum is not None and moments.unit_square_sum is not None
    )
    sample = reservoir.sample()
    records, twins_of = [], []
    with step_progress(len(chosen), "TwoNN", enabled=progress) as step:
        for i, layer in enumerate(chosen):
            expected, shares = rogue_shares_of_sums(
                moments.unit_sum[i], moments.unit_square_sum[i], moments.n
            )
            order = np.argsort(-shares, kind="stable")[:top]
            dim, twins = twonn(sample[:, i])
            twins_of.append(twins)
            records.append(
                {
                    "layer": layer,
                    "isoscore": isoscore_of_covariance(moments.scatter[i] / (moments.n - 1)),
                    "intrinsic_dim": dim,
                    "expected_cosine": expected,
                    "rogue": [{"dim": int(d), "share": float(shares[d])} for d in order],
                    "twins": twins,
                    "n_points": len(sample) - twins,  # the distinct points TwoNN's figure rests on
                }
            )
            step()
    width = int(moments.mean.shape[-1])
    settings = {
        "model": model.loaded.source,
        "n_texts": given,
        "n_distinct_texts": given - repeats,
        "repeats_merged": repeats,
        "n_tokens": moments.n,
        "dimension": width,
        "tokens_per_dimension": round(moments.n / width, 3),
        "special_tokens": "left out",
        "twonn_sample": len(sample),
        "max_tokens_sampled": max_tokens_sampled,
        "seed": seed,
        "sampling": "uniform reservoir sample of the tokens, the same tokens for every layer (TwoNN only)",
        "discard_fraction": DISCARD_FRACTION,
    }
    points = len(sample) - max(twins_of)  # the layer TwoNN had the fewest distinct points on
    twonn_note = few_points_note(points, sampled=len(sample) < moments.n)
    return GeometryResult(
        records, settings, note=few_tokens_note(moments.n, width), twonn_note=twonn_note,
        twonn_sample_note=sample_size_note(records, len(sample), moments.n),
    )  # fmt: skip


def sample_size_note(records: list[dict[str, Any]], sampled: int, n_tokens: int) -> str:
    """What TwoNN's figures rest on, said always: the distinct points of each layer (the fewest and the
    most), and that the estimate moves with their number and the sample."""
    counts = sorted({r["n_points"] for r in records})
    points = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]} (by layer)"
    of = "all the tokens" if sampled == n_tokens else f"a sample of {sampled} of {n_tokens} tokens"
    return (
        f"TwoNN's intrinsic dimension rests on {points} distinct points ({of}): on token vectors it "
        "changes with the number of points and moves from sample to sample (seed), so compare layers "
        "within one run, not figures from runs of other sizes"
    )


def _flush(pending: list[np.ndarray], moments: _Moments, reservoir: Reservoir) -> None:
    rows = np.concatenate(pending, axis=1)  # (layers, n, d)
    moments.add(rows)
    reservoir.add(rows.transpose(1, 0, 2))
