"""A store against this deployment: re-embed a sample of its texts and compare with the stored vectors.

The sample is stratified over the store's rows (one row drawn from each of `rows` equal slices), so every
batch a job wrote is represented. The texts are embedded with the model recorded in the store (or the one
given) and the store's own settings (layers, pooling, prompt, post-processing); every view is checked.
Token, word and chunk stores (rows.py) re-embed the sampled rows' documents with the store's level and
compare the rows by (id, position). The stored batches that hold the sample are checked against their
checksums first (a damaged store is an error, never a verdict). A fingerprint in the store's settings
is compared with this deployment's too. The tolerances are drift.py's.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..core.spec import EmbedOptions, PostArg, resolve
from ..errors import CorpusError, InvalidInput
from ..io.checksums import rebuild_hint
from ..io.formats import Format
from ..io.stores import Store, open_store, view_settings, with_view
from ..io.vector_files import check_npy_rows
from .drift import StoreCheck, add_drift
from .fingerprint import compare_fingerprints, fingerprint_problem, store_fingerprint
from .rows import check_rows, texts_by_id

__all__ = ["StoreCheck", "sample_rows", "verify_store"]


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
    one written without them, a chunk store) needs the `corpus` it was made from (`text_field`,
    `id_field` as the job's). A store made with post-processing needs its file as `post`.
    """
    from ..io.search import model_for

    start = time.perf_counter()
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise InvalidInput(f"rows={rows!r}: give how many rows to check, at least 1")
    opened = store if isinstance(store, Store) else open_store(store, collection=collection)
    if "model" not in opened.settings:  # every job writes it: without it nothing says what made the rows
        hint = rebuild_hint(opened.path, opened.collection)
        raise CorpusError(
            f"{opened.path}: its settings do not say which model made it (no 'model'), so nothing can "
            f"prove its vectors; restore the settings it was written with, or {hint}"
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
    check = StoreCheck(
        True, len(positions), 0.0, 1.0, store=str(opened.path), rows=count, model=m.info().source
    )
    recorded = opened.settings.get("fingerprint")
    problem = None if recorded is None else fingerprint_problem(recorded, canaries=False)
    if problem:  # found before anything is embedded
        hint = rebuild_hint(opened.path, opened.collection)
        raise CorpusError(f"{opened.path}: the fingerprint in its settings is damaged ({problem}); {hint}")
    corpus_texts = {"corpus": corpus, "text_field": text_field, "id_field": id_field}
    if opened.settings.get("level", "sentence") == "sentence":
        if opened.rules.format is Format.NPY:  # the stored batches that hold the sample, as Parquet's are
            check_npy_rows(opened.path, positions)
        _check_sentences(check, m, opened, positions, post, corpus_texts)
    else:
        check_rows(check, m, opened, positions, corpus_texts)
    if recorded is not None:
        check.differences += compare_fingerprints(recorded, store_fingerprint(m))
    check.ok = not check.differences
    check.seconds = time.perf_counter() - start
    return check


def _check_sentences(
    check: StoreCheck,
    model: Any,
    opened: Store,
    positions: np.ndarray,
    post: PostArg,
    corpus: dict[str, Any],
) -> None:
    texts: list[str] | None = None
    for view in list(opened.settings.get("views") or {}) or [None]:
        column = with_view(opened, view)
        ids, stored_texts, stored = _read_rows(column, positions)
        if texts is None:
            whole = all(isinstance(t, str) for t in stored_texts)
            texts = [str(t) for t in stored_texts] if whole else texts_by_id(ids, corpus, opened.path)
        settings = view_settings(column)
        options = replace(EmbedOptions.from_settings(settings, post=post), prompt=settings.get("prompt", ""))
        fresh = np.asarray(model.embed_with(texts, resolve(model, options)).vectors, dtype=np.float32)
        labels = [f"row {int(p)} (id {i})" for p, i in zip(positions, ids, strict=True)]
        add_drift(check, model, settings, labels, stored, fresh, column=f"view {view}" if view else "")


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
