"""Named sentence views of one corpus pass: `NAME=LAYERS/POOLING[/OPTION...]`, each its own column.

A view is a layer spec with a pooling (and optionally how the layers combine, whether specials are
masked and whether vectors are normalised). `/` separates the parts because layer specs use `:` and
`,` themselves (`-4:`, `1:4`, `0,6`):

    last=-1/mean              the last layer, mean-pooled
    cls4=-4:/cls/concat       the last four layers concatenated, then the [CLS] vector
    mid=2:4/max/mask_special  layers 2..4 averaged, max-pooled without [CLS]/[SEP]
    first_last=0,-1/mean/normalize

OPTIONs: `mean`, `sum` or `concat` (combine); `mask_special`; `normalize` or `no_normalize`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .._enums import Combine
from ..errors import InvalidSpec

__all__ = ["parse_view", "parse_views", "VIEW_KEYS"]

# What a view may set; long texts and their stride are the job's (they decide the batches).
VIEW_KEYS = ("layers", "combine", "pooling", "mask_special", "normalize")
_NAME = re.compile(r"[A-Za-z0-9_]+")
_SYNTAX = "NAME=LAYERS/POOLING[/OPTION...], e.g. last=-1/mean or cls4=-4:/cls/concat"


def parse_view(text: str) -> tuple[str, dict[str, Any]]:
    """`NAME=LAYERS/POOLING[/OPTION...]` -> (name, options for Model.spec)."""
    name, sep, body = text.partition("=")
    parts = body.split("/")
    if not sep or len(parts) < 2 or not all(parts[:2]):
        raise InvalidSpec(f"view {text!r}: write {_SYNTAX}")
    _check_name(name)
    options: dict[str, Any] = {"layers": parts[0], "pooling": parts[1]}
    combines = {c.value for c in Combine}
    for option in parts[2:]:
        if option in combines:
            options["combine"] = option
        elif option in ("mask_special", "normalize", "no_normalize"):
            options["normalize" if option.endswith("normalize") else option] = option != "no_normalize"
        else:
            raise InvalidSpec(
                f"view {text!r}: unknown option {option!r}; allowed: {', '.join(sorted(combines))}, "
                "mask_special, normalize, no_normalize"
            )
    return name, options


def parse_views(views: Iterable[str] | Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Views given as strings (command line) or as {name: options} (library), checked."""
    if isinstance(views, Mapping):
        parsed = {}
        for name, options in views.items():
            _check_name(name)
            unknown = sorted(set(options) - set(VIEW_KEYS))
            if unknown:
                raise InvalidSpec(
                    f"view {name!r}: {', '.join(unknown)} cannot differ between views; "
                    f"a view sets {', '.join(VIEW_KEYS)} (long and stride are the job's)"
                )
            parsed[name] = dict(options)
        return parsed
    result: dict[str, dict[str, Any]] = {}
    for text in views:
        name, options = parse_view(text)
        if name in result:
            raise InvalidSpec(f"view name {name!r} is given twice; each view needs its own name")
        result[name] = options
    return result


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise InvalidSpec(f"view name {name!r}: use letters, digits and _ only ({_SYNTAX})")
