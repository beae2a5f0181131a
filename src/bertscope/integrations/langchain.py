"""bertscope as a LangChain `Embeddings`, in process (no server): `pip install 'bertscope[langchain]'`.

from bertscope.integrations.langchain import BertscopeEmbeddings
emb = BertscopeEmbeddings(layers="-2", pooling="mean", query_prompt="query: ")
emb.embed_documents(["a cat", "a dog"])    # == bertscope.load().embed([...], layers="-2", ...)
emb.embed_query("pets")                     # with "query: " before it

For a model that ships prompts, query_prompt_name="query" picks its own.
"""

from __future__ import annotations

import asyncio
import os

from typing_extensions import Unpack

from ..core.spec import RecipeKeywords
from ._shared import Loaded, cut_said_once, listed, load_options, model_and_recipes, vectors

try:
    from langchain_core.embeddings import Embeddings
except ImportError as exc:  # the extra is optional: say which one to install
    raise ImportError(
        "bertscope.integrations.langchain needs langchain-core: pip install 'bertscope[langchain]'"
    ) from exc

__all__ = ["BertscopeEmbeddings"]


class BertscopeEmbeddings(Embeddings):
    """LangChain embeddings from a bertscope model: any layers, pooling, mode and prompts, equal to `embed`.

    `model`: a name or folder (None: the bundled all-MiniLM-L6-v2) or what `bertscope.load` returned
    (a `Model`, or a `StaticModel` for a model2vec folder);
    `mode`, `device`, `dtype`, `backend`, `trust_remote_code`: how it loads (`bertscope.load`);
    `query_prompt_name` / `query_prompt` and `document_prompt_name` / `document_prompt`: each role's
    prompt (None: the model's default); `options`: `Model.embed`'s (layers, combine, pooling,
    mask_special, normalize, long, stride, post).
    """

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
        document_prompt_name: str | None = None,
        document_prompt: str | None = None,
        **options: Unpack[RecipeKeywords],
    ) -> None:
        load_kwargs = load_options(mode, device, dtype, backend, trust_remote_code)
        prompts = {
            "query": (query_prompt_name, query_prompt),
            "document": (document_prompt_name, document_prompt),
        }
        self.model, self._recipes = model_and_recipes(model, load_kwargs, prompts, options)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, with the documents' prompt (one string is refused: pass [text])."""
        return vectors(self.model, self._recipes["document"], listed(texts, "embed_documents", "embed_query"))

    def embed_query(self, text: str) -> list[float]:
        """The query's vector, with the query prompt."""
        return vectors(self.model, self._recipes["query"], [text])[0]

    # The forward runs in a thread, so an async caller's event loop keeps serving while it runs; a cut is
    # said when it returns, at the caller's line (a thread's stack holds none).
    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """`embed_documents` without blocking the event loop."""
        with cut_said_once(self.model):
            return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """`embed_query` without blocking the event loop."""
        with cut_said_once(self.model):
            return await asyncio.to_thread(self.embed_query, text)
