"""Token, word and chunk stores (a row per token, word or chunk of a text) against this deployment.

The documents behind the sampled rows are embedded again with the store's own level and settings (the
same `make_level` the corpus job ran), and each sampled row is compared with the fresh row of the same
(id, position), in every vector column (`embedding`, or one `layer_N` per kept layer). Tokens and words
take each document's text from its first row; chunk rows hold their chunk only, so a chunk store (and one
written without texts) needs the corpus it was made from. Parquet and .npy stores (a matrix with its row
labels in `<stem>.rows.jsonl`); SQLite stores hold sentence vectors only. Only the sampled rows' labels,
texts and vectors are read (row_labels.py), each vector checked against its stored checksum first (a
.npy's labels too, up to the end of the last batch that holds the sample; a Parquet store's other
columns, position, token, word, offsets ..., in the row groups that hold the sample, where its checksums
cover them: `check_parquet_labels`). A corpus is read as the job
read it: the records a job run with --skip-bad set aside (its `<store>.rejects`) are set aside again, and
those only (`texts_by_id`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..core.spec import EmbedOptions
from ..errors import CorpusError, InvalidInput
from ..io.checksums import column_values, covered_columns, rebuild_hint, vector_names
from ..io.formats import Format
from ..io.level_table import CorpusOptions, make_level
from ..io.levels import LevelOptions, WordLevel
from ..io.parquet_checked import CheckedParquet
from ..io.readers import Record, Rejects
from ..io.stores import Store
from ..io.vector_files import check_npy_rows, open_matrix
from .drift import StoreCheck, add_drift
from .fingerprint import Difference
from .row_labels import first_texts, sampled_keys

__all__ = ["check_parquet_labels", "check_rows", "corpus_texts_differ", "refuse_repeated_rows", "texts_by_id"]


def check_rows(
    check: StoreCheck, model: Any, opened: Store, positions: np.ndarray, corpus: dict[str, Any]
) -> None:
    """Add the drift of a token, word or chunk store's sampled rows to `check` (see the module docstring)."""
    settings = opened.settings
    level = settings["level"]
    if opened.rules.format is Format.PARQUET:  # every column of the groups that hold the sample, first: an
        check_parquet_labels(opened.path, positions)  # edited position or word is damage, not drift
    sampled = sampled_keys(opened, positions)  # a line that cannot be read is named as such
    if opened.rules.format is Format.NPY:  # the batches that hold the sample, vectors and labels, before
        check_npy_rows(opened.path, positions)  # an edited id sends the texts to the wrong document
    refuse_repeated_rows(opened, positions, sampled, "id {!r} at position {}")
    docs = list(dict.fromkeys(doc for doc, _ in sampled))
    stored_texts = first_texts(opened, docs, int(positions[-1])) if level != "chunks" else {}
    if all(doc in stored_texts for doc in docs):
        texts = [stored_texts[doc] for doc in docs]
        if corpus["corpus"] is not None:  # the ids too: each document's stored text is its id's
            labels = [f"text {doc}" for doc in docs]
            corpus_texts_differ(
                labels, docs, texts, corpus, opened.path, collection=opened.collection, checked="texts"
            )
    else:
        texts = texts_by_id(docs, corpus, opened.path, chunks=level == "chunks")
        check.texts_from_corpus = True
    rows_of = _level(level, model, settings)  # the job's level: the sampled texts' rows, and lost texts'
    made = rows_of.embed([Record(d, t, 0) for d, t in zip(docs, texts, strict=True)])
    fresh_rows = {
        (str(doc), int(place)): row
        for row, (doc, place) in enumerate(
            zip(made.table.column("id").to_pylist(), made.table.column("position").to_pylist(), strict=True)
        )
    }
    if len(positions) == check.rows:  # every row read: each text's rows are all its fresh ones, no fewer
        if corpus["corpus"] is not None:  # and each corpus text that makes rows has them
            _refuse_lost_texts(opened, rows_of, set(docs), corpus)
        kept = set(sampled)
        lost = [key for key in fresh_rows if key not in kept]  # every fresh row is of a sampled text
        if lost:
            doc, place = lost[0]
            raise CorpusError(
                f"{opened.path} lacks row {place} of text {doc} ({len(lost)} row(s) of its texts in all), "
                f"which the store's settings make: rows were removed after it was written; "
                f"{rebuild_hint(opened.path, opened.collection)}"
            )
    present = [i for i, key in enumerate(sampled) if key in fresh_rows]
    for i in [i for i, key in enumerate(sampled) if key not in fresh_rows][:5]:
        doc, place = sampled[i]
        found = f"no row {place} made for text {doc} here"
        check.differences.append(
            Difference(f"row {int(positions[i])} (id {doc}, position {place})", "stored", found)
        )
    if opened.rules.format is Format.NPY:  # a .npy's columns are the level's, in order
        stored_of, columns = _npy_vectors(opened, positions), vector_names(made.table.schema)
    else:
        stored_of, columns = _parquet_vectors(opened), _parquet_columns(opened.path)
    labels = [f"row {int(positions[i])} (id {sampled[i][0]}, position {sampled[i][1]})" for i in present]
    for number, column in enumerate(columns):
        stored = stored_of(positions[present], number, column)
        fresh = column_values(made.table.column(column)).astype(np.float32)
        fresh = fresh[[fresh_rows[sampled[i]] for i in present]]
        name = column if len(columns) > 1 else ""
        add_drift(check, model, settings, labels, stored, fresh, column=name)


_Stored = Callable[[np.ndarray, int, str], np.ndarray]  # (rows, column number, column name) -> (rows, d)


def _parquet_vectors(opened: Store) -> _Stored:
    """How to read sampled vectors of a Parquet store (the row groups that hold them, each checked)."""

    def stored(rows: np.ndarray, number: int, column: str) -> np.ndarray:
        return np.asarray(replace(opened, column=column).take(rows)[2], dtype=np.float32)

    return stored


def _npy_vectors(opened: Store, positions: np.ndarray) -> _Stored:
    """How to read sampled vectors of a .npy matrix ((rows, d), or (rows, layers, d) where each layer kept
    its own column: the level's columns in order); `check_rows` has checked the stored batches that hold
    `positions` against their checksums (a store written before them: those rows checked to be finite)."""
    matrix = open_matrix(opened.path)

    def stored(rows: np.ndarray, number: int, column: str) -> np.ndarray:
        picked = np.asarray(matrix[np.sort(rows)] if len(rows) else matrix[:0], dtype=np.float32)
        picked = picked[np.argsort(np.argsort(rows))]  # back in the order asked
        return picked[:, number] if picked.ndim == 3 else picked

    return stored


def check_parquet_labels(path: Path, rows: np.ndarray) -> None:
    """Check the columns other than vectors (`covered_columns`) of the row groups of a Parquet store that
    hold `rows` against their checksums (a group keeps one per column; one written before every column
    was covered keeps them for ids, texts and counts only): a `ChecksumMismatch` for a group that fails.
    The vectors are checked where they are read."""
    checked = CheckedParquet(path)
    columns = covered_columns(checked.file.schema_arrow)
    groups = np.unique(np.searchsorted(checked.starts, np.asarray(rows, dtype=np.int64), side="right") - 1)
    for number in groups:
        checked.group(int(number), columns)


def _parquet_columns(path: Path) -> list[str]:
    """The vector columns of a Parquet store."""
    import pyarrow.parquet as pq

    return vector_names(pq.ParquetFile(path).schema_arrow)


def _level(level: str, model: Any, settings: dict[str, Any]) -> Any:
    """The corpus level the store was written with, from its settings (an unpooled level: its own only)."""
    asked = LevelOptions.from_settings({**settings, "level": level})
    made = make_level(model, CorpusOptions(EmbedOptions.from_settings(settings), asked).for_level())
    if isinstance(made, WordLevel):
        made.as_stored(settings)
    return made


def refuse_repeated_rows(
    opened: Store, positions: np.ndarray, keys: Sequence[Hashable], shown: str = "id {!r}"
) -> None:
    """CorpusError where two sampled rows hold the same key (an id; an id and position): a job writes each
    once and refuses repeated ids, so the store was edited after it was written, whatever its checksums
    say (they can be made again). `shown` formats a key for the message."""
    first: dict[Hashable, int] = {}
    for row, key in zip(positions.tolist(), keys, strict=True):
        if key in first:
            named = shown.format(*key) if isinstance(key, tuple) else shown.format(key)
            raise CorpusError(
                f"{opened.path} holds {named} in rows {first[key]} and {row}: a job writes each once, so the "
                f"store was edited after it was written; {rebuild_hint(opened.path, opened.collection)}"
            )
        first[key] = row


def corpus_texts_differ(
    labels: Sequence[str],
    ids: Sequence[str],
    texts: Sequence[str],
    corpus: dict[str, Any],
    path: Path,
    *,
    rows: int | None = None,
    collection: str | None = None,
    checked: str = "rows",
) -> None:
    """Refuse stored texts (named by `labels`) that are not the corpus's texts of their ids: most of them,
    the corpus is not the store's (or not in its order: InvalidInput); a few, ids swapped or edited in the
    store, which the vectors alone cannot show, a row's vector being its stored text's (CorpusError).
    Never drift: the model is not at fault. `rows` as `texts_by_id`'s (a row per text: the corpus must
    hold that many); `collection`: the store's, for the rebuild it names; `checked`: what `labels` name
    ("rows", or "texts" of a token or word store)."""
    expected = texts_by_id(ids, corpus, path, rows=rows)
    differ = [
        f"{label} holds {_short(text)!r}"
        for label, text, want in zip(labels, texts, expected, strict=True)
        if text != want
    ]
    if not differ:
        return
    given = corpus["corpus"]
    shown = "; ".join(differ[:2]) + (f"; and {len(differ) - 2} more" if len(differ) > 2 else "")
    said = (
        f"{path}'s stored texts are not {given}'s texts of their ids in {len(differ)} of the {len(labels)} "
        f"{checked} checked ({shown})"
    )
    if 2 * len(differ) > len(labels):
        raise InvalidInput(
            f"{said}: {given} is not the corpus the store was made from, or not in the order it was read; "
            "pass the store's own corpus with --corpus (corpus=), or leave it out: the store keeps its texts"
        )
    raise CorpusError(
        f"{said}: their ids were swapped or edited after the store was written, or {given}'s texts of them "
        f"changed since; pass the store's own corpus with --corpus (corpus=), or "
        f"{rebuild_hint(path, collection)}"
    )


def _short(text: str, size: int = 40) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def texts_by_id(
    ids: Sequence[str], corpus: dict[str, Any], path: Path, *, rows: int | None = None, chunks: bool = False
) -> list[str]:
    """The texts of `ids` read from the corpus a store was made from (`corpus`: verify_store's options).

    `rows`: the store holds a row per text (sentence vectors), so the corpus must hold that many texts:
    another corpus whose ids overlap would otherwise pass its texts off as the store's and read as drift.
    `chunks`: the store keeps its chunks' texts, which are re-embedded from their whole documents.
    """
    if corpus["corpus"] is None:
        kept = (
            "its chunks' texts, not the whole documents to re-embed them from"
            if chunks
            else "no texts to re-embed"
        )
        raise InvalidInput(f"{path} keeps {kept}: pass the corpus it was made from (corpus=, --corpus FILE)")
    wanted = set(ids)
    found: dict[str, str] = {}
    counted = 0
    for record in _corpus_records(corpus, path):
        counted += 1
        if record.id in wanted:
            found[record.id] = record.text
            if len(found) == len(wanted) and rows is None:
                break
    if rows is not None and counted != rows:
        raise InvalidInput(
            f"{corpus['corpus']} holds {counted} texts and {path} {rows} rows: it is not the corpus the "
            "store was made from, or rows were added to or removed from the store after it was written; "
            "pass the store's own corpus with --corpus (corpus=)"
        )
    missing = [i for i in ids if i not in found]
    if missing:
        # a store made with id_field= numbers its rows by that field; read without it, the corpus's ids
        # are its line numbers, and no id of the store is found
        fields = ""
        if corpus["id_field"] is None:
            fields = " If it is, the store was made with an id field: give the id_field= its job was given"
        raise InvalidInput(
            f"{corpus['corpus']} has no text with id {missing[0]!r} of {path}: is it the store's "
            f"corpus?{fields}"
        )
    return [found[i] for i in ids]


def _corpus_records(corpus: dict[str, Any], path: Path) -> Iterator[Record]:
    """The records of the corpus a store was made from, read as its job read them: the records the job set
    aside (--skip-bad) are set aside here too, and those only, read with its tokenizer too; each record
    skipped here must be one its .rejects file lists."""
    from ..io.readers import read_corpus

    set_aside, rejects = _job_rejects(path), Rejects()
    records = read_corpus(
        corpus["corpus"], text_field=corpus["text_field"], id_field=corpus["id_field"],
        skip_bad=set_aside is not None, rejects=rejects, tokenizer=corpus.get("tokenizer"),
    )  # fmt: skip
    for record in records:
        _refuse_unlisted(rejects, set_aside, path)
        yield record
    _refuse_unlisted(rejects, set_aside, path)


def _refuse_lost_texts(opened: Store, level: Any, docs: set[str], corpus: dict[str, Any]) -> None:
    """CorpusError where the corpus holds a text the store has no row of, and the store's settings make rows
    of it (every row read): its rows were removed after it was written. A text that makes no rows (none
    kept at this level) is no loss; the texts not in the store are embedded a few at a time, up to the
    first that makes rows."""
    lost: list[Record] = []
    for record in _corpus_records(corpus, opened.path):
        if record.id not in docs:
            lost.append(record)
        if len(lost) == _LOST_BATCH:
            _refuse_if_made(opened, level, lost, corpus["corpus"])
            lost = []
    _refuse_if_made(opened, level, lost, corpus["corpus"])


# The texts missing from a store embedded at once to see whether they make rows.
_LOST_BATCH = 16


def _refuse_if_made(opened: Store, level: Any, records: list[Record], given: Any) -> None:
    """CorpusError naming the first of `records` (texts of the corpus `given` with no row in the store) that
    makes rows: the corpus is another (a larger one) or the store's rows were removed."""
    if not records:
        return
    made = level.embed(records).table.column("id").to_pylist()
    for record in records:
        if record.id in made:
            raise CorpusError(
                f"{opened.path} has no row of text {record.id} of the corpus, which the store's settings "
                f"make rows of ({made.count(record.id)} here): {given} is not the corpus the store was made "
                "from, or rows were removed from the store after it was written; pass the store's own corpus "
                f"with --corpus (corpus=), or {rebuild_hint(opened.path, opened.collection)}"
            )


def _job_rejects(path: Path) -> set[str] | None:
    """The records the job that wrote the store at `path` set aside (`bertscope embed --skip-bad` lists
    them in `<store>.rejects`), each as `_reject_key` says it, or None where it set none aside."""
    listed = Path(f"{path}.rejects")
    if not listed.is_file():
        return None
    with listed.open(encoding="utf-8", errors="surrogateescape") as lines:
        return {_reject_key(line.rstrip("\n")) for line in lines if line.strip()}


def _reject_key(line: str) -> str:
    """A set-aside record's complaint without its corpus's name ("c.jsonl:2: no field 'text'" is
    ":2: no field 'text'"): the job's names the corpus as the job was given it, verify's as verify is."""
    found = re.search(r":\d+(?:-\d+)?: ", line)
    return line[found.start() :] if found else line


def _refuse_unlisted(rejects: Rejects, set_aside: set[str] | None, path: Path) -> None:
    """CorpusError for a record set aside here (`rejects.bad`) that the store's job did not set aside:
    the corpus is not the one it read (a malformed record without --skip-bad is refused by the reader)."""
    while rejects.bad:
        complaint = rejects.bad.pop()
        if set_aside is None or _reject_key(complaint) not in set_aside:
            raise CorpusError(
                f"{complaint}; the job that wrote {path} did not set this record aside ({path}.rejects "
                "does not list it): is it the store's corpus?"
            )
