"""Searching a stored output: exact top-k cosine, or the ANN index's candidates ranked exactly.

A query text is embedded by the store's own model as it ran (`model_for`, which loads it by name through
the loader the package registers: `core.loaders`).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.post import PostProcessor, as_post
from ..core.prompts import query_prompt_name
from ..core.similarity import Hit, TopK
from ..core.spec import EmbedOptions, reloadable, resolve
from ..errors import CorpusError
from . import index as ann  # looked up per call: tests watch ann.ann_search
from .checksums import column_values
from .level_table import level_of
from .parquet_checked import CheckedParquet
from .stores import Store, open_store, view_settings, with_view

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.spec import QueryKeywords

__all__ = ["search", "model_for"]


def search(
    query: str | np.ndarray | None,
    store: str | Path | Store,
    *,
    collection: str | None = None,
    k: int = 5,
    item_id: str | None = None,
    model: Any = None,
    view: str | None = None,
    exact: bool = False,
    nprobe: int | None = None,
    chunk_size: int = 65536,
    **query_options: Unpack[QueryKeywords],
) -> list[Hit]:
    """Top-k cosine search of a stored output, by a query text, a vector, or a stored id.

    With a fresh ANN index beside the store (`build_index`) the index proposes candidates and they are
    ranked by their exact cosines (`nprobe`: index cells visited, more for recall, fewer for speed);
    `exact=True`, no index, or a stale one (warned) scan every row.
    A store with several views searches the one named by `view`, embedding the query its way.
    A query text is embedded the store's way; a store made with a passage prompt is searched with the
    model's query prompt where it has one (`prompt_name` / `prompt` choose another); `post` is the
    post-processing the store was made with (`QueryKeywords`).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise CorpusError(f"k must be a whole number of at least 1, got {k!r}")
    opened = store if isinstance(store, Store) else open_store(store, collection=collection)
    level = level_of(opened.settings.get("level", "sentence"))
    if not level.searchable:
        raise CorpusError(
            f"{opened.path} holds {level.name.value} rows, not one vector per text; search it by occurrence "
            "(search_occurrences, or bertscope similar --in STORE --word WORD --context TEXT)"
        )
    spans = level.spans  # a hit is a span of a document: its id, number and span come back
    if spans and (item_id is not None or not opened.rules.columns):
        raise CorpusError(
            f"{opened.path}: a store of {level.name.value} is searched by a query text or vector, and "
            "written as .parquet (its rows keep each one's document and span)"
        )
    opened = with_view(opened, view)
    if item_id is not None:
        vector = opened.vector_of(str(item_id))
    elif isinstance(query, np.ndarray):
        vector = query
    elif isinstance(query, str):
        vector = _embed_query(query, view_settings(opened), model, EmbedOptions(**query_options))
    else:
        raise CorpusError("give a query text, a vector, or a stored id to search with")
    exclude = None if item_id is None else str(item_id)
    if spans:
        return _chunk_hits(TopK(vector, k, exclude=exclude), opened.path, chunk_size)
    if not exact and opened.rules.by_row:
        state = ann.index_state(opened)
        if state.fresh:
            return ann.ann_search(opened, vector, k=k, state=state, exclude=exclude, nprobe=nprobe)
        if state.status == "stale":
            warnings.warn(
                f"{state.reason}: searching every row instead; rebuild it with "
                f"`bertscope index build {opened.path}`",
                ann.IndexStaleWarning,
                stacklevel=2,
            )
    top = TopK(vector, k, exclude=exclude)
    for ids, texts, vectors in opened.chunks(chunk_size):
        top.add(ids, texts, vectors)
    return top.hits


def _chunk_hits(top: TopK, path: Path, size: int) -> list[Hit]:
    """Top chunks of a chunk store, each with its document id, chunk number and span."""
    checked = CheckedParquet(path)
    names = ["id", "position", "start", "end", "text", "embedding"]
    for batch in checked.tables([n for n in names if n in checked.file.schema_arrow.names], size):
        rows = zip(*(batch.column(n).to_pylist() for n in ("id", "position", "start", "end")), strict=True)
        keys = [json.dumps(row) for row in rows]  # a chunk's (document, number, start, end) as its key
        texts = batch.column("text").to_pylist() if "text" in batch.schema.names else [None] * len(keys)
        top.add(keys, texts, column_values(batch.column("embedding")))
    hits = []
    for hit in top.hits:
        doc, number, start, end = json.loads(hit.id)
        hits.append(Hit(doc, hit.score, hit.text, chunk=number, start=start, end=end))
    return hits


def _embed_query(query: str, settings: dict[str, Any], model: Any, asked: EmbedOptions) -> np.ndarray:
    """Embed a query with the same model, settings and post-processing the store was made with.

    Of `asked`, the post-processing (which must be the store's) and the prompt are read: the rest of the
    recipe is the store's own.
    """
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
    m = model_for(settings, model)
    _check_same_model(settings, m)
    if prompt_name is None and prompt is None:
        prompt_name = query_prompt_name(settings, m.prompts)
        prompt = None if prompt_name else settings.get("prompt", "")
    options = EmbedOptions.from_settings(settings, post=processor)
    options = replace(options, prompt_name=prompt_name, prompt=prompt)
    return np.asarray(m.embed_with([query], resolve(m, options)).vectors[0])


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


def _check_same_model(settings: dict[str, Any], model: Any) -> None:
    """Refuse a model other than the store's: its layers, width and space are not the store's."""
    made = settings.get("model")
    if made and model.info().source != made:
        raise CorpusError(
            f"this store was made with {made}; the model given is {model.info().source}: "
            "search it with the store's own model (leave -m/--model out)"
        )


def model_for(settings: dict[str, Any], model: Any = None) -> Any:
    """The model to embed queries for a store: `model` if given, else the store's own, as it ran."""
    from ..core.encoder import Encoder
    from ..core.loaders import load_model
    from ..static_model import StaticModel

    if isinstance(model, (Encoder, StaticModel)):
        return model
    if model is None:
        reloadable(settings)
    return load_model(
        model or settings.get("model_arg"),
        dtype=settings.get("dtype", "float32"),
        backend=settings.get("backend") or "auto",
        quantize=settings.get("quantize"),
    )
