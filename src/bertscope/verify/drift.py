"""Stored vectors against freshly made ones: the result of a store check, and the one comparison.

Exact on both sides, each vector must match within `EXACT_ATOL` (a float16 store: within one float16
step more); a lossy side (bfloat16, float16 or int8 arithmetic) is within `floor` of float32: the lowest
of the bound fast mode chose under (either side) and each side's precision floor (`settings.STORE_FLOORS`:
int8 0.98, since its scales move with the batch). One lossy side against an exact one (an int8 deployment
checked against a float32 store) holds the cosine to `floor` itself; two lossy sides, each within `floor`
of float32 in its own direction, to `2 floor^2 - 1` (the angles add). A row
that is not finite (NaN or infinity) on either side is out of tolerance, and a zero vector against a
non-zero one has cosine 0; the headline figures are those of the rows that hold numbers, so a poisoned
row neither hides nor fakes the drift of the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..backends.exact import EXACT_ATOL
from .fingerprint import Difference
from .settings import LOSSY_FLOOR, is_lossy, lossy_floor, store_floor, vector_settings

__all__ = ["FAR_COSINE", "StoreCheck", "add_drift", "far_cosine", "pairwise_cosines"]

_WORST_SHOWN = 5
# A fingerprint's settings of how the model runs, not of which model it is (settings.precision.quantize)
PRECISION = "settings.precision."


@dataclass
class StoreCheck:
    """A store's vectors against this deployment's: ok when every sampled row is within tolerance."""

    ok: bool
    rows_checked: int
    max_abs: float
    min_cosine: float
    differences: list[Difference] = field(default_factory=list)
    tolerance: dict[str, Any] = field(default_factory=dict)
    store: str = ""
    rows: int = 0
    model: str = ""
    seconds: float = 0.0
    seed: int | None = None  # the sample's: verify_store(seed=...) draws the same rows again
    # What the check could not prove (one line each), e.g. a store that records no fingerprint.
    notes: list[str] = field(default_factory=list)
    # The `what` of each difference between the store's fingerprint and this model's ("files.vocab.txt"),
    # and how many sampled rows are out of tolerance (the most of any vector column): the headline's.
    model_changes: list[str] = field(default_factory=list)
    rows_out: int = 0
    # How many sampled rows are far off (`far_cosine`, the most of any vector column): further than any
    # runtime or precision moves the same model's vectors, so, the model unchanged, another text's vector.
    rows_far: int = 0
    texts_from_corpus: bool = False  # the texts re-embedded were read from the corpus given, not the store

    def headline(self) -> str:
        """One line: the verdict, what differs (the model, the rows, or both) and the figures."""
        what = f"{self.rows_checked} of {self.rows} rows of {self.store} re-embedded with {self.model}"
        figures = f"max abs {self.max_abs:.3g}, min cosine {self.min_cosine:.8f}{self._tolerance_said()}"
        if not self.model_changes:
            return f"{'ok' if self.ok else 'DRIFT'}: {what}: {figures}"
        shown = ", ".join(self.model_changes[:3])
        more = f" and {len(self.model_changes) - 3} more" if len(self.model_changes) > 3 else ""
        differs = f"DRIFT: the model differs from the store's ({shown}{more})"
        fix = ""
        if all(change.startswith(PRECISION) for change in self.model_changes):
            # the deployment's precision, not the model: the store itself is checked as it ran
            fix = (
                "; only the precision differs: load the model as the store ran (leave out the dtype, "
                "quantize and fast options) to check the store itself"
            )
        if self.rows_out:
            rows = f"{self.rows_out} of the {self.rows_checked} rows checked are out of tolerance"
            return f"{differs}, and {rows} ({what}: {figures}){fix}"
        same = "unchanged" if self.max_abs == 0 else "within tolerance"
        checked = f"the vectors of the {self.rows_checked} rows checked are {same}"
        return f"{differs}; {checked} ({what}: {figures}){fix}"

    def _tolerance_said(self) -> str:
        """The tolerance the figures were held to, as `bertscope verify` states it ("" before any row)."""
        if "min_cosine" in self.tolerance:
            return f"; tolerance min cosine >= {self.tolerance['min_cosine']:.6g}"
        if "max_abs" in self.tolerance:
            step = " (plus a float16 step: stored in float16)" if self.tolerance.get("float16_step") else ""
            return f"; tolerance max abs <= {self.tolerance['max_abs']:g}{step}"
        return ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: ok, rows_checked, max_abs, min_cosine, differences [{what, expected, found}], notes,
        ..."""
        return {
            "ok": self.ok,
            "rows_checked": self.rows_checked,
            "max_abs": self.max_abs,
            "min_cosine": self.min_cosine,
            "differences": [d.to_dict() for d in self.differences],
            "tolerance": self.tolerance,
            "store": self.store,
            "rows": self.rows,
            "model": self.model,
            "seed": self.seed,
            "notes": list(self.notes),
        }


def add_drift(
    check: StoreCheck,
    model: Any,
    settings: dict[str, Any],
    labels: Sequence[str],
    stored: np.ndarray,
    fresh: np.ndarray,
    *,
    column: str = "",
) -> None:
    """Add one vector column's drift to `check`: max abs, min cosine, and its worst rows (named by
    `labels`) when out of tolerance. `stored` and `fresh` are (rows, d), row for row."""
    where = f"{column} " if column else ""
    if stored.shape != fresh.shape:
        found = f"{fresh.shape[-1]} dimensions here"
        check.differences.append(Difference(f"{where}width", f"{stored.shape[-1]} dimensions", found))
        check.rows_out = max(check.rows_out, len(stored))
        return
    float16 = settings.get("precision") == "float16"
    if float16:  # the store kept float16: compare what this deployment would store
        fresh = fresh.astype(np.float16).astype(np.float32)
    stored_ok, fresh_ok = _finite_rows(stored), _finite_rows(fresh)
    finite = stored_ok & fresh_ok
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(fresh - stored)
    cosines = np.where(finite, pairwise_cosines(fresh, stored), np.nan)
    if finite.any():  # the headline over the rows that hold numbers; the others are named below
        check.max_abs = max(check.max_abs, float(diff[finite].max(initial=0.0)))
        check.min_cosine = min(check.min_cosine, float(cosines[finite].min(initial=1.0)))
    here = vector_settings(model)["precision"]
    lossy_store, lossy_here = _lossy_store(settings), is_lossy({"precision": here})
    if lossy_store or lossy_here:
        floor = min(
            lossy_floor(model),
            _stored_floor(settings),
            store_floor(here.get("dtype"), here.get("quantize")),
            store_floor(settings.get("dtype"), settings.get("quantize")),
        )
        # The exact side is float32 itself: only the lossy side's angle to it counts.
        bound = 2 * floor**2 - 1 if lossy_store and lossy_here else floor
        check.tolerance = {"min_cosine": bound}
        out = np.zeros(len(finite), dtype=bool)
        out[finite] = cosines[finite] < bound
    else:
        allowed = EXACT_ATOL + (np.abs(np.spacing(stored.astype(np.float16))) if float16 else 0.0)
        check.tolerance = {"max_abs": EXACT_ATOL, "float16_step": float16}
        with np.errstate(invalid="ignore"):
            out = (diff > allowed).any(axis=1)
    bad = np.flatnonzero(out | ~finite)
    check.rows_out = max(check.rows_out, len(bad))
    # a zero vector stored is no text's vector (damage), so not another text's either
    far = finite & (np.abs(stored).reshape(len(stored), -1).max(axis=1, initial=0.0) > 0)
    far &= cosines < far_cosine(check.tolerance.get("min_cosine", 1.0))
    check.rows_far = max(check.rows_far, int(far.sum()))
    worst = bad[np.argsort(np.where(finite[bad], cosines[bad], -np.inf), kind="stable")][:_WORST_SHOWN]
    for row in worst:
        if not stored_ok[row]:
            found = "stored values not finite (NaN or infinity)"
        elif not fresh_ok[row]:
            found = "not finite here (NaN or infinity)"
        else:
            found = f"cosine {cosines[row]:.6f}, max abs {diff[row].max():.3g}"
        check.differences.append(Difference(f"{where}{labels[row]}", "stored", found))
    if len(bad) > len(worst):
        more = f"{len(bad) - len(worst)} more rows out of tolerance"
        check.differences.append(Difference(f"{where}rows", "stored", more))


# Below this cosine a row is far off, whatever the mode: float32 runtimes agree to ~1e-6, bfloat16 and
# int8 to 0.99 and 0.98 (settings.STORE_FLOORS), while the vectors of two texts of one model differ more.
FAR_COSINE = 0.95


def far_cosine(bound: float) -> float:
    """The cosine under which a row is far off against a cosine `bound` (1 for an exact check): twice as far
    from 1 as the bound (`2 bound - 1`), at most `FAR_COSINE`."""
    return min(FAR_COSINE, 2 * float(bound) - 1)


def pairwise_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(...,) cosine of each vector of a (..., d) with the same one of b, in float64: 1 where they are
    equal (zero vectors too), 0 where only one is zero (a zero vector points nowhere), NaN where either is not
    finite."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        dots = (a64 * b64).sum(axis=-1)
        norm_a, norm_b = np.linalg.norm(a64, axis=-1), np.linalg.norm(b64, axis=-1)
    both = (norm_a > 0) & (norm_b > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cosines = np.where(both, dots / np.where(both, norm_a * norm_b, 1.0), 0.0)
    cosines = np.where((norm_a == 0) & (norm_b == 0), 1.0, cosines)
    cosines = np.where((a64 == b64).all(axis=-1), 1.0, cosines)  # equal vectors: 1, not 1 - 2e-16
    return np.where(np.isfinite(norm_a) & np.isfinite(norm_b), cosines, np.nan)


def _finite_rows(matrix: np.ndarray) -> np.ndarray:
    """(rows,) whether each row of a (rows, d) array holds numbers only (no NaN, no infinity)."""
    return np.isfinite(matrix).reshape(len(matrix), -1).all(axis=1)


def _lossy_store(settings: dict[str, Any]) -> bool:
    return settings.get("dtype", "float32") != "float32" or settings.get("quantize") not in (None, "none")


def _stored_floor(settings: dict[str, Any]) -> float:
    fast = settings.get("fast") or {}
    return float(fast.get("min_cosine", LOSSY_FLOOR))
