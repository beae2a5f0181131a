"""Corpus readers (txt, jsonl, csv/tsv, parquet, stdin), sinks (Parquet, NumPy, SQLite) and resumable jobs."""

from .formats import open_sink
from .readers import Record, read_corpus

__all__ = ["Record", "read_corpus", "open_sink"]
