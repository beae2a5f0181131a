"""What the framework integrations share: the model, a resolved recipe per role, vectors as lists.

The model is a name or folder, or anything `bertscope.load` returns (a `Model`, or a `StaticModel` for a
model2vec folder). A text over the model's limit is truncated, as sentence-transformers (which the
frameworks' own classes wrap) truncates at max_seq_length, with a `TruncatedTextsWarning` saying how
many were; `long="window"` keeps every token, `long="error"` refuses.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeAlias

from ..core.spec import EmbedOptions, Recipe, RecipeKeywords, resolve, unknown_option
from ..encode import warn_truncated
from ..errors import InvalidSpec
from ..model import Model, load
from ..static_model import StaticModel

__all__ = ["Loaded", "load_options", "model_and_recipes", "vectors"]

# What `bertscope.load` returns: a transformer, or the rows of a model2vec folder.
Loaded: TypeAlias = Model | StaticModel


# The `bertscope.load` options each framework class takes.
LOAD_OPTIONS = ("mode", "device", "dtype", "backend")


def load_options(
    mode: str | None, device: str | None, dtype: str | None, backend: str | None
) -> dict[str, str]:
    """The `bertscope.load` options a framework class was given (those left out take load's defaults)."""
    given = {"mode": mode, "device": device, "dtype": dtype, "backend": backend}
    return {key: value for key, value in given.items() if value}


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
    recipes = {
        role: resolve(loaded, replace(EmbedOptions.given(**options), prompt_name=name, prompt=text))
        for role, (name, text) in prompts.items()
    }
    return loaded, recipes


def vectors(model: Loaded, recipe: Recipe, texts: Sequence[str]) -> list[list[float]]:
    """Sentence vectors as plain lists, as the frameworks want them; none for no texts."""
    if not texts:
        return []
    found = model.embed_with(list(texts), recipe)
    warn_truncated(found.n_dropped, model.max_tokens, "long='window' keeps every token")
    return found.vectors.astype(float).tolist()
