"""Corpus sinks: Parquet, NumPy and an SQLite collection, each written in atomic steps so no work is lost.

Parquet and NumPy outputs grow as numbered part files in `<output>.parts/` (each written to a temporary
name, then renamed) and are joined into the final file at the end; a killed job resumes after the
last whole part. SQLite writes one transaction per batch and skips what it already holds.
Each part's marker also holds a digest of the records read up to its end (ids and texts, chained part by
part), so a resumed job proves that the records it skips are the ones already written.
Every batch's vectors are refused when not finite and stored with their checksums (`io.checksums`);
the parts are checked again when a job resumes and when they are joined.

Each is in a module of its own: the base every sink extends (`sink_base.py`), the part-file sinks' base
(`parts_sink.py`), `parquet_sink.py`, `npy_sink.py`, `sqlite_store.py`, and the settings compared on
resume (`sink_settings.py`); this module keeps the names it held importable from here.
"""

from .npy_sink import NpySink as NpySink
from .npy_sink import npy_parts
from .parquet_sink import PARQUET_META_KEY, view_column, with_settings
from .parquet_sink import ParquetSink as ParquetSink
from .sink_base import RecordDigest, Sink, other_input
from .sink_settings import settings_diff as settings_diff
from .sink_settings import settings_differ as settings_differ

__all__ = [
    "RecordDigest",
    "Sink",
    "other_input",
    "with_settings",
    "npy_parts",
    "view_column",
    "PARQUET_META_KEY",
]
