"""A keyword under its new name or its old one: one concept, one name in the library, the command line and
the service (`as_words=` as `static --as-words` and `"as_words"`; `chunk_size=` as `--chunk-size`). The
old name still works, with a DeprecationWarning; both at once is refused in one line."""

from __future__ import annotations

import warnings
from typing import TypeVar

from ..errors import InvalidInput

__all__ = ["renamed_keyword"]

T = TypeVar("T")


def renamed_keyword(value: T, old_value: T, *, name: str, old: str, caller: str, meaning: str = "") -> T:
    """`value` (keyword `name`), or `old_value` (keyword `old`, its old name) with a DeprecationWarning
    (ending with `meaning`, what `name` is, where given); None where neither was given. Both given is
    refused, whatever their values. The public function `caller` calls this itself, so the warning points
    at the line that called `caller`."""
    if old_value is None:
        return value
    if value is not None:
        raise InvalidInput(f"{old}= is the old name of {name}=; give {name}= only")
    said = f"{caller}({old}=...) is deprecated; use {name}=..." + (f", {meaning}" if meaning else "")
    warnings.warn(said, DeprecationWarning, stacklevel=3)
    return old_value
