"""What the framework integrations share: the model, a resolved recipe per role, vectors as lists.

The model is a name or folder, or anything `bertscope.load` returns (a `Model`, or a `StaticModel` for a
model2vec folder). A text over the model's limit is truncated, as sentence-transformers (which the
frameworks' own classes wrap) truncates at max_seq_length, with a `TruncatedTextsWarning` saying how
many were; `long="window"` keeps every token, `long="error"` refuses. The warning is said once per call
of the framework's method (however many batches it cuts the texts into, in threads or tasks), at the
caller's line: the first frame outside bertscope, the framework and the machinery it runs through.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import Any, TypeAlias

import numpy as np

from ..core.spec import EmbedOptions, Recipe, RecipeKeywords, resolve, unknown_option
from ..core.tokens import cut_warning
from ..encode import texts_as_list
from ..errors import InvalidInput, InvalidSpec, caller_level
from ..model import Model, load
from ..static_model import StaticModel

__all__ = ["Loaded", "cut_said_once", "listed", "load_options", "model_and_recipes", "vectors"]

# What `bertscope.load` returns: a transformer, or the rows of a model2vec folder.
Loaded: TypeAlias = Model | StaticModel


# Where a warning is not the caller's line: frames of these top-level packages (and of any whose name
# starts with one of them and "_": langchain_core, llama_index_instrumentation) are passed over.
_NOT_THE_CALLER = (
    "bertscope", "langchain", "llama_index", "asyncio", "concurrent", "threading", "contextlib",
    "contextvars", "functools", "wrapt", "tqdm",
)  # fmt: skip
_WINDOW = "long='window' keeps every token"
# The texts dropped per text of each batch a framework method ran, while it runs (`cut_said_once`): its
# threads and tasks copy the context, so every batch adds to the one list.
_CUTS: ContextVar[list[np.ndarray] | None] = ContextVar("bertscope_integration_cuts", default=None)


# The `bertscope.load` options each framework class takes: those the hint for sentence-transformers'
# model_kwargs= names (dtype=, device=, trust_remote_code=) among them, so the hint holds for the classes.
LOAD_OPTIONS = ("mode", "device", "dtype", "backend", "trust_remote_code")


def load_options(
    mode: str | None,
    device: str | None,
    dtype: str | None,
    backend: str | None,
    trust_remote_code: bool = False,
) -> dict[str, Any]:
    """The `bertscope.load` options a framework class was given (those left out take load's defaults)."""
    given: dict[str, Any] = {"mode": mode, "device": device, "dtype": dtype, "backend": backend}
    given["trust_remote_code"] = trust_remote_code
    return {key: value for key, value in given.items() if value is not None and value is not False}


def model_and_recipes(
    model: str | os.PathLike[str] | Loaded | None,
    load_kwargs: dict[str, Any] | None,
    prompts: dict[str, tuple[str | None, str | None]],
    options: RecipeKeywords,
    *,
    own: Sequence[str] = (),
) -> tuple[Loaded, dict[str, Recipe]]:
    """The model (loaded unless given) and one resolved recipe per role, so bad options fail at once.

    `own` names the framework class's keywords besides the load options, the roles' prompts and the
    recipe's: an unknown keyword is refused with the list of what the class takes."""
    for key in ("prompt_name", "prompt"):
        if key in options:
            raise InvalidSpec(
                f"{key}: give each role its own instead ({', '.join(f'{r}_{key}' for r in prompts)}), "
                "or none for the model's default prompt"
            )
    for role, (name, text) in prompts.items():
        if name is not None and text is not None:
            # resolve() would say it in the library's keywords (prompt_name, prompt), which the class lacks
            raise InvalidSpec(
                f"give {role}_prompt_name or {role}_prompt, not both ({role}_prompt is the text itself)"
            )
    recipe = [name for name in EmbedOptions.__dataclass_fields__ if name not in ("prompt_name", "prompt")]
    for key in options:
        if key not in recipe:
            role_prompts = [f"{role}_{kind}" for role in prompts for kind in ("prompt_name", "prompt")]
            raise unknown_option(key, [*LOAD_OPTIONS, *role_prompts, *own, *recipe])
    loaded: Loaded
    if isinstance(model, Model | StaticModel):
        if load_kwargs:
            asked = ", ".join(f"{key}={value!r}" for key, value in load_kwargs.items())
            raise InvalidSpec(
                f"{', '.join(load_kwargs)}: how a model loads; pass its name instead of a loaded Model, "
                f"or load it with bertscope.load(..., {asked}) yourself"
            )
        loaded = model
    else:
        loaded = load(model, **(load_kwargs or {}))
    recipes = {role: _recipe(loaded, options, role, name, text) for role, (name, text) in prompts.items()}
    return loaded, recipes


def _recipe(loaded: Loaded, options: RecipeKeywords, role: str, name: str | None, text: str | None) -> Recipe:
    """One role's recipe; a refusal of its prompt names the class's keyword (query_prompt=), not the
    library's (prompt=)."""
    try:
        return resolve(loaded, replace(EmbedOptions.given(**options), prompt_name=name, prompt=text))
    except InvalidSpec as error:
        said = str(error).replace("give the text with prompt=", f"give the text with {role}_prompt=")
        if said == str(error):
            raise
        raise InvalidSpec(said) from None


def listed(texts: Sequence[str], method: str, one: str) -> list[str]:
    """`texts` as a list; one string is refused (it would be read as its characters, one vector each), and
    what `encode` refuses (a dict, a set, ...) is refused here in the same words."""
    if isinstance(texts, str):
        raise InvalidInput(
            f"{method} takes a list of texts, not one string (it would embed each character): pass [text], "
            f"or {one}(text) for one vector"
        )
    return texts_as_list(texts, f"{method} takes a list of texts")


def vectors(model: Loaded, recipe: Recipe, texts: Sequence[str]) -> list[list[float]]:
    """Sentence vectors as plain lists, as the frameworks want them; none for no texts. A cut is said
    at the caller's line, or, inside `cut_said_once`, kept for it to say once. They keep the model's
    `truncate_dim` dimensions where it has one, as sentence-transformers' encode (which the frameworks'
    own classes call) does."""
    if not texts:
        return []
    found = model.embed_with(list(texts), recipe)
    cuts = _CUTS.get()
    if cuts is not None:
        cuts.append(found.n_dropped)
    else:
        _say_cut(found.n_dropped, model.max_tokens)
    width = model.truncate_dim
    return found.vectors[:, :width].astype(float).tolist()


@contextmanager
def cut_said_once(model: Loaded) -> Iterator[None]:
    """Around one call of a framework's method: the texts its batches cut are said in one
    `TruncatedTextsWarning` when it returns, at the caller's line."""
    cuts: list[np.ndarray] = []
    token = _CUTS.set(cuts)
    try:
        yield
    finally:
        _CUTS.reset(token)
    if cuts:
        _say_cut(np.concatenate(cuts), model.max_tokens)


def _say_cut(n_dropped: np.ndarray, max_tokens: int) -> None:
    """The `TruncatedTextsWarning` for texts cut (n_dropped: per text), if any was, at the caller's line."""
    dropped = np.asarray(n_dropped, dtype=np.int64)
    cut = int(np.count_nonzero(dropped > 0))
    if cut:
        warning = cut_warning(cut, len(dropped), max_tokens, _WINDOW, int(dropped.sum()))
        warnings.warn(warning, stacklevel=caller_level(_NOT_THE_CALLER))
