"""bertscope as a LlamaIndex `BaseEmbedding`, in process (no server): `pip install 'bertscope[llamaindex]'`.

from llama_index.core import Settings
from bertscope.integrations.llamaindex import BertscopeEmbedding
Settings.embed_model = BertscopeEmbedding(layers="-2", pooling="mean", query_prompt="query: ")
Settings.embed_model.get_query_embedding("pets")    # with "query: " before it

For a model that ships prompts, query_prompt_name="query" picks its own.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from typing_extensions import Unpack

from ..core.spec import RecipeKeywords
from ..errors import InvalidSpec
from ._shared import Loaded, cut_said_once, listed, load_options, model_and_recipes, vectors

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import PrivateAttr
except ImportError as exc:  # the extra is optional: say which one to install
    raise ImportError(
        "bertscope.integrations.llamaindex needs llama-index-core: pip install 'bertscope[llamaindex]'"
    ) from exc

__all__ = ["BertscopeEmbedding"]


class BertscopeEmbedding(BaseEmbedding):
    """LlamaIndex embeddings from a bertscope model: any layers, pooling, mode and prompts, equal to `embed`.

    `model`: a name or folder (None: the bundled all-MiniLM-L6-v2) or what `bertscope.load` returned
    (a `Model`, or a `StaticModel` for a model2vec folder);
    `mode`, `device`, `dtype`, `backend`: how it loads (`bertscope.load`); `query_prompt_name` /
    `query_prompt` and `text_prompt_name` / `text_prompt`: each role's prompt (None: the model's
    default); `options`: `Model.embed`'s (layers, combine, pooling, mask_special, normalize, long,
    stride, post). `embed_batch_size` only sets how many texts go in one call: vectors do not depend on it.
    """

    _model: Loaded = PrivateAttr()
    _recipes: dict[str, Any] = PrivateAttr()

    def __init__(
        self,
        model: str | os.PathLike[str] | Loaded | None = None,
        *,
        mode: str | None = None,
        device: str | None = None,
        dtype: str | None = None,
        backend: str | None = None,
        query_prompt_name: str | None = None,
        query_prompt: str | None = None,
        text_prompt_name: str | None = None,
        text_prompt: str | None = None,
        embed_batch_size: int = 64,
        callback_manager: Any = None,
        **options: Unpack[RecipeKeywords],
    ) -> None:
        load_kwargs = load_options(mode, device, dtype, backend)
        prompts = {"query": (query_prompt_name, query_prompt), "text": (text_prompt_name, text_prompt)}
        own = ("embed_batch_size", "callback_manager")
        _check_batch_size(embed_batch_size)
        loaded, recipes = model_and_recipes(model, load_kwargs, prompts, options, own=own)
        super().__init__(
            model_name=loaded.info().source,
            embed_batch_size=embed_batch_size,
            callback_manager=callback_manager,
        )
        self._model = loaded
        self._recipes = recipes

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's name for this class."""
        return "BertscopeEmbedding"

    @property
    def model(self) -> Loaded:
        """The bertscope model behind these embeddings."""
        return self._model

    # LlamaIndex cuts a list into embed_batch_size batches (in tasks, when async): the texts they cut are
    # said once per call, at the caller's line.
    def get_text_embedding_batch(self, texts: list[str], show_progress: bool = False, **kwargs: Any) -> Any:
        """A vector per text, `embed_batch_size` texts a call (one string is refused: pass [text])."""
        checked = listed(texts, "get_text_embedding_batch", "get_text_embedding")
        with cut_said_once(self._model):
            return super().get_text_embedding_batch(checked, show_progress, **kwargs)

    async def aget_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> Any:
        """`get_text_embedding_batch` without blocking the event loop."""
        checked = listed(texts, "aget_text_embedding_batch", "aget_text_embedding")
        with cut_said_once(self._model):
            return await super().aget_text_embedding_batch(checked, show_progress, **kwargs)

    async def aget_query_embedding(self, query: str) -> Any:
        """The query's vector without blocking the event loop."""
        with cut_said_once(self._model):
            return await super().aget_query_embedding(query)

    async def aget_text_embedding(self, text: str) -> Any:
        """The text's vector without blocking the event loop."""
        with cut_said_once(self._model):
            return await super().aget_text_embedding(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        return vectors(self._model, self._recipes["query"], [query])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return vectors(self._model, self._recipes["text"], [text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return vectors(self._model, self._recipes["text"], texts)

    # The forward runs in a thread, so an async caller's event loop keeps serving while it runs.
    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


def _check_batch_size(size: object) -> None:
    """embed_batch_size as LlamaIndex's field takes it (1 to 2,048 texts), refused in one line."""
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 2048:
        raise InvalidSpec(f"embed_batch_size must be a whole number of texts from 1 to 2048, not {size!r}")
