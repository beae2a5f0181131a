"""Reading .parquet and .npy stores back: settings, rows in chunks, rows by number, vector columns.

Each reader answers the questions of `formats.StoreReader` for its format; `stores.Store` asks them
through the format table (formats.py), never by testing a suffix. Every batch of vectors read is
checked against its stored checksum first (`io.checksums`), with a Parquet row group's ids, texts and
counts (n_tokens, truncated), and a .npy batch's lines in its ids (or labels) file against theirs; a
store written before checksums has its vectors checked to be finite, one written before ids (or counts)
were covered has them read as they are. `npy_changed_rows` names the rows of a failed batch that
changed. A .npy matrix is read only as the float matrix of the shape its settings say (`matrix_shape`): one
reshaped keeps its bytes, and so its checksums, but not its rows.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from ..errors import CorpusError
from .checksums import (
    MISMATCH,
    NOT_FINITE,
    changed_rows,
    checksum,
    corrupt,
    count_differs,
    non_finite,
    proven_settings,
    rebuild_hint,
    rechunk,
    recorded,
)
from .parquet_checked import CheckedParquet, checks_missing, readable_parquet, unproven, with_coverage
from .parquet_sink import PARQUET_META_KEY

__all__ = [
    "Chunk",
    "NpyReader",
    "ParquetReader",
    "check_npy_rows",
    "npy_store_files",
    "npy_changed_rows",
    "npy_checksums",
    "npy_settings",
    "matrix_shape",
    "open_matrix",
    "stored_checksums",
]

# The most bytes of a .npy matrix read at once when its checksums are checked.
_CHECK_BYTES = 16 << 20

# (ids, texts (None where not kept), vectors (rows, d))
Chunk = tuple[list[str], list[str | None], np.ndarray]


class ParquetReader:
    """A Parquet store: settings in the file's metadata, one or more fixed-size-list vector columns."""

    def open(self, path: Path, collection: str | None) -> tuple[str | None, dict[str, Any]]:
        """(None, settings) of the store, or CorpusError when it is not a whole bertscope file."""
        meta = readable_parquet(path).schema_arrow.metadata or {}  # a file cut short: named, with the rebuild
        if PARQUET_META_KEY not in meta:
            raise CorpusError(f"{path} was not written by bertscope (no settings in its metadata)")
        return None, _settings_object(meta[PARQUET_META_KEY], f"{path}'s `bertscope` metadata", path)

    def chunks(self, path: Path, collection: str | None, column: str, size: int) -> Iterator[Chunk]:
        """(ids, texts, vectors) of every row, `size` rows at a time, from the vector column `column`."""
        checked = CheckedParquet(path)
        for table in checked.tables(_parquet_columns(checked, column), size):
            yield _parquet_rows(table, column)

    def count(self, path: Path, collection: str | None) -> int:
        """The rows, from the file's metadata."""
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)

    def take(self, path: Path, rows: np.ndarray, column: str | None) -> Chunk:
        """Read only the row groups that hold the rows asked for (a few per query, not the whole file)."""
        import pyarrow as pa

        checked = CheckedParquet(path)
        file, starts = checked.file, checked.starts
        groups = np.searchsorted(starts, rows, side="right") - 1
        columns = _parquet_columns(checked, column)
        pieces = []
        for group in np.unique(groups):
            local = rows[groups == group] - starts[group]
            pieces.append(checked.group(int(group), columns).take(pa.array(local)))
        table = pa.concat_tables(pieces) if pieces else file.schema_arrow.empty_table().select(columns)
        # concat_tables gathered the rows group by group; put them back in the order asked for.
        order = np.concatenate([np.flatnonzero(groups == g) for g in np.unique(groups)]) if pieces else rows
        ids, texts, vectors = _parquet_rows(table, column)
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        return [ids[i] for i in back], [texts[i] for i in back], vectors[back] if column else vectors

    def columns(self, path: Path) -> list[str]:
        """The vector columns: `embedding`, a view's, or one per layer of a stacked token store."""
        import pyarrow.parquet as pq

        from .levels import vector_columns

        return vector_columns(pq.read_schema(path))


# The files a .npy store keeps beside its matrix: its settings, and its ids (sentence rows) or labels
_SIDE_FILES = (".settings.json", ".ids.txt", ".rows.jsonl")


class NpyReader:
    """A .npy matrix (rows, d) with its settings and ids in files beside it."""

    def open(self, path: Path, collection: str | None) -> tuple[str | None, dict[str, Any]]:
        """(None, settings) from `<stem>.settings.json`; CorpusError when the files beside it are missing."""
        settings_path = path.with_suffix(".settings.json")
        if not any(path.with_suffix(end).exists() for end in _SIDE_FILES):
            # a matrix of the user's own: advice to rebuild it with --overwrite would write over it
            raise CorpusError(
                f"{path} is a NumPy matrix, not a bertscope store: a .npy store keeps its settings and ids "
                f"in files beside it ({path.with_suffix('.settings.json').name}, "
                f"{path.with_suffix('.ids.txt').name}); make one with `bertscope embed -i CORPUS -o "
                "STORE.npy`"
            )
        if not settings_path.exists() or not _labels_file(path).exists():
            missing = settings_path.name if not settings_path.exists() else _labels_file(path).name
            # a .npy store is its files together: the matrix alone says neither its ids nor its settings
            raise CorpusError(
                f"{path} has no {missing} beside it, one of the store's files: restore {missing} from where "
                f"the store was copied, or make the store again with `bertscope embed -i CORPUS -o {path} "
                "--overwrite` and the options it was made with"
            )
        settings = npy_settings(path)
        settings.pop("checksums", None)  # how the vectors are checked, not how they were made
        return None, settings

    def chunks(self, path: Path, collection: str | None, column: str, size: int) -> Iterator[Chunk]:
        """(ids, texts, vectors) of every row, `size` rows at a time (the matrix memory-mapped): a
        sentence store's ids from its .ids.txt (no texts), a token, word or chunk store's ids and texts
        from its .rows.jsonl (a text on its first row, as a Parquet store's)."""
        matrix = open_matrix(path)
        labels = _labels_file(path)
        with labels.open("rb") as handle:
            for lines, block in _checked_blocks(path, matrix, size, handle):
                ids, texts = _labelled(labels, lines, path)
                yield ids, texts, block

    def count(self, path: Path, collection: str | None) -> int:
        """The matrix's rows."""
        return int(open_matrix(path).shape[0])

    def take(self, path: Path, rows: np.ndarray, column: str | None) -> Chunk:
        """The rows asked for, in that order (no vectors with column=None)."""
        _proven_checksums(path)  # a store whose checksums were stripped is not read
        matrix = open_matrix(path)
        wanted = {int(r) for r in rows}
        found: dict[int, bytes] = {}
        number = -1
        labels = _labels_file(path)
        with labels.open("rb") as handle:
            for number, line in enumerate(handle):
                if number in wanted:
                    found[number] = line
                    if len(found) == len(wanted):
                        break
            if len(found) < len(wanted):
                _too_few_ids(path, number + 1, len(matrix))
            if len(matrix) - 1 in wanted:  # read to its last row: nothing may follow
                _no_more_lines(handle, path, len(matrix))
        ids, texts = _labelled(labels, [found[int(r)] for r in rows], path)
        picked = np.asarray(matrix[rows] if column is not None else matrix[:0, :0], dtype=np.float32)
        bad = non_finite(picked)  # scattered rows: their batches' checksums are checked by a full read
        if len(bad):
            raise corrupt(str(path), (int(rows[bad[0]]), int(rows[bad[0]])), NOT_FINITE, rebuild_hint(path))
        return ids, texts, picked

    def columns(self, path: Path) -> list[str]:
        """One vector column, the matrix itself."""
        return ["embedding"]


def open_matrix(path: Path) -> np.ndarray:
    """A .npy store's matrix, memory-mapped read-only; CorpusError when the file is not a whole .npy, or
    holds no float matrix of the shape its settings say (`matrix_shape`)."""
    try:
        # allow_pickle stays off: an object array is refused ("can't be memory-mapped"), never unpickled
        matrix = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:  # truncated: "mmap length is greater than file size"
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CorpusError(
            f"{path} is not a whole .npy matrix ({problem}): the file is corrupt; {rebuild_hint(path)}"
        ) from None
    _check_shape(path, matrix, npy_settings(path))
    return matrix


def matrix_shape(settings: dict[str, Any]) -> tuple[int | None, ...]:
    """The shape a .npy store's settings say its matrix has, None where they do not say: (rows, d), or
    (rows, layers, d) for token or word rows kept with combine="stack" and several layers (`NpySink`);
    an empty store (dimension 0) is (0, 0), as the sink writes it."""
    width = settings.get("dimension")
    width = width if isinstance(width, int) and not isinstance(width, bool) else None
    if width == 0:
        return (0, 0)
    layers = settings.get("layers")
    if settings.get("combine") == "stack" and (not isinstance(layers, list) or len(layers) > 1):
        return (None, len(layers) if isinstance(layers, list) else None, width)
    return (None, width)


def _check_shape(path: Path, matrix: np.ndarray, settings: dict[str, Any]) -> None:
    """CorpusError where a .npy store's matrix is not the float matrix its settings say (`matrix_shape`):
    reshaped or transposed after it was written, its bytes (and so its checksums) may be the same, but its
    rows are not the vectors the job wrote."""
    wanted = matrix_shape(settings)
    fits = matrix.ndim == len(wanted) and all(
        w is None or w == n for w, n in zip(wanted, matrix.shape, strict=True)
    )
    if fits and matrix.dtype.kind == "f":
        return
    names = ("rows", "d") if len(wanted) == 2 else ("rows", "layers", "d")
    said = "(" + ", ".join(name if w is None else str(w) for name, w in zip(names, wanted, strict=True)) + ")"
    found = f"shape {tuple(matrix.shape)}" + ("" if matrix.dtype.kind == "f" else f" of {matrix.dtype}")
    raise CorpusError(
        f"{path} holds a matrix of {found}, where its settings ({path.with_suffix('.settings.json').name}) "
        f"say float vectors of shape {said}: it was reshaped or replaced after it was written, so its rows "
        f"are not the vectors the job wrote; the store is damaged; {rebuild_hint(path)}"
    )


def npy_settings(path: Path) -> dict[str, Any]:
    """The settings in `<stem>.settings.json` beside a .npy store (its checksums included); CorpusError
    when they cannot be read or are not a JSON object."""
    settings_path = path.with_suffix(".settings.json")
    try:
        raw = settings_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read {settings_path}: {getattr(exc, 'strerror', None) or exc}") from None
    return _settings_object(raw, str(settings_path), path)


def check_npy_rows(path: Path, rows: np.ndarray | None = None) -> None:
    """Check the stored batches of a .npy store that hold `rows` (None: every batch) against their
    checksums, read a slice at a time (memory bounded whatever a batch's size); in a store written before
    checksums, those rows are checked to be finite. Raises the one-line `corrupt` error."""
    matrix = open_matrix(path)
    found = _proven_checksums(path)
    total = int(matrix.shape[0])
    step = max(1, _CHECK_BYTES // max(1, matrix[:1].nbytes))
    if found is None:
        picked = np.arange(total) if rows is None else np.unique(np.asarray(rows, dtype=np.int64))
        for first in range(0, len(picked), step):
            some = picked[first : first + step]
            bad = non_finite(np.asarray(matrix[some]))
            if len(bad):
                span = (int(some[bad[0]]), int(some[bad[-1]]))
                raise corrupt(str(path), span, NOT_FINITE, rebuild_hint(path))
        return
    batches = found["batches"]
    starts = np.cumsum([0, *(int(b["rows"]) for b in batches)])
    if starts[-1] != total:
        raise count_differs(str(path), total, int(starts[-1]), rebuild_hint(path))
    asked = (
        range(len(batches)) if rows is None else np.unique(np.searchsorted(starts, rows, side="right") - 1)
    )
    for number in asked:
        start, end = int(starts[number]), int(starts[number + 1])
        crc = 0
        for first in range(start, end, step):  # as checksums.checksum, continued slice by slice
            block = matrix[first : min(end, first + step)]
            crc = zlib.crc32(np.ascontiguousarray(block, dtype=block.dtype.newbyteorder("<")).data, crc)
        if crc != batches[number].get("embedding"):
            raise corrupt(str(path), (start, end - 1), MISMATCH, rebuild_hint(path))
    _check_labels(path, batches, starts, set(int(n) for n in asked), total)


def npy_store_files(path: Path) -> list[Path]:
    """The files of a .npy store that hold its rows' meaning: the matrix, its settings and its labels."""
    return [path, path.with_suffix(".settings.json"), _labels_file(path)]


def _labels_file(path: Path) -> Path:
    """The ids (sentence rows) or labels (token, word, chunk rows) file beside a .npy store, as its settings
    say its level: an .ids.txt left beside a token store (where an older bertscope rewrote a sentence store
    at another level) is not its labels."""
    level = npy_settings(path).get("level", "sentence")
    return path.with_suffix(".ids.txt" if level == "sentence" else ".rows.jsonl")


def _check_labels(
    path: Path, batches: list[dict[str, Any]], starts: np.ndarray, asked: set[int], total: int
) -> None:
    """Check the asked batches' lines in the labels file (a sentence store's .ids.txt, a token, word or
    chunk store's .rows.jsonl) against their checksums, read line by line up to the last asked batch's end
    (as far as a sample reads; one line in memory). Batches written before ids were covered are taken as
    they read."""
    if not asked or not any("labels" in batches[n] for n in asked):
        return
    labels = _labels_file(path)
    with labels.open("rb") as handle:
        for number in range(max(asked) + 1):
            start, rows = int(starts[number]), int(batches[number]["rows"])
            crc = 0
            for row in range(start, start + rows):
                line = handle.readline()
                if not line:  # the labels ran out before the rows
                    _too_few_ids(path, row, total)
                crc = zlib.crc32(line, crc)  # as checksums.checksum of the lines joined
            wanted = batches[number].get("labels")
            if number in asked and wanted is not None and crc != wanted:
                raise corrupt(str(labels), (start, start + rows - 1), MISMATCH, rebuild_hint(path))
        if max(asked) == len(batches) - 1:  # read to its last row: nothing may follow
            _no_more_lines(handle, path, total)


def _batch_lines(handle: Any, path: Path, start: int, rows: int, total: int) -> list[bytes]:
    """The next `rows` lines of a labels file (its rows from `start`); CorpusError when it runs out."""
    lines = [handle.readline() for _ in range(rows)]
    if lines and not lines[-1]:  # the ids ran out before the rows
        _too_few_ids(path, start + lines.index(b""), total)
    return lines


def _proven_checksums(path: Path) -> dict[str, Any] | None:
    """The checksums recorded beside a .npy store to read its rows by (None: written before them), or the
    one-line refusal where its settings say checksums were written that are gone (`checks_missing`) or
    were edited since they were written (`proven_settings`; their digest leaves the checksums out)."""
    settings = npy_settings(path)
    sums = settings.pop("checksums", None)
    proven_settings(settings, f"{path} ({path.with_suffix('.settings.json').name})", rebuild_hint(path))
    found = recorded(sums, str(path))
    missing = checks_missing(settings, with_coverage(found, "labels"))
    if missing is not None:
        raise unproven(str(path), missing, path, rebuild_hint(path))
    return found


def npy_checksums(path: Path) -> dict[str, Any] | None:
    """The checksums recorded beside a .npy store, or None for a store written before them."""
    return recorded(npy_settings(path).get("checksums"), str(path))


def stored_checksums(path: Path) -> dict[str, Any] | None:
    """The checksums a .npy or .parquet store records, as stored (None where it records none), with
    `labels_checked`: whether they cover its ids, not its vectors alone, and `rows_recorded`: whether
    they carry their digest (`checksums.checksums_block`: the batch list bound in order, checked on
    reading), and `counts_checked`: whether a Parquet store's count columns have theirs."""
    if path.suffix == ".npy":
        coverage = with_coverage(npy_checksums(path), "labels")
    else:
        coverage = CheckedParquet(path).coverage
    if coverage is None:
        return None
    listed = coverage.get("row_groups", coverage.get("batches"))
    # a store with no batches has no ids' checksums to speak of (`with_coverage` reads it as covered)
    return {**coverage, "labels_checked": bool(listed) and coverage["labels_checked"]}


def npy_changed_rows(path: Path, first: int) -> tuple[list[int], list[str]] | None:
    """(row numbers, their ids) of the rows of the .npy batch starting at row `first` whose digest
    differs from the one written, or None where none can be named (no digests, none differs)."""
    found = npy_checksums(path)
    if found is None:
        return None
    batches = found["batches"]
    starts = np.cumsum([0, *(int(b["rows"]) for b in batches)])
    number = int(np.searchsorted(starts, first, side="right")) - 1
    if not 0 <= number < len(batches) or not batches[number].get("row_digests"):
        return None
    start, end = int(starts[number]), int(starts[number + 1])
    with _labels_file(path).open("rb") as handle:
        for _ in range(start):
            handle.readline()
        lines = [handle.readline() for _ in range(end - start)]
    block = np.asarray(open_matrix(path)[start:end])
    rows = changed_rows(batches[number]["row_digests"], [block], lines)
    if not rows:
        return None
    return [start + r for r in rows], [_label_id(lines[r]) for r in rows]


def _labelled(labels: Path, lines: list[bytes], path: Path) -> tuple[list[str], list[str | None]]:
    """(ids, texts) of rows from their lines in a .npy store's `labels` file: an .ids.txt line is the id
    (no text), a .rows.jsonl line a JSON object holding the id and, on a text's first row, the text;
    CorpusError where a line is not such an object (the store is damaged)."""
    decoded = [line.decode("utf-8", "surrogateescape").rstrip("\n") for line in lines]
    if labels.suffix != ".jsonl":
        return decoded, [None] * len(decoded)
    ids: list[str] = []
    texts: list[str | None] = []
    for line in decoded:
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if not isinstance(row, dict) or "id" not in row:
            raise CorpusError(
                f"{labels} holds a line that is not a row bertscope wrote ({line[:40]!r}): the store is "
                f"damaged; {rebuild_hint(path)}"
            )
        text = row.get("text")
        ids.append(str(row["id"]))
        texts.append(text if isinstance(text, str) else None)
    return ids, texts


def _label_id(line: bytes) -> str:
    """The id of a row from its line: an .ids.txt line is the id, a .rows.jsonl line holds it."""
    text = line.decode("utf-8", "surrogateescape").rstrip("\n")
    if text.startswith("{"):
        try:
            return str(json.loads(text).get("id", text))
        except (ValueError, AttributeError):
            return text
    return text


def _settings_object(raw: str | bytes, where: str, path: Path) -> dict[str, Any]:
    """Stored settings parsed: a JSON object, or CorpusError naming `where` and what is wrong."""
    try:
        settings = json.loads(raw)
    except ValueError:
        raise CorpusError(
            f"{where} is not JSON: the store's settings are damaged; {rebuild_hint(path)}"
        ) from None
    if not isinstance(settings, dict):
        raise CorpusError(
            f"{where} holds a JSON {type(settings).__name__}, not the store's settings object: the store is "
            f"damaged; {rebuild_hint(path)}"
        )
    return settings


def _no_more_lines(handle: Any, path: Path, rows: int) -> None:
    """Refuse a labels file read to its last row that goes on (lines appended to .ids.txt or .rows.jsonl:
    the ids would no longer be the rows')."""
    if handle.readline():
        raise CorpusError(
            f"{_labels_file(path)} holds more lines than the {rows} rows of {path}: the store is damaged; "
            f"{rebuild_hint(path)}"
        )


def _too_few_ids(path: Path, ids: int, rows: int) -> NoReturn:
    labels = _labels_file(path)
    held = f"holds {ids} ids for" if labels.suffix == ".txt" else f"ends before row {ids} of"
    raise CorpusError(
        f"{labels} {held} the {rows} rows of {path}: the store is damaged; {rebuild_hint(path)}"
    )


def _checked_blocks(
    path: Path, matrix: np.ndarray, size: int, ids_file: Any
) -> Iterator[tuple[list[bytes], np.ndarray]]:
    """(id lines, rows) of a .npy store, `size` at a time, each stored batch's rows and id lines checked
    against their checksums (`<stem>.settings.json`); a store written before checksums has its rows
    checked to be finite."""
    found = _proven_checksums(path)
    rows = matrix.shape[0]
    if found is None:
        for start in range(0, rows, size):
            block = np.asarray(matrix[start : start + size])
            bad = non_finite(block)
            if len(bad):
                span = (start + int(bad[0]), start + int(bad[-1]))
                raise corrupt(str(path), span, NOT_FINITE, rebuild_hint(path))
            yield _batch_lines(ids_file, path, start, len(block), rows), block
        _no_more_lines(ids_file, path, rows)
        return
    batches = found["batches"]
    if (written := sum(int(b["rows"]) for b in batches)) != rows:
        raise count_differs(str(path), rows, written, rebuild_hint(path))

    def checked() -> Iterator[tuple[list[bytes], np.ndarray]]:
        start = 0
        for batch in batches:
            block = np.asarray(matrix[start : start + batch["rows"]])
            span = (start, start + len(block) - 1)
            if checksum(block) != batch["embedding"]:
                raise corrupt(str(path), span, MISMATCH, rebuild_hint(path))
            lines = _batch_lines(ids_file, path, start, len(block), rows)
            if "labels" in batch and checksum(b"".join(lines)) != batch["labels"]:
                raise corrupt(str(_labels_file(path)), span, MISMATCH, rebuild_hint(path))
            start += len(block)
            yield lines, block
        _no_more_lines(ids_file, path, rows)

    yield from rechunk(
        checked(),
        size,
        lambda piece: len(piece[1]),
        lambda pieces: (
            [line for lines, _ in pieces for line in lines],
            np.concatenate([b for _, b in pieces]),
        ),
        lambda piece, start, n: (piece[0][start : start + n], piece[1][start : start + n]),
    )


def _parquet_columns(checked: CheckedParquet, column: str | None) -> list[str]:
    """The columns of a Parquet store read for its rows: id, text (where kept) and `column`, and the
    counts (n_tokens, truncated) where its checksums cover them (row checks 4 on), so that they are
    checked as the rows are read; CorpusError where `id` or `column` is gone."""
    names = checked.file.schema_arrow.names
    lost = [c for c in ("id", column) if c is not None and c not in names]
    if lost:
        raise CorpusError(
            f"{checked.where} has no {' or '.join(f'`{c}`' for c in lost)} column, which bertscope writes: a "
            "column was renamed or dropped after it was written, so its rows cannot be read; use the file "
            f"as bertscope wrote it, or {checked.rebuild}"
        )
    covered = checked.groups[0] if checked.groups else {}
    counts = [c for c in checked.counts if c in covered]
    return [c for c in ("id", "text", column) if c is not None and c in names] + counts


def _parquet_rows(batch: Any, column: str | None) -> Chunk:
    """(ids, texts, vectors) of an Arrow batch or table (no vector column: an empty (0, 0) array)."""
    ids = batch.column("id").to_pylist()
    texts = batch.column("text").to_pylist() if "text" in batch.schema.names else [None] * len(ids)
    if column is None:
        return ids, texts, np.empty((0, 0), np.float32)
    embedding = batch.column(column)
    if hasattr(embedding, "combine_chunks"):
        embedding = embedding.combine_chunks()
    vectors = embedding.flatten().to_numpy(zero_copy_only=False).reshape(-1, embedding.type.list_size)
    return ids, texts, vectors
