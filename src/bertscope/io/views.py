"""Named sentence views of one corpus pass: `NAME=LAYERS/POOLING[/OPTION...]`, each its own column.

A view is a layer spec with a pooling (and optionally how the layers combine, whether specials are
masked and whether vectors are normalised). `/` separates the parts because layer specs use `:` and
`,` themselves (`-4:`, `1:4`, `0,6`):

    last=-1/mean              the last layer, mean-pooled
    cls4=-4:/cls/concat       the last four layers concatenated, then the [CLS] vector
    mid=2:4/max/mask_special  layers 2..4 averaged, max-pooled without [CLS]/[SEP]
    first_last=0,-1/mean/normalize

OPTIONs: `mean`, `sum` or `concat` (combine); `mask_special`; `normalize` or `no_normalize`.

What a view leaves out is the job's: a view given as {name: options} (library) may leave out any of
`VIEW_KEYS`, and takes the job's `layers=`, `pooling=`, ... for it; a view string always names its
layers and pooling, and takes the job's combine, mask_special and normalize where it sets none. A
job-level option that every view sets for itself would be read by none of them, and is refused
(`views_level`), as the command line refuses --layers/--pooling beside --view and --combine,
--mask-special or --normalize beside views that all set it; one that does nothing to a view that takes
it (--mask-special beside a cls view) is refused naming the view.
`ViewsLevel` is the corpus level that writes them: one row per text, one `embedding_<name>` column
per view, from one forward per batch (`Engine.sentence_views`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..core._enums import Combine, Level, Precision
from ..core.engine import OnBatch
from ..core.spec import EmbedOptions, EmbedSpec, resolve
from ..errors import CorpusError, InvalidSpec
from .formats import rules_of, suffixes_where
from .levels import CorpusLevel, LevelOptions, Rows, storage
from .parquet_sink import view_column
from .readers import Record

__all__ = ["parse_view", "parse_views", "unread_options", "views_level", "ViewsLevel", "VIEW_KEYS"]

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


class ViewsLevel(CorpusLevel):
    """One row per text with one vector column per named view: id, text, embedding_<name>..., counts."""

    name = Level.SENTENCE

    def __init__(
        self, model: Any, specs: dict[str, EmbedSpec], *, keep_text: bool, precision: Precision
    ) -> None:
        super().__init__(model, next(iter(specs.values())), keep_text=keep_text, precision=precision)
        self.specs = specs

    def recorded(self) -> dict[str, Any]:
        """The shared long-text options, then each view's own spec under `views`."""
        shared = {k: v for k, v in self.spec.as_dict().items() if k not in VIEW_KEYS}
        views = {name: {k: spec.as_dict()[k] for k in VIEW_KEYS} for name, spec in self.specs.items()}
        if self.precision is not Precision.FLOAT32:
            shared["precision"] = self.precision.value
        return {**shared, "views": views}

    def embed(self, records: Sequence[Record], *, on_batch: OnBatch | None = None) -> Rows:
        """id, text, one embedding_<name> per view, n_tokens, truncated per record."""
        texts = [r.text for r in records]
        chunks = list(self.model.engine.sentence_views(texts, self.specs, on_batch=on_batch))
        columns: dict[str, Any] = {"id": pa.array([r.id for r in records], pa.string())}
        if self.keep_text:
            columns["text"] = pa.array(texts, pa.string())
        dtype = np.float16 if self.precision is Precision.FLOAT16 else np.float32
        for name in self.specs:
            vectors = np.concatenate([chunk[name].vectors for chunk in chunks]).astype(dtype)
            flat = pa.array(np.ascontiguousarray(vectors).reshape(-1))
            columns[view_column(name)] = pa.FixedSizeListArray.from_arrays(flat, int(vectors.shape[1]))
        first = [next(iter(chunk.values())) for chunk in chunks]
        n_tokens = np.concatenate([c.n_tokens for c in first])
        truncated = np.concatenate([c.n_dropped for c in first])
        columns["n_tokens"] = pa.array(n_tokens.astype(np.int32))
        columns["truncated"] = pa.array(truncated.astype(np.int32))
        return Rows(pa.table(columns), len(records), int(n_tokens.sum()), int(np.count_nonzero(truncated)))

    def tally(self, table: pa.Table) -> tuple[int, int, int]:
        """Rows are texts."""
        truncated = table.column("truncated").to_numpy()
        return (
            table.num_rows,
            int(table.column("n_tokens").to_numpy().sum()),
            int(np.count_nonzero(truncated)),
        )


def views_level(
    model: Any,
    views: Iterable[str] | Mapping[str, Mapping[str, Any]],
    *,
    options: EmbedOptions,
    asked: LevelOptions,
    output: str | Path,
) -> ViewsLevel:
    """The corpus level for several views: each view's spec is the job's options with its own on top."""
    if Level.parse(asked.level, what="level") is not Level.SENTENCE:
        raise InvalidSpec("views are pooled sentence vectors; leave them out of token and word jobs")
    rules = rules_of(output)
    if rules is None or not rules.columns:
        where = suffixes_where(lambda r: r.columns).replace(" and ", " or ")
        raise CorpusError(
            f"{output}: several views are stored as named vector columns; write to a {where} file"
        )
    if options.post is not None:
        raise CorpusError("post-processing is fitted to one view; leave --post out when asking for views")
    parsed = parse_views(views)
    if not parsed:
        raise InvalidSpec("no views given: name at least one, e.g. last=-1/mean")
    _refuse_overridden(options, parsed)
    specs = {name: _view_spec(model, options, name, view) for name, view in parsed.items()}
    return ViewsLevel(model, specs, **storage(asked))


def unread_options(views: Mapping[str, Mapping[str, Any]], given: Iterable[str]) -> list[str]:
    """The options of `given` (`VIEW_KEYS`) that every view sets for itself: the job's would be read by
    none of them."""
    return [key for key in VIEW_KEYS if key in given and all(key in view for view in views.values())]


def _refuse_overridden(options: EmbedOptions, views: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse a job-level option of `VIEW_KEYS` (away from its default) that every view sets for itself:
    no view would read it (the command line, which sees what was typed, refuses one at its default too)."""
    defaults = EmbedOptions()
    given = [key for key in VIEW_KEYS if _value(getattr(options, key)) != _value(getattr(defaults, key))]
    unread = unread_options(views, given)
    if unread:
        named = " and ".join(f"{key}=" for key in unread)
        raise InvalidSpec(
            f"every view sets its own {' and '.join(unread)}, so the job's {named} would be read by none: "
            f"drop {named}, or leave it out of a view that should take it"
        )


def _value(option: Any) -> Any:
    return getattr(option, "value", option)


def _view_spec(model: Any, options: EmbedOptions, name: str, view: Mapping[str, Any]) -> EmbedSpec:
    """One view's spec: the job's options with the view's on top. A job-level option that does nothing to
    this view (mask_special beside a cls view, combine beside one layer) is refused naming the view, and
    advising to set it in the views it applies to: the job's own fixes (--pooling, --layers) are refused
    beside views."""
    try:
        return resolve(model, replace(options, **view)).spec
    except InvalidSpec:
        defaults = EmbedOptions()
        for key in ("mask_special", "combine", "normalize"):
            value, default = getattr(options, key), getattr(defaults, key)
            if key in view or _value(value) == _value(default):
                continue
            try:
                resolve(model, replace(options, **{**view, key: default}))
            except InvalidSpec:
                continue
            raise InvalidSpec(_not_for_view(name, view, key, _value(value))) from None
        raise


def _not_for_view(name: str, view: Mapping[str, Any], key: str, value: Any) -> str:
    """Why the job's `key`=`value` does nothing to view `name`, and where to set it instead."""
    why = {
        "mask_special": f"pooling {_value(view.get('pooling'))} reads one token itself",
        "combine": "it reads one layer",
    }.get(key, "it does not apply there")
    option = {"mask_special": "mask_special", "combine": str(value)}.get(
        key, "normalize" if value else "no_normalize"
    )
    flag = {"mask_special": "--mask-special", "combine": f"--combine {value}"}.get(
        key, "--normalize" if value else "--no-normalize"
    )
    return (
        f"view {name!r} takes the job's {key}={value!r} ({flag}), which does nothing to it ({why}): "
        f"leave it out of the job and put /{option} in the views it applies to (NAME=LAYERS/POOLING/{option})"
    )
