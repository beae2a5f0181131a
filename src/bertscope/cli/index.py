"""The command line's `index` group: build and inspect the ANN index beside a store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from .app import JsonOpt, app, emit_json, err, out

index_app = typer.Typer(
    help="An approximate-nearest-neighbour index beside a .parquet or .npy store (for big stores).\n\n"
    "Example: `bertscope index build corpus.parquet`, then `bertscope index info corpus.parquet`.",
    no_args_is_help=True,
)
app.add_typer(index_app, name="index")

ViewOpt = Annotated[
    str | None, typer.Option("--view", help="Which view of a store with several views to index.")
]
InfoViewOpt = Annotated[
    str | None, typer.Option("--view", help="Which view's index, of a store with several views.")
]
ColumnOpt = Annotated[
    str | None, typer.Option("--column", help="Another vector column, e.g. layer_6 of a token store.")
]


@index_app.command("build")
def build(
    store: Annotated[Path, typer.Argument(help="A bertscope output: .parquet or .npy.")],
    view: ViewOpt = None,
    column: ColumnOpt = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing index.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Build STORE.index (faiss IVF), STORE.index.json and, beside a .parquet, STORE.index.npy (a copy of
    the vectors it re-ranks from); `similar` then uses it while it is fresh.

    A token store made with `--combine stack` gets one index per layer column (or name one with
    --column); `similar --word` then reads only the occurrences' vectors.

    Examples: `bertscope index build corpus.parquet`, `bertscope index build tokens.parquet`
    """
    from ..io.index import indexable
    from ..io.index_build import build_index
    from ..io.stores import open_store, with_view

    indexable(store)  # a .db is refused before a collection is asked for
    # opened with no column: a stacked token store has none of its own, and each layer column is built
    opened = with_view(open_store(store), view)
    built = []
    for name in [column] if column else _columns(opened):
        # A counter that updates in place and goes, then one summary line per index.
        with _progress(quiet) as shown:
            state = build_index(opened, column=name, overwrite=overwrite, on_chunk=shown)
        assert state.meta is not None
        built.append({"index": str(state.index), **state.meta})
        if not quiet and not as_json:
            seconds = state.meta["build_seconds"]
            err.print(
                f"{state.meta['rows']} vectors indexed in {seconds:.1f}s -> {state.index}", highlight=False
            )
    if as_json:
        emit_json(built[0] if len(built) == 1 else built)


def _columns(opened: Any) -> list[str | None]:
    """The store's own vector column (None), or each layer column of a stacked token store."""
    if not opened.rules.columns or opened.view is not None:
        return [None]
    names = opened.rules.reader.columns(opened.path)
    return [None] if "embedding" in names or not names else list(names)


@contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[int], None]]:
    """A rows-indexed counter on a terminal's stderr, cleared when done; nothing when piped or quiet."""
    if quiet or not err.is_terminal:
        yield lambda rows: None
        return
    with err.status("indexing") as status:
        yield lambda rows: status.update(f"indexed {rows} rows")


@index_app.command("info")
def info(
    store: Annotated[Path, typer.Argument(help="A bertscope output: .parquet or .npy.")],
    view: InfoViewOpt = None,
    column: ColumnOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Whether a store has an index, what it was built from, and whether it is still fresh.

    The index file is read whole and checked against its size and the CRC-32 recorded when it was built:
    a damaged or replaced one is an error naming the rebuild.

    Example: `bertscope index info corpus.parquet`
    """
    from ..io.index import index_build_command, index_state, opened_store, rebuild_index

    searched = opened_store(store, view, column)  # a .db is refused before a collection is asked for
    state = index_state(searched, check_index=True)
    # What to do about an index that is not used: build one, or rebuild a stale or damaged one.
    fix = {"missing": f"build one with `{index_build_command(searched)}`", "stale": rebuild_index(searched)}
    if as_json:
        said = {"status": state.status, "reason": state.reason, "fix": fix.get(state.status)}
        emit_json({**said, "index": str(state.index), **(state.meta or {})})
        return
    table = Table("field", "value", title=f"{state.index}: {state.status}")
    table.add_row("status", f"{state.status}: {state.reason}")
    if state.status in fix:
        table.add_row("fix", fix[state.status])
    for key, value in (state.meta or {}).items():
        table.add_row(key, str(value))
    out.print(table)
