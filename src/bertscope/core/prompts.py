"""A model's own prompts ("query: ", "passage: ", instructions), read as sentence-transformers ships them.

A sentence-transformers folder lists its prompts in `config_sentence_transformers.json` (`prompts`,
`default_prompt_name`); its Pooling config says with `include_prompt` whether the prompt's tokens count
in the pooled vector. The prompt is put before the text as a string, as sentence-transformers does, and
with `include_prompt: false` the first `length` tokens ([CLS] and the prompt's pieces, counted by
tokenizing the prompt alone, cut at the model's limit) are left out of pooling.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, overload

from ..errors import InvalidSpec, ModelLoadError

__all__ = [
    "Prompts", "Prompt", "PromptsOfFolder", "read_prompts", "query_prompt_name", "prepend", "prompt_length",
]  # fmt: skip

# Names under which models ship the prompt for the stored side of a search.
_PASSAGE_NAMES = ("passage", "document", "doc", "corpus", "retrieval.passage")


@dataclass(frozen=True)
class Prompt:
    """A resolved prompt: its name (None when given as text), its text, and whether pooling counts it."""

    name: str | None
    text: str
    include: bool = True

    def settings(self) -> dict[str, Any]:
        """What goes into provenance: prompt_name, prompt and include_prompt."""
        return {"prompt_name": self.name, "prompt": self.text, "include_prompt": self.include}


@dataclass(frozen=True, eq=False)  # eq=False: the dataclass's field-wise __eq__ would hide Mapping's
class Prompts(Mapping[str, str]):
    """The prompts a model folder ships, its default prompt's name, and its Pooling's include_prompt.

    Read as a mapping of name -> prompt text, as sentence-transformers' `model.prompts` dict is read
    (`prompts["query"]`, `dict(prompts)`, `"query" in prompts`); an empty one is falsy, as an empty dict.
    It equals a dict with the same items (another `Prompts` only where its default and include_prompt
    match too), and is unhashable, as a dict. `dict(prompts)` is its JSON form (`json.dumps` takes dicts).
    """

    prompts: dict[str, str] = field(default_factory=dict)
    default_name: str | None = None
    include_prompt: bool = True
    # True as loaded: sentence-transformers' model then lists an empty "query" and "document" prompt
    # beside the folder's; False once `model.prompts = {...}` replaced them, as its dict is then the one set
    st_roles: bool = field(default=True, compare=False)

    def __getitem__(self, name: str) -> str:
        return self.prompts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.prompts)

    def __len__(self) -> int:
        return len(self.prompts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Prompts):
            return (self.prompts, self.default_name, self.include_prompt) == (
                other.prompts,
                other.default_name,
                other.include_prompt,
            )
        if isinstance(other, Mapping):
            return self.prompts == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable-looking mapping, equal to dicts: unhashable as they are

    def replaced(self, prompts: object) -> Prompts:
        """These settings with `prompts` (a dict of name -> prompt text) in place of the folder's, as
        sentence-transformers' `model.prompts = {...}`: the default prompt stays where its name is among
        them, else there is none (sentence-transformers' default then finds no prompt). A `Prompts` is
        taken whole, its default too (this model's Pooling still says include_prompt)."""
        if isinstance(prompts, Prompts):
            return replace(prompts, include_prompt=self.include_prompt)
        if not isinstance(prompts, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()
        ):
            raise InvalidSpec(
                f"prompts must be a dict of prompt name -> prompt text, such as {{'query': 'query: '}}, "
                f"got {reprlib.repr(prompts)}"
            )
        given = dict(prompts)
        default = self.default_name if self.default_name in given else None
        return replace(self, prompts=given, default_name=default, st_roles=False)

    def with_default(self, name: object) -> Prompts:
        """These prompts with `name` (one of them, or None for none) as the default, as sentence-transformers'
        `model.default_prompt_name = name`; an unknown name is refused, where sentence-transformers would
        apply no prompt without a word."""
        if name is None or (isinstance(name, str) and name in self.prompts):
            return replace(self, default_name=name)
        known = ", ".join(repr(n) for n in self.prompts) if self.prompts else "none"
        raise InvalidSpec(
            f"default_prompt_name {reprlib.repr(name)} is not one of this model's prompts ({known}); give "
            "one of them or None, or add it first: model.prompts = {**model.prompts, NAME: TEXT}"
        )

    def resolve(self, *, prompt_name: str | None = None, prompt: str | None = None) -> Prompt | None:
        """The prompt asked for (by name or as text), else the model's default; None for no prompt.

        `prompt=""` asks for no prompt even where the model has a default.
        """
        if prompt is not None and not isinstance(prompt, str):
            raise InvalidSpec(
                f"prompt must be a str (the text put before each text, such as 'query: '), "
                f"got {prompt!r} ({type(prompt).__name__})"
            )
        if prompt_name is not None and not isinstance(prompt_name, str):
            raise InvalidSpec(
                f"prompt_name must be a str (the name of one of the model's prompts, such as 'query'), "
                f"got {prompt_name!r} ({type(prompt_name).__name__})"
            )
        if prompt_name is not None and prompt is not None:
            raise InvalidSpec("give prompt_name= or prompt=, not both (prompt= is the text itself)")
        if prompt is not None:
            return Prompt(None, prompt, self.include_prompt) if prompt else None
        name = prompt_name if prompt_name is not None else self.default_name
        if name is None:
            return None
        if name not in self.prompts:
            known = ", ".join(repr(n) for n in self.prompts) if self.prompts else "none"
            raise InvalidSpec(
                f"unknown prompt name {name!r}; this model's prompts: {known}. "
                "Use one of them, or give the text with prompt="
            )
        text = self.prompts[name]
        return Prompt(name, text, self.include_prompt) if text else None


def prepend(prompt: str, texts: Sequence[Any]) -> list[Any]:
    """Texts with the prompt put before each (before A of an (A, B) pair), as sentence-transformers does."""
    return [(prompt + t[0], t[1]) if isinstance(t, tuple) else prompt + t for t in texts]


def prompt_length(tokenizer: Any, prompt: str) -> int:
    """Leading tokens a prompt fills: [CLS] and its pieces, without a closing special (as ST counts).

    The prompt is measured cut at the model's limit, as sentence-transformers' `_get_prompt_length`
    tokenizes it with max_seq_length truncation: a prompt that fills the window leaves the text's closing
    [SEP] pooled, not an empty mask (a zero mean, a max of the mask's fill)."""
    tokens = tokenizer.encode([prompt])[0]
    limit = getattr(tokenizer, "max_tokens", None)
    if isinstance(limit, int) and len(tokens) > limit:
        tokens = tokens.truncated(limit)
    return int(len(tokens) - (1 if tokens.special_tokens_mask and tokens.special_tokens_mask[-1] else 0))


def read_prompts(path: Path | None) -> Prompts:
    """The prompts of a sentence-transformers folder (none for a plain transformers folder)."""
    if path is None:
        return Prompts()
    config = _json(path / "config_sentence_transformers.json")
    prompts = {str(k): str(v) for k, v in (config.get("prompts") or {}).items()}
    default = config.get("default_prompt_name") or None
    if default is not None and default not in prompts:
        raise ModelLoadError(
            f"{path}: default_prompt_name {default!r} is not one of its prompts "
            f"({', '.join(prompts) or 'none'}); fix config_sentence_transformers.json"
        )
    return Prompts(prompts, default, _include_prompt(path))


class PromptsOfFolder:
    """A model's `prompts` attribute: its folder's prompts (`read_prompts`, read on first use), until set;
    read as a mapping of name -> prompt text, as sentence-transformers' `model.prompts`. Setting it, as
    sentence-transformers' `model.prompts = {...}`, replaces them for every embed and encode after (the
    default prompt stays where its name is among them). The model names its folder with
    `_settings_folder()`, the one its `similarity_fn_name` is read from too."""

    @overload
    def __get__(self, model: None, owner: type | None = None) -> PromptsOfFolder: ...
    @overload
    def __get__(self, model: Any, owner: type | None = None) -> Prompts: ...
    def __get__(self, model: Any, owner: type | None = None) -> Prompts | PromptsOfFolder:
        """The model's prompts; read on the class (`bertscope.Model.prompts`, help() and doc tools do),
        this descriptor itself, as a property is."""
        if model is None:
            return self
        found = model.__dict__.get("_prompts")
        if found is None:
            found = model.__dict__["_prompts"] = read_prompts(model._settings_folder())
        return found  # type: ignore[no-any-return]

    def __set__(self, model: Any, value: Mapping[str, str]) -> None:
        model.__dict__["_prompts"] = self.__get__(model).replaced(value)


def query_prompt_name(stored: dict[str, Any], prompts: Prompts) -> str | None:
    """The prompt name to embed a search query with, for a store made with `stored` settings.

    A store made with a passage prompt is searched with the model's query prompt where it has one;
    otherwise the query gets the store's own prompt: by name where this model's prompt of that name is the
    text the store recorded, else None, and the caller gives the recorded text (a prompt set in code with
    `model.prompts = {...}` is not in a freshly loaded model).
    """
    name = stored.get("prompt_name")
    if name in _PASSAGE_NAMES and "query" in prompts.prompts:
        return "query"
    if not isinstance(name, str) or name not in prompts.prompts:
        return None
    return name if prompts.prompts[name] == stored.get("prompt", prompts.prompts[name]) else None


def _include_prompt(path: Path) -> bool:
    modules = _json(path / "modules.json", default=[])
    for module in modules if isinstance(modules, list) else []:
        if str(module.get("type", "")).endswith("Pooling"):
            return bool(_json(path / module.get("path", "") / "config.json").get("include_prompt", True))
    return True


def _json(path: Path, default: Any = None) -> Any:
    if not path.is_file():
        return {} if default is None else default
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path} is not valid JSON ({exc}); fix or remove it") from None
