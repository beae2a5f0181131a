"""The ANN index's copy of a store's vectors (`X.parquet.index.npy`), checked a block at a time.

`build_index` records a CRC-32 of each block of `block_rows` rows of the copy (`checksums.checksum`, as a
.npy store's batches keep theirs) in the index's description, under `copy_checksums`: the CRCs as base64
of little-endian uint32s. A search re-ranks its candidates only from blocks that match: the blocks its
candidate rows fall in are checked before they are read (a query never reads the whole copy), each once
per process while the copy is the same file (`file_identity`: a rewrite or an edit moves it), so a
service checks a block once. A block is `BLOCK_BYTES` (64 KiB: 42 rows of 384 float32), larger only in a
copy of more than `MAX_BLOCKS` blocks (the description stays under 1.4 MB).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.fingerprint_facts import file_identity
from ..errors import CorpusError
from .checksums import ALGORITHM, MISMATCH, checksum, corrupt

__all__ = ["KEY", "CheckedCopy", "CopyChecks", "copy_checksums", "read_copy_checks"]

KEY = "copy_checksums"
BLOCK_BYTES = 1 << 16
MAX_BLOCKS = 1 << 18


@dataclass(frozen=True, eq=False)
class CopyChecks:
    """The CRC-32 (uint32) of each block of `block_rows` rows of an index's copy, and the copy's shape."""

    block_rows: int
    sums: np.ndarray
    shape: tuple[int, int]


def block_rows(rows: int, dimension: int) -> int:
    """Rows a block: `BLOCK_BYTES` of float32 rows (one at least), more where the copy would have more
    than `MAX_BLOCKS` blocks."""
    return max(1, BLOCK_BYTES // (4 * dimension), -(-rows // MAX_BLOCKS))


def copy_checksums(matrix: np.ndarray) -> dict[str, Any]:
    """The `copy_checksums` entry of an index's description for its (rows, d) float32 copy, read a block
    at a time (memory-mapped: the copy is never in memory whole)."""
    per = block_rows(len(matrix), int(matrix.shape[1]))
    sums = np.array(
        [checksum(np.asarray(matrix[start : start + per])) for start in range(0, len(matrix), per)],
        dtype="<u4",
    )
    text = base64.b64encode(sums.tobytes()).decode("ascii")
    return {"algorithm": ALGORITHM, "block_rows": per, "blocks": len(sums), "crc32": text}


def read_copy_checks(entry: object, rows: int, dimension: int) -> CopyChecks | None:
    """The block CRCs an index's description records for its copy of (rows, dimension), or None where the
    entry is not one this bertscope writes (algorithm, whole counts, one CRC a block)."""
    if not isinstance(entry, dict) or entry.get("algorithm") != ALGORITHM:
        return None
    per, blocks, text = entry.get("block_rows"), entry.get("blocks"), entry.get("crc32")
    if not isinstance(per, int) or isinstance(per, bool) or per < 1 or not isinstance(text, str):
        return None
    if not isinstance(blocks, int) or isinstance(blocks, bool) or blocks != -(-rows // per):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 4 * blocks:
        return None
    return CopyChecks(per, np.frombuffer(raw, dtype="<u4"), (rows, dimension))


# A copy's path -> (its file identity, the CRCs it was checked against, which blocks matched them).
_PROVEN: dict[str, tuple[tuple[int, ...], bytes, np.ndarray]] = {}


class CheckedCopy:
    """An index's copy, read by row numbers: the blocks each read touches are checked first.

    `rebuild` is the fix a failed check names (the `bertscope index build` command of this index).
    """

    def __init__(self, path: Path, checks: CopyChecks, rebuild: str) -> None:
        self.path, self.checks, self.rebuild = path, checks, rebuild

    def __len__(self) -> int:
        return self.checks.shape[0]

    def __getitem__(self, rows: Any) -> np.ndarray:
        """The float32 vectors of `rows` (row numbers), once their blocks match their CRCs."""
        rows = np.asarray(rows, dtype=np.int64)
        identity = file_identity(self.path.stat())  # before reading: an edit after it gives another
        matrix = self._open()
        key, sums = str(self.path.resolve()), self.checks.sums.tobytes()
        known, recorded, proven = _PROVEN.get(key, ((), b"", np.zeros(0, dtype=bool)))
        if known != identity or recorded != sums:
            proven = np.zeros(len(self.checks.sums), dtype=bool)
        per = self.checks.block_rows
        blocks = np.unique(rows // per)
        for block in blocks[~proven[blocks]]:
            start, end = int(block) * per, min(len(matrix), (int(block) + 1) * per)
            if checksum(np.asarray(matrix[start:end])) != int(self.checks.sums[block]):
                raise corrupt(str(self.path), (start, end - 1), MISMATCH, self.rebuild)
            proven[block] = True
        _PROVEN[key] = (identity, sums, proven)
        return np.asarray(matrix[rows], dtype=np.float32)

    def _open(self) -> np.ndarray:
        """The copy, memory-mapped, refused in one line where it is not the (rows, d) float32 .npy its
        index describes."""
        try:
            matrix = np.load(self.path, mmap_mode="r")
        except (OSError, ValueError, EOFError) as exc:  # truncated: "mmap length is greater than file size"
            problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CorpusError(
                f"{self.path} is not a whole .npy matrix ({problem}): the index's copy of the vectors is "
                f"corrupt; {self.rebuild}"
            ) from None
        if matrix.dtype != np.float32 or matrix.shape != self.checks.shape:
            raise CorpusError(
                f"{self.path} holds {matrix.dtype} vectors of shape {matrix.shape} where its index describes "
                f"{self.checks.shape} float32: the index's copy of the vectors was replaced; {self.rebuild}"
            )
        return matrix
