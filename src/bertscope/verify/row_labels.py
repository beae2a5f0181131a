"""The labels of a token, word or chunk store's sampled rows and their documents' texts, read streaming.

Only what the sampled rows need is kept: a Parquet store is read row group by row group (the groups that
hold sampled rows; `_BATCH` rows at a time), a .npy store's `<stem>.rows.jsonl` line by line, up to its
last sampled row, so memory stays bounded whatever the store's size. Each reader says what is wrong with
a damaged file in one line (`CorpusError`).

    sampled_keys(opened, positions)   [(id, position)] of the sampled rows, in their order
    first_texts(opened, docs, last)   {id: text} from the first row of each document that holds it
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError
from ..io.checksums import rebuild_hint
from ..io.formats import Format
from ..io.parquet_checked import readable_parquet
from ..io.stores import Store
from ..io.vector_files import open_matrix

__all__ = ["first_texts", "sampled_keys"]

_BATCH = 8192  # rows of a Parquet store decoded at once


def sampled_keys(opened: Store, positions: np.ndarray) -> list[tuple[str, int]]:
    """(id, position) of each sampled row (`positions`: sorted row numbers)."""
    if opened.rules.format is Format.NPY:
        return _jsonl_keys(opened.path, positions)
    return _parquet_keys(opened.path, positions)


def first_texts(opened: Store, docs: Sequence[str], last: int) -> dict[str, str]:
    """Each of `docs`' text, from the first of its rows that holds one (at or before row `last`, the last
    sampled row: a document's first row comes before its others); the documents whose text is kept
    nowhere are left out."""
    wanted = set(docs)
    found: dict[str, str] = {}
    pairs = (
        _jsonl_texts(opened.path, last) if opened.rules.format is Format.NPY else _parquet_texts(opened, last)
    )
    for doc, text in pairs:
        if doc in wanted and doc not in found:
            found[doc] = text
            if len(found) == len(wanted):
                break
    return found


# Parquet ----------------------------------------------------------------------------------------------


def _parquet_keys(path: Path, positions: np.ndarray) -> list[tuple[str, int]]:
    file, starts = _parquet(path)
    _require(path, file.schema_arrow.names, ("id", "position"))
    groups = np.searchsorted(starts, positions, side="right") - 1
    keys: list[tuple[str, int]] = []
    for group in np.unique(groups):
        local = positions[groups == group] - starts[group]  # sorted, as `positions` are
        offset, at = 0, 0
        for batch in _batches(path, file, ["id", "position"], [int(group)]):
            end = offset + batch.num_rows
            while at < len(local) and local[at] < end:
                row = int(local[at]) - offset
                keys.append(
                    (str(batch.column(0)[row].as_py()), _position(batch.column(1)[row].as_py(), path))
                )
                at += 1
            offset = end
            if at == len(local):
                break
    return keys


def _parquet_texts(opened: Store, last: int) -> Iterator[tuple[str, str]]:
    """(id, text) of the rows that hold a text, up to row `last`; none where the store keeps no texts."""
    import pyarrow.compute as pc

    file, starts = _parquet(opened.path)
    if "text" not in file.schema_arrow.names:
        return
    groups = list(range(int(np.searchsorted(starts, last, side="right"))))
    for batch in _batches(opened.path, file, ["id", "text"], groups):
        held = batch.filter(pc.is_valid(batch.column(1)))
        yield from zip(
            map(str, held.column(0).to_pylist()), map(str, held.column(1).to_pylist()), strict=True
        )


def _parquet(path: Path) -> tuple[Any, np.ndarray]:
    """The file and its row groups' first rows (with the total last)."""
    file = readable_parquet(path)
    meta = file.metadata
    return file, np.cumsum([0, *(meta.row_group(g).num_rows for g in range(meta.num_row_groups))])


def _batches(path: Path, file: Any, columns: list[str], groups: list[int]) -> Iterator[Any]:
    batches = file.iter_batches(batch_size=_BATCH, row_groups=groups, columns=columns)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (OSError, ValueError) as exc:  # a broken page: pyarrow's ArrowInvalid is a ValueError
            raise CorpusError(
                f"{path}: its {', '.join(columns)} columns cannot be decoded ({_first_line(exc)}): the file "
                f"is corrupt; {rebuild_hint(path)}"
            ) from None
        yield batch


# .npy with <stem>.rows.jsonl ----------------------------------------------------------------------------


def _jsonl_keys(path: Path, positions: np.ndarray) -> list[tuple[str, int]]:
    labels = path.with_suffix(".rows.jsonl")
    keys: list[tuple[str, int]] = []
    for number, line in _lines(path, int(positions[-1]) if len(positions) else -1):
        while len(keys) < len(positions) and positions[len(keys)] == number:
            row = _row(line, path, number)
            keys.append((str(row.get("id")), _position(row.get("position"), labels, number)))
    if len(keys) < len(positions):
        rows = len(open_matrix(path))
        raise CorpusError(
            f"{labels} ends before row {int(positions[len(keys)])} of the {rows} rows of {path}: the store "
            f"is damaged; {rebuild_hint(path)}"
        )
    return keys


def _jsonl_texts(path: Path, last: int) -> Iterator[tuple[str, str]]:
    for number, line in _lines(path, last):
        if line.count('"text": ') == 1 and '"text": null' in line:
            continue  # the one "text" is null: no need to decode the line
        row = _row(line, path, number)
        if isinstance(row.get("text"), str):
            yield str(row.get("id")), row["text"]


def _lines(path: Path, last: int) -> Iterator[tuple[int, str]]:
    """(number, line) of the .npy store `path`'s row labels, from the first to line `last`."""
    labels = path.with_suffix(".rows.jsonl")
    if last < 0:
        return
    try:
        with labels.open(encoding="utf-8", newline="\n") as lines:
            for number, line in enumerate(lines):
                yield number, line
                if number >= last:
                    return
    except OSError as exc:
        raise CorpusError(f"cannot read {labels}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CorpusError(f"{labels} is not UTF-8 text: the store is damaged; {rebuild_hint(path)}") from None


def _row(line: str, path: Path, number: int) -> dict[str, Any]:
    """Line `number` (0-based) of a .npy store's row labels: a JSON object, or CorpusError."""
    try:
        row = json.loads(line)
    except ValueError:
        row = None
    if not isinstance(row, dict):
        labels = path.with_suffix(".rows.jsonl")
        raise CorpusError(
            f"line {number + 1} of {labels} is not a JSON object: the store is damaged; {rebuild_hint(path)}"
        )
    return row


# Both -------------------------------------------------------------------------------------------------


def _require(path: Path, names: Sequence[str], columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in names]
    if missing:
        raise CorpusError(
            f"{path} has no {' or '.join(missing)} column, which a token, word or chunk store holds: the "
            f"store is damaged; {rebuild_hint(path)}"
        )


def _position(value: Any, where: Path, number: int | None = None) -> int:
    """A row's position: a whole number, or CorpusError naming the file (and line)."""
    if isinstance(value, bool) or not isinstance(value, int):
        line = f"line {number + 1} of " if number is not None else ""
        raise CorpusError(
            f"{line}{where} holds the position {value!r}, not a whole number: the store is damaged; "
            "rebuild it"
        )
    return value


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
