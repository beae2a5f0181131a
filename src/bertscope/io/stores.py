"""Reading stored vectors back (Parquet, NumPy, SQLite) in chunks, and searching them exactly."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError
from ..similarity import Hit, TopK
from ..spec import EmbedOptions, PostArg, resolve
from .sinks import PARQUET_META_KEY

__all__ = ["Store", "open_store", "search", "model_for"]

Chunk = tuple[list[str], list[str | None], np.ndarray]


@dataclass
class Store:
    """A finished output: its settings and a way to read (ids, texts, vectors) in chunks."""

    path: Path
    collection: str | None
    settings: dict[str, Any]

    def chunks(self, size: int = 65536) -> Iterator[Chunk]:
        """(ids, texts, vectors) of every stored row, `size` rows at a time."""
        suffix = self.path.suffix.lower()
        if suffix == ".parquet":
            yield from _parquet_chunks(self.path, size)
        elif suffix == ".npy":
            yield from _npy_chunks(self.path, size)
        else:
            from .sqlite_store import connect, iter_vectors

            db = connect(self.path)
            try:
                yield from iter_vectors(db, str(self.collection), size)
            finally:
                db.close()

    def vector_of(self, item_id: str) -> np.ndarray:
        """The stored vector of one id, or CorpusError if there is none."""
        for ids, _, vectors in self.chunks():
            if item_id in ids:
                return np.array(vectors[ids.index(item_id)])
        raise CorpusError(
            f"no id {item_id!r} in {self.path}"
            + (f" (collection {self.collection!r})" if self.collection else "")
        )


def open_store(path: str | Path, *, collection: str | None = None) -> Store:
    """Open a bertscope output for reading; SQLite needs the collection (or has exactly one)."""
    path = Path(path)
    if not path.is_file():
        what = "a folder, not a file" if path.is_dir() else "no such file"
        raise CorpusError(f"cannot read {path}: {what}")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            meta = pq.ParquetFile(path).schema_arrow.metadata or {}
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise CorpusError(f"{path} is not a readable Parquet file ({exc}); is it whole?") from None
        if PARQUET_META_KEY not in meta:
            raise CorpusError(f"{path} was not written by bertscope (no settings in its metadata)")
        return Store(path, None, json.loads(meta[PARQUET_META_KEY]))
    if suffix == ".npy":
        settings_path = path.with_suffix(".settings.json")
        labels = [path.with_suffix(".ids.txt"), path.with_suffix(".rows.jsonl")]
        if not settings_path.exists() or not any(p.exists() for p in labels):
            raise CorpusError(
                f"{path} has no {settings_path.name} / ids file beside it; was it written by bertscope?"
            )
        return Store(path, None, json.loads(settings_path.read_text()))
    if suffix in (".db", ".sqlite", ".sqlite3"):
        from .sqlite_store import list_collections

        available = {c["name"]: c for c in list_collections(path)}
        if collection is None and len(available) == 1:
            collection = next(iter(available))
        if collection not in available:
            names = ", ".join(available) or "none"
            raise CorpusError(f"{path} has no collection {collection!r}; its collections: {names}")
        return Store(path, collection, available[collection]["settings"])
    raise CorpusError(f"{path}: not a bertscope output (.parquet, .npy or .db)")


def search(
    query: str | np.ndarray | None,
    store: str | Path | Store,
    *,
    collection: str | None = None,
    k: int = 5,
    item_id: str | None = None,
    model: Any = None,
    post: PostArg = None,
    chunk_size: int = 65536,
) -> list[Hit]:
    """Exact top-k cosine search of a stored output, by a query text, a vector, or a stored id."""
    if k < 1:
        raise CorpusError(f"k must be at least 1, got {k}")
    opened = store if isinstance(store, Store) else open_store(store, collection=collection)
    level = opened.settings.get("level", "sentence")
    if level != "sentence":
        raise CorpusError(
            f"{opened.path} holds {level} rows, not one vector per text; search it by occurrence "
            "(search_occurrences, or bertscope similar --in STORE --word WORD --context TEXT)"
        )
    if item_id is not None:
        vector = opened.vector_of(str(item_id))
    elif isinstance(query, np.ndarray):
        vector = query
    elif isinstance(query, str):
        vector = _embed_query(query, opened.settings, model, post)
    else:
        raise CorpusError("give a query text, a vector, or a stored id to search with")
    top = TopK(vector, k, exclude=None if item_id is None else str(item_id))
    for ids, texts, vectors in opened.chunks(chunk_size):
        top.add(ids, texts, vectors)
    return top.hits


def _embed_query(query: str, settings: dict[str, Any], model: Any, post: PostArg = None) -> np.ndarray:
    """Embed a query with the same model, settings and post-processing the store was made with."""
    if settings.get("post") and post is None:
        kind = settings["post"].get("kind", "post-processing")
        raise CorpusError(f"this store's vectors went through {kind}; pass the same file with post= (--post)")
    if post is not None and not settings.get("post"):
        # A query moved by a post-processing the stored vectors never had ranks unrelated texts first.
        raise CorpusError(
            "this store's vectors were made without post-processing, so the query must be too; "
            "leave out post= (--post), or embed the corpus again with it"
        )

    m = model_for(settings, model)
    recipe = resolve(m, EmbedOptions.from_settings(settings, post=post))
    return np.asarray(m.embed_with([query], recipe).vectors[0])


def model_for(settings: dict[str, Any], model: Any = None) -> Any:
    """The model to embed queries for a store: `model` if given, else the store's own, as it ran."""
    from ..model import Model, load

    if isinstance(model, Model):
        return model
    return load(
        model or settings.get("model_arg"),
        dtype=settings.get("dtype", "float32"),
        backend=settings.get("backend") or "auto",
        quantize=settings.get("quantize"),
    )


def _parquet_chunks(path: Path, size: int) -> Iterator[Chunk]:
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    columns = [c for c in ("id", "text", "embedding") if c in file.schema_arrow.names]
    for batch in file.iter_batches(batch_size=size, columns=columns):
        embedding = batch.column("embedding")
        dimension = embedding.type.list_size
        vectors = embedding.values.to_numpy(zero_copy_only=False).reshape(-1, dimension)
        ids = batch.column("id").to_pylist()
        texts = batch.column("text").to_pylist() if "text" in columns else [None] * len(ids)
        yield ids, texts, vectors


def _npy_chunks(path: Path, size: int) -> Iterator[Chunk]:
    matrix = np.load(path, mmap_mode="r")
    with path.with_suffix(".ids.txt").open(newline="\n") as ids_file:
        for start in range(0, matrix.shape[0], size):
            ids = [ids_file.readline().rstrip("\n") for _ in range(min(size, matrix.shape[0] - start))]
            yield ids, [None] * len(ids), np.asarray(matrix[start : start + size])
