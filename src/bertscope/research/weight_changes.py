"""Which parts of a model fine-tuning changed, read from two folders' safetensors without torch: per part
(the embeddings with their norm or projection, each encoder block, ALBERT's layers shared by every block,
the position tables every block reads, the rest: pooler, final norm) the relative change |W_b - W_a| /
|W_a| over its parameters, summed in float64 a block of rows at a time (`BLOCK_VALUES`), so memory stays
bounded by the block, not the largest tensor. `research.compare` reads it beside the layers' CKA.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from ..core.safetensors_header import Stored, damaged, safetensors_tensors

__all__ = ["BLOCK_VALUES", "weight_changes"]


# a parameter of encoder block N: what comes before `layer.N.` / `layers.N.` / `block.N.`, N, the rest
_BLOCK = re.compile(r"^(?:.*?\.)?(?:layers?|blocks?)\.(\d+)\.")
# ALBERT's layer group G, whose layers every block it serves runs (one group: every block)
_GROUP = re.compile(r"(?:^|\.)albert_layer_groups\.(\d+)\.")
# parameters that act before block 0, whose output is layer 0: the embedding layer, its norm (emb_ln:
# nomic-bert, jina-v3) and its projection to the hidden width (ELECTRA, ALBERT)
_EMBEDDING = re.compile(
    r"(?:^|\.)(?:embeddings|emb|embed_tokens|emb_ln|embeddings_project|embedding_hidden_mapping_in)\."
)
# relative-position tables every block reads (DeBERTa-v2's with its norm, MPNet's bias, RoFormer's sines)
_POSITIONS = re.compile(
    r"(?:^|\.)(?:encoder\.(?:rel_embeddings|LayerNorm|relative_attention_bias|embed_positions))\."
)
# run inside block 0 though stored beside the layers: DeBERTa-v2's convolution (conv_kernel_size > 0),
# which transformers applies to the first layer's output
_FIRST_BLOCK = re.compile(r"(?:^|\.)encoder\.conv\.")
# the first part of a name a head's model adds in front of the base model's (`bert.encoder...`)
_BASE_PARTS = ("embeddings.", "encoder.", "pooler.", "transformer.", "layers.", "final_norm.")
# safetensors' float types as NumPy reads their bytes (bfloat16 as its 16 bits, widened in `_widened`)
_FLOATS: dict[str, np.dtype[Any]] = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
}  # fmt: skip
# values read at a time: the sums grow in float64 over blocks of rows, so memory stays a few times this
# (8 MB of float64), whatever the largest tensor (XLM-R's word matrix is 192 M values)
BLOCK_VALUES = 1 << 20


def weight_changes(
    path_a: Path | None, path_b: Path | None, n_layers: int
) -> tuple[list[dict[str, Any]], str | None]:
    """Per part, how far B's weights are from A's, read from the two folders' safetensors (no torch):
    rows (part: 'embeddings', 'block k' for k in 0..n_layers - 1, ALBERT's 'shared layers (every block)',
    'position tables (every block)', 'other': pooler, final norm; block: k or None; parameters: how many
    tensors; relative_change: |W_b - W_a| / |W_a| over the part's float tensors, None where none was
    read; changed, None where none was read), and a note on what was not compared (None where all was)."""
    tensors = [safetensors_tensors(p) if p is not None else {} for p in (path_a, path_b)]
    for name, path, found in zip("AB", (path_a, path_b), tensors, strict=True):
        if not found:
            where = "is not a local folder" if path is None else f"({path}) has no safetensors weights"
            return [], f"weights not compared: model {name} {where}"
    named = _matched(tensors[0], tensors[1])
    blocks = [f"block {k}" for k in range(n_layers)]
    moved: dict[str, float] = {}
    base: dict[str, float] = {}
    counts: dict[str, int] = {}
    said = _Said()
    for name in sorted(set(named[0]) & set(named[1])):
        pair = named[0][name], named[1][name]
        if not all(_is_float(s.dtype) for s in pair):  # an integer buffer (position_ids): no weight
            continue
        unread = [s.dtype for s in pair if s.dtype not in _FLOATS]
        if unread:
            said.dtypes.append(f"{name} ({'/'.join(sorted(set(unread)))})")
            continue
        rows = _shared_rows(pair[0].shape, pair[1].shape)
        if rows is None:
            said.misfit.append(name)
            continue
        if pair[0].shape != pair[1].shape:
            said.grown.append(_grown(name, pair[0].shape[0], pair[1].shape[0]))
        part = _part(name, n_layers)
        change, size = _sums(pair[0], pair[1], rows)
        if not np.isfinite(change) or not np.isfinite(size):
            said.not_finite.append(name)
        counts[part] = counts.get(part, 0) + 1
        moved[part] = moved.get(part, 0.0) + change
        base[part] = base.get(part, 0.0) + size
    _every_block(counts, moved, base)
    shared = sorted(p for p in counts if p not in ("embeddings", "other", *blocks))
    parts = ["embeddings", *blocks, *shared, *(["other"] if "other" in counts else [])]
    rows_out = [
        {
            "part": part,
            "block": int(part.split()[1]) if part in blocks else None,
            "parameters": counts.get(part, 0),
            # a part none of whose tensors was read is not measured, not identical
            "relative_change": _relative(moved[part], base[part]) if part in counts else None,
            # nan (a weight not finite in one model) is a change, as inf is
            "changed": bool(moved[part] != 0) if part in counts else None,
        }
        for part in parts
    ]
    return rows_out, said.note(named)


def _every_block(*sums: dict[str, Any]) -> None:
    """ALBERT's one layer group, run by every block, named so: 'shared layers (every block)'."""
    if [p for p in sums[0] if p.startswith("shared layer group")] == ["shared layer group 0"]:
        for part in sums:
            part["shared layers (every block)"] = part.pop("shared layer group 0")


class _Said:
    """What the weights' note says: tensors not compared (their dtype, their shapes), matrices grown."""

    def __init__(self) -> None:
        self.dtypes: list[str] = []
        self.misfit: list[str] = []
        self.grown: list[str] = []
        self.not_finite: list[str] = []

    def note(self, named: list[dict[str, Stored]]) -> str | None:
        """The note: parameters one model alone has (a head), or not compared, or compared in part."""
        said = []
        for name, mine, theirs in (("A", named[0], named[1]), ("B", named[1], named[0])):
            alone = sorted(set(mine) - set(theirs))
            if alone:
                said.append(f"weights only in {name}, not compared: {_some(alone)}")
        if self.misfit:
            said.append(f"weights shaped otherwise in A and B, not compared: {_some(self.misfit)}")
        if self.dtypes:
            said.append(f"weights of a type not read, not compared: {_some(self.dtypes)}")
        said.extend(self.grown)
        if self.not_finite:  # its part reads changed, its relative change null
            said.append(f"weights holding values that are not finite (nan or inf): {_some(self.not_finite)}")
        return "; ".join(said) or None


def _some(names: list[str]) -> str:
    """The first three names, and how many more."""
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _matched(tensors_a: dict[str, Stored], tensors_b: dict[str, Stored]) -> list[dict[str, Stored]]:
    """Each model's tensors under the names the two are paired by: a head's prefix (`bert.`, `model.`,
    `electra.`) stripped where the other model names the tensor without it."""
    named = [{_base_name(k): v for k, v in found.items()} for found in (tensors_a, tensors_b)]
    for mine, theirs in ((named[0], named[1]), (named[1], named[0])):
        for name in [n for n in mine if n not in theirs]:
            rest = name
            while "." in rest:
                rest = rest.partition(".")[2]
                if rest in theirs and rest not in mine:
                    mine[rest] = mine.pop(name)
                    break
    return named


def _base_name(name: str) -> str:
    """`name` without the prefix a head's model puts before the base model's names (`bert.`, `model.`)."""
    rest = name.partition(".")[2]
    return rest if rest.startswith(_BASE_PARTS) and not name.startswith(_BASE_PARTS) else name


def _part(name: str, n_layers: int) -> str:
    """The part a parameter belongs to: 'block k', 'embeddings', ALBERT's shared layers, the position
    tables every block reads, or 'other' (pooler, final norm, a head both models have)."""
    found = _BLOCK.match(name)
    if found and int(found.group(1)) < n_layers:
        return f"block {found.group(1)}"
    if _FIRST_BLOCK.search(name):
        return "block 0"
    group = _GROUP.search(name)
    if group:  # ALBERT: a group's layers are run by every block it serves (`_every_block` names one group)
        return f"shared layer group {group.group(1)}"
    if _POSITIONS.search(name):
        return "position tables (every block)"
    return "embeddings" if _EMBEDDING.search(name) else "other"


def _is_float(dtype: str) -> bool:
    """Whether a safetensors dtype holds floats (F64 ... F8_E4M3, BF16); else an integer or bool buffer."""
    return dtype.startswith(("F", "BF"))


def _shared_rows(shape_a: list[int], shape_b: list[int]) -> int | None:
    """How many leading rows the two tensors share: all where the shapes agree, the fewer where a matrix
    grew by rows (`vocab add`); None where they differ otherwise."""
    if shape_a == shape_b:
        return shape_a[0] if shape_a else 1
    if len(shape_a) == len(shape_b) > 0 and shape_a[1:] == shape_b[1:]:
        return min(shape_a[0], shape_b[0])
    return None


def _grown(name: str, rows_a: int, rows_b: int) -> str:
    """What to say of a matrix whose rows differ in number: its shared rows are compared, the rest not."""
    more, extra = ("B", rows_b - rows_a) if rows_b > rows_a else ("A", rows_a - rows_b)
    return f"{name}: the {min(rows_a, rows_b)} shared rows compared; {more} adds {extra}"


def _sums(a: Stored, b: Stored, rows: int) -> tuple[float, float]:
    """Sum of (b - a)^2 and of a^2 over the first `rows` rows, read `BLOCK_VALUES` values at a time and
    summed in float64: memory stays bounded whatever the tensor's size."""
    views = [_rows_view(s) for s in (a, b)]
    width = views[0].shape[1] if views[0].size else 1
    step = max(1, BLOCK_VALUES // max(width, 1))
    moved = size = 0.0
    for start in range(0, rows if views[0].size else 0, step):
        w_a, w_b = (
            _widened(v[start : min(start + step, rows)], s.dtype) for v, s in zip(views, (a, b), strict=True)
        )
        diff = w_b - w_a
        moved += float(np.vdot(diff, diff))
        size += float(np.vdot(w_a, w_a))
    return moved, size


def _rows_view(stored: Stored) -> np.ndarray:
    """A tensor of a safetensors file as (rows, values per row), memory-mapped: a slice reads its rows."""
    kind = _FLOATS[stored.dtype]
    count = int(np.prod(stored.shape, dtype=np.int64))
    if count * kind.itemsize != stored.end - stored.start:
        raise damaged(
            stored.file, f"its header gives a tensor of shape {stored.shape} a byte range of another size"
        )
    rows = stored.shape[0] if stored.shape else 1
    if count == 0:
        return np.zeros((rows, 0), dtype=kind)
    return np.memmap(stored.file, dtype=kind, mode="r", offset=stored.start, shape=(rows, count // rows))


def _widened(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Stored float values as float64, exactly (bfloat16 is the top half of a float32)."""
    if dtype == "BF16":
        raw = (raw.astype(np.uint32) << 16).view(np.float32)
    return np.asarray(raw, dtype=np.float64)


def _relative(moved: float, base: float) -> float:
    """sqrt(moved / base); nan where the base is zero and the weights moved (no scale to read it by)."""
    if base > 0:
        return float(np.sqrt(moved / base))
    return 0.0 if moved == 0 else float("nan")
