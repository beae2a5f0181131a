"""A store against this deployment: re-embed a sample of its texts and compare with the stored vectors.

The sample is stratified over the store's rows (one row drawn from each of `rows` equal slices), so every
batch a job wrote is represented. The texts are embedded with the model recorded in the store (or the one
given) and the store's own settings (layers, pooling, prompt, post-processing); every view is checked.
Exact on both sides, each vector must match within `EXACT_ATOL` (a float16 store: within one float16
step); a lossy side holds the cosine to `2 floor^2 - 1` (both within `floor` of float32). A fingerprint in
the store's settings is compared with this deployment's too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.exact import EXACT_ATOL
from ..core.spec import EmbedOptions, PostArg, resolve
from ..errors import InvalidInput
from ..io.stores import Store, open_store, view_settings, with_view
from .fingerprint import Difference, compare_fingerprints, fingerprint
from .settings import LOSSY_FLOOR, is_lossy, lossy_floor, vector_settings

__all__ = ["StoreCheck", "sample_rows", "verify_store"]

_WORST_SHOWN = 5


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

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: ok, rows_checked, max_abs, min_cosine, differences [{what, expected, found}], ..."""
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
            "seconds": round(self.seconds, 3),
        }


def sample_rows(count: int, rows: int, *, seed: int = 0) -> np.ndarray:
    """Sorted row numbers: one drawn from each of min(rows, count) equal slices of 0..count-1."""
    take = min(rows, count)
    edges = np.linspace(0, count, take + 1).astype(np.int64)
    rng = np.random.default_rng(seed)
    return np.array([rng.integers(a, max(a + 1, b)) for a, b in zip(edges[:-1], edges[1:], strict=True)])


def verify_store(
    store: str | Path | Store,
    *,
    model: Any = None,
    rows: int = 200,
    collection: str | None = None,
    corpus: str | Path | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    post: PostArg = None,
    seed: int = 0,
) -> StoreCheck:
    """Whether `store` and this deployment share one vector space (see the module docstring).

    `model`: a Model, a name, or None for the store's own as it ran. A store that keeps no texts (.npy,
    or written without them) needs the `corpus` it was made from (`text_field`, `id_field` as the job's).
    A store made with post-processing needs its file as `post`.
    """
    from ..io.search import model_for

    start = time.perf_counter()
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise InvalidInput(f"rows={rows!r}: give how many rows to check, at least 1")
    opened = store if isinstance(store, Store) else open_store(store, collection=collection)
    level = opened.settings.get("level", "sentence")
    if level != "sentence":
        raise InvalidInput(
            f"{opened.path} holds {level} rows; verify checks sentence stores (one vector per text) for now"
        )
    if opened.settings.get("post") and post is None:
        kind = opened.settings["post"].get("kind", "post-processing")
        raise InvalidInput(
            f"{opened.path}'s vectors went through {kind}: pass the same file as post= (--post)"
        )
    count = opened.count()
    if count == 0:
        raise InvalidInput(f"{opened.path} holds no rows to check")
    positions = sample_rows(count, rows, seed=seed)
    m = model_for(opened.settings, model)
    check = StoreCheck(True, len(positions), 0.0, 1.0, store=str(opened.path), rows=count)
    check.model = m.info().source
    texts: list[str] | None = None
    for view in list(opened.settings.get("views") or {}) or [None]:
        column = with_view(opened, view)
        ids, stored_texts, stored = _read_rows(column, positions)
        texts = texts or _texts(stored_texts, ids, corpus, text_field, id_field, opened.path)
        settings = view_settings(column)
        options = replace(EmbedOptions.from_settings(settings, post=post), prompt=settings.get("prompt", ""))
        fresh = np.asarray(m.embed_with(texts, resolve(m, options)).vectors, dtype=np.float32)
        _compare(check, m, settings, positions, ids, stored, fresh, view)
    recorded = opened.settings.get("fingerprint")
    if isinstance(recorded, dict):
        check.differences += compare_fingerprints(recorded, fingerprint(m, with_canaries=False))
    check.ok = not check.differences
    check.seconds = time.perf_counter() - start
    return check


def _read_rows(store: Store, positions: np.ndarray) -> tuple[list[str], list[str | None], np.ndarray]:
    """(ids, texts, vectors) of the sampled rows: by number where the format can, else one pass."""
    if store.rules.by_row:
        ids, texts, vectors = store.take(positions)
        return list(ids), list(texts), np.asarray(vectors, dtype=np.float32)
    wanted = {int(p): i for i, p in enumerate(positions)}
    got_ids: list[str] = [""] * len(positions)
    got_texts: list[str | None] = [None] * len(positions)
    got: list[np.ndarray] = [np.empty(0)] * len(positions)
    offset = 0
    for chunk_ids, chunk_texts, vectors in store.chunks():
        for row in range(len(chunk_ids)):
            slot = wanted.get(offset + row)
            if slot is not None:
                got_ids[slot], got_texts[slot], got[slot] = chunk_ids[row], chunk_texts[row], vectors[row]
        offset += len(chunk_ids)
    return got_ids, got_texts, np.stack(got).astype(np.float32)


def _texts(
    texts: Sequence[str | None],
    ids: Sequence[str],
    corpus: str | Path | None,
    text_field: str,
    id_field: str | None,
    path: Path,
) -> list[str]:
    """The sampled rows' texts: from the store, else from the corpus by id."""
    if all(isinstance(t, str) for t in texts):
        return [str(t) for t in texts]
    if corpus is None:
        raise InvalidInput(
            f"{path} keeps no texts: pass the corpus it was made from (corpus=, --corpus FILE) to re-embed"
        )
    from ..io.readers import read_corpus

    wanted = set(ids)
    found: dict[str, str] = {}
    for record in read_corpus(corpus, text_field=text_field, id_field=id_field):
        if record.id in wanted:
            found[record.id] = record.text
            if len(found) == len(wanted):
                break
    missing = [i for i in ids if i not in found]
    if missing:
        raise InvalidInput(
            f"{corpus} has no text with id {missing[0]!r} of {path}: is it the store's corpus?"
        )
    return [found[i] for i in ids]


def _compare(
    check: StoreCheck,
    model: Any,
    settings: dict[str, Any],
    positions: np.ndarray,
    ids: Sequence[str],
    stored: np.ndarray,
    fresh: np.ndarray,
    view: str | None,
) -> None:
    """Add one column's drift to `check`: max abs, min cosine, and the worst rows when out of tolerance."""
    what = f"view {view}, row" if view else "row"
    if stored.shape != fresh.shape:
        found = f"{fresh.shape[1]} dimensions here"
        check.differences.append(Difference(f"{what}s (width)", f"{stored.shape[1]} dimensions", found))
        return
    float16 = settings.get("precision") == "float16"
    if float16:  # the store kept float16: compare what this deployment would store
        fresh = fresh.astype(np.float16).astype(np.float32)
    diff = np.abs(fresh - stored)
    dots = (fresh.astype(np.float64) * stored).sum(axis=1)
    norms = np.linalg.norm(fresh.astype(np.float64), axis=1) * np.linalg.norm(
        stored.astype(np.float64), axis=1
    )
    cosines = np.where(norms > 0, dots / np.maximum(norms, 1e-300), 1.0)
    check.max_abs = max(check.max_abs, float(diff.max()))
    check.min_cosine = min(check.min_cosine, float(cosines.min()))
    lossy = _lossy_store(settings) or is_lossy(vector_settings(model))
    if lossy:
        floor = min(lossy_floor(model), _stored_floor(settings))
        bound = 2 * floor**2 - 1
        check.tolerance = {"min_cosine": bound}
        bad = np.flatnonzero(cosines < bound)
    else:
        allowed = EXACT_ATOL + (np.abs(np.spacing(stored.astype(np.float16))) if float16 else 0.0)
        check.tolerance = {"max_abs": EXACT_ATOL, "float16_step": float16}
        bad = np.flatnonzero((diff > allowed).any(axis=1))
    worst = bad[np.argsort(cosines[bad])][:_WORST_SHOWN]
    for row in worst:
        found = f"cosine {cosines[row]:.6f}, max abs {diff[row].max():.3g}"
        check.differences.append(Difference(f"{what} {int(positions[row])} (id {ids[row]})", "stored", found))
    if len(bad) > len(worst):
        more = f"{len(bad) - len(worst)} more rows out of tolerance"
        check.differences.append(Difference(f"{what}s", "stored", more))


def _lossy_store(settings: dict[str, Any]) -> bool:
    return settings.get("dtype", "float32") != "float32" or settings.get("quantize") not in (None, "none")


def _stored_floor(settings: dict[str, Any]) -> float:
    fast = settings.get("fast") or {}
    return float(fast.get("min_cosine", LOSSY_FLOOR))
