"""Tensors of a model folder's safetensors files, found from their headers and read as float32 by hand.

Only the headers are parsed (8-byte length, JSON); a tensor's bytes are read with NumPy from its offsets,
so a folder's matrix shapes and its word-piece matrix are known without torch or the safetensors package.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

__all__ = ["Stored", "float32_tensor", "safetensors_header", "safetensors_tensors"]


class Stored(NamedTuple):
    """Where one tensor's bytes are in a safetensors file, and how they are stored."""

    file: Path
    dtype: str
    shape: list[int]
    start: int  # byte offset of the first element in `file`
    end: int


def safetensors_header(file: Path) -> tuple[int, dict[str, Any]]:
    """A safetensors file's header: its byte length and JSON (tensor name -> dtype, shape, offsets)."""
    with file.open("rb") as stream:
        (size,) = struct.unpack("<Q", stream.read(8))
        return size, json.loads(stream.read(size))


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
        for name, entry in header.items():
            if name != "__metadata__":
                begin, end = entry["data_offsets"]
                tensors[name] = Stored(file, entry["dtype"], entry["shape"], data + begin, data + end)
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
    count = (stored.end - stored.start) // kind.itemsize
    flat = np.fromfile(stored.file, dtype=kind, count=count, offset=stored.start)
    if stored.dtype == "BF16":  # bfloat16 is the top half of a float32
        flat = (flat.astype(np.uint32) << 16).view(np.float32)
    return flat.astype(np.float32, copy=False).reshape(stored.shape)
