"""Tensors of a model folder's safetensors files, found from their headers and read as float32 by hand.

Only the headers are parsed (8-byte length, JSON); a tensor's bytes are read with NumPy from its offsets,
so a folder's matrix shapes and its word-piece matrix are known without torch or the safetensors package.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..errors import ModelLoadError

__all__ = ["FloatRows", "Stored", "damaged", "float32_tensor", "safetensors_header", "safetensors_tensors"]


class Stored(NamedTuple):
    """Where one tensor's bytes are in a safetensors file, and how they are stored."""

    file: Path
    dtype: str
    shape: list[int]
    start: int  # byte offset of the first element in `file`
    end: int


def safetensors_header(file: Path) -> tuple[int, dict[str, Any]]:
    """A safetensors file's header: its byte length and JSON (tensor name -> dtype, shape, offsets).

    A file whose header is cut short, not JSON or not an object is a `ModelLoadError` naming it (`damaged`).
    """
    with file.open("rb") as stream:
        total = os.fstat(stream.fileno()).st_size
        if total < 8:
            raise damaged(file, f"{total} bytes, shorter than a header")
        (size,) = struct.unpack("<Q", stream.read(8))
        if size > total - 8:
            raise damaged(file, f"its header says {size:,} bytes, the file has {total - 8:,} after it")
        try:
            header = json.loads(stream.read(size))
        except ValueError as exc:  # invalid JSON or UTF-8
            raise damaged(file, f"its header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise damaged(file, "its header is not a JSON object")
    return size, header


def damaged(file: Path, why: str) -> ModelLoadError:
    """The one line for a safetensors file that is cut short or damaged: what to do about it."""
    return ModelLoadError(
        f"{file.parent} could not be loaded as a model: its {file.name} is damaged or cut short ({why}); "
        "download the model again (or save it again where it was made)"
    )


def safetensors_tensors(path: Path) -> dict[str, Stored]:
    """Tensor name -> where it is, from the safetensors headers (one file or an index of shards); {} if
    none. Only the headers are read."""
    index = path / "model.safetensors.index.json"
    files = [path / "model.safetensors"]
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
        except (OSError, ValueError, AttributeError):
            return {}  # an unreadable index: only a load can say which files hold the weights
        files = [path / name for name in sorted(set(weight_map.values()))]
    tensors: dict[str, Stored] = {}
    for file in files:
        if not file.is_file():
            return {}
        size, header = safetensors_header(file)
        data = 8 + size  # the tensors' bytes follow the 8-byte length and the header
        total = file.stat().st_size
        for name, entry in header.items():
            if name != "__metadata__":
                try:
                    begin, end = (int(offset) for offset in entry["data_offsets"])
                    stored = Stored(file, str(entry["dtype"]), list(entry["shape"]), data + begin, data + end)
                except (KeyError, TypeError, ValueError):
                    raise damaged(file, f"its header's entry for {name} is not a tensor's") from None
                if not data <= stored.start <= stored.end <= total:
                    raise damaged(file, f"{name} ends at byte {stored.end:,} of {total:,}")
                tensors[name] = stored
    return tensors


# safetensors' float types as NumPy reads their bytes (bfloat16 as the 16 bits it is, widened below)
_SAFETENSORS_FLOATS: dict[str, np.dtype[Any]] = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
}


def float32_tensor(stored: Stored) -> np.ndarray | None:
    """A float32, float16 or bfloat16 tensor of a safetensors file, widened exactly to float32; else None.

    Read from the header's offsets rather than with safetensors' NumPy reader, which knows bfloat16 only
    when some other package has registered a NumPy bfloat16 type.
    """
    kind = _SAFETENSORS_FLOATS.get(stored.dtype)
    if kind is None:
        return None
    flat = np.fromfile(stored.file, dtype=kind, count=_count(stored, kind), offset=stored.start)
    return _widened(flat, stored.dtype).reshape(stored.shape)


def _count(stored: Stored, kind: np.dtype[Any]) -> int:
    """How many values `stored` holds; its shape and its byte range must say the same (else damaged)."""
    count = int(np.prod(stored.shape, dtype=np.int64))
    if count * kind.itemsize != stored.end - stored.start:
        raise damaged(
            stored.file, f"its header gives a tensor of shape {stored.shape} a byte range of another size"
        )
    return count


def _widened(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Stored float values as float32, exactly."""
    if dtype == "BF16":  # bfloat16 is the top half of a float32
        raw = (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.astype(np.float32, copy=False)


class FloatRows:
    """A 2-D float tensor of a safetensors file whose rows are read only as they are indexed.

    A memory map: taking 10 rows of XLM-R's 250,002 x 768 word matrix reads those rows, not its 768 MB."""

    def __init__(self, stored: Stored) -> None:
        if stored.dtype not in _SAFETENSORS_FLOATS or len(stored.shape) != 2:
            raise ValueError(f"not a 2-D float tensor: {stored.dtype} {stored.shape}")
        kind = _SAFETENSORS_FLOATS[stored.dtype]
        _count(stored, kind)
        self._raw = np.memmap(
            stored.file, dtype=kind, mode="r", offset=stored.start, shape=tuple(stored.shape)
        )
        self._dtype = stored.dtype

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, width)."""
        rows, width = self._raw.shape
        return int(rows), int(width)

    def __getitem__(self, ids: np.ndarray) -> np.ndarray:
        """The rows of an integer array of ids, float32, shaped ids.shape + (width,)."""
        return _widened(np.asarray(self._raw[ids]), self._dtype)
