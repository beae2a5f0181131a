"""bertscope as a LangChain `Embeddings`, in process (no server): `pip install 'bertscope[langchain]'`.

from bertscope.integrations.langchain import BertscopeEmbeddings
emb = BertscopeEmbeddings(layers="-2", pooling="mean", query_prompt="query: ")
emb.embed_documents(["a cat", "a dog"])    # == bertscope.load().embed([...], layers="-2", ...)
emb.embed_query("pets")                     # with "query: " before it

For a model that ships prompts, query_prompt_name="query" picks its own. Texts may be (A, B) pairs, as
langchain-huggingface's classes take them.

It pickles as the keywords that make it again, the process reading it loading the model again (one made
from a loaded model is refused in one line); copy.deepcopy shares the loaded model, whose weights are
only read; its repr shows the model and the keywords given.
"""

from __future__ import annotations

import asyncio
import copy
import os
from typing import Any

from typing_extensions import Unpack

from ..core.spec import RecipeKeywords
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
        self._given = given_keywords(model, self.model, load_kwargs, prompts, options)
        # A model the caller loaded has load options no other process can know: it does not pickle.
        self._reloads = not isinstance(model, Loaded)

    def __repr__(self) -> str:
        """The model and the keywords given, as the call that makes it again."""
        return recipe_repr(type(self).__name__, self.model, self._given, reloads=self._reloads)

    def __getstate__(self) -> dict[str, Any]:
        """The keywords that make it again, not the model (which does not pickle): the reader loads it."""
        if not self._reloads:
            raise unpicklable(type(self).__name__, "a process reading it must load the model itself")
        return {"given": self._given}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Made again from its keywords: the model loads here, as it loaded where it was pickled."""
        self.__init__(**state["given"])  # type: ignore[misc]

    def __copy__(self) -> BertscopeEmbeddings:
        """The same model and recipes (without this, copy.copy would pickle it: a second load)."""
        made = type(self).__new__(type(self))
        made.__dict__.update(self.__dict__)
        return made

    def __deepcopy__(self, memo: dict[int, Any]) -> BertscopeEmbeddings:
        """Its recipes copied and the loaded model shared: its weights are only read, and a second copy
        would double the memory (pickle it for one loaded again)."""
        made = type(self).__new__(type(self))
        memo[id(self)] = made
        memo[id(self.model)] = self.model
        made.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return made

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, with the documents' prompt (one string is refused: pass [text])."""
        return vectors(self.model, self._recipes["document"], _documents(texts, ""))

    def embed_query(self, text: str) -> list[float]:
        """The query's vector, with the query prompt (a list is refused: embed_documents takes one)."""
        return vectors(self.model, self._recipes["query"], [_query(text, "")])[0]

    # The forward runs in a thread, so an async caller's event loop keeps serving while it runs; a cut is
    # said when it returns, at the caller's line (a thread's stack holds none).
    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """`embed_documents` without blocking the event loop."""
        checked = _documents(texts, "a")  # refused here, in the name the caller called
        with cut_said_once(self.model):
            return await asyncio.to_thread(vectors, self.model, self._recipes["document"], checked)

    async def aembed_query(self, text: str) -> list[float]:
        """`embed_query` without blocking the event loop."""
        checked = _query(text, "a")  # refused here, in the name the caller called
        with cut_said_once(self.model):
            found = await asyncio.to_thread(vectors, self.model, self._recipes["query"], [checked])
        return found[0]


def _documents(texts: object, prefix: str) -> list[str]:
    """The texts of `embed_documents` (`prefix` "a": of `aembed_documents`), or one line naming it."""
    return listed(texts, f"{prefix}embed_documents", f"{prefix}embed_query")  # type: ignore[arg-type]


def _query(text: object, prefix: str) -> Any:
    """The one text or (A, B) pair of `embed_query` (`prefix` "a": of `aembed_query`), or one line naming
    that method."""
    return one_text(text, f"{prefix}embed_query", f"{prefix}embed_documents takes a list", pairs=True)
