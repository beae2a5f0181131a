"""The command line's `senses`: a word's occurrences in a token or word store, clustered into senses."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from .app import JsonOpt, app, emit_json, err, old_spelling, out, warn
from .pictures import METHODS, OverwriteOpt, picture_output
from .typer_setup import missing_argument


@app.command()
def senses(
    word: Annotated[str, typer.Argument(help="The word whose senses to find.")],
    store: Annotated[
        Path | None,
        typer.Option(
            "--store", help="A token or word store (.parquet from embed --tokens or --level words)."
        ),
    ] = None,
    # --in: --store's old name, still read, not shown (as similar's)
    old_in: Annotated[Path | None, typer.Option("--in", hidden=True)] = None,
    n_clusters: Annotated[
        int | None,
        typer.Option("--n-clusters", "-n", help="How many senses (default: best silhouette of 2..8)."),
    ] = None,
    # -k: --n-clusters' old name, still read, not shown (-k/--top-k counts results everywhere else)
    old_k: Annotated[int | None, typer.Option("-k", hidden=True)] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Draw the occurrences to this PNG.")
    ] = None,
    overwrite: OverwriteOpt = False,
    method: Annotated[str, typer.Option("--method", help=f"2-D layout of the picture: {METHODS}")] = "pca",
    examples: Annotated[int, typer.Option("--examples", min=0, help="Central examples shown per sense.")] = 3,
    limit: Annotated[
        int, typer.Option("--limit", min=3, help="Cluster at most this many occurrences (at least 3).")
    ] = 2000,
    layer: Annotated[
        int | None,
        typer.Option("--layer", help="One layer of a stacked store (embed --combine stack); default: all."),
    ] = None,
    seed: Annotated[
        int,
        typer.Option("--seed", help="Seed of the clustering (k-means' starts) and of the picture's layout."),
    ] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Cluster a word's occurrences into senses; print each sense's size and most central examples.

    Examples: `bertscope senses bank --store tokens.parquet -o senses.png` (--n-clusters chosen by
    silhouette over 2..8, or given: `-n 2`), `bertscope senses bank --store stacked.parquet --layer 6`
    (one layer of a store made with --combine stack)
    """
    from ..research.plots import Projection
    from ..research.senses import word_senses

    store = old_spelling(store, old_in, name="--store", old="--in")
    n_clusters = old_spelling(n_clusters, old_k, name="--n-clusters", old="-k")
    if store is None:
        raise missing_argument(
            "name the token or word store with --store FILE (.parquet from embed --tokens)"
        )
    how = Projection.parse(method, what="projection")
    picture = picture_output(output, overwrite=overwrite)
    found = word_senses(
        store, word, n_clusters=n_clusters, examples=examples, limit=limit, layer=layer, seed=seed
    )
    if picture is not None:
        from ..research.plots import plot_senses

        plot_senses(found, picture, method=how, seed=seed, overwrite=overwrite)
        err.print(f"wrote {output}", highlight=False)
    if found.capped:
        warn(
            f"the word occurs more than {limit} times; clustered the first {limit} only (--limit)",
            label="note:",
        )
    if found.note:  # the silhouette search's limits, in the flags' words
        warn(found.note.replace("or n_clusters", "or --n-clusters"), label="note:", style="cyan")
    if as_json:
        emit_json({**found.to_dict(), "picture": str(output) if output else None})
        return
    # `score`, the examples' name in the library and --json (docs/names.md): their cosine to the centroid
    table = Table(
        "sense", "size", "score", "central examples", title=f"senses of {word!r}: {found.criterion}"
    )
    for sense in found.senses:
        if not sense.examples:  # --examples 0: each sense's size still shown
            table.add_row(str(sense.sense), str(sense.size), "", "")
        for rank, example in enumerate(sense.examples):
            first = rank == 0
            table.add_row(
                str(sense.sense) if first else "",
                str(sense.size) if first else "",
                f"{example.score:.3f}",
                f"{example.id}: {example.snippet}",
            )
    out.print(table)
    if found.silhouettes:
        scores = "  ".join(f"{n}: {v:.3f}" for n, v in found.silhouettes.items())
        out.print(f"silhouette (cosine) per n_clusters: {scores}", highlight=False)
