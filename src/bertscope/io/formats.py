"""The output formats of corpus jobs, by suffix: the one table the sinks, stores and index read.

A new format is a `Format` member with its suffixes here and its sink (and store reader) beside the others.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core._enums import StrEnum
from ..errors import CorpusError
from .sinks import NpySink, ParquetSink, Sink
from .sqlite_store import SqliteSink

__all__ = ["Format", "FORMATS", "SUPPORTED_OUTPUTS", "format_of", "open_sink"]


class Format(StrEnum):
    """A bertscope output's file format."""

    PARQUET = "parquet"
    NPY = "npy"
    SQLITE = "sqlite"


# suffix -> format; the first suffix of each format is its name in messages
FORMATS: dict[str, Format] = {
    ".parquet": Format.PARQUET,
    ".npy": Format.NPY,
    ".db": Format.SQLITE,
    ".sqlite": Format.SQLITE,
    ".sqlite3": Format.SQLITE,
}
SINKS: dict[Format, Any] = {Format.PARQUET: ParquetSink, Format.NPY: NpySink}
SUPPORTED_OUTPUTS = (".parquet", ".npy", ".db / .sqlite")


def format_of(path: str | Path) -> Format | None:
    """The format a path's suffix names (case-insensitive), or None."""
    return FORMATS.get(Path(path).suffix.lower())


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
    if not path.parent.exists():
        raise CorpusError(f"cannot write {path}: the folder {path.parent} does not exist")
    kind = format_of(path)
    level = settings.get("level", "sentence")
    if kind is Format.SQLITE:
        if level != "sentence":
            raise CorpusError(
                f"{path}: an SQLite collection holds one vector per text; "
                f"write {level} rows to .parquet or .npy"
            )
        return SqliteSink(
            path,
            settings=settings,
            collection=collection or "default",
            overwrite=overwrite,
            keep_text=keep_text,
        )
    if kind is None:
        suffix = path.suffix.lower() or "(none)"
        raise CorpusError(f"{path}: unknown output type {suffix}; supported: {', '.join(SUPPORTED_OUTPUTS)}")
    return SINKS[kind](path, settings=settings, resume=resume, overwrite=overwrite)
