"""A result's field under its old name: the new name is the dataclass field, the old one a read-only
property that gives the same value with a DeprecationWarning (`ChunkEmbeddings.truncated` of `n_dropped`,
`JobSummary.truncated` of `n_truncated`). It imports nothing of bertscope, so the result types, which
everything imports, can use it; keywords under an old name are `renamed.py`'s."""

from __future__ import annotations

import warnings
from typing import TypeVar

__all__ = ["renamed_field"]

T = TypeVar("T")


def renamed_field(value: T, *, owner: str, name: str, old: str) -> T:
    """`value`, the field `owner.name`, read under `old`, its old name, with a DeprecationWarning. The
    property `old` calls this itself, so the warning points at the line that read the attribute."""
    said = f"{owner}.{old} is deprecated; use .{name} (the same value)"
    warnings.warn(said, DeprecationWarning, stacklevel=3)
    return value
