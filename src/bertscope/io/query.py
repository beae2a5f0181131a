"""The query of a store's search: a text embedded the store's way, or a vector as given, and the checks that
keep it comparable with the stored rows (the same model's files, the same post-processing, no option the
search would not read).

A query text is embedded by the store's own model as it ran (`model_for`, which loads it by name through
the loader the package registers: `core.loaders`), cutting texts at the store's recorded token limit as
its rows were cut. The same model is the same files (`same_model`: the SHA-256 of each file the store's
fingerprint records, compared as a resumed job compares them), not the same name: a folder fine-tuned in
place is another model, the bundled model loaded by its path is not.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from ..core.fingerprint_facts import file_hashes
from ..core.finite import refuse_non_finite
from ..core.post import PostProcessor, as_post
from ..core.prompts import query_prompt_name
from ..core.spec import SPEC_KEYS, EmbedOptions, reloadable, resolve
from ..core.texts_given import type_named
from ..core.tokens import check_text, named_as, say_cut
from ..errors import CorpusError, InvalidInput, InvalidSpec
from .sink_settings import settings_diff, settings_differ

__all__ = [
    "PrecisionWarning", "embed_query", "model_for", "precision_note", "query_vector", "recorded_limit",
    "refuse_other_files", "refuse_other_folder", "refuse_unread", "same_model",
]  # fmt: skip

# What a query text reads of the options given: the post-processing (checked to be the store's) and the
# prompt; the rest of the recipe (SPEC_KEYS) is the store's own. A query vector or a stored id reads none.
_READ = ("post", "prompt_name", "prompt")


def refuse_unread(
    asked: EmbedOptions,
    settings: dict[str, Any],
    path: Path,
    *,
    vector: str | None,
    model_given: bool = False,
) -> None:
    """Refuse the options given (`asked`: those not left at their default) that the search would not read:
    the recipe (layers, pooling, ...), as the query text is embedded the store's way, and every option
    where no text is embedded (`vector`: what the query is instead, as the refusal names it), `model=`
    (`model_given`) among them."""
    unset = EmbedOptions()
    given = [name for name in (*SPEC_KEYS, *_READ) if getattr(asked, name) != getattr(unset, name)]
    unread = [name for name in given if vector is not None or name not in _READ]
    if vector is not None and model_given:
        unread.append("model")
    if not unread:
        return
    drop = " and ".join(f"{name}=" for name in unread)
    if vector is not None:
        raise InvalidSpec(f"{vector} is searched as it is, not embedded: drop {drop}")
    shown = ["layers", "pooling", *(name for name in unread if name not in ("layers", "pooling"))]
    made = ", ".join(f"{name} {_shown(settings.get(name))}" for name in shown)
    raise InvalidSpec(f"{path} was made with {made}; search embeds the query the store's way: drop {drop}")


def _shown(value: Any) -> str:
    return "none" if value is None else str(value)


def query_vector(query: Any, width: int | None) -> np.ndarray:
    """A query vector given as any 1-D sequence of numbers (list, NumPy or torch array, ...) as float32 (d,);
    one of another shape, or of another width than the store's (`width`, where recorded), is refused."""
    try:
        vector = np.asarray(query, dtype=np.float32)
    except (TypeError, ValueError, RuntimeError):  # not numbers (a torch tensor on a GPU: .cpu() first)
        vector = None
    if vector is None or vector.ndim != 1 or vector.size == 0:
        what = type_named(query) if vector is None else f"an array of shape {vector.shape}"
        raise InvalidInput(
            f"the query is {what}: give a query text, a vector (a 1-D sequence of "
            f"{width or 'the stored'} numbers) or a stored id (item_id=)"
        )
    if width is not None and len(vector) != width:
        raise InvalidInput(
            f"the query vector has {len(vector)} numbers but the store's vectors have {width}: "
            "give a vector of the store's width"
        )
    return vector


def embed_query(
    query: str, settings: dict[str, Any], model: Any, asked: EmbedOptions, path: Path
) -> np.ndarray:
    """Embed a query with the same model, settings and post-processing the store was made with.

    Of `asked`, the post-processing (which must be the store's) and the prompt are read: the rest of the
    recipe is the store's own (`refuse_unread` refuses it first).
    """
    with named_as(_the_query):  # before a model loads: "the query is empty", not "text 0 is empty"
        check_text(query, 0)
    post, prompt_name, prompt = asked.post, asked.prompt_name, asked.prompt
    if settings.get("post") and post is None:
        kind = settings["post"].get("kind", "post-processing")
        raise CorpusError(f"this store's vectors went through {kind}; pass the same file with post= (--post)")
    if post is not None and not settings.get("post"):
        # A query moved by a post-processing the stored vectors never had ranks unrelated texts first.
        raise CorpusError(
            "this store's vectors were made without post-processing, so the query must be too; "
            "leave out post= (--post), or embed the corpus again with it"
        )

    processor = as_post(post)  # read once: checked here, applied by the recipe
    _check_same_post(settings.get("post"), processor)
    m = model_for(settings, model, store_limit=True, path=path)
    same_model(settings, m, path=path)
    if prompt_name is None and prompt is None:
        prompt_name = query_prompt_name(settings, m.prompts)
        prompt = None if prompt_name else settings.get("prompt", "")
    options = EmbedOptions.from_settings(settings, post=processor)
    options = replace(options, prompt_name=prompt_name, prompt=prompt)
    with named_as(_the_query):
        found = m.embed_with([query], resolve(m, options))
    refuse_non_finite(found.vectors)  # a NaN query would rank every row nan, in store order
    say_cut(
        found.n_dropped,
        m.max_tokens,
        "a query is cut as the store's texts were; shorten it to search by all of it",
    )
    return np.asarray(found.vectors[0])


def _the_query(kind: str, index: int) -> str:
    """How a refusal names a search's one query text (`core.tokens.named_as`)."""
    return "the query"


def _check_same_post(recorded: dict[str, Any] | None, processor: PostProcessor | None) -> None:
    """Refuse a post-processing other than the store's: same width, unrelated axes, unrelated hits."""
    if not recorded or processor is None or "fingerprint" not in recorded:
        return  # stores written before fingerprints were recorded are checked by width only
    if processor.fingerprint != recorded["fingerprint"]:
        raise CorpusError(
            f"this store's vectors went through another {recorded.get('kind', 'post-processing')} "
            f"(fingerprint {recorded['fingerprint'][:12]}), not the file given ({processor.kind.value}, "
            f"{processor.fingerprint[:12]}); pass the file the store was made with"
        )


def same_model(
    settings: dict[str, Any], model: Any, *, path: Path, made: str | None = None, fix: str | None = None
) -> None:
    """Refuse a model other than the one a store was made with (`settings`): its vectors would not compare.

    Compared by the SHA-256 of the model's files, the comparison a resumed job makes of the fingerprint it
    stored (`sinks.settings_differ`), so the refusal names the files that differ; a store written before
    stores carried a fingerprint, by the model's name. `made` describes the store in the refusal (default:
    its model); `fix` the advice that ends it (default: a search's).
    """
    made = made or str(settings.get("model"))
    info = model.info()
    source = info.source
    stored = (settings.get("fingerprint") or {}).get("files")
    now = file_hashes(getattr(model.loaded, "path", None)) if stored else {}
    if stored and now:
        refuse_other_files(settings, now, path=path, source=source, made=made, fix=fix)
    elif settings.get("model") and source != settings.get("model"):
        raise CorpusError(
            f"{path} was made with {made}; the model given is {source}: "
            + (fix or "search it with the store's own model (leave model= out)")
        )
    _note_precision(settings, info, path)


def refuse_other_files(
    settings: dict[str, Any],
    now: dict[str, str],
    *,
    path: Path,
    source: str,
    made: str | None = None,
    fix: str | None = None,
) -> None:
    """`same_model`'s refusal by the files alone: `now`, the SHA-256 of a model's files (`file_hashes` of
    its folder, which can be read before the model loads), against those the store's fingerprint records
    (a store that records none is not refused here)."""
    stored = (settings.get("fingerprint") or {}).get("files")
    if not stored or not now:
        return
    then_files, now_files = {"fingerprint": {"files": stored}}, {"fingerprint": {"files": now}}
    if settings_differ(then_files, now_files):
        raise CorpusError(
            f"{path} was made with {made or settings.get('model')}; the files of the model {source} are not "
            f"those it was made with ({settings_diff(then_files, now_files)}): "
            + (fix or "search with the model the store was made with, or embed the corpus again with it")
        )


def refuse_other_folder(settings: dict[str, Any], name: Any, *, path: Path, made: str | None = None) -> None:
    """`refuse_other_files` of a model named by a local folder (`name`; a loaded model or a hub name is
    checked by `same_model` once loaded), before it loads: a load of another model is seconds and an
    ONNX export left in the cache, all for a refusal."""
    folder = _loaded_folder(name)
    if folder is not None:
        refuse_other_files(settings, file_hashes(folder), path=path, source=str(name), made=made)


def _loaded_folder(name: Any) -> Path | None:
    """The local folder a load of `name` reads, resolved as the loader resolves it (`FolderView.open`,
    `load_parts`): the bundled model by its name before any folder of that name, ~ expanded; None for
    the bundled model (checked by `same_model` once loaded), a hub id, or a path the load refuses in its
    own words."""
    from ..core.folder import BUNDLED, local_folder
    from ..errors import ModelLoadError

    if not isinstance(name, (str, PathLike)) or name == BUNDLED:
        return None
    try:
        return local_folder(str(name))
    except ModelLoadError:
        return None


class PrecisionWarning(UserWarning):
    """The model given runs at another precision than the store was made with: scores may move a little.

    `differ`: (setting, the store's, the model's) of each that differs, ("quantize", "none", "int8"), so a
    caller that chose the precision by other means says it in its own words (`precision_note`)."""

    def __init__(self, message: str, differ: tuple[tuple[str, str, str], ...] = ()) -> None:
        super().__init__(message)
        self.differ = differ


def precision_note(path: Path | str, differ: tuple[tuple[str, str, str], ...], *, flags: bool = False) -> str:
    """The PrecisionWarning's line: the library's (the model given), or with `flags` the command line's,
    where the store's own model runs as --dtype/--quantize asked and leaving those out is the fix."""
    if flags:
        made = " and ".join(f"{name} {then}" for name, then, _ in differ)
        runs = " and ".join(f"--{name} {now}" for name, _, now in differ)
        left = " and ".join(f"--{name}" for name, _, _ in differ)
        return (
            f"{path} was made with {made}; the query's model runs with {runs}: scores may move a little; "
            f"for the store's own cosines leave {left} out"
        )
    said = " and ".join(f"{name} {then} (the model given: {now})" for name, then, now in differ)
    keywords = ", ".join(f"{name}={then!r}" for name, then, _ in differ)
    return (
        f"{path} was made with {said}: scores may move a little; for the store's own cosines load the "
        f"model at its precision ({keywords}), or leave model= out"
    )


def _note_precision(settings: dict[str, Any], info: Any, path: Path) -> None:
    """Warn (one line) where the model runs with another dtype or quantization than the store's vectors
    were made with: the same files, so it is accepted, but the query's vector (and so every cosine) moves a
    little (about 1e-3 for bfloat16 or int8 against float32)."""

    def shown(value: Any, default: str) -> str:
        return str(getattr(value, "value", value) or default).lower()

    pairs = [
        (name, shown(settings.get(name), default), shown(getattr(info, name, None), default))
        for name, default in (("dtype", "float32"), ("quantize", "none"))
    ]
    differ = tuple((name, made, now) for name, made, now in pairs if made != now)
    if differ:
        warnings.warn(PrecisionWarning(precision_note(path, differ), differ), stacklevel=4)


def model_for(
    settings: dict[str, Any],
    model: Any = None,
    *,
    store_limit: bool = False,
    path: Path | None = None,
    made: str | None = None,
) -> Any:
    """The model to embed queries for a store: `model` if given, else the store's own, as it ran.

    `path`: the store's, where a model named by a folder whose files are not the store's model's is
    refused before it loads (`refuse_other_folder`, `made` describing the store as `same_model`'s does).

    `store_limit`: a model loaded here (by the store's name or the one given) cuts texts at the store's
    recorded token limit (`recorded_limit`), as its rows were cut (`load(max_tokens=12)`, or a limit rule
    since changed), not at the model's default. A limit over the model's positions says the model is
    not the store's: it is loaded at its own, and the caller's check of the model (`same_model`, verify's
    fingerprint) names it. A store that records none is embedded at the model's own limit, as before. A
    loaded model is used as it is.
    """
    from ..core.encoder import Encoder
    from ..core.loaders import load_model
    from ..static_model import StaticModel

    if isinstance(model, (Encoder, StaticModel)):
        return model
    if model is None:
        reloadable(settings)
        moved_away(settings)
    name = model or settings.get("model_arg")
    if path is not None:
        refuse_other_folder(settings, name, path=path, made=made)
    options = {
        "dtype": settings.get("dtype", "float32"),
        "backend": settings.get("backend") or "auto",
        "quantize": settings.get("quantize"),
    }
    if not store_limit:
        return load_model(name, **options)
    return at_recorded_limit(load_model, settings, name, **options)


def at_recorded_limit(load: Callable[..., Any], settings: dict[str, Any], name: Any, **options: Any) -> Any:
    """`load(name, **options)` cutting texts at the store's recorded token limit (`recorded_limit`), where
    it records one: one load at the limit; a second, at the model's own, only where the model cannot take
    it (over its positions: not the store's model, which the caller's check names)."""
    limit = recorded_limit(settings)
    if limit is None:
        return load(name, **options)
    try:
        return load(name, max_tokens=limit, **options)
    except InvalidSpec:
        return load(name, **options)


def moved_away(settings: dict[str, Any]) -> None:
    """Refuse to reload a store's model from a local folder that is gone (recorded resolved, so a path
    that does not exist now was moved or deleted), naming it and the fix, where the folder's own error
    would offer the bundled model, another model than the store's."""
    from ..errors import ModelLoadError

    arg = settings.get("model_arg")
    if isinstance(arg, str) and Path(arg).is_absolute() and not Path(arg).exists():
        raise ModelLoadError(
            f"the store was made with the model folder {arg}, which is not there now; give the folder's new "
            "place with model="
        )


def recorded_limit(settings: dict[str, Any]) -> int | None:
    """The tokens per text a store's rows were cut at (its fingerprint's settings.truncation.max_tokens),
    or None for a store that records none (written before fingerprints were)."""
    fingerprint = settings.get("fingerprint")
    recorded = fingerprint.get("settings") if isinstance(fingerprint, dict) else None
    truncation = recorded.get("truncation") if isinstance(recorded, dict) else None
    limit = truncation.get("max_tokens") if isinstance(truncation, dict) else None
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 2 else None
