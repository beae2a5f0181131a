"""The sink every corpus job writes to (`Sink`), and the digest a resumed job proves its skipped records by.

Each part's marker holds a digest of the records read up to its end (ids and texts, chained part by part:
`RecordDigest`), so a resumed job proves that the records it skips are the ones already written.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CorpusError
from .readers import Record, given_texts, source_name

if TYPE_CHECKING:
    from .levels import Rows

__all__ = ["RecordDigest", "Sink", "fewer_records", "other_input"]

# The options that choose a corpus job's records, as a resume's refusal names them
RECORD_FIELDS = ("text_field", "id_field")


class Sink(ABC):
    """Where a corpus job writes; `done` records are already safe on disk (resume skips them)."""

    path: Path
    done: int = 0
    # Part-file sinks resume by skipping the records already written; SQLite skips them by id instead.
    resumes_by_position: bool = True
    reused: int = 0
    already: int = 0
    # The digest (RecordDigest) of the `done` records as the sink saved it, where it keeps one, and the
    # digest of those a resume skipped (`resumed`), for the sink to go on from
    saved_input: str | None = None
    read_before: RecordDigest | None = None
    # The options that choose what a record is, named when a resume finds other records (a job that reads
    # no ids, static --corpus, names its text field only)
    record_fields: tuple[str, ...] = RECORD_FIELDS

    def pending(self, records: list[Record]) -> list[Record]:
        """The records of a batch that still need embedding (all of them, unless the sink deduplicates)."""
        return records

    def resumed(self, records: Iterator[Record], source: object) -> Iterator[Record]:
        """The records after the `done` ones, which a resumed job skips: proven the ones read before
        where the sink saved their digest (`saved_input`), else counted only."""
        digest = RecordDigest("")
        for record in islice(records, self.done):
            digest.add(record)
        if digest.count < self.done:
            raise CorpusError(fewer_records(source, digest.count, self.done))
        if self.saved_input is not None and digest.hexdigest() != self.saved_input:
            raise CorpusError(other_input(source, self.path, digest, fields=self.record_fields))
        self.read_before = digest
        yield from records

    @abstractmethod
    def write(self, records: list[Record], rows: Rows) -> None:
        """Store one batch of a level's rows atomically."""

    @abstractmethod
    def finish(self) -> list[Path]:
        """Make the output whole and return the files it consists of."""

    @abstractmethod
    def abandon(self) -> None:
        """Leave nothing behind for a job that stored nothing."""


class RecordDigest:
    """A running SHA-256 of records' ids and texts, chained from a digest before them (hex, "" at the
    start): what a resumed job proves it read before. It counts them and keeps the first and last one's
    line for messages."""

    def __init__(self, previous: str) -> None:
        self.hash = hashlib.sha256(previous.encode())
        self.count = 0
        self.first: int | None = None
        self.last: int | None = None

    def add(self, record: Record) -> None:
        for value in (record.id, record.text):
            data = value.encode("utf-8", "surrogatepass")
            self.hash.update(len(data).to_bytes(8, "little") + data)
        self.count += 1
        self.first = record.line if self.first is None else self.first
        self.last = record.line

    def hexdigest(self) -> str:
        return self.hash.hexdigest()


def other_input(
    source: object, output: object, digest: RecordDigest, *, fields: Sequence[str] = RECORD_FIELDS
) -> str:
    """The one-line refusal of a resume whose input differs from what the unfinished job read; `fields` are
    the options of the job that choose a record (only those it has are named)."""
    name = source_name(source)
    named = " and ".join(f"{field}=" for field in fields)
    where = str(digest.first) if digest.first == digest.last else f"{digest.first}-{digest.last}"
    return (
        f"{name}:{where}: these records are not the ones the unfinished job for {output} read from "
        "there (their ids or texts differ): the input changed since; resume with the input (and "
        f"{named}) it was started with, or start again with overwrite=True (--overwrite)"
    )


def fewer_records(source: object, found: int, done: int) -> str:
    name = "the texts given" if given_texts(source) else str(source)
    return (
        f"{name} has fewer texts ({found}) than the unfinished job already wrote ({done}); resume with the "
        "input it was started with, or start again with overwrite=True (--overwrite)"
    )
