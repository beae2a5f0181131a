"""What the framework integrations share: the model, a resolved recipe per role, vectors as lists.

The model is a name or folder, or anything `bertscope.load` returns (a `Model`, or a `StaticModel` for a
model2vec folder). Each class keeps the keywords that make it again (`given_keywords`): a pickle carries
them and loads the model again where it is read (one made from a loaded model is refused there in one
line), a deep copy shares the loaded model (its weights are only read: a second copy would double the
memory), and its repr shows them.

A text over the model's limit is truncated, as sentence-transformers (which the frameworks' own classes
wrap) truncates at max_seq_length, with a `TruncatedTextsWarning` saying how many were; `long="window"`
keeps every token, `long="error"` refuses. The warning is said once per call of the framework's method
(however many batches it cuts the texts into, in threads or tasks), at the caller's line: the first frame
outside bertscope, the framework and the machinery it runs through.
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

from ..core.context_vars import set_within
from ..core.finite import refuse_non_finite
from ..core.post import PostProcessor
from ..core.spec import EmbedOptions, Recipe, RecipeKeywords, resolve, unknown_option
from ..core.texts_given import is_pair, type_named
from ..core.tokens import cut_warning
from ..encode import texts_as_list
from ..errors import InvalidInput, InvalidSpec, caller_level
from ..model import Model, load
from ..static_model import StaticModel

__all__ = [
    "Loaded",
    "cut_said_once",
    "given_keywords",
    "listed",
    "load_options",
    "model_and_recipes",
    "one_text",
    "recipe_repr",
    "unpicklable",
    "vectors",
]

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


def given_keywords(
    model: str | os.PathLike[str] | Loaded | None,
    loaded: Loaded,
    load_kwargs: dict[str, Any],
    prompts: dict[str, tuple[str | None, str | None]],
    options: RecipeKeywords,
) -> dict[str, Any]:
    """The keywords that make a framework class again: the model as a name or folder (a loaded one as its
    folder), the load options, each role's prompt given (`prompts`: role -> (prompt_name, prompt), as
    `model_and_recipes` takes them) and the recipe's options, a saved post-processing's path as a string."""
    source = str(loaded.info().path) if isinstance(model, Loaded) else model
    recipe: dict[str, Any] = dict(options)
    if isinstance(recipe.get("post"), os.PathLike):
        recipe["post"] = str(recipe["post"])
    return {
        "model": None if source is None else str(source),
        **load_kwargs,
        **{
            f"{role}_{kind}": value
            for role, pair in prompts.items()
            for kind, value in zip(("prompt_name", "prompt"), pair, strict=True)
            if value is not None
        },
        **recipe,
    }


def unpicklable(cls_name: str, why: str) -> InvalidSpec:
    """The refusal to pickle a class made from a loaded model, whose load options are unknown, so no
    process can load it again; `why` says where a pickle goes and that the model loads there."""
    return InvalidSpec(
        f"a {cls_name} made from a loaded model does not pickle ({why}): give its name or folder and load "
        f"options instead, {cls_name}(name, backend=...)"
    )


def recipe_repr(cls_name: str, loaded: Loaded, given: dict[str, Any], *, reloads: bool, **shown: Any) -> str:
    """`Cls('name', option=value, ...)`: the model as given (a loaded one, or the default, as its repr)
    and the keywords given, a fitted post-processing by its kind and widths (never its arrays)."""
    model = given["model"] if reloads and given["model"] is not None else loaded
    parts = [repr(model)]
    for key, value in {**given, **shown}.items():
        if key == "model":
            continue
        if isinstance(value, PostProcessor):
            parts.append(f"{key}=<fitted {value.kind.value} {value.dim_in} -> {value.dim_out}>")
        else:
            parts.append(f"{key}={value!r}")
    return f"{cls_name}({', '.join(parts)})"


def one_text(text: object, method: str, instead: str, *, pairs: bool, why: str = "") -> Any:
    """The one text of a single-text method (or (A, B) pair, with `pairs`); anything else refused in one
    line naming `method` and, for a list, `instead` (what takes a list); `why` says why a pair is not
    taken where it is not."""
    if isinstance(text, str) or (pairs and isinstance(text, tuple) and is_pair(text)):
        return text
    one = "one string or an (A, B) pair" if pairs else "one string"
    if isinstance(text, tuple) and is_pair(text):
        raise InvalidInput(f"{method} takes one string, not an (A, B) pair: {why}")
    if isinstance(text, list | tuple):
        raise InvalidInput(f"{method} takes {one}, not a {type(text).__name__}: {instead}")
    raise InvalidInput(f"{method} takes {one}, not {type_named(text)}")


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
    refuse_non_finite(found.vectors)
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
    with set_within(_CUTS, cuts):
        yield
    if cuts:
        _say_cut(np.concatenate(cuts), model.max_tokens)


def _say_cut(n_dropped: np.ndarray, max_tokens: int) -> None:
    """The `TruncatedTextsWarning` for texts cut (n_dropped: per text), if any was, at the caller's line."""
    dropped = np.asarray(n_dropped, dtype=np.int64)
    cut = int(np.count_nonzero(dropped > 0))
    if cut:
        warning = cut_warning(cut, len(dropped), max_tokens, _WINDOW, int(dropped.sum()))
        warnings.warn(warning, stacklevel=caller_level(_NOT_THE_CALLER))
