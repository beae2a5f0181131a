"""bertscope as a LlamaIndex `BaseEmbedding`, in process (no server): `pip install 'bertscope[llamaindex]'`.

from llama_index.core import Settings
from bertscope.integrations.llamaindex import BertscopeEmbedding
Settings.embed_model = BertscopeEmbedding(layers="-2", pooling="mean", query_prompt="query: ")
Settings.embed_model.get_query_embedding("pets")    # with "query: " before it

For a model that ships prompts, query_prompt_name="query" picks its own.

It takes BaseEmbedding's own fields (model_name, num_workers, embeddings_cache, ...), and its `to_dict`
holds the keywords that make it again (the model, how it loads, the prompts and options), so
`from_dict(to_dict())` gives the same vectors and an IngestionPipeline's cache tells two recipes apart.
A post-processing is given as the path of a saved one (post="white.safetensors"): a fitted one has no
JSON form, so it is refused in one line. It pickles as those keywords (IngestionPipeline(...).run(
num_workers=2) sends it to other processes), each process loading the model again; one made from a
loaded model is refused there in one line. copy.deepcopy and model_copy(deep=True) share the loaded
model, whose weights are only read. Its texts are strings, as LlamaIndex's interface takes them: an
(A, B) pair, a tuple or a list of two strings, is refused before the model runs (Model.embed takes
pairs). Its repr shows the model and the keywords given.
"""

from __future__ import annotations

import asyncio
import os
import re
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any

from typing_extensions import Unpack

from ..core.context_vars import set_within
from ..core.folder import DEFAULT_MODEL
from ..core.post import PostProcessor
from ..core.spec import RecipeKeywords
from ..core.texts_given import is_pair, type_named
from ..errors import InvalidInput, InvalidSpec
from ._shared import (
    Loaded,
    cut_said_once,
    given_keywords,
    listed,
    load_options,
    model_and_recipes,
    one_text,
    recipe_repr,
    unpicklable,
    vectors,
)

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import PrivateAttr
except ImportError as exc:  # the extra is optional: say which one to install
    raise ImportError(
        "bertscope.integrations.llamaindex needs llama-index-core: pip install 'bertscope[llamaindex]'"
    ) from exc

__all__ = ["BertscopeEmbedding"]

# The whole list a batch method was given, while it runs: LlamaIndex cuts it into embed_batch_size
# batches itself, and a refusal names the text by its place in a batch ("text 1" of the second batch).
_TEXTS: ContextVar[list[str] | None] = ContextVar("bertscope_llamaindex_texts", default=None)
# BaseEmbedding's fields a pickle carries (the callback manager and rate limiter stay in this process).
_FIELDS = ("model_name", "embed_batch_size", "num_workers", "embeddings_cache")
# Why a pair is refused, and what takes one.
_PAIRS = (
    "LlamaIndex's embeddings take strings; embed (A, B) pairs with the model itself, .model.embed([(a, b)])"
)


class BertscopeEmbedding(BaseEmbedding):
    """LlamaIndex embeddings from a bertscope model: any layers, pooling, mode and prompts, equal to `embed`.

    `model`: a name or folder (None: the bundled all-MiniLM-L6-v2) or what `bertscope.load` returned
    (a `Model`, or a `StaticModel` for a model2vec folder);
    `mode`, `device`, `dtype`, `backend`, `trust_remote_code`: how it loads (`bertscope.load`);
    `query_prompt_name` / `query_prompt` and `text_prompt_name` / `text_prompt`: each role's prompt
    (None: the model's default); `options`: `Model.embed`'s (layers, combine, pooling, mask_special,
    normalize, long, stride, post). `embed_batch_size` only sets how many texts go in one call: vectors
    do not depend on it.
    `model_name`, `num_workers`, `embeddings_cache`: BaseEmbedding's; `model_name` is the name LlamaIndex
    shows (default: the model's), and with no `model` the model to load, as in LlamaIndex's own classes.
    """

    _model: Loaded = PrivateAttr()
    _recipes: dict[str, Any] = PrivateAttr()
    # The keywords that make these embeddings again (the model as a name or folder), and whether a
    # process may load it from them: not a model loaded by the caller, whose load options are unknown.
    _given: dict[str, Any] = PrivateAttr()
    _reloads: bool = PrivateAttr()

    def __init__(
        self,
        model: str | os.PathLike[str] | Loaded | None = None,
        *,
        mode: str | None = None,
        device: str | None = None,
        dtype: str | None = None,
        backend: str | None = None,
        trust_remote_code: bool = False,
        query_prompt_name: str | None = None,
        query_prompt: str | None = None,
        text_prompt_name: str | None = None,
        text_prompt: str | None = None,
        embed_batch_size: int = 64,
        callback_manager: Any = None,
        model_name: str | None = None,
        num_workers: int | None = None,
        embeddings_cache: Any = None,
        **options: Unpack[RecipeKeywords],
    ) -> None:
        load_kwargs = load_options(mode, device, dtype, backend, trust_remote_code)
        prompts = {"query": (query_prompt_name, query_prompt), "text": (text_prompt_name, text_prompt)}
        own = ("callback_manager", *_FIELDS)  # _FIELDS names embed_batch_size
        _check_batch_size(embed_batch_size)
        _check_post(options.get("post"))
        if model is None and model_name is not None and model_name != DEFAULT_MODEL:
            model = model_name  # the model to load, as LlamaIndex's own classes read model_name
        loaded, recipes = model_and_recipes(model, load_kwargs, prompts, options, own=own)
        super().__init__(
            model_name=model_name or loaded.info().source,
            embed_batch_size=embed_batch_size,
            callback_manager=callback_manager,
            num_workers=num_workers,
            embeddings_cache=embeddings_cache,
        )
        self._model = loaded
        self._recipes = recipes
        self._reloads = not isinstance(model, Loaded)
        self._given = given_keywords(model, loaded, load_kwargs, prompts, options)

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's name for this class."""
        return "BertscopeEmbedding"

    @property
    def model(self) -> Loaded:
        """The bertscope model behind these embeddings."""
        return self._model

    def to_dict(self, **kwargs: Any) -> dict[str, Any]:
        """BaseEmbedding's fields and the keywords that make these embeddings again (`from_dict` takes
        them; one made from a loaded model names its folder, loaded there with `bertscope.load`'s
        defaults)."""
        return {**super().to_dict(**kwargs), **self._given}

    def __repr__(self) -> str:
        """The model and the keywords given (BaseEmbedding's fields where not their defaults)."""
        fields = {key: getattr(self, key) for key in _FIELDS}
        defaults = {"model_name": self._model.info().source, "embed_batch_size": 64}
        shown = {key: value for key, value in fields.items() if value != defaults.get(key)}
        return recipe_repr(type(self).__name__, self._model, self._given, reloads=self._reloads, **shown)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> BertscopeEmbedding:
        """Its fields and recipes copied and the loaded model shared: its weights are only read, and a
        second copy would double the memory (pickle it for one loaded again)."""
        memo = {} if memo is None else memo
        memo[id(self._model)] = self._model
        return super().__deepcopy__(memo)

    def __getstate__(self) -> dict[str, Any]:
        """The keywords that make it again, not the model (which does not pickle): each process loads it."""
        if not self._reloads:
            raise unpicklable(
                "BertscopeEmbedding",
                "IngestionPipeline's num_workers sends it to other processes, which must load the model "
                "themselves",
            )
        return {"given": self._given, "fields": {key: getattr(self, key) for key in _FIELDS}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Made again from its keywords: the model loads here, as it loaded where it was pickled."""
        self.__init__(**state["given"], **state["fields"])  # type: ignore[misc]

    # LlamaIndex cuts a list into embed_batch_size batches (in tasks, when async): the texts they cut are
    # said once per call, at the caller's line.
    def get_text_embedding_batch(self, texts: list[str], show_progress: bool = False, **kwargs: Any) -> Any:
        """A vector per text, `embed_batch_size` texts a call (one string is refused: pass [text])."""
        checked = _strings(listed(texts, "get_text_embedding_batch", "get_text_embedding"))
        with cut_said_once(self._model), _whole(checked):
            return super().get_text_embedding_batch(checked, show_progress, **kwargs)

    async def aget_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> Any:
        """`get_text_embedding_batch` without blocking the event loop."""
        checked = _strings(listed(texts, "aget_text_embedding_batch", "aget_text_embedding"))
        with cut_said_once(self._model), _whole(checked):
            return await super().aget_text_embedding_batch(checked, show_progress, **kwargs)

    # The one text is checked before LlamaIndex's own method runs: its cache would take a list as a key,
    # and its end event refuses a pair only after the model ran.
    def get_query_embedding(self, query: str) -> Any:
        """The query's vector, with the query prompt (a list is refused: one call per query)."""
        return super().get_query_embedding(_one(query, "get_query_embedding"))

    def get_text_embedding(self, text: str) -> Any:
        """The text's vector, with the text prompt (a list is refused: get_text_embedding_batch takes one)."""
        return super().get_text_embedding(_one(text, "get_text_embedding"))

    async def aget_query_embedding(self, query: str) -> Any:
        """The query's vector without blocking the event loop."""
        checked = _one(query, "aget_query_embedding")
        with cut_said_once(self._model):
            return await super().aget_query_embedding(checked)

    async def aget_text_embedding(self, text: str) -> Any:
        """The text's vector without blocking the event loop."""
        checked = _one(text, "aget_text_embedding")
        with cut_said_once(self._model):
            return await super().aget_text_embedding(checked)

    def _get_query_embedding(self, query: str) -> list[float]:
        return vectors(self._model, self._recipes["query"], [_one(query, "get_query_embedding")])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return vectors(self._model, self._recipes["text"], [_one(text, "get_text_embedding")])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        try:
            return vectors(self._model, self._recipes["text"], _strings(texts))
        except InvalidInput as error:
            raise _named_in_whole(error, texts) from None

    # The forward runs in a thread, so an async caller's event loop keeps serving while it runs.
    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


def _whole(texts: list[str]) -> AbstractContextManager[None]:
    """Around one batch method: the list it was given, for a refusal to name its text's place in it."""
    return set_within(_TEXTS, texts)


def _named_in_whole(error: InvalidInput, batch: list[str]) -> InvalidInput:
    """`error` ("text i ..." of `batch`) naming the text by its place in the list the caller gave (its
    first: a text refused once is refused wherever it stands), or quoting it where no list is known."""
    said = str(error)
    found = re.match(r"text (\d+)\b", said)
    if found is None or int(found[1]) >= len(batch) or not isinstance(batch[int(found[1])], str):
        return error  # a pair or another non-string is named by its place: quoting it says nothing more
    text, whole = batch[int(found[1])], _TEXTS.get()
    if whole is not None and text in whole:
        name = f"text {whole.index(text)}"
    else:
        name = f"the text {text if len(text) <= 40 else text[:37] + '...'!r}"
    return type(error)(name + said[found.end() :])


def _one(text: object, method: str) -> str:
    """The one text of a single-text method, or one line naming the method and what takes a list."""
    instead = "call it once per query" if "query" in method else "get_text_embedding_batch takes a list"
    checked: str = one_text(text, method, instead, pairs=False, why=_PAIRS)
    return checked


def _strings(texts: list[Any]) -> list[str]:
    """`texts`, an (A, B) pair among them refused by its place before the model runs (LlamaIndex's end
    event would refuse it after); any other text is checked by the model, in the words of `embed`. A pair
    is what `Model.embed` reads as one (`is_pair`): a tuple or a list of two strings."""
    for index, text in enumerate(texts):
        if is_pair(text):
            given = "an (A, B) pair" if isinstance(text, tuple) else "a list of two strings (an A, B pair)"
            raise InvalidInput(f"text {index} is {given}, not a string: {_PAIRS}")
        if isinstance(text, (list, tuple)):  # a pair's shape gone wrong: embed would speak of pairs
            raise InvalidInput(f"text {index} is {type_named(text)}, not a string: LlamaIndex takes strings")
    return texts


def _check_post(post: object) -> None:
    """post= as LlamaIndex's to_dict can hold it: a fitted post-processing has no JSON form (to_json
    failed, and the ingestion cache hashed numpy's shortened print of it), so it is given as a file."""
    if isinstance(post, PostProcessor):
        raise InvalidSpec(
            f"post= is a fitted {post.kind.value}, which BertscopeEmbedding's to_dict cannot hold "
            "(LlamaIndex saves it, and hashes it for its ingestion cache): save it with .save(path), "
            "pass post=path"
        )


def _check_batch_size(size: object) -> None:
    """embed_batch_size as LlamaIndex's field takes it (1 to 2,048 texts), refused in one line."""
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 2048:
        raise InvalidSpec(f"embed_batch_size must be a whole number of texts from 1 to 2048, not {size!r}")
