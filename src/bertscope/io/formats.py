"""The output formats of corpus jobs: the one table the sinks, stores, index, search and views read.

Each format has its suffixes, its sink, its reader and what it can do (rows by number, a memory-mapped
matrix, named vector columns, the row levels it holds, collections, float16); the rest of io asks
`rules_of(path)` instead of testing suffixes. A new format is a `Format` member and a row of `RULES`
here, with its sink and reader in a module of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..core._enums import Precision, StrEnum
from ..core.exports import refuse_stdout
from ..errors import CorpusError, InvalidSpec
from .npy_sink import NpySink
from .parquet_sink import ParquetSink
from .sink_base import Sink
from .sqlite_reader import SqliteReader
from .sqlite_store import SqliteSink
from .vector_files import Chunk, NpyReader, ParquetReader

__all__ = [
    "Format",
    "FORMATS",
    "SUPPORTED_OUTPUTS",
    "format_of",
    "open_sink",
    "refuse_collection",
    "refuse_idle_store_options",
]


class Format(StrEnum):
    """A bertscope output's file format."""

    PARQUET = "parquet"
    NPY = "npy"
    SQLITE = "sqlite"


class StoreReader(Protocol):
    """How a format's store is read back (`stores.Store` asks these)."""

    def open(self, path: Path, collection: str | None) -> tuple[str | None, dict[str, Any]]: ...
    def chunks(self, path: Path, collection: str | None, column: str, size: int) -> Iterator[Chunk]: ...
    def count(self, path: Path, collection: str | None) -> int: ...
    def take(self, path: Path, rows: np.ndarray, column: str | None) -> Chunk: ...
    def columns(self, path: Path) -> list[str]: ...


OpenSink = Callable[..., Sink]  # (path, *, settings, collection, resume, overwrite, keep_text) -> Sink


@dataclass(frozen=True)
class FormatRules:
    """One format: its suffixes (the first names it), sink, reader and what its stores can do."""

    format: Format
    label: str  # its name in messages
    suffixes: tuple[str, ...]
    sink: OpenSink
    reader: StoreReader
    by_row: bool = False  # rows read by number (`Store.take`), so an ANN index can point at them
    mapped: bool = False  # the file is itself a (rows, d) matrix numpy maps: an index keeps no copy
    columns: bool = False  # named vector columns: views, a column per layer, chunk and token rows
    levels: tuple[str, ...] | None = None  # the row levels it holds (None: every level)
    collections: bool = False  # several named sets of rows in one file (collection=)
    float16: bool = True  # vectors stored at half size when asked (precision='float16')


def _file_sink(kind: type[Sink]) -> OpenSink:
    def open_(
        path: Path, *, settings: dict[str, Any], collection: str | None, resume: bool, overwrite: bool,
        keep_text: bool,
    ) -> Sink:  # fmt: skip
        return kind(path, settings=settings, resume=resume, overwrite=overwrite)  # type: ignore[call-arg]

    return open_


def _sqlite_sink(
    path: Path, *, settings: dict[str, Any], collection: str | None, resume: bool, overwrite: bool,
    keep_text: bool,
) -> Sink:  # fmt: skip
    # A collection is appended to by content hash: resuming is what it always does (--resume also checks
    # the rows already stored).
    return SqliteSink(
        path, settings=settings, collection=collection or "default", overwrite=overwrite, keep_text=keep_text,
        resume=resume,
    )  # fmt: skip


RULES: dict[Format, FormatRules] = {
    Format.PARQUET: FormatRules(
        Format.PARQUET,
        "Parquet",
        (".parquet",),
        _file_sink(ParquetSink),
        ParquetReader(),
        by_row=True,
        columns=True,
    ),
    Format.NPY: FormatRules(
        Format.NPY, "NumPy", (".npy",), _file_sink(NpySink), NpyReader(), by_row=True, mapped=True
    ),
    Format.SQLITE: FormatRules(
        Format.SQLITE,
        "SQLite",
        (".db", ".sqlite", ".sqlite3"),
        _sqlite_sink,
        SqliteReader(),
        levels=("sentence",),
        collections=True,
        float16=False,  # float32 blobs, whatever precision= says
    ),
}
# suffix -> format; the first suffix of each format is its name in messages
FORMATS: dict[str, Format] = {suffix: kind for kind, rules in RULES.items() for suffix in rules.suffixes}
SUPPORTED_OUTPUTS = tuple(" / ".join(rules.suffixes[:2]) for rules in RULES.values())


def format_of(path: str | Path) -> Format | None:
    """The format a path's suffix names (case-insensitive), or None."""
    return FORMATS.get(Path(path).suffix.lower())


def rules_of(path: str | Path) -> FormatRules | None:
    """The format rules of a path, by its suffix, or None."""
    kind = format_of(path)
    return None if kind is None else RULES[kind]


def store_rules(path: str | Path) -> FormatRules:
    """The format rules of a store to read, or CorpusError naming the outputs bertscope writes."""
    rules = rules_of(path)
    if rules is None:
        raise CorpusError(f"{path}: not a bertscope output ({', '.join(SUPPORTED_OUTPUTS)})")
    return rules


def suffixes_where(can: Callable[[FormatRules], bool]) -> str:
    """The formats that can do something, by their first suffix, for messages: ".parquet and .npy"."""
    names = [rules.suffixes[0] for rules in RULES.values() if can(rules)]
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]


def refuse_collection(path: str | Path, collection: str | None, *, writing: bool = False) -> None:
    """Refuse a collection named for a store that has none (it would be ignored in silence)."""
    rules = rules_of(path)
    if collection is None or rules is None or rules.collections:
        return
    where = suffixes_where(lambda r: r.collections).replace(" and ", " or ")
    fix = f"drop collection= or write to a {where} file" if writing else "drop collection="
    raise InvalidSpec(
        f"collection={collection!r} names a collection in an SQLite store ({where}); {Path(path).name} holds "
        f"one set of rows: {fix}"
    )


def refuse_idle_store_options(
    path: str | Path, *, collection: str | None, precision: Precision | str
) -> None:
    """Refuse what the output's format has no use for, before anything is embedded or written: a
    collection outside SQLite, and float16 into SQLite (its blobs are float32; the settings would say
    float16)."""
    refuse_collection(path, collection, writing=True)
    rules = rules_of(path)
    if rules is None or rules.float16 or Precision.parse(precision, what="precision") is Precision.FLOAT32:
        return
    where = suffixes_where(lambda r: r.float16).replace(" and ", " or ")
    raise InvalidSpec(
        f"precision='float16' applies to {where.replace(' or ', ' and ')} stores; {rules.label} stores "
        f"({Path(path).name}) keep float32 vectors: drop precision= or write to a {where} file"
    )


def open_sink(
    path: str | Path,
    *,
    settings: dict[str, Any],
    collection: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    keep_text: bool = True,
) -> Sink:
    """The sink for an output path, by its suffix, checked against resume/overwrite and the level."""
    path = Path(path)
    supported = ", ".join(SUPPORTED_OUTPUTS)
    refuse_stdout(
        path, f"a corpus job writes its vectors to a file; give a file name with a known type such as "
        f"vectors.parquet ({supported})",
    )  # fmt: skip
    if not path.parent.exists():
        raise CorpusError(f"cannot write {path}: the folder {path.parent} does not exist")
    rules = rules_of(path)
    if rules is None:
        if path.is_dir():
            raise CorpusError(
                f"{path}: a folder output is written by a Ray corpus job only (embed --engine ray); "
                f"to write one file, give it a known type: {supported}"
            )
        if not path.suffix:  # nothing there, no suffix: the type was left out, not a folder meant
            raise CorpusError(
                f"{path}: an output needs a known type by its suffix: {supported} (e.g. {path}.parquet)"
            )
        raise CorpusError(f"{path}: unknown output type {path.suffix.lower()}; supported: {supported}")
    level = settings.get("level", "sentence")
    if rules.levels is not None and level not in rules.levels:
        elsewhere = suffixes_where(lambda r: r.levels is None or level in r.levels).replace(" and ", " or ")
        raise CorpusError(
            f"{path}: {rules.label} stores hold {', '.join(rules.levels)} rows only; "
            f"write {level} rows to {elsewhere}"
        )
    return rules.sink(
        path,
        settings=settings,
        collection=collection,
        resume=resume,
        overwrite=overwrite,
        keep_text=keep_text,
    )
