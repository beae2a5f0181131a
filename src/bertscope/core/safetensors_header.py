"""Tensors of a model folder's safetensors files, found from their headers and read as float32 by hand.

Only the headers are parsed (8-byte length, JSON); a tensor's bytes are read with NumPy from its offsets,
so a folder's matrix shapes and its word-piece matrix are known without torch or the safetensors package.
`config_misfits` holds the headers against config.json: the layers and shapes a load would refuse.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..errors import ModelLoadError

__all__ = [
    "FloatRows", "Misfits", "Stored", "config_misfits", "damaged", "float32_tensor", "misshaped",
    "safetensors_header", "safetensors_tensors",
]  # fmt: skip


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


class Misfits(NamedTuple):
    """What a folder's weights hold otherwise than its config.json asks, as a load would refuse it."""

    left_out: list[str]  # tensors missing, or misshaped (with the shape in the file and the config's)
    extra: list[str]  # tensors of layers past num_hidden_layers: transformers builds no place for them


# A tensor of an encoder layer: what comes before `layer.N.` / `layers.N.` (the first such part), N, the
# rest. ALBERT's shared layers (albert_layer_groups.G.albert_layers.K) do not match: num_hidden_layers
# counts how often the group runs, not stored layers, so its layers are left to the load to check.
_LAYER = re.compile(r"^((?:.*?\.)?layers?)\.(\d+)\.(.+)$")
# The config's names of the sizes (DistilBERT's dim, n_layers, n_heads, hidden_dim) as transformers reads
_SIZES = {
    "hidden": ("hidden_size", "dim"),
    "layers": ("num_hidden_layers", "n_layers"),
    "heads": ("num_attention_heads", "n_heads"),
    "intermediate": ("intermediate_size", "hidden_dim"),
    "kv_heads": ("num_key_value_heads",),
}
# The embedding matrices whose rows a config value sets (one tensor each, the name's end)
_ROWS = {
    "vocab_size": ("word_embeddings.weight", "tok_embeddings.weight", "embed_tokens.weight"),
    "max_position_embeddings": ("embeddings.position_embeddings.weight", "encoder.embed_positions.weight"),
    "type_vocab_size": ("embeddings.token_type_embeddings.weight",),
}


def config_misfits(tensors: dict[str, Stored], config: dict[str, Any]) -> Misfits:
    """The tensors of `tensors` (a folder's headers) that do not fit `config` (its config.json), read
    generically, without torch: embedding rows against vocab_size, max_position_embeddings and
    type_vocab_size; the layers stored against num_hidden_layers; the tensors of a module some layers
    leave out or hold alone (`_layer_tensors`); and a layer tensor with a size neither hidden_size nor
    intermediate_size gives. Only what every family's load refuses is said: a layout not
    read here is left to the load (which still checks every tensor)."""
    left_out = _embedding_rows(tensors, config)
    sizes = {key: _size(config, names) for key, names in _SIZES.items()}
    layers = _layers(tensors)
    if layers is None or sizes["layers"] is None:
        return Misfits(left_out, [])
    prefix, stored = layers
    count = sizes["layers"]
    extra = [f"{prefix}.{i}.{rest}" for i in sorted(stored) if i >= count for rest in sorted(stored[i])]
    kept = {i: names for i, names in stored.items() if i < count}
    if not kept:  # none of the config's layers stored: a layout not read here
        return Misfits(left_out, extra)
    left, dropped = _layer_tensors(prefix, kept, count)
    return Misfits(left_out + left + _layer_sizes(prefix, kept, sizes), extra + dropped)


def _layer_tensors(
    prefix: str, kept: dict[int, dict[str, list[int]]], count: int
) -> tuple[list[str], list[str]]:
    """The tensors the layers under num_hidden_layers leave out, and those only some of them hold: a
    whole layer missing; a module (a name less its last part) some layers lack of the parameters every
    other layer holds (a bias without its weight); a module held by fewer than half the layers (a
    setting transformers no longer reads left its weights there), or lacked whole by fewer than half.
    A module the first layer alone lacks is ModernBERT's design (no attn_norm before its first
    attention), and a module held by half the layers cannot tell which: both left to the load."""
    left: list[str] = []
    most = max(kept.values(), key=len)
    for i in range(count):
        if i not in kept:  # a whole layer missing: each tensor the fullest layer holds
            left += [f"{prefix}.{i}.{rest}" for rest in sorted(most)]
            continue
        others = [set(names) for j, names in kept.items() if j != i]
        held = {rest.rsplit(".", 1)[0] for rest in kept[i]}
        every_other = set.intersection(*others) if others else set()
        left += [
            f"{prefix}.{i}.{rest}"
            for rest in sorted(every_other)
            if rest not in kept[i] and rest.rsplit(".", 1)[0] in held
        ]
    holders: dict[str, list[int]] = {}
    for i, names in sorted(kept.items()):
        for module in sorted({rest.rsplit(".", 1)[0] for rest in names}):
            holders.setdefault(module, []).append(i)
    dropped: list[str] = []
    layers = sorted(kept)
    for module, held_by in sorted(holders.items()):
        lacking = [i for i in layers if i not in held_by]
        params = sorted(rest for rest in kept[held_by[0]] if rest.rsplit(".", 1)[0] == module)
        if not lacking or lacking == [0]:
            continue
        if 2 * len(held_by) < len(layers):
            dropped += [f"{prefix}.{i}.{rest}" for i in held_by for rest in params]
        elif 2 * len(held_by) > len(layers):
            left += [f"{prefix}.{i}.{rest}" for i in lacking for rest in params]
    return left, dropped


def _size(config: dict[str, Any], names: tuple[str, ...]) -> int | None:
    value = next((config[name] for name in names if name in config), None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _embedding_rows(tensors: dict[str, Stored], config: dict[str, Any]) -> list[str]:
    """The embedding matrices whose row count is not the config value that sets it."""
    wrong = []
    for key, ends in _ROWS.items():
        rows = _size(config, (key,))
        found = [(name, stored.shape) for name, stored in tensors.items() if name.endswith(ends)]
        if rows is None or len(found) != 1 or len(found[0][1]) != 2:
            continue  # none, several (a head's copy): the load reads which one the model takes
        name, shape = found[0]
        if shape[0] != rows:
            wrong.append(misshaped(name, shape, [rows, shape[1]]))
    return wrong


def _layers(tensors: dict[str, Stored]) -> tuple[str, dict[int, dict[str, list[int]]]] | None:
    """The encoder layers' tensors by layer index (name after `layer.N.` -> shape), with the name before
    the index; None where no tensor is a layer's, or layers are stored under two names (two encoders)."""
    layers: dict[int, dict[str, list[int]]] = {}
    prefixes = set()
    for name, stored in tensors.items():
        found = _LAYER.match(name)
        if found is not None:
            prefixes.add(found.group(1))
            layers.setdefault(int(found.group(2)), {})[found.group(3)] = stored.shape
    return (prefixes.pop(), layers) if len(prefixes) == 1 else None


def _layer_sizes(
    prefix: str, kept: dict[int, dict[str, list[int]]], sizes: dict[str, int | None]
) -> list[str]:
    """The layer weights and biases every layer holds whose sizes neither hidden_size nor
    intermediate_size give (a query, a fused qkv, a gated MLP's doubled rows and the keys and values of
    fewer heads allowed): the tensors a config of other sizes misshapes."""
    hidden, intermediate = sizes["hidden"], sizes["intermediate"]
    if hidden is None or intermediate is None:
        return []
    fits = {hidden, 2 * hidden, 3 * hidden, intermediate, 2 * intermediate}
    heads, kv = sizes["heads"], sizes["kv_heads"]
    if heads and kv and kv != heads:  # grouped-query attention: keys and values of fewer heads
        width = kv * (hidden // heads)
        fits |= {width, 2 * width, hidden + 2 * width}
    every = set.intersection(*(set(names) for names in kept.values()))
    checked = sorted(
        rest for rest in every if rest.endswith((".weight", ".bias")) and len(kept[min(kept)][rest]) <= 2
    )
    asked = _asked_sizes([kept[i][rest] for i in kept for rest in checked], hidden, intermediate)
    wrong = []
    for i in sorted(kept):
        for rest in checked:
            shape = kept[i][rest]
            if set(shape) <= fits:
                continue
            if all(size in fits or size in asked for size in shape):
                ask = [size if size in fits else asked[size] for size in shape]
                wrong.append(misshaped(f"{prefix}.{i}.{rest}", shape, ask))
            else:
                wrong.append(
                    f"{prefix}.{i}.{rest} ({_shape(shape)} in the file, which config.json's hidden_size "
                    f"{hidden} and intermediate_size {intermediate} do not give)"
                )
    return wrong


def _asked_sizes(shapes: list[list[int]], hidden: int, intermediate: int) -> dict[int, int]:
    """A stored size -> the size the config gives it, where the file's own hidden and intermediate sizes
    read plainly: its hidden size the size its layer tensors hold most, its intermediate size the most
    held of the others (each also doubled, and the hidden tripled for a fused qkv); {} where they do not."""
    held = Counter(size for shape in shapes for size in shape)
    if not held:
        return {}
    stored_hidden = held.most_common(1)[0][0]
    hiddens = {k * stored_hidden: k * hidden for k in (1, 2, 3)}
    # a gated MLP holds its intermediate size and twice it alike: the smaller of the most held
    rest = sorted((size for size in held if size not in hiddens), key=lambda size: (-held[size], size))
    inner = {k * rest[0]: k * intermediate for k in (1, 2)} if rest else {}
    if set(hiddens) & set(inner):
        return {}  # the file's sizes overlap (an intermediate twice the hidden): no plain reading
    return {**hiddens, **inner}


def misshaped(name: str, stored: Sequence[int], asked: Sequence[int]) -> str:
    """A tensor shaped otherwise than config.json asks, as every refusal names it:
    `name (37x32 in the file, 40x32 by config.json)` (the light check's and the load's alike)."""
    return f"{name} ({_shape(stored)} in the file, {_shape(asked)} by config.json)"


def _shape(shape: Sequence[int]) -> str:
    return "x".join(str(int(size)) for size in shape)
