"""Corpus sinks: Parquet, NumPy and an SQLite collection, each written in atomic steps so no work is lost.

Parquet and NumPy outputs grow as numbered part files in `<output>.parts/` (each written to a temporary
name, then renamed) and are joined into the final file at the end; a killed job resumes after the
last whole part. SQLite writes one transaction per batch and skips what it already holds.
Each part's marker also holds a digest of the records read up to its end (ids and texts, chained part by
part), so a resumed job proves that the records it skips are the ones already written.
Every batch's vectors are refused when not finite and stored with their checksums (`io.checksums`);
the parts are checked again when a job resumes and when they are joined.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.fingerprint_facts import flatten
from ..errors import CorpusError
from .checksums import (
    MISMATCH,
    NOT_FINITE,
    ROW_CHECKS,
    ROW_CHECKS_KEY,
    checksum,
    checksums_block,
    corrupt,
    keeps_digests,
    non_finite,
    refuse_non_finite,
    row_digests,
    sealed,
)
from .parquet_checked import CheckedParquet, write_checked
from .readers import Record, given_texts, source_name

if TYPE_CHECKING:
    from .levels import Rows

__all__ = [
    "RecordDigest",
    "Sink",
    "other_input",
    "with_settings",
    "npy_parts",
    "view_column",
    "PARQUET_META_KEY",
]

PARQUET_META_KEY = b"bertscope"
# How a job whose saved parts fail their checks is made again.
_REDO = "start the job again with overwrite=True (--overwrite)"


def view_column(view: str) -> str:
    """The Parquet column that holds one named sentence view's vectors."""
    return f"embedding_{view}"


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
            raise CorpusError(_fewer(source, digest.count, self.done))
        if self.saved_input is not None and digest.hexdigest() != self.saved_input:
            raise CorpusError(other_input(source, self.path, digest))
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


class _PartsSink(Sink):
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
        if overwrite:
            shutil.rmtree(self.parts, ignore_errors=True)
            for old in self.outputs():
                old.unlink(missing_ok=True)
        elif self.complete():
            # A job killed while removing its parts leaves the whole output and some parts: the output wins.
            shutil.rmtree(self.parts, ignore_errors=True)
            if resume:
                raise CorpusError(
                    f"{path} is already complete: nothing to resume (overwrite=True (--overwrite) redoes it)"
                )
            raise CorpusError(f"{path} exists; pass overwrite=True (--overwrite) to replace it")
        elif resume and state.exists():
            stored = json.loads(state.read_text())
            if settings_differ(stored, settings):
                raise CorpusError(
                    f"{path}: the unfinished job was started with other settings "
                    f"({settings_diff(stored, settings)}); "
                    "resume with the same options, or start again with overwrite=True (--overwrite)"
                )
        elif self.parts.exists():
            raise CorpusError(
                f"{self.parts} holds an unfinished job for {path}; "
                "pass resume=True (--resume) to continue it or overwrite=True (--overwrite) to start again"
            )
        elif any(output.exists() for output in self.outputs()):
            raise CorpusError(f"{path} exists; pass overwrite=True (--overwrite) to replace it")
        self.parts.mkdir(exist_ok=True)
        if not state.exists():  # a resumed job keeps the settings it was started with
            _atomic_write_text(state, json.dumps(settings, sort_keys=True))
        self.files: list[Path] = []
        self.input = ""  # the digest of the records written so far (`resumed` sets it from the parts)
        while (part := self._next_part()).with_suffix(".done").exists():
            self.files.append(part)
            self.done += int(_marker(part)["records"])
        markers = sorted(self.parts.glob("part-*.done"))
        if len(markers) != len(self.files):
            # Part names assume no gap: resuming past one would skip records and overwrite later parts.
            raise CorpusError(
                f"{self.parts}: part {len(self.files)} is missing but later parts exist, so the job "
                "cannot be resumed exactly; start again with overwrite=True (--overwrite)"
            )
        for part in self.files:  # a resumed job goes on only from parts that are whole
            self._check_part(part)

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
            marker = _marker(part)
            wanted = int(marker["records"])
            digest = RecordDigest(previous)
            for record in islice(records, wanted):
                digest.add(record)
            count += digest.count
            if digest.count < wanted:
                raise CorpusError(_fewer(source, count, self.done))
            previous = digest.hexdigest()
            if marker.get("input", previous) != previous:
                raise CorpusError(other_input(source, self.path, digest))
        self.input = previous
        yield from records

    def _check_part(self, part: Path) -> None:
        """Refuse a saved part whose vectors fail their checksums (or are not finite)."""

    def _refuse_non_finite(self, table: Any) -> None:
        names = [f.name for f in table.schema if _is_vector(f.type)]
        matrices = [_matrix(table.column(n)) for n in names]
        refuse_non_finite(self.path, table.column("id").to_pylist(), matrices, done=self.done)

    def _committed(self, part: Path, records: list[Record], sums: dict[str, Any] | None = None) -> None:
        """Mark a part whole: its records' count and digest (chained from the part before), and `sums`."""
        digest = RecordDigest(self.input)
        for record in records:
            digest.add(record)
        marker = {"records": len(records), "input": digest.hexdigest(), **(sums or {})}
        _atomic_write_text(part.with_suffix(".done"), json.dumps(marker))
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


class ParquetSink(_PartsSink):
    """The level's columns (sentence: id, text, embedding, n_tokens, truncated); settings in metadata."""

    suffix = ".parquet"
    _columns_checked = False  # whether a resumed job's first new part was compared with the saved ones

    def write(self, records: list[Record], rows: Rows) -> None:
        """Write one part file (temporary name, then rename, then its marker)."""

        part = self._next_part()
        tmp = part.with_suffix(".tmp")
        self._refuse_non_finite(rows.table)
        with _removed_on_failure(tmp):
            write_checked(tmp, [with_settings(rows.table, self.settings)])
        self._refuse_other_columns(tmp)
        os.replace(tmp, part)
        self._committed(part, records)

    def _refuse_other_columns(self, tmp: Path) -> None:
        """A resumed job's first new part must hold the columns of the saved parts (they are joined as one
        table): a store whose parts predate `keep_text` in the settings could differ in its text column."""
        import pyarrow.parquet as pq

        if self.files and not self._columns_checked:
            with _removed_on_failure(tmp):
                _same_columns(
                    self.path, pq.read_schema(self.files[0]), pq.read_schema(tmp), "this run's part"
                )
            self._columns_checked = True

    def _check_part(self, part: Path) -> None:
        checked = CheckedParquet(part, rebuild=_REDO)
        names = [f.name for f in checked.file.schema_arrow if _is_vector(f.type)]
        for group in range(checked.file.metadata.num_row_groups):
            checked.group(group, names)

    def finish(self) -> list[Path]:
        """Join the parts into one Parquet file, streaming row group by row group, each one checked."""
        import pyarrow.parquet as pq

        if not self.files:
            self._cleanup()
            raise CorpusError(f"{self.path}: no texts were embedded, so there is nothing to write")
        tmp = self.path.with_name(self.path.name + ".tmp")
        with _removed_on_failure(tmp):
            write_checked(tmp, self._groups(), pq.read_schema(self.files[0]))
        os.replace(tmp, self.path)
        self._cleanup()
        return [self.path]

    def _groups(self) -> Iterator[Any]:
        import pyarrow.parquet as pq

        first = pq.read_schema(self.files[0])
        for part in self.files:
            checked = CheckedParquet(part, rebuild=_REDO)
            _same_columns(self.path, first, checked.file.schema_arrow, f"the saved {part.name}", redo=True)
            for group in range(checked.file.metadata.num_row_groups):
                yield checked.group(group, None)


class NpySink(_PartsSink):
    """A .npy matrix (memory-mappable) with its labels and `<stem>.settings.json` beside it.

    Sentences: (texts, d) with `<stem>.ids.txt`. Token and word rows: (rows, d), or (rows, layers, d) for
    combine="stack", with `<stem>.rows.jsonl` (one JSON object per row: id, position, token, span ...).
    """

    suffix = ".npy"

    @property
    def labels_suffix(self) -> str:
        """Where the row labels go: ids for sentences, JSON lines for the other levels."""
        return ".ids.txt" if self.settings.get("level", "sentence") == "sentence" else ".rows.jsonl"

    def outputs(self) -> list[Path]:
        """The matrix, its labels and its settings."""
        return [self.path, self.path.with_suffix(self.labels_suffix), self.path.with_suffix(".settings.json")]

    def write(self, records: list[Record], rows: Rows) -> None:
        """Write one part (vectors and labels), each to a temporary name then renamed; the marker last."""
        broken = next((r for r in records if "\n" in r.id or "\r" in r.id), None)
        if broken is not None and self.labels_suffix == ".ids.txt":
            raise CorpusError(
                f"id {broken.id!r} (line {broken.line}) holds a line break, which the .ids.txt beside a .npy "
                "cannot keep; write to .parquet or .db, or use other ids"
            )
        self._refuse_non_finite(rows.table)
        vectors, labels = npy_parts(rows.table)
        part = self._next_part()
        tmp = part.with_name(part.name + ".tmp")
        with tmp.open("wb") as handle:
            np.save(handle, vectors)
        labels_file = part.with_suffix(self.labels_suffix)
        _atomic_write_text(labels_file, labels)
        os.replace(tmp, part)
        sums = {
            "rows": len(vectors),
            "embedding": checksum(vectors),
            "labels": checksum(labels_file.read_bytes()),
        }
        self._committed(part, records, sums)

    def _check_part(self, part: Path) -> None:
        self._checked_sum(part)

    def _checked_sum(self, part: Path) -> int:
        """The checksum of a part's vectors, refused when they do not match the one saved with them."""
        block = _load_part(part)
        found = checksum(block)
        wanted = _marker(part).get("embedding")
        if wanted is not None and found != wanted:
            raise corrupt(str(part), (0, len(block) - 1), MISMATCH, _REDO)
        bad = non_finite(block) if wanted is None else np.empty(0, int)  # a part saved before checksums
        if len(bad):
            raise corrupt(str(part), (int(bad[0]), int(bad[-1])), NOT_FINITE, _REDO)
        return found

    def _batch(self, part: Path, block: np.ndarray, digests: bool) -> dict[str, Any]:
        """A part's entry in the store's checksums: its vectors', its labels' (checked against the ones
        saved with it, where they were) and, with `digests` (`checksums.keeps_digests`), its row digests;
        one part in memory."""
        labels = part.with_suffix(self.labels_suffix).read_bytes()
        wanted = _marker(part).get("labels")
        if wanted is not None and checksum(labels) != wanted:
            where = str(part.with_suffix(self.labels_suffix))
            raise corrupt(where, (0, max(0, len(block) - 1)), MISMATCH, _REDO)
        entry: dict[str, Any] = {
            "rows": len(block),
            "embedding": self._checked_sum(part),
            "labels": checksum(labels),
        }
        if digests:
            lines = labels.splitlines(keepends=True)
            entry["row_digests"] = row_digests([block], lines) if len(lines) == len(block) else ""
        return entry

    def finish(self) -> list[Path]:
        """Join the parts into one .npy (streamed through a memory map) and write labels and settings."""
        blocks = [_load_part(p) for p in self.files]
        batches = []
        shapes = {b.shape[1:] for b in blocks}
        shape = shapes.pop() if shapes else (0,)
        dtype = blocks[0].dtype if blocks else np.float32
        total = sum(len(b) for b in blocks)
        tmp = self.path.with_name(self.path.name + ".tmp")
        labels = self.path.with_suffix(self.labels_suffix)
        with _removed_on_failure(tmp), _removed_on_failure(labels.with_name(labels.name + ".tmp")):
            matrix = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=(total, *shape))
            row = 0
            with labels.with_name(labels.name + ".tmp").open("w") as labels_out:
                for part, block in zip(self.files, blocks, strict=True):
                    batches.append(self._batch(part, block, keeps_digests(row + len(block))))
                    matrix[row : row + len(block)] = block
                    row += len(block)
                    labels_out.write(part.with_suffix(self.labels_suffix).read_text())
            matrix.flush()
            del matrix, blocks
        os.replace(tmp, self.path)
        os.replace(labels.with_name(labels.name + ".tmp"), labels)
        sums = checksums_block("batches", batches)
        # the settings' digest leaves the row checksums out: they are checked against the rows themselves
        settings = sealed({**self.settings, "dimension": int(shape[-1]), ROW_CHECKS_KEY: ROW_CHECKS})
        _atomic_write_text(
            self.path.with_suffix(".settings.json"), json.dumps({**settings, "checksums": sums}, indent=2)
        )
        self._cleanup()
        return self.outputs()


def with_settings(table: Any, settings: dict[str, Any]) -> Any:
    """The table with the job's settings (its vector width and the row checksums kept beside them) in the
    schema metadata, with their digest (`checksums.sealed`)."""
    widths = [f.type.list_size for f in table.schema if _is_vector(f.type)]
    stored = sealed({**settings, "dimension": widths[0] if widths else 0, ROW_CHECKS_KEY: ROW_CHECKS})
    meta = {PARQUET_META_KEY: json.dumps(stored).encode()}
    return table.replace_schema_metadata(meta)


def npy_parts(table: Any) -> tuple[np.ndarray, str]:
    """(vectors, labels) of a level's rows for the .npy sink: ids per line for sentences, else JSON lines.

    Several vector columns (combine="stack") become one (rows, layers, d) block.
    """
    names = [f.name for f in table.schema if _is_vector(f.type)]
    blocks = [_matrix(table.column(n)) for n in names]
    vectors = blocks[0] if len(blocks) == 1 else np.stack(blocks, axis=1)
    if "position" not in table.column_names:  # sentence rows: one per text
        return vectors, "".join(i + "\n" for i in table.column("id").to_pylist())
    rows = table.drop_columns(names).to_pylist()
    return vectors, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


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


def other_input(source: object, output: object, digest: RecordDigest) -> str:
    """The one-line refusal of a resume whose input differs from what the unfinished job read."""
    name = source_name(source)
    where = str(digest.first) if digest.first == digest.last else f"{digest.first}-{digest.last}"
    return (
        f"{name}:{where}: these records are not the ones the unfinished job for {output} read from "
        "there (their ids or texts differ): the input changed since; resume with the input (and "
        "text_field= and id_field=) it was started with, or start again with overwrite=True (--overwrite)"
    )


def _fewer(source: object, found: int, done: int) -> str:
    name = "the texts given" if given_texts(source) else str(source)
    return (
        f"{name} has fewer texts ({found}) than the unfinished job already wrote ({done}); resume with the "
        "input it was started with, or start again with overwrite=True (--overwrite)"
    )


def _same_columns(path: Path, first: Any, other: Any, what: str, *, redo: bool = False) -> None:
    """Refuse a part whose columns differ from the job's first part's: they cannot be joined as one table."""
    if first.equals(other, check_metadata=False):
        return
    names = [f.name for f in first] != [f.name for f in other]
    before, after = (", ".join(f.name if names else f"{f.name} {f.type}" for f in s) for s in (first, other))
    fix = "start again with overwrite=True (--overwrite)"
    if not redo:
        fix = f"resume with the options it was started with (--no-text leaves the text out), or {fix}"
    raise CorpusError(
        f"{path}: {what} holds the columns {after} where the job's first part holds {before}; {fix}"
    )


def _is_vector(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_fixed_size_list(kind))


def _matrix(column: Any) -> np.ndarray:
    """(rows, d) NumPy from a fixed-size list column, in its stored precision."""
    array = column.combine_chunks()
    width = array.type.list_size
    return np.asarray(array.flatten().to_numpy(zero_copy_only=False)).reshape(-1, width)


@contextmanager
def _removed_on_failure(path: Path) -> Iterator[None]:
    """A temporary file that a failed step (a full disk, a kill's KeyboardInterrupt) leaves no trace of."""
    try:
        yield
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _load_part(part: Path) -> np.ndarray:
    """A saved .npy part, memory-mapped; the one-line `corrupt` error where it is not a whole .npy file
    (cut short by a full disk or a crash: "mmap length is greater than file size")."""
    try:
        return np.load(part, mmap_mode="r")
    except (OSError, ValueError, EOFError) as exc:
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CorpusError(
            f"{part} is not a whole .npy file ({problem}): the file is corrupt; {_REDO}"
        ) from None


def _marker(part: Path) -> dict[str, Any]:
    """A part's `.done` marker: its records, the digest of the input read up to its end, and for a .npy
    part its rows and checksum (a plain count in parts saved before checksums and digests)."""
    text = part.with_suffix(".done").read_text()
    return json.loads(text) if text.lstrip().startswith("{") else {"records": int(text)}  # type: ignore[no-any-return]


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def settings_differ(stored: dict[str, Any], asked: dict[str, Any]) -> bool:
    """Whether a stored job's settings forbid going on with the asked ones.

    The exact runtimes (float32, unquantised torch, ONNX Runtime, OpenVINO) give vectors equal within
    1e-5, so a job started on one goes on on another: the exact default may choose again (`--remeasure`,
    another machine), and stores made before it existed say torch. A store written before stores carried
    the model's fingerprint, or whether it keeps the texts, goes on without them (its other settings
    still compared).
    """
    return _comparable(stored) != _comparable(asked, like=stored)


def _comparable(settings: dict[str, Any], *, like: dict[str, Any] | None = None) -> dict[str, Any]:
    # which row checksums a store keeps is the writer's, not an option a job is asked with
    settings = {k: v for k, v in settings.items() if k != ROW_CHECKS_KEY}
    if like is not None:
        settings = {k: v for k, v in settings.items() if k not in _LATER or k in like}
    exact = (
        settings.get("mode", "exact") == "exact"
        and settings.get("dtype") == "float32"
        and settings.get("quantize") is None
        and settings.get("backend") in _EXACT_RUNTIMES
    )
    if not exact:
        return settings
    return {**{k: v for k, v in settings.items() if k != "backend"}, "mode": "exact"}


_EXACT_RUNTIMES = ("torch", "onnxruntime", "openvino")
# Settings that stores carry since a later version: a store made before goes on without comparing them.
_LATER = ("fingerprint", "keep_text")


def settings_diff(stored: dict[str, Any], asked: dict[str, Any]) -> str:
    """Each setting that differs, as `key: stored then, asked now`; the model's fingerprint by the keys
    inside it that differ (`fingerprint files.model.safetensors: ...`; its id follows from them)."""
    stored, asked = dict(_comparable(stored)), dict(_comparable(asked, like=stored))
    for settings in (stored, asked):
        inner = {k: v for k, v in (settings.pop("fingerprint", None) or {}).items() if k != "id"}
        settings.update({f"fingerprint {k}": v for k, v in flatten(inner).items() if inner})
    keys = sorted(k for k in set(stored) | set(asked) if stored.get(k) != asked.get(k))
    said = [f"{k}: {stored.get(k)!r} then, {asked.get(k)!r} now" for k in keys[:4]]
    return "; ".join(said + [f"{len(keys) - 4} more"] * (len(keys) > 4))
