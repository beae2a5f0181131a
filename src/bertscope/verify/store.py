"""A store against this deployment: re-embed a sample of its texts and compare with the stored vectors.

The sample is stratified over the store's rows (one row drawn from each of `rows` equal slices), so every
batch a job wrote is represented; the draw is fresh each run (its seed is reported, `seed=` repeats it),
so rows edited where a fixed sample never looks are found by the next run. The texts are embedded with
the model recorded in the store (or the one given) and the store's own settings (layers, pooling,
prompt, post-processing); every view is checked.
Token, word and chunk stores (rows.py) re-embed the sampled rows' documents with the store's level and
compare the rows by (id, position). The stored batches that hold the sample are checked against their
checksums first (a damaged store is an error, never a verdict), and its settings against theirs: the
settings say which model, precision and pooling to re-embed with and how far a row may drift (a store
edited to claim int8 would be held to cosine 0.98), so settings changed since the store was written are
an error too. A fingerprint in the store's settings is compared with this deployment's too, before
anything is embedded: a model of another architecture (type, layers, width) is refused as the wrong
model, while a difference in its files or settings is drift that the headline names apart from the rows'.
The tolerances are drift.py's.

What a store cannot prove is said, not passed over: a store that records no fingerprint is checked on its
vectors alone (a note says so), one that records no checksum of its settings is taken at its settings'
word (a note says so), one that records no checksums of its rows (written before stores carried them) is
checked on the sampled rows alone (a note says so), one whose checksums cover its vectors but not its ids
(written before they did) has its ids checked where the sample falls (a note says so), one a newer
bertscope wrote (row checks past `ROW_CHECKS`) is checked as far as this version knows how (a note says
so), and its ids are checked against their texts only where the corpus is given (`corpus`: each sampled
row's stored text must be the corpus's text of its id, and a sentence store written by one job must hold
a row per corpus text). A job writes each id (and each position of it) once, so two sampled rows with the
same key are an edit, and where every row is sampled each text's rows must be all the fresh ones
(rows.py): errors, whatever the checksums say. A store whose settings carry their checksum was written by
a bertscope that stores row checksums too: missing ones were stripped (a re-save by another tool, an
edit), so it is refused as damaged, never passed on its sample; its sealed settings also say which row
checksums were kept (`checksums.ROW_CHECKS_KEY`), so those of its ids and texts, or the record of its
rows (a Parquet or .npy store's digest of its checksums, an SQLite collection's row count), stripped are
refused the same way. A batch that fails its checksum is damage, not drift (exit 2: the bytes changed
after they were written, so the store cannot testify about this deployment), and the rows of it that
changed are named with their ids (the row digests written beside the checksums; an SQLite row's own
checksums). A post-processing file other than the store's is bad input (its fingerprint names it), not
drift.
"""

from __future__ import annotations

import numbers
import os
import secrets
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..core.post import PostProcessor, as_post
from ..core.spec import EmbedOptions, PostArg, resolve
from ..errors import CorpusError, InvalidInput
from ..io.checksums import (
    ROW_CHECKS,
    ChecksumMismatch,
    changed,
    count_differs,
    rebuild_hint,
    row_checks,
    sealed,
    settings_edited,
)
from ..io.formats import Format, store_rules
from ..io.parquet_checked import (
    CHECKSUMS_MISSING,
    COUNTS_MISSING,
    LABELS_MISSING,
    RECORD_MISSING,
    CheckedParquet,
    checks_missing,
    readable_parquet,
    unproven,
)
from ..io.sqlite_rows import changed_rows
from ..io.sqlite_store import row_checksums
from ..io.stores import Store, open_store, view_settings, with_view
from ..io.vector_files import check_npy_rows, npy_changed_rows, stored_checksums
from .drift import StoreCheck, add_drift
from .fingerprint import compare_fingerprints, fingerprint_problem, store_fingerprint
from .rows import check_rows, corpus_texts_differ, refuse_repeated_rows, texts_by_id

__all__ = [
    "NO_FINGERPRINT",
    "NO_IDS_CHECKSUM",
    "NO_ROW_CHECKSUMS",
    "NO_SETTINGS_CHECKSUM",
    "StoreCheck",
    "open_checked",
    "refuse_edited_settings",
    "sample_rows",
    "verify_store",
]

# Rows of a store read at once where it is read in one pass (SQLite): a few MB, whatever the store's size.
_CHUNK_ROWS = 4096
NO_FINGERPRINT = (
    "the store records no fingerprint of the model that made it (written before stores carried one, or "
    "removed): only the sampled vectors were compared, not the model's files and settings"
)
NO_ROW_CHECKSUMS = (
    "the store records no checksums of its rows (written before stores carried them): only the sampled "
    "rows were checked, so an edit to any other row would not be found"
)
NO_IDS_CHECKSUM = (
    "the store's checksums cover its vectors, not its ids (written before they did): only the sampled "
    "rows' ids were checked, so ids swapped or edited outside the sample would not be found"
)
NO_SETTINGS_CHECKSUM = (
    "the store records no checksum of its settings (written before stores carried one, or removed): "
    "they were taken as they read, so an edit to them (another model, precision or pooling, a looser "
    "tolerance) would not be found"
)


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
    seed: int | None = None,
) -> StoreCheck:
    """Whether `store` and this deployment share one vector space (see the module docstring).

    `model`: a Model, a name, or None for the store's own as it ran. A store that keeps no texts (.npy,
    one written without them, a chunk store) needs the `corpus` it was made from (`text_field`,
    `id_field` as the job's). A store made with post-processing needs its file as `post`. `seed` repeats
    a check's sample (its report's `seed`); None draws a fresh one.
    """
    from ..io.search import model_for

    start = time.perf_counter()
    if isinstance(rows, bool) or not isinstance(rows, numbers.Integral) or rows < 1:
        raise InvalidInput(f"rows={rows!r}: give how many rows to check, at least 1")
    rows = int(rows)
    if seed is None:  # a sample nobody can know in advance: edits that avoid it cannot be planned
        seed = secrets.randbelow(2**32)
    elif isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InvalidInput(f"seed={seed!r}: give a whole number, 0 or more, or None for a fresh sample")
    seed = int(seed)
    if not isinstance(store, (str, os.PathLike, Store)):
        raise InvalidInput(f"store={store!r}: give the path of a store (a str or Path)")
    opened = store if isinstance(store, Store) else open_checked(store, collection=collection)
    refuse_edited_settings(opened)
    if "model" not in opened.settings:  # every job writes it: without it nothing says what made the rows
        hint = rebuild_hint(opened.path, opened.collection)
        raise CorpusError(
            f"{opened.path}: its settings do not say which model made it (no 'model'), so nothing can "
            f"prove its vectors; restore the settings it was written with, or {hint}"
        )
    processor = _same_post(opened, post)
    count = opened.count()
    if count == 0:
        raise InvalidInput(f"{opened.path} holds no rows to check")
    positions = sample_rows(count, rows, seed=seed)
    m = model_for(opened.settings, model, store_limit=True)  # re-embedded at the limit its rows were cut at
    check = StoreCheck(
        True, len(positions), 0.0, 1.0, store=str(opened.path), rows=count, model=m.info().source, seed=seed
    )
    recorded = opened.settings.get("fingerprint")
    problem = None if recorded is None else fingerprint_problem(recorded, canaries=False)
    if problem:  # found before anything is embedded
        hint = rebuild_hint(opened.path, opened.collection)
        raise CorpusError(f"{opened.path}: the fingerprint in its settings is damaged ({problem}); {hint}")
    found = None if recorded is None else store_fingerprint(m)
    if recorded is not None and found is not None:  # another model is refused before it embeds anything
        _refuse_another_model(opened, recorded, found, m.info().source, given=model is not None)
    from ..core.encoder import Encoder

    # the corpus is read as the job read it: a text its tokenizer gives no pieces is a bad record there too
    tokenizer = m.tokenizer if isinstance(m, Encoder) else None
    corpus_texts = {"corpus": corpus, "text_field": text_field, "id_field": id_field, "tokenizer": tokenizer}
    check.notes += _unchecked_rows(opened)  # checksums stripped are said before rows that miss them
    try:
        if opened.settings.get("level", "sentence") == "sentence":
            if opened.rules.format is Format.NPY:  # the stored batches that hold the sample, as Parquet's are
                check_npy_rows(opened.path, positions)
            _check_sentences(check, m, opened, positions, processor, corpus_texts)
        else:
            check_rows(check, m, opened, positions, corpus_texts)
    except ChecksumMismatch as exc:  # damage, not drift: name the rows of the batch that changed
        raise _named(opened, exc) from None
    if recorded is not None and found is not None:
        changes = compare_fingerprints(recorded, found)
        check.differences += changes
        check.model_changes = [d.what for d in changes]
        proven = _row_checksums(opened) is not None  # its vectors as the job wrote them
        if not changes and proven:
            _other_corpus_note(check, opened, corpus)  # the path given: texts were read from it
        elif not changes and _mostly_far(check):
            check.notes.append(_far_note(corpus, "no checksums of its rows to tell it from rows edited"))
    else:
        check.notes.append(NO_FINGERPRINT)
        if _mostly_far(check):
            check.notes.append(_far_note(corpus, "no fingerprint to tell it from the model changed"))
    if opened.settings_match is None:
        check.notes.append(NO_SETTINGS_CHECKSUM)
    if row_checks(opened.settings) > ROW_CHECKS:
        check.notes.append(_newer_note(row_checks(opened.settings)))
    check.ok = not check.differences
    check.seconds = time.perf_counter() - start
    return check


def _newer_note(generation: int) -> str:
    """The note for a store a newer bertscope wrote (row checks `generation`, past this one's): it was
    checked as far as this version knows how, not by the checks its writer added."""
    return (
        f"the store was written by a newer bertscope (row checks {generation}; this one knows up to "
        f"{ROW_CHECKS}): the checks it added were not made; upgrade bertscope to make them"
    )


def _mostly_far(check: StoreCheck) -> bool:
    """Whether most sampled rows, their texts read from the corpus given, are far off (`drift.far_cosine`)."""
    return check.texts_from_corpus and 2 * check.rows_far > check.rows_checked


def _other_corpus_note(check: StoreCheck, opened: Store, corpus: str | Path | None) -> None:
    """Where the model's files and settings are the store's own (its fingerprint matches), its rows are as
    the job wrote them (their checksums held) and most sampled rows, their texts read from the corpus
    given, are far off: a note naming the likeliest cause, texts that are not the ones the store embedded.
    It stays drift (exit 1), never a refusal: the fingerprint holds files and settings, not vectors, so a
    runtime that now gives other vectors (a library upgrade, a damaged export) reads the same."""
    if _mostly_far(check):
        check.notes.append(
            f"{check.rows_far} of the {check.rows_checked} rows checked are far off (min cosine "
            f"{check.min_cosine:.8f}) though the model's files and settings are the store's own: the "
            f"likeliest cause is {corpus}, not the corpus the store was made from or not in the order it "
            "was read (pass the store's own corpus, as it was read, with --corpus); if it is, this "
            "runtime gives other vectors than the one that wrote the store"
        )


def _far_note(given: str | Path | None, lacks: str) -> str:
    """The note for most rows far off where the store cannot prove the model its own, or its vectors as
    written (`lacks`: what it records none of)."""
    return (
        f"most rows checked are far off, and their texts were read from {given}: if it is not the corpus "
        f"the store was made from, in the order it was read, that is why; the store records {lacks}"
    )


# What makes a model another model, not this one changed: a store's rows cannot even be re-embedded by it.
_IDENTITY = {"model_type": "type", "family": "family", "layers": "layers", "hidden_size": "dimensions"}


def _refuse_another_model(
    opened: Store, recorded: dict[str, Any], found: dict[str, Any], source: str, *, given: bool
) -> None:
    """InvalidInput where the model to re-embed with has another architecture than the store's
    fingerprint records (type, family, layers, width): no verdict on its vectors, the wrong model."""
    want, got = recorded.get("settings", {}), found["settings"]
    differ = [k for k in _IDENTITY if want.get(k) != got.get(k)]
    if not differ:
        return
    made = opened.settings.get("model", "another model")
    there = ", ".join(f"{_IDENTITY[k]} {want.get(k)}" for k in differ)
    here = ", ".join(f"{_IDENTITY[k]} {got.get(k)}" for k in differ)
    store = f"{opened.path} was made with {made} (fingerprint {recorded.get('id')}: {there})"
    if given:
        raise InvalidInput(
            f"{store}, and model= (-m) names another model, {source} ({here}): leave model= (-m) out "
            "to check it with the model it was made with, or name that model"
        )
    raise InvalidInput(
        f"{store}, and its name loads another model here, {source} ({here}): give the model it was "
        "made with as model= (-m)"
    )


def open_checked(path: str | Path, *, collection: str | None = None) -> Store:
    """`open_store`, where a Parquet file cut short, or a store holding other rows than its checksums say
    were written, is refused naming the fix (rebuild it), as a .npy cut short is."""
    path = Path(path)
    if path.is_file() and store_rules(path).format is Format.PARQUET:
        readable_parquet(path)  # its footer first: open_store's refusal says no fix
    opened = open_store(path, collection=collection)
    if opened.rules.format is Format.NPY:
        _refuse_other_count(opened)
    return opened


def _refuse_other_count(opened: Store) -> None:
    """CorpusError where a .npy store holds another number of rows than its checksums say were written (a
    row removed or added: "holds 299 rows where 300 were written", not rows "not laid out")."""
    found = stored_checksums(opened.path)
    if found is None:
        return
    written = sum(int(batch["rows"]) for batch in found["batches"])
    if written != opened.count():
        raise count_differs(str(opened.path), opened.count(), written, rebuild_hint(opened.path))


def refuse_edited_settings(opened: Store) -> None:
    """Refuse a store whose settings do not match their checksum, or whose settings carry one (so its
    writer stored row checksums too) but whose row checksums are gone, before anything is loaded or
    read by what they say (a model they name, the int8 bound they claim)."""
    hint = rebuild_hint(opened.path, opened.collection)
    if opened.settings_match is False:
        raise settings_edited(_settings_where(opened), hint)
    if not opened.settings_match:
        return
    # The test reading rows applies (`checks_missing`, to the settings as the store keeps them, sealed:
    # they matched their digest above); here the refusal also says where the checksums were kept.
    missing = checks_missing(sealed(opened.settings), _row_checksums(opened))
    if missing is None:
        return
    fmt = opened.rules.format
    where = _WHERE[missing][fmt]
    if fmt is Format.SQLITE:
        raise unproven(_store_where(opened), f"{missing} ({where})", None, hint, how="copied")
    raise unproven(_store_where(opened), f"{missing} ({where})", None, hint)


# Where a format keeps what `checks_missing` finds missing (its row checksums, those of its rows' ids and
# texts, the record of its rows: their count, its batch list), for the refusal.
_WHERE = {
    CHECKSUMS_MISSING: {
        Format.PARQUET: "no `bertscope.checksums` in its metadata",
        Format.NPY: 'no "checksums" in its .settings.json',
        Format.SQLITE: "NULL in its rows' `checksum` column",
    },
    LABELS_MISSING: {
        Format.PARQUET: 'no "id" in the row groups of its `bertscope.checksums`',
        Format.NPY: 'no "labels" in the batches of the "checksums" in its .settings.json',
        Format.SQLITE: "NULL in its rows' `labels_checksum` column",
    },
    COUNTS_MISSING: {
        Format.PARQUET: 'no "n_tokens" or "truncated" in the row groups of its `bertscope.checksums`',
        Format.NPY: 'no "labels" in the batches of the "checksums" in its .settings.json',
        Format.SQLITE: "NULL in its rows' `labels_checksum` column",
    },
    RECORD_MISSING: {
        Format.PARQUET: 'no "sha256" in its `bertscope.checksums`',
        Format.NPY: 'no "sha256" in the "checksums" in its .settings.json',
        Format.SQLITE: "NULL in its collection's `row_count`",
    },
}


def _row_checksums(opened: Store) -> dict[str, Any] | None:
    """The row checksums a store records (None where it records none), with `labels_checked`: whether
    they cover its ids, not its vectors alone."""
    if opened.rules.format is Format.SQLITE:
        return row_checksums(opened.path, str(opened.collection))
    return stored_checksums(opened.path)


def _store_where(opened: Store) -> str:
    """The store in messages: its file, or its collection in the file."""
    return f"collection {opened.collection!r} in {opened.path}" if opened.collection else str(opened.path)


def _unchecked_rows(opened: Store) -> list[str]:
    """Notes for what a store's checksums leave out: its rows (none recorded), or its ids."""
    found = _row_checksums(opened)
    if found is None:
        return [NO_ROW_CHECKSUMS]
    return [] if found["labels_checked"] else [NO_IDS_CHECKSUM]


def _named(opened: Store, exc: ChecksumMismatch) -> Exception:
    """The error naming the rows (and ids) of a failed batch that changed, where their digests tell
    them; else the batch's own error."""
    first = exc.rows[0]
    if opened.rules.format is Format.NPY:
        found = npy_changed_rows(opened.path, first)
    elif opened.rules.format is Format.PARQUET:
        found = CheckedParquet(opened.path).changed_rows(first)
    else:  # each row keeps its own checksums: the rows that fail them are the rows that changed
        found = changed_rows(opened.path, str(opened.collection), exc.rows)
    if found is None:
        return exc
    rows, ids = found
    hint = rebuild_hint(opened.path, opened.collection)
    # an SQLite collection has no row numbers (its rowid order is not its texts' order): ids alone
    numbered = opened.rules.format is not Format.SQLITE
    return changed(_store_where(opened), rows, ids, hint, numbered=numbered)


def _check_sentences(
    check: StoreCheck,
    model: Any,
    opened: Store,
    positions: np.ndarray,
    post: PostProcessor | None,
    corpus: dict[str, Any],
) -> None:
    texts: list[str] | None = None
    for view in list(opened.settings.get("views") or {}) or [None]:
        column = with_view(opened, view)
        ids, stored_texts, stored = _read_rows(column, positions)
        labels = _labels(opened, positions, ids)
        if texts is None:
            refuse_repeated_rows(opened, positions, ids)
            whole = all(isinstance(t, str) for t in stored_texts)
            texts = (
                [str(t) for t in stored_texts]
                if whole
                else texts_by_id(ids, corpus, opened.path, rows=_rows_per_text(opened, check.rows))
            )
            check.texts_from_corpus = not whole
            if whole and corpus["corpus"] is not None:  # the ids too: each row's text is its id's
                each = _rows_per_text(opened, check.rows)  # and a row per text: none removed, none added
                corpus_texts_differ(
                    labels, ids, texts, corpus, opened.path, rows=each, collection=opened.collection
                )
        settings = view_settings(column)
        options = replace(EmbedOptions.from_settings(settings, post=post), prompt=settings.get("prompt", ""))
        fresh = np.asarray(model.embed_with(texts, resolve(model, options)).vectors, dtype=np.float32)
        add_drift(check, model, settings, labels, stored, fresh, column=f"view {view}" if view else "")


def _labels(opened: Store, positions: np.ndarray, ids: list[str]) -> list[str]:
    """How the sampled rows are named: `row 5 (id 6)`, or `id 6` in an SQLite collection, which has no
    row numbers (its rowid order is not the order its texts were read in)."""
    if opened.rules.format is Format.SQLITE:
        return [f"id {i}" for i in ids]
    return [f"row {int(p)} (id {i})" for p, i in zip(positions, ids, strict=True)]


def _rows_per_text(opened: Store, rows: int) -> int | None:
    """The texts the store's corpus holds: a row each, where one job wrote the store (an SQLite
    collection grows by a job per input, so its count says nothing of one corpus)."""
    return None if opened.collection is not None else rows


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
    for chunk_ids, chunk_texts, vectors in store.chunks(_CHUNK_ROWS):
        for row in range(len(chunk_ids)):
            slot = wanted.get(offset + row)
            if slot is not None:  # a copy: a view of the row would keep its whole chunk alive
                got_ids[slot], got_texts[slot] = chunk_ids[row], chunk_texts[row]
                got[slot] = np.array(vectors[row], dtype=np.float32)
        offset += len(chunk_ids)
    return got_ids, got_texts, np.stack(got)


def _settings_where(opened: Store) -> str:
    """Where a store keeps its settings, for messages: its collection, or the file beside a .npy."""
    if opened.collection:
        return f"collection {opened.collection!r} in {opened.path}"
    if opened.rules.format is Format.NPY:
        return f"{opened.path} ({opened.path.with_suffix('.settings.json').name})"
    return str(opened.path)


def _same_post(opened: Store, post: PostArg) -> PostProcessor | None:
    """The post-processing file given, read once, refused unless it is the one the store was made with
    (a store without one takes none; a recorded fingerprint must match): bad input, not drift."""
    recorded = opened.settings.get("post")
    if recorded and post is None:
        kind = recorded.get("kind", "post-processing")
        raise InvalidInput(
            f"{opened.path}'s vectors went through {kind}: pass the same file as post= (--post)"
        )
    processor = as_post(post)
    if processor is None:
        return None
    if not recorded:
        raise InvalidInput(
            f"{opened.path}'s vectors were made without post-processing: leave post= (--post) out"
        )
    if "fingerprint" in recorded and processor.fingerprint != recorded["fingerprint"]:
        raise InvalidInput(
            f"{opened.path}'s vectors went through another {recorded.get('kind', 'post-processing')} "
            f"(fingerprint {str(recorded['fingerprint'])[:12]}) than the file given ({processor.kind.value}, "
            f"{processor.fingerprint[:12]}): pass the file the store was made with"
        )
    return processor
