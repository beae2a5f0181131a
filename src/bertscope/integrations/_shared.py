"""What the framework integrations share: the model, a resolved recipe per role, vectors as lists."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..core.spec import EmbedOptions, Recipe, RecipeKeywords, resolve
from ..errors import InvalidSpec
from ..model import Model, load

__all__ = ["load_options", "model_and_recipes", "vectors"]


def load_options(
    mode: str | None, device: str | None, dtype: str | None, backend: str | None
) -> dict[str, str]:
    """The `bertscope.load` options a framework class was given (those left out take load's defaults)."""
    given = {"mode": mode, "device": device, "dtype": dtype, "backend": backend}
    return {key: value for key, value in given.items() if value}


def model_and_recipes(
    model: str | os.PathLike[str] | Model | None,
    load_kwargs: dict[str, Any] | None,
    prompts: dict[str, tuple[str | None, str | None]],
    options: RecipeKeywords,
) -> tuple[Model, dict[str, Recipe]]:
    """The model (loaded unless given) and one resolved recipe per role, so bad options fail at once."""
    for key in ("prompt_name", "prompt"):
        if key in options:
            raise InvalidSpec(
                f"{key}: give each role its own instead ({', '.join(f'{r}_{key}' for r in prompts)}), "
                "or none for the model's default prompt"
            )
    if isinstance(model, Model):
        if load_kwargs:
            raise InvalidSpec(
                f"{', '.join(load_kwargs)}: how a model loads; pass its name instead of a loaded Model, "
                "or load it with bertscope.load(..., mode=...) yourself"
            )
        loaded = model
    else:
        loaded = load(model, **(load_kwargs or {}))
    recipes = {
        role: resolve(loaded, replace(EmbedOptions(**options), prompt_name=name, prompt=text))
        for role, (name, text) in prompts.items()
    }
    return loaded, recipes


def vectors(model: Model, recipe: Recipe, texts: Sequence[str]) -> list[list[float]]:
    """Sentence vectors as plain lists, as the frameworks want them; none for no texts."""
    if not texts:
        return []
    return model.embed_with(list(texts), recipe).vectors.astype(float).tolist()
