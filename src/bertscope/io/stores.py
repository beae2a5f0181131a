"""Reading stored vectors back (Parquet, NumPy, SQLite) in chunks; `io.search` searches them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError
from .checksums import proven_settings, rebuild_hint, unsealed
from .formats import Format, FormatRules, refuse_collection, store_rules, suffixes_where
from .parquet_sink import view_column
from .sqlite_store import JOB_KEY
from .vector_files import Chunk

__all__ = ["Store", "open_store", "with_view", "view_settings"]


@dataclass
class Store:
    """A finished output: its settings and a way to read (ids, texts, vectors) in chunks."""

    path: Path
    collection: str | None
    settings: dict[str, Any]
    # Which vector column is read: "embedding", or one view's column of a store with several views.
    column: str = "embedding"
    view: str | None = None
    # Whether the settings match the digest stored with them: None where the store records none (written
    # before stores carried one); False where they were changed since (`checksums.unsealed`), which
    # `open_store` refuses: only a Store made by hand carries False.
    settings_match: bool | None = None

    @property
    def rules(self) -> FormatRules:
        """What the store's format is and can do (formats.py)."""
        return store_rules(self.path)

    @property
    def read_column(self) -> str:
        """The vector column read: `column`, or on a store of views opened with none named, its one view's
        (several: CorpusError naming them, where the missing `embedding` column read as damage)."""
        if self.view is None and self.column == "embedding" and self.settings.get("views"):
            return with_view(self, None).column
        return self.column

    def chunks(self, size: int = 65536) -> Iterator[Chunk]:
        """(ids, texts, vectors (rows, d)) of every stored row, `size` rows at a time."""
        yield from self.rules.reader.chunks(self.path, self.collection, self.read_column, size)

    def count(self) -> int:
        """How many rows the store holds (from metadata for .parquet and .npy)."""
        return self.rules.reader.count(self.path, self.collection)

    def take(self, rows: np.ndarray, *, vectors: bool = True) -> Chunk:
        """(ids, texts, vectors (len(rows), d)) of the given 0-based row numbers, in that order.

        `vectors=False` reads ids and texts only (vectors come back as an empty (0, 0) array).
        """
        rules = self.rules
        if not rules.by_row:
            where = suffixes_where(lambda r: r.by_row)
            raise CorpusError(f"{self.path}: reading rows by number works on {where} stores only")
        rows = np.asarray(rows, dtype=np.int64)
        return rules.reader.take(self.path, rows, self.read_column if vectors else None)

    def vector_of(self, item_id: str, *, size: int = 65536) -> np.ndarray:
        """The stored vector of one id, or CorpusError if there is none; read `size` rows at a time."""
        for ids, _, vectors in self.chunks(size):
            if item_id in ids:
                return np.array(vectors[ids.index(item_id)])
        raise CorpusError(
            f"no id {item_id!r} in {self.path}"
            + (f" (collection {self.collection!r})" if self.collection else "")
        )


def open_store(path: str | Path, *, collection: str | None = None) -> Store:
    """Open a bertscope output for reading; SQLite needs the collection (or has exactly one), another
    store refuses one. Its settings come without their digest; `settings_match` says whether they match it
    (None: written before settings were sealed). Settings that no longer match it (edited) are refused in
    one line (`checksums.proven_settings`), as `verify --store` says: nothing answers from them."""
    path = Path(path)
    if not path.is_file():
        what = "a folder, not a file" if path.is_dir() else _unfinished(path) or "no such file"
        raise CorpusError(f"cannot read {path}: {what}")
    refuse_collection(path, collection)
    rules = store_rules(path)
    found, stored = rules.reader.open(path, collection)
    settings, match = unsealed(
        proven_settings(stored, _settings_where(path, found, rules), rebuild_hint(path, found))
    )
    if rules.format is Format.SQLITE and JOB_KEY in settings:
        raise CorpusError(f"cannot read {path}: {_unfinished_collection(path, str(found), rules)}")
    return Store(path, found, settings, settings_match=match)


def _settings_where(path: Path, collection: str | None, rules: FormatRules) -> str:
    """Where a store keeps its settings, for messages: its collection, or the file beside a .npy."""
    if collection:
        return f"collection {collection!r} in {path}"
    if rules.format is Format.NPY:
        return f"{path} ({path.with_suffix('.settings.json').name})"
    return str(path)


def _unfinished(path: Path) -> str | None:
    """What a job that has not finished `path` left beside it (its lock while it runs, its parts), said
    with what to do; None where it left nothing."""
    from .job_lock import running_job

    parts = path.with_name(path.name + ".parts")
    if (holder := running_job(path)) is not None:
        return (
            f"a job is writing it ({holder}) and has not finished; wait until it has (a job that was "
            "stopped: run it again with --resume)"
        )
    if parts.is_dir():
        return (
            f"its job stopped before it finished ({parts.name} holds what it wrote); run it again with "
            "--resume to finish it first"
        )
    return None


def _unfinished_collection(path: Path, collection: str, rules: FormatRules) -> str:
    """What a collection whose settings say its job has not finished (`sqlite_store.JOB_KEY`) is, said as
    `_unfinished` says it of a Parquet or .npy job: a job writing it now (its lock), or one that stopped."""
    from .job_lock import running_job

    if (holder := running_job(path, collection=collection)) is not None:
        return (
            f"a job is writing collection {collection!r} ({holder}) and has not finished; wait until it has "
            "(a job that was stopped: run it again with --resume)"
        )
    count = rules.reader.count(path, collection)
    return (
        f"its job stopped before it finished (collection {collection!r} holds the {count} texts it wrote); "
        "run it again with --resume to finish it first"
    )


def with_view(store: Store, view: str | None) -> Store:
    """The store reading one view's column; a store with several views needs one named."""
    views = store.settings.get("views")
    if not views:
        if view is not None:
            raise CorpusError(f"{store.path} holds one vector per text and no views; leave view= out")
        return store
    if view is None and len(views) == 1:
        view = next(iter(views))
    if view is None or view not in views:
        asked = "no view was named" if view is None else f"it has no view {view!r}"
        raise CorpusError(f"{store.path} holds the views {', '.join(views)}; {asked}: pick one with view=")
    return replace(store, column=view_column(view), view=view)


def view_settings(store: Store) -> dict[str, Any]:
    """The settings one column was made with: the store's, with its view's spec in place."""
    settings = {k: v for k, v in store.settings.items() if k != "views"}
    if store.view is not None:
        settings.update(store.settings["views"][store.view])
    return settings
