"""Corpus readers (txt, jsonl, csv/tsv, parquet, stdin), sinks (Parquet, NumPy, SQLite) and resumable jobs."""

from .readers import Record, read_corpus
from .sinks import open_sink

__all__ = ["Record", "read_corpus", "open_sink"]
