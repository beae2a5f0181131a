"""An SQLite store read back: its collections listed, and one collection's vectors (`SqliteReader`)."""

from __future__ import annotations

import json
import shlex
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..core.text_files import not_a_file
from ..errors import CorpusError
from .checksums import rebuild_hint, unsealed
from .sqlite_rows import iter_vectors
from .sqlite_schema import connect_read

__all__ = ["REPLACING", "SqliteReader", "list_collections", "replacement_of"]


# The name an --overwrite job writes a collection's replacement under, before the collection's own name
# (`replacement_of`): it takes the old collection's place only once whole, so a job that fails leaves the old
# one as it was. Readers list no collection under such a name.
REPLACING = "\x1freplacing "


def replacement_of(collection: str) -> str:
    """The name under which an --overwrite job writes the replacement of `collection` (`REPLACING`)."""
    return REPLACING + collection


def list_collections(path: str | Path) -> list[dict[str, Any]]:
    """Each collection's name, model, settings, dimension, created time and texts (`n_texts`; `count`,
    its older name, holds the same number). The model is the one its settings record (sealed by their
    digest, which `verify` checks), not the `model` column beside them, which no checksum covers (an edit
    there would be listed as is); a collection whose settings record none lists the column's."""
    found = _collections(path)
    for listed in found:  # the settings as they were made; their digest is the store's own business
        listed["settings"] = unsealed(listed["settings"])[0]
        model = listed["settings"].get("model")
        if isinstance(model, str):
            listed["model"] = model
    return found


def _collections(path: str | Path) -> list[dict[str, Any]]:
    """`list_collections` with each collection's settings as stored (their digest included)."""
    if not Path(path).is_file():
        raise CorpusError(f"cannot read {path}: {not_a_file(path)}")
    db = connect_read(path)
    try:
        rows = db.execute(
            "SELECT c.name, c.model, c.settings, c.dimension, c.created, "
            "(SELECT COUNT(*) FROM embeddings e WHERE e.collection = c.name) "
            "FROM collections c ORDER BY c.name"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise CorpusError(
            f"{path} cannot be read ({exc}): the file is corrupt; {rebuild_hint(path)}"
        ) from None
    finally:
        db.close()
    keys = ("name", "model", "settings", "dimension", "created", "n_texts")
    found = [
        dict(zip(keys, (*r[:2], _settings(r[2], r[0], path), *r[3:]), strict=True))
        for r in rows
        if not str(r[0]).startswith(REPLACING)  # an --overwrite job's collection on its way
    ]
    for listed in found:
        listed["count"] = listed["n_texts"]  # its older name, still read
    return found


def _settings(raw: Any, collection: str, path: str | Path) -> dict[str, Any]:
    """A collection's stored settings: a JSON object, or CorpusError naming the collection."""
    try:
        settings = json.loads(raw)
    except (TypeError, ValueError):
        settings = None
    if not isinstance(settings, dict):
        raise CorpusError(
            f"collection {collection!r} in {path} keeps settings that are not a JSON object: the store is "
            f"damaged; {rebuild_hint(path, collection)}"
        )
    return settings


def _no_collections(path: str | Path) -> str:
    """The refusal of a store that lists no collection: nothing stored in it, or rows whose collections
    were deleted from under them (damaged)."""
    db = connect_read(path)
    try:
        (rows,) = db.execute("SELECT COUNT(*) FROM embeddings").fetchone()
    except sqlite3.DatabaseError:
        rows = 0
    finally:
        db.close()
    if rows:
        return (
            f"{path} has no collections, though it holds {rows} rows: its `collections` table was emptied "
            f"after they were written, so nothing says how they were made; the store is damaged; "
            f"{rebuild_hint(path)}"
        )
    return (
        f"{path} has no collections: nothing was stored in it; embed into it with `bertscope embed -o {path}`"
    )


class SqliteReader:
    """An SQLite store read back: one collection's settings and (ids, texts, vectors) in rowid order."""

    def open(self, path: Path, collection: str | None) -> tuple[str | None, dict[str, Any]]:
        """(collection, its settings as stored); the collection may be left out when the file holds
        exactly one."""
        available = {c["name"]: c for c in _collections(path)}
        if collection is None and len(available) == 1:
            collection = next(iter(available))
        if collection is None and len(available) > 1:
            # The keyword with its flag beside it: the CLI's wording layer keeps the flag alone.
            first = next(iter(available))
            raise CorpusError(
                f"{path} holds {len(available)} collections ({', '.join(available)}): name one with "
                f"collection={first!r} (--collection {shlex.quote(first)})"
            )
        if not available:
            raise CorpusError(_no_collections(path))
        if collection not in available:
            names = ", ".join(available)
            raise CorpusError(f"{path} has no collection {collection!r}; its collections: {names}")
        return collection, available[collection]["settings"]

    def chunks(
        self, path: Path, collection: str | None, column: str, size: int
    ) -> Iterator[tuple[list[str], list[str | None], np.ndarray]]:
        """(ids, texts, vectors) of the collection, `size` rows at a time."""
        db = connect_read(path)
        try:
            yield from iter_vectors(db, str(collection), size, path=path)
        finally:
            db.close()

    def count(self, path: Path, collection: str | None) -> int:
        """The collection's rows, counted by SQLite (reading them decoded every vector: hundreds of MB)."""
        db = connect_read(path)
        try:
            found = db.execute("SELECT COUNT(*) FROM embeddings WHERE collection = ?", (str(collection),))
            return int(found.fetchone()[0])
        finally:
            db.close()

    def take(
        self, path: Path, rows: np.ndarray, column: str | None
    ) -> tuple[list[str], list[str | None], np.ndarray]:
        """Not offered: rows have no fixed numbers in a collection (the format table says so)."""
        raise CorpusError(f"{path}: an SQLite collection is not read by row number")

    def columns(self, path: Path) -> list[str]:
        """One vector per text, in one column."""
        return ["embedding"]
