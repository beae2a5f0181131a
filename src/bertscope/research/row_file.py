"""A (rows, width) float32 array on disk, appended to while it is written and read a run of rows at a
time: the structural probes keep every word's vector of every layer this way.

Written with plain appends and read with seek + read, never mapped: the process holds only the rows a
read returns. A memory-mapped array (how it was first done) reads the same, but every page touched stays
in the process's resident set: the probe of all-mpnet-base-v2's 13 layers on EWT's 12,544 training
sentences peaked at 12.8 GB, the size of the file.
"""

from __future__ import annotations

import io
from pathlib import Path
from types import TracebackType

import numpy as np

__all__ = ["RowFile"]

ITEM = np.dtype(np.float32).itemsize


class RowFile:
    """Rows of `width` float32 values in the file at `path`: `append` while writing, then `finish`;
    `len`, `shape` and `rows[a:b]` ((b - a, width) read from disk) afterwards. A context manager."""

    def __init__(self, path: Path, width: int) -> None:
        self.path, self.width, self.rows = path, width, 0
        self._handle: io.BufferedRandom = open(path, "w+b")  # noqa: SIM115 (closed by close(), or by `with`)

    def append(self, rows: np.ndarray) -> None:
        """Add (n, width) rows at the end; rows of another shape are refused, never reshaped (a (n, 2w)
        block read as (2n, w) rows would shift every later row)."""
        block = np.ascontiguousarray(rows, dtype=np.float32)
        if block.ndim != 2 or block.shape[1] != self.width:
            raise ValueError(
                f"{self.path}: holds rows of width {self.width}; refused a block of shape {block.shape}"
            )
        self._handle.write(block.tobytes())
        self.rows += len(block)

    def finish(self) -> RowFile:
        """Done writing: flushed, ready to read."""
        self._handle.flush()
        return self

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, width)."""
        return (self.rows, self.width)

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, rows: slice) -> np.ndarray:
        start, stop, step = rows.indices(self.rows)
        if step != 1:
            raise IndexError("a RowFile reads runs of rows (a slice without a step)")
        count = max(stop - start, 0)
        self._handle.seek(start * self.width * ITEM)
        data = self._handle.read(count * self.width * ITEM)
        if len(data) != count * self.width * ITEM:
            raise OSError(f"{self.path}: the file ended before row {stop}")
        return np.frombuffer(data, dtype=np.float32).reshape(count, self.width)

    def close(self) -> None:
        """Close the file (it stays on disk)."""
        self._handle.close()

    def __enter__(self) -> RowFile:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
