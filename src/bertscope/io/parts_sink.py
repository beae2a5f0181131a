"""The part-file sinks' shared base: numbered parts in `<output>.parts/`, each written atomically.

Parquet and NumPy outputs grow as numbered part files in `<output>.parts/` (each written to a temporary
name, then renamed) and are joined into the final file at the end; a killed job resumes after the
last whole part, each part's records proven by the digest its marker keeps (`sink_base.RecordDigest`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError
from .checksums import refuse_non_finite
from .readers import Record
from .sink_base import RecordDigest, Sink, fewer_records, other_input
from .sink_settings import going_on, settings_diff, settings_differ

# How a job whose saved parts fail their checks is made again.
__all__ = [
    "REDO_ADVICE", "PartsSink", "atomic_write_text", "column_matrix", "is_vector_type", "part_marker",
    "removed_on_failure", "write_settings",
]  # fmt: skip

REDO_ADVICE = "start the job again with overwrite=True (--overwrite)"
# The file in an --overwrite job's part folder that says an old output waits to be replaced by it.
_REPLACES = "replaces"


class PartsSink(Sink):
    """Numbered part files in `<output>.parts/`, joined into the output by `finish`.

    A part counts once its `.done` marker (holding how many records it covers) is written, last of its
    files: a job killed mid-part redoes that part and no other.
    """

    suffix = ""

    def __init__(self, path: Path, *, settings: dict[str, Any], resume: bool, overwrite: bool) -> None:
        self.path = path
        self.parts = path.with_name(path.name + ".parts")
        self.settings = settings
        state = self.parts / "settings.json"
        # An --overwrite job's parts say that an old output waits for them (`_REPLACES`): it stays whole
        # until `finish` renames the new one over it, so a job that fails leaves it as it was.
        replacing = state.exists() and (self.parts / _REPLACES).exists()
        if overwrite:
            shutil.rmtree(self.parts, ignore_errors=True)  # an unfinished job's parts; the output stays
        elif replacing:
            if not resume:
                raise CorpusError(
                    f"{self.parts} holds an unfinished job that replaces {path}; pass resume=True (--resume) "
                    "to finish it or overwrite=True (--overwrite) to start again"
                )
            _refuse_other_settings(path, state, settings)
        elif self.complete():
            # A job killed while removing its parts leaves the whole output and some parts: the output wins.
            shutil.rmtree(self.parts, ignore_errors=True)
            if resume:
                raise CorpusError(
                    f"{path} is already complete: nothing to resume (overwrite=True (--overwrite) redoes it)"
                )
            raise CorpusError(f"{path} exists; pass overwrite=True (--overwrite) to replace it")
        elif resume and state.exists():
            _refuse_other_settings(path, state, settings)
        elif self.parts.exists() and not state.exists():
            # The settings are written before any part and removed first: without them nothing was saved
            # (a job whose settings write failed, a full disk): a fresh start, resumed or not.
            shutil.rmtree(self.parts, ignore_errors=True)
        elif self.parts.exists():
            raise CorpusError(
                f"{self.parts} holds an unfinished job for {path}; "
                "pass resume=True (--resume) to continue it or overwrite=True (--overwrite) to start again"
            )
        elif any(output.exists() for output in self.outputs()):
            raise CorpusError(f"{path} exists; pass overwrite=True (--overwrite) to replace it")
        self.parts.mkdir(exist_ok=True)
        if overwrite and any(output.exists() for output in self.outputs()):
            (self.parts / _REPLACES).touch()  # before the settings: parts with these are a job to resume
        if not state.exists():  # a resumed job keeps the settings it was started with
            self._start(state)
        self.files: list[Path] = []
        self.input = ""  # the digest of the records written so far (`resumed` sets it from the parts)
        while (part := self._next_part()).with_suffix(".done").exists():
            self.files.append(part)
            self.done += int(part_marker(part)["records"])
        markers = sorted(self.parts.glob("part-*.done"))
        if len(markers) != len(self.files):
            # Part names assume no gap: resuming past one would skip records and overwrite later parts.
            raise CorpusError(
                f"{self.parts}: part {len(self.files)} is missing but later parts exist, so the job "
                "cannot be resumed exactly; start again with overwrite=True (--overwrite)"
            )
        for part in self.files:  # a resumed job goes on only from parts that are whole
            self._check_part(part)

    def _start(self, state: Path) -> None:
        """Write the job's settings, its first file; a failed write (a full disk) leaves no folder behind
        and says so in the words of a failed batch."""
        try:
            write_settings(
                state, self.settings, self.path, fix="; nothing was saved: fix that, then run it again"
            )
        except CorpusError:
            shutil.rmtree(self.parts, ignore_errors=True)
            raise

    def complete(self) -> bool:
        """Whether the finished output is in place: every file of it (written before the cleanup)."""
        return all(output.exists() for output in self.outputs())

    def outputs(self) -> list[Path]:
        """The files a finished job consists of."""
        return [self.path]

    def _next_part(self) -> Path:
        return self.parts / f"part-{len(self.files):06d}{self.suffix}"

    def resumed(self, records: Iterator[Record], source: object) -> Iterator[Record]:
        """The records after those in the saved parts, each part's records proven to be the ones it holds.

        Streaming: the digest of each part's records (ids and texts, chained from the part before) is
        compared with the one its marker saved; a part saved before markers held one is taken on trust.
        """
        previous, count = "", 0
        for part in self.files:
            marker = part_marker(part)
            wanted = int(marker["records"])
            digest = RecordDigest(previous)
            for record in islice(records, wanted):
                digest.add(record)
            count += digest.count
            if digest.count < wanted:
                raise CorpusError(fewer_records(source, count, self.done))
            previous = digest.hexdigest()
            if marker.get("input", previous) != previous:
                raise CorpusError(other_input(source, self.path, digest))
        self.input = previous
        yield from records

    def _check_part(self, part: Path) -> None:
        """Refuse a saved part whose vectors fail their checksums (or are not finite)."""

    def _refuse_non_finite(self, table: Any) -> None:
        names = [f.name for f in table.schema if is_vector_type(f.type)]
        matrices = [column_matrix(table.column(n)) for n in names]
        refuse_non_finite(self.path, table.column("id").to_pylist(), matrices, done=self.done)

    def _committed(self, part: Path, records: list[Record], sums: dict[str, Any] | None = None) -> None:
        """Mark a part whole: its records' count and digest (chained from the part before), and `sums`."""
        digest = RecordDigest(self.input)
        for record in records:
            digest.add(record)
        marker = {"records": len(records), "input": digest.hexdigest(), **(sums or {})}
        atomic_write_text(part.with_suffix(".done"), json.dumps(marker))
        self.files.append(part)
        self.done += len(records)
        self.input = marker["input"]

    def _cleanup(self) -> None:
        # The resume marker goes first: parts left by a kill during removal can never be resumed over.
        (self.parts / "settings.json").unlink(missing_ok=True)
        shutil.rmtree(self.parts, ignore_errors=True)

    def abandon(self) -> None:
        """Remove the part folder of a job that stored nothing."""
        self._cleanup()


def _refuse_other_settings(path: Path, state: Path, settings: dict[str, Any]) -> None:
    """Refuse to resume an unfinished job with settings other than those it was started with."""
    stored = json.loads(state.read_text())
    if settings_differ(stored, settings):
        raise CorpusError(
            f"{path}: the unfinished job was started with other settings "
            f"({settings_diff(stored, settings)}); " + going_on(stored, settings)
        )


def is_vector_type(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_fixed_size_list(kind))


def column_matrix(column: Any) -> np.ndarray:
    """(rows, d) NumPy from a fixed-size list column, in its stored precision."""
    array = column.combine_chunks()
    width = array.type.list_size
    return np.asarray(array.flatten().to_numpy(zero_copy_only=False)).reshape(-1, width)


@contextmanager
def removed_on_failure(path: Path) -> Iterator[None]:
    """A temporary file that a failed step (a full disk, a kill's KeyboardInterrupt) leaves no trace of."""
    try:
        yield
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def part_marker(part: Path) -> dict[str, Any]:
    """A part's `.done` marker: its records, the digest of the input read up to its end, and for a .npy
    part its rows and checksum (a plain count in parts saved before checksums and digests)."""
    text = part.with_suffix(".done").read_text()
    return json.loads(text) if text.lstrip().startswith("{") else {"records": int(text)}  # type: ignore[no-any-return]


def write_settings(state: Path, settings: dict[str, Any], output: Path | str, *, fix: str) -> None:
    """A job's settings written to `state` (a local job's part folder, a Ray job's resume folder); a failed
    write (a full disk) is one CorpusError naming `output`, the reason, and then `fix`."""
    try:
        atomic_write_text(state, json.dumps(settings, sort_keys=True))
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise CorpusError(f"{output}: could not write the job's settings ({reason}){fix}") from None


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file beside it, so a reader sees the old text or the new."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
