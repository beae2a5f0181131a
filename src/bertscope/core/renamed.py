"""A keyword under its new name or its old one: one concept, one name in the library, the command line and
the service (`as_words=` as `static --as-words` and `"as_words"`; `chunk_size=` as `--chunk-size`). The
old name still works, with a DeprecationWarning (`renamed_keyword`), or, for a spelling too widely used
to warn about (`top=`, `k=` of `top_k=`), silently (`older_spelling`); both at once is refused in one line.
A result's field under its old name is a read-only property that warns (`renamed_fields.renamed_field`)."""

from __future__ import annotations

import warnings
from typing import TypeVar

from ..errors import BertscopeError, InvalidInput, InvalidSpec
from .spec import whole_number

__all__ = ["renamed_keyword", "older_spelling", "top_k_given"]

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


def older_spelling(value: T | None, old_value: T | None, *, name: str, old: str, default: T) -> tuple[T, str]:
    """`value` (keyword `name`), else `old_value` (keyword `old`, an older spelling still read with no
    warning: `top=` and `k=` of `top_k=`, so every call that worked keeps working), else `default`; with
    the keyword it came under, so a refusal of the value names what the caller wrote. Both given is
    refused in one line, whatever their values."""
    if old_value is None:
        return (default, name) if value is None else (value, name)
    if value is not None:
        raise InvalidInput(f"{old}= is the older spelling of {name}=; give {name}= only")
    return old_value, old


def top_k_given(
    top_k: int | None,
    old_value: int | None,
    *,
    old: str,
    default: int,
    least: int = 1,
    meaning: str | None = None,
    error: type[BertscopeError] = InvalidSpec,
) -> int:
    """A count of results given as `top_k=` or its older spelling `old=` (`older_spelling`), checked as every
    count is (`whole_number`), named as the caller wrote it."""
    count, given_as = older_spelling(top_k, old_value, name="top_k", old=old, default=default)
    return whole_number(count, given_as, least=least, meaning=meaning, error=error)
