"""What a resumable Ray job counts as done: a unit is a run of consecutive records of one input that one
actor call embedded, named by its key `SOURCE:START:COUNT:ROWS:DIGEST` (the input's number in the job's
list, the first record's number in that input, 0-based, how many records, how many rows they gave and
the SHA-256 of their ids and texts, as the local job's `RecordDigest` chains them from "").

Each output row carries its unit's key to the shard writer, which records beside each shard the units
its rows belong to, in row order. A resumed job skips a unit's records when the saved shards hold all
of its rows, proving them the same records by their digest as it reads past them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from ..errors import CorpusError
from ..io.readers import Record
from ..io.sink_base import RecordDigest, other_input

__all__ = ["SOURCE", "RECORD", "UNIT", "WHERE", "Unit", "embed_units", "embed_located", "skip_done"]

# The columns a numbered read task adds (the input's number, the record's number in it) and the column
# the actors add to each output row; the shard writer drops all three. A located read (a job's own:
# `corpus_dataset(located=True)`) adds each record's FILE:LINE (WHERE), which the actors of a job that
# asked for it read and drop: a refusal names it as the local job does. A user's dataset is neither:
# its columns, these names too, are its own and kept.
SOURCE, RECORD, UNIT, WHERE = "_source", "_record", "_unit", "_where"


class Unit(NamedTuple):
    """One actor call's run of records of one input, and the rows they gave."""

    source: int
    start: int
    records: int
    rows: int
    digest: str

    @property
    def key(self) -> str:
        """The unit as its rows carry it."""
        return f"{self.source}:{self.start}:{self.records}:{self.rows}:{self.digest}"

    @classmethod
    def parse(cls, key: str) -> Unit:
        """The unit a key names."""
        source, start, count, rows, digest = key.split(":")
        return cls(int(source), int(start), int(count), int(rows), digest)


def embed_units(level: Any, batch: Any, text_field: str) -> Any:
    """A numbered Arrow batch's rows of `level`, each run of consecutive records embedded as one unit and
    its rows tagged with the unit's key (`UNIT`)."""
    import pyarrow as pa

    sources = batch.column(SOURCE).to_pylist()
    numbers = batch.column(RECORD).to_pylist()
    ids, texts = batch.column("id").to_pylist(), batch.column(text_field).to_pylist()
    plain, where = _located(batch.drop_columns([SOURCE, RECORD]))
    tables = []
    for first, count in _runs(sources, numbers):
        at = None if where is None else where[first : first + count]
        rows = level.embed_arrow(plain.slice(first, count), text_field, where=at)
        digest = RecordDigest("")
        for i in range(first, first + count):
            digest.add(Record(ids[i], texts[i], 0))
        unit = Unit(sources[first], numbers[first], count, rows.num_rows, digest.hexdigest())
        tables.append(rows.append_column(UNIT, pa.array([unit.key] * rows.num_rows, pa.string())))
    return pa.concat_tables(tables) if tables else level.embed_arrow(plain, text_field)


def embed_located(level: Any, batch: Any, text_field: str, *, located: bool) -> Any:
    """An Arrow batch's rows of `level`; with `located` (a located read's batch) a refusal names a record
    by the FILE:LINE its WHERE column gives, and the column is dropped."""
    if not located:
        return level.embed_arrow(batch, text_field)
    plain, where = _located(batch)
    return level.embed_arrow(plain, text_field, where=where)


def _located(batch: Any) -> tuple[Any, list[str] | None]:
    """The batch without its WHERE column, and that column's FILE:LINE of each row (None without it)."""
    if WHERE not in batch.column_names:
        return batch, None
    return batch.drop_columns([WHERE]), batch.column(WHERE).to_pylist()


def _runs(sources: list[int], numbers: list[int]) -> Iterator[tuple[int, int]]:
    """(first row, rows) of each run of consecutive records of one input in a batch."""
    first = 0
    for i in range(1, len(numbers) + 1):
        if i == len(numbers) or sources[i] != sources[first] or numbers[i] != numbers[i - 1] + 1:
            yield first, i - first
            first = i


def skip_done(
    records: Iterator[Record], done: list[Unit], *, source: str, output: object
) -> Iterator[tuple[int, Record]]:
    """Each record with its number in the input, past those of the `done` units, each unit's records
    proven the ones it was made from (CorpusError naming their lines where the input changed)."""
    ahead = sorted(done)
    at, digest = 0, RecordDigest("")
    for number, record in enumerate(records):
        if at < len(ahead) and number >= ahead[at].start:
            digest.add(record)
            if number == ahead[at].start + ahead[at].records - 1:
                if digest.hexdigest() != ahead[at].digest:
                    raise CorpusError(other_input(source, output, digest))
                at, digest = at + 1, RecordDigest("")
            continue
        yield number, record
    if at < len(ahead):
        wanted = ahead[-1].start + ahead[-1].records
        raise CorpusError(
            f"{source} has fewer texts than the unfinished job for {output} already wrote from it (it "
            f"wrote text {wanted}); resume with the input it was started with, or start again with "
            "--overwrite"
        )
