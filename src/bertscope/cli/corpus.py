"""The command line's corpus commands: `similar` and `collections` (embed -o runs the corpus job)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import InvalidInput
from .app import (
    JsonOpt,
    ModelOpt,
    app,
    emit_json,
    err,
    out,
)

CORPUS_SUFFIXES = (".parquet", ".npy", ".db", ".sqlite", ".sqlite3")


def run_job(
    items: list[str] | None, input_path: str | None, output: Path, *, quiet: bool, **options: Any
) -> None:
    """Run a corpus job for `bertscope embed -o FILE` and print its one-line summary."""
    from ..io.job import embed_corpus

    if items and input_path:
        raise InvalidInput("give texts as arguments or with -i/--input, not both")
    if not items and not input_path:
        raise InvalidInput("no texts given: pass them as arguments, or -i FILE (- for stdin)")
    summary = embed_corpus(
        items if items else str(input_path), output, progress=False if quiet else None, **options
    )
    if summary.truncated and not quiet:
        err.print(
            f"[yellow]warning:[/] {summary.truncated} text(s) were truncated; --long window keeps every token"
        )
    if not quiet:
        err.print(summary.line(), highlight=False)


@app.command()
def similar(
    query: Annotated[str | None, typer.Argument(help="The text to search with.")] = None,
    store: Annotated[Path, typer.Option("--in", help="A bertscope output: .db, .parquet or .npy.")] = Path(
        "-"
    ),
    collection: Annotated[
        str | None, typer.Option("--collection", "-c", help="Collection in a .db file.")
    ] = None,
    item_id: Annotated[str | None, typer.Option("--id", help="Search with a stored item's vector.")] = None,
    word: Annotated[
        str | None, typer.Option("--word", help="A token or word store: the occurrences of this word.")
    ] = None,
    context: Annotated[
        str | None, typer.Option("--context", help="With --word: rank occurrences by the sense it has here.")
    ] = None,
    k: Annotated[int, typer.Option("-k", help="How many results.")] = 5,
    post: Annotated[
        Path | None, typer.Option("--post", help="The post-processing file the store used.")
    ] = None,
    model: ModelOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Nearest stored texts by cosine (exact, in chunks: works on stores larger than memory).

    Examples: `bertscope similar "a storm hits the coast" --in docs.db --collection news -k 5`,
    `bertscope similar --id 42 --in corpus.parquet -k 5`,
    `bertscope similar --in tokens.parquet --word bank --context "we sat on the bank of the river" -k 10`
    (a store made with `embed --tokens` or `--words`; `--word bank` alone lists its occurrences)
    """
    from ..io.stores import search

    if str(store) == "-":
        raise InvalidInput("name the store to search with --in FILE (.db, .parquet or .npy)")
    if word is not None or context is not None:
        if word is None or query is not None or item_id is not None:
            raise InvalidInput("--context goes with --word (and no query text or --id)")
        _occurrences(store, word, context, k, model, as_json)
        return
    if (query is None) == (item_id is None):
        raise InvalidInput("give either a query text or --id ID (or --word WORD for a token store)")
    hits = search(query, store, collection=collection, k=k, item_id=item_id, model=model, post=post)
    if as_json:
        emit_json([h.to_dict() for h in hits])
        return
    table = Table("rank", "id", "cosine", "text", title=f"nearest to {query or 'id ' + str(item_id)!r}")
    for rank, hit in enumerate(hits, 1):
        table.add_row(str(rank), hit.id, f"{hit.score:.4f}", hit.text or "")
    out.print(table)


def _occurrences(
    store: Path, word: str, context: str | None, k: int, model: str | None, as_json: bool
) -> None:
    from ..io.occurrences import search_occurrences

    found = search_occurrences(store, word=word, context=context, k=k, model=model)
    if as_json:
        emit_json(
            {
                "word": word,
                "context": context,
                "total": found.total,
                "hits": [h.__dict__ for h in found.hits],
            }
        )
        return
    what = f"{word!r} nearest to its use in {context!r}" if context else f"occurrences of {word!r}"
    table = Table("rank", "id", "span", "cosine", "snippet", title=f"{what} ({found.total} in the store)")
    for rank, hit in enumerate(found.hits, 1):
        score = "" if hit.score is None else f"{hit.score:.4f}"
        table.add_row(str(rank), hit.id, f"{hit.start}-{hit.end}", score, escape(hit.snippet))
    out.print(table)


@app.command()
def collections(
    store: Annotated[Path, typer.Argument(help="An SQLite store written by bertscope.")],
    as_json: JsonOpt = False,
) -> None:
    """What an SQLite store holds: collections with their model, settings, size and date.

    Example: `bertscope collections docs.db`
    """
    from ..io.sqlite_store import list_collections

    found = list_collections(store)
    if as_json:
        emit_json(found)
        return
    table = Table("name", "texts", "dim", "model", "settings", "created", title=str(store))
    for c in found:
        settings = ", ".join(f"{k}={v}" for k, v in c["settings"].items() if k not in ("model", "model_arg"))
        table.add_row(c["name"], str(c["count"]), str(c["dimension"]), c["model"], settings, c["created"])
    out.print(table)
