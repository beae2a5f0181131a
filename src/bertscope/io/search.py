"""Searching a stored output: exact top-k cosine, or the ANN index's candidates ranked exactly.

The query (a text embedded the store's way, by the store's own model, or a vector) is `io.query`'s.
"""

from __future__ import annotations

import itertools
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from ..core.renamed import renamed_keyword, top_k_given
from ..core.similarity import Hit, TopK
from ..core.spec import EmbedOptions, whole_number
from ..errors import CorpusError, InvalidInput
from . import index as ann  # looked up per call: tests watch ann.ann_search
from .checksums import column_values, rebuild_hint
from .formats import Format, refuse_collection
from .level_table import level_of
from .parquet_checked import CheckedParquet
from .query import embed_query, model_for, query_vector, refuse_unread
from .stores import Store, open_store, view_settings, with_view
from .vector_files import Chunk, check_npy_rows, open_matrix

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from typing_extensions import Unpack

    from ..core.spec import QueryKeywords

__all__ = ["search", "model_for"]


def search(
    query: str | ArrayLike | None,
    store: str | Path | Store,
    *,
    collection: str | None = None,
    top_k: int | None = None,
    item_id: str | None = None,
    model: Any = None,
    view: str | None = None,
    exact: bool = False,
    nprobe: int | None = None,
    rows_per_read: int | None = None,
    chunk_size: int | None = None,
    k: int | None = None,
    **query_options: Unpack[QueryKeywords],
) -> list[Hit]:
    """Top-k cosine search of a stored output, by a query text, a vector, or a stored id: the `top_k`
    nearest (default 5; `k=` is its older spelling, still read).

    With a fresh ANN index beside the store (`build_index`) the index proposes candidates and they are
    ranked by their exact cosines (`nprobe`: index cells visited, more for recall, fewer for speed; not
    with `exact`); `exact=True`, no index, or a stale one (warned) scan every row, `rows_per_read` rows
    at a time (default 65536; `chunk_size` is its deprecated old name). Cosines are clipped to [-1, 1];
    of rows with equal cosines the one stored first ranks first, with or without the index. A chunk
    store (.parquet, or .npy with its `.rows.jsonl`) is searched alike, each hit its document's id with
    the chunk's number and span.
    A query vector is any 1-D sequence of numbers (a list, a NumPy or torch array) of the store's width;
    one with NaN or infinite values, or all zeros, is refused (`InvalidInput`). `item_id` searches by the
    stored vector of that id: a store made from a list or a text file has ids "1".."n", a text's position
    counted from 1 (so `Hit(id="2")` is `texts[1]`), unless the records named their own (`id_field`).
    A store with several views searches the one named by `view`, embedding the query its way.
    A query text is embedded the store's way, by the model the store was made with (the same files;
    `model` defaults to the store's own): a store made with a passage prompt is searched with the
    model's query prompt where it has one (`prompt_name` / `prompt` choose another); `post` is the
    post-processing the store was made with (`QueryKeywords`). The store's recipe (layers, pooling,
    normalize, ...) is not an option here: one given is refused (InvalidSpec), as is any option given
    with a query vector or an id (`model` too), which are not embedded.
    """
    k = top_k_given(top_k, k, old="k", default=5, error=CorpusError)
    if nprobe is not None:
        ann.check_nprobe(nprobe)
        if exact:
            raise InvalidInput(
                "nprobe= (--nprobe) is how many cells of the ANN index to visit, and exact=True (--exact) "
                "reads every row without the index: give one or the other"
            )
    per_read = renamed_keyword(
        rows_per_read, chunk_size, name="rows_per_read", old="chunk_size", caller="search"
    )
    per_read = 65536 if per_read is None else whole_number(per_read, "rows_per_read", error=CorpusError)
    asked = EmbedOptions.given(**query_options)
    if item_id is not None and query is not None:
        raise InvalidInput("give a query or item_id= (a stored id to search by), not both")
    if isinstance(store, Store):
        refuse_collection(store.path, collection)  # an opened store's own is the one searched
    opened = store if isinstance(store, Store) else open_store(store, collection=collection)
    level = level_of(opened.settings.get("level", "sentence"))
    if not level.searchable:
        if opened.rules.format is not Format.PARQUET:  # occurrences are read from a Parquet store's columns
            raise CorpusError(
                f"{opened.path} holds {level.name.value} rows, not one vector per text, and occurrences "
                f"are searched in a .parquet store of them only: embed the corpus again with -o "
                f"{opened.path.with_suffix('.parquet').name} --level {level.name.value} (output= a .parquet "
                "file), then search it by occurrence (bertscope similar --store STORE --word WORD)"
            )
        raise CorpusError(
            f"{opened.path} holds {level.name.value} rows, not one vector per text; search it by occurrence "
            "(search_occurrences, or bertscope similar --store STORE --word WORD --context TEXT)"
        )
    spans = level.spans  # a hit is a span of a document: its id, number and span come back
    if spans and item_id is not None:
        raise CorpusError(
            f"{opened.path}: a store of {level.name.value} is searched by a query text or vector; an id "
            "names a whole document of several chunks, not one vector"
        )
    opened = with_view(opened, view)
    settings = view_settings(opened)
    if query is None and item_id is None:
        raise CorpusError("give a query text, a query vector or a stored id (item_id=) to search with")
    if isinstance(query, str):
        refuse_unread(asked, settings, opened.path, vector=None)
        vector = embed_query(query, settings, model, asked, opened.path)
    else:
        what = "the query vector" if item_id is None else f"the stored vector of {item_id!r}"
        refuse_unread(asked, settings, opened.path, vector=what, model_given=model is not None)
        width = _stored_width(opened) if item_id is None else None  # a stored vector has the store's own
        vector = (
            opened.vector_of(str(item_id), size=per_read)
            if item_id is not None
            else query_vector(query, width)
        )
    _check_query(vector, item_id)
    exclude = None if item_id is None else str(item_id)
    found = None if exact else _index_state(opened)
    state = found if found is not None and found.fresh else None
    if nprobe is not None and (found is None or found.status == "missing"):
        build = f"build one ({ann.index_build_command(opened)}) or " if opened.rules.by_row else ""
        raise CorpusError(
            f"nprobe= (--nprobe) is how many cells of the ANN index to visit, and {opened.path} has no "
            f"index (every row is read): {build}leave nprobe= out"
        )
    labels = (lambda rows: _span_labels(opened, rows)) if spans else None
    if state is not None:
        hits = ann.ann_search(opened, vector, k=k, state=state, exclude=exclude, nprobe=nprobe, labels=labels)
    else:
        top = TopK(vector, k, exclude=exclude)
        for ids, texts, vectors in _span_rows(opened, per_read) if spans else opened.chunks(per_read):
            top.add(ids, texts, vectors)
        hits = top.hits
    return [_span_hit(hit) for hit in hits] if spans else hits


def _stored_width(store: Store) -> int | None:
    """The width of the vectors a search reads, for a query vector's check before any row is: the column's
    (a view's own) in a Parquet store's schema, the collection's recorded dimension in SQLite, the
    settings' of a .npy store; None where nothing says (an empty store: nothing to compare)."""
    width: object = None
    if store.rules.format is Format.PARQUET:
        import pyarrow.parquet as pq

        schema = pq.read_schema(store.path)
        found = schema.get_field_index(store.read_column)
        width = getattr(schema.field(found).type, "list_size", None) if found >= 0 else None
    elif store.rules.format is Format.SQLITE:
        from .sqlite_reader import list_collections

        width = next(
            (c["dimension"] for c in list_collections(store.path) if c["name"] == store.collection), None
        )
    else:
        width = store.settings.get("dimension")
    return width if isinstance(width, int) and not isinstance(width, bool) and width > 0 else None


def _check_query(vector: np.ndarray, item_id: str | None) -> None:
    """Refuse a query vector with no direction: NaN or infinite values, or all zeros (cosine undefined)."""
    what = "the query vector" if item_id is None else f"the stored vector of {item_id!r}"
    values = np.asarray(vector, dtype=np.float64)
    if not np.isfinite(values).all():
        raise InvalidInput(f"{what} holds NaN or infinite values; search with a vector of finite numbers")
    if not values.any():
        raise InvalidInput(
            f"{what} is all zeros, so its cosine to every row is undefined; search with a nonzero vector"
        )


def _index_state(opened: Store) -> ann.IndexState | None:
    """The state of the store's ANN index (fresh, missing, or stale: warned of, and searched without), or
    None for a format searched without one. Read once per search (it reads the store's checksums)."""
    if not opened.rules.by_row:
        return None
    state = ann.index_state(opened)
    if state.status == "stale":
        warnings.warn(
            f"{state.reason}: searching every row instead; {ann.rebuild_index(opened)}",
            ann.IndexStaleWarning,
            stacklevel=3,
        )
    return state


# A chunk store's rows are keyed by their chunk: (document id, chunk number, start, end) as JSON.
_SPAN = ("id", "position", "start", "end")


def _span_rows(store: Store, size: int) -> Iterator[Chunk]:
    """(keys, texts, vectors (rows, d)) of every row of a chunk store, `size` rows at a time, checked."""
    if store.rules.mapped:  # .npy: the matrix, and its rows' labels in <stem>.rows.jsonl
        check_npy_rows(store.path)
        matrix = open_matrix(store.path)
        labels = _jsonl_rows(store.path)
        for start in range(0, len(matrix), size):
            block = np.asarray(matrix[start : start + size], dtype=np.float32)
            rows = list(itertools.islice(labels, len(block)))
            if len(rows) < len(block):
                _labels_end(store.path, start + len(rows), len(matrix))
            yield [_key(row) for row in rows], [row.get("text") for row in rows], block
        return
    checked = CheckedParquet(store.path)
    names = [n for n in (*_SPAN, "text", store.column) if n in checked.file.schema_arrow.names]
    for table in checked.tables(names, size):
        rows = table.drop_columns([store.column]).to_pylist()
        vectors = column_values(table[store.column])
        yield [_key(row) for row in rows], [row.get("text") for row in rows], vectors


def _span_labels(store: Store, rows: np.ndarray) -> tuple[list[str], list[str | None]]:
    """(keys, texts) of a chunk store's row numbers `rows`, in that order (the index's candidates)."""
    found: dict[int, dict[str, Any]] = {}
    if store.rules.mapped:
        wanted = {int(r) for r in rows}
        for number, row in enumerate(_jsonl_rows(store.path) if wanted else ()):
            if number in wanted:
                found[number] = row
                if len(found) == len(wanted):
                    break
        if len(found) < len(wanted):
            _labels_end(store.path, min(wanted - found.keys()), len(open_matrix(store.path)))
    else:
        import pyarrow as pa

        checked = CheckedParquet(store.path)
        names = [n for n in (*_SPAN, "text") if n in checked.file.schema_arrow.names]
        groups = np.searchsorted(checked.starts, rows, side="right") - 1
        for group in np.unique(groups):
            picked = rows[groups == group]
            local = pa.array(picked - checked.starts[group])
            table = checked.group(int(group), names).take(local)
            found.update(zip(picked.tolist(), table.to_pylist(), strict=True))
    labelled = [found[int(r)] for r in rows]
    return [_key(row) for row in labelled], [row.get("text") for row in labelled]


def _jsonl_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows' labels of a .npy chunk store, one JSON object a line of `<stem>.rows.jsonl`."""
    labels = path.with_suffix(".rows.jsonl")
    number = 1  # the line being read
    try:
        with labels.open(encoding="utf-8") as lines:
            for line in lines:
                row = json.loads(line)
                if not isinstance(row, dict) or any(name not in row for name in _SPAN):
                    raise ValueError
                yield row
                number += 1
    except OSError as exc:
        raise CorpusError(f"cannot read {labels}: {exc.strerror or exc}") from None
    except ValueError:  # not UTF-8, not JSON, or not a chunk's labels
        raise CorpusError(
            f"line {number} of {labels} is not a chunk's labels (a JSON object with {', '.join(_SPAN)}): "
            f"the store is damaged; {rebuild_hint(path)}"
        ) from None


def _labels_end(path: Path, row: int, rows: int) -> NoReturn:
    raise CorpusError(
        f"{path.with_suffix('.rows.jsonl')} ends before row {row} of the {rows} rows of {path}: the store "
        f"is damaged; {rebuild_hint(path)}"
    )


def _key(row: dict[str, Any]) -> str:
    return json.dumps([row[name] for name in _SPAN])


def _span_hit(hit: Hit) -> Hit:
    """A hit keyed by its chunk, as the document's id with the chunk's number and span."""
    doc, number, start, end = json.loads(hit.id)
    return Hit(doc, hit.score, hit.text, chunk=number, start=start, end=end)
