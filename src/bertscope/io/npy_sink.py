"""The NumPy sink: a .npy matrix joined from part files, its row labels and settings (checksums) beside it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

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
    row_checks,
    row_digests,
    sealed,
)
from .parts_sink import (
    REDO_ADVICE,
    PartsSink,
    atomic_write_text,
    column_matrix,
    is_vector_type,
    part_marker,
    removed_on_failure,
)
from .readers import Record

if TYPE_CHECKING:
    from .levels import Rows

__all__ = ["NpySink", "npy_parts"]

# The checksums a part's `.done` marker keeps (row checks 1 on): of its vectors and of its labels' bytes.
_PART_SUMS = ("embedding", "labels")


class NpySink(PartsSink):
    """A .npy matrix (memory-mappable) with its labels and `<stem>.settings.json` beside it.

    Sentences: (texts, d) with `<stem>.ids.txt`. Token and word rows: (rows, d), or (rows, layers, d) for
    combine="stack", with `<stem>.rows.jsonl` (one JSON object per row: id, position, token, span ...).
    """

    suffix = ".npy"

    def __init__(self, path: Path, *, settings: dict[str, Any], resume: bool, overwrite: bool) -> None:
        # The job's settings say which row checks its parts keep (a resumed job's, as it was started),
        # so a part whose marker lost them is refused (`_marker`), the first part's too.
        self._kept: set[str] = set()
        self._generation: int | None = None
        job = {**settings, ROW_CHECKS_KEY: ROW_CHECKS}
        super().__init__(path, settings=job, resume=resume, overwrite=overwrite)

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
        with removed_on_failure(tmp), tmp.open("wb") as handle:
            # through Python's writes, not numpy's fwrite: a full disk then says "No space left on device"
            # (errno ENOSPC), where fwrite's short count said only "19200 requested and 10208 written"
            np.save(_Writes(handle), vectors)
        labels_file = part.with_suffix(self.labels_suffix)
        atomic_write_text(labels_file, labels)
        os.replace(tmp, part)
        sums = {
            "rows": len(vectors),
            "embedding": checksum(vectors),
            "labels": checksum(labels_file.read_bytes()),
        }
        self._committed(part, records, sums)

    def _check_part(self, part: Path) -> None:
        self._checked_sum(part, self._marker(part))

    def _marker(self, part: Path) -> dict[str, Any]:
        """A part's marker, refused where it lacks a checksum that the job's row checks or an earlier part
        (checked in order) say was written: bertscope writes them for every part, so it was stripped, and
        the part's rows cannot be proven (the SQLite rule for a row without its checksum after rows with
        theirs). A job saved before checksums (row checks 0, plain markers) has none to lose."""
        if self._generation is None:
            stored = json.loads((self.parts / "settings.json").read_text())
            self._generation = row_checks(stored) if isinstance(stored, dict) else 0
        marker = part_marker(part)
        missing = [k for k in _PART_SUMS if k not in marker and (self._generation >= 1 or k in self._kept)]
        if missing:
            why = (
                "which this job's earlier parts keep"
                if self._kept.issuperset(missing)
                else f"which this job (row checks {self._generation}) writes for every part"
            )
            raise CorpusError(
                f"{part.with_suffix('.done')} keeps no {', '.join(missing)} "
                f"checksum{'s' if len(missing) > 1 else ''}, {why}: they were stripped, so its rows cannot "
                f"be proven; {REDO_ADVICE}"
            )
        self._kept.update(k for k in _PART_SUMS if k in marker)
        return marker

    def _checked_sum(self, part: Path, marker: dict[str, Any]) -> int:
        """The checksum of a part's vectors, refused when they do not match the one saved with them."""
        block = _load_part(part)
        found = checksum(block)
        wanted = marker.get("embedding")
        if wanted is not None and found != wanted:
            raise corrupt(str(part), (0, len(block) - 1), MISMATCH, REDO_ADVICE)
        bad = non_finite(block) if wanted is None else np.empty(0, int)  # a part saved before checksums
        if len(bad):
            raise corrupt(str(part), (int(bad[0]), int(bad[-1])), NOT_FINITE, REDO_ADVICE)
        return found

    def _batch(self, part: Path, block: np.ndarray, digests: bool) -> dict[str, Any]:
        """A part's entry in the store's checksums: its vectors', its labels' (checked against the ones
        saved with it, where they were: `_marker`) and, with `digests` (`checksums.keeps_digests`), its
        row digests; one part in memory."""
        marker = self._marker(part)
        labels = part.with_suffix(self.labels_suffix).read_bytes()
        wanted = marker.get("labels")
        if wanted is not None and checksum(labels) != wanted:
            where = str(part.with_suffix(self.labels_suffix))
            raise corrupt(where, (0, max(0, len(block) - 1)), MISMATCH, REDO_ADVICE)
        entry: dict[str, Any] = {
            "rows": len(block),
            "embedding": self._checked_sum(part, marker),
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
        self._kept = set()  # the parts are checked again in order
        shapes = {b.shape[1:] for b in blocks}
        shape = shapes.pop() if shapes else (0,)
        dtype = blocks[0].dtype if blocks else np.float32
        total = sum(len(b) for b in blocks)
        tmp = self.path.with_name(self.path.name + ".tmp")
        labels = self.path.with_suffix(self.labels_suffix)
        with removed_on_failure(tmp), removed_on_failure(labels.with_name(labels.name + ".tmp")):
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
        sums = checksums_block("batches", batches)
        # the settings' digest leaves the row checksums out: they are checked against the rows themselves
        settings = sealed({**self.settings, "dimension": int(shape[-1]), ROW_CHECKS_KEY: ROW_CHECKS})
        settings_file = self.path.with_suffix(".settings.json")
        settings_tmp = settings_file.with_name(settings_file.name + ".tmp")
        labels_tmp = labels.with_name(labels.name + ".tmp")
        with removed_on_failure(tmp), removed_on_failure(labels_tmp), removed_on_failure(settings_tmp):
            settings_tmp.write_text(json.dumps({**settings, "checksums": sums}, indent=2))
        # The three files replace an old output's one after the other (it stays whole until then), and
        # the labels of an output at another level go too: a reader would take them for this one's.
        os.replace(tmp, self.path)
        os.replace(labels_tmp, labels)
        os.replace(settings_tmp, settings_file)
        for stale in self.stale_outputs():
            stale.unlink(missing_ok=True)
        self._cleanup()
        return self.outputs()

    def stale_outputs(self) -> list[Path]:
        """The labels file of the other levels (`.ids.txt` beside token rows, `.rows.jsonl` beside
        sentences): an output this job replaces may have had it."""
        other = ".rows.jsonl" if self.labels_suffix == ".ids.txt" else ".ids.txt"
        return [self.path.with_suffix(other)]


class _Writes:
    """A binary file seen by `np.save` as a writable object only, so it writes with `write`."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle

    def write(self, data: bytes) -> int:
        """Write `data` to the file; an OSError with its errno where the disk refuses it."""
        return self.handle.write(data)


def npy_parts(table: Any) -> tuple[np.ndarray, str]:
    """(vectors, labels) of a level's rows for the .npy sink: ids per line for sentences, else JSON lines.

    Several vector columns (combine="stack") become one (rows, layers, d) block.
    """
    names = [f.name for f in table.schema if is_vector_type(f.type)]
    blocks = [column_matrix(table.column(n)) for n in names]
    vectors = blocks[0] if len(blocks) == 1 else np.stack(blocks, axis=1)
    if "position" not in table.column_names:  # sentence rows: one per text
        return vectors, "".join(i + "\n" for i in table.column("id").to_pylist())
    rows = table.drop_columns(names).to_pylist()
    return vectors, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _load_part(part: Path) -> np.ndarray:
    """A saved .npy part, memory-mapped; the one-line `corrupt` error where it is not a whole .npy file
    (cut short by a full disk or a crash: "mmap length is greater than file size")."""
    try:
        return np.load(part, mmap_mode="r")
    except (OSError, ValueError, EOFError) as exc:
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CorpusError(
            f"{part} is not a whole .npy file ({problem}): the file is corrupt; {REDO_ADVICE}"
        ) from None
