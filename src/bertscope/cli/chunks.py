"""Chunk options of `bertscope embed` and how chunk vectors print (the chunk store is a corpus job)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from .app import cuts_said_here, emit_json, out, warn

ChunksOpt = Annotated[
    str | None,
    typer.Option("--chunks", help="One vector per chunk: sentence, paragraph or tokens (see --chunk-size)."),
]
LateOpt = Annotated[
    bool,
    typer.Option(
        "--late/--naive",
        help="Late chunking (the whole document once, token vectors pooled per chunk) or each chunk alone.",
    ),
]
ChunkSizeOpt = Annotated[
    int,
    typer.Option(
        "--chunk-size",
        help="Word pieces per chunk (--chunks tokens); the pieces of one character (a Hangul syllable an "
        "uncased tokenizer splits) count as one.",
    ),
]
ChunkOverlapOpt = Annotated[
    int, typer.Option("--chunk-overlap", help="Word pieces neighbouring token chunks share.")
]


def print_chunks(
    model: Any, docs: list[str], *, ids: list[str] | None = None, as_json: bool, **options: Any
) -> dict[str, Any] | None:
    """Embed each document's chunks and print them: a table per document, or JSON (each document's dict
    with its `id`: a line number, or the --id-field value). The spec the tables share is returned for
    the caller's `spec:` line (None after JSON, which holds it)."""
    ids = ids if ids is not None else [str(number) for number in range(1, len(docs) + 1)]
    with cuts_said_here():  # said once below, in the command line's words
        results = model.embed_chunks(docs, **options)
    truncated = sum(int((r.n_dropped > 0).sum()) for r in results)
    if truncated:
        warn(
            f"{truncated} chunk(s) longer than {model.max_tokens} tokens were truncated "
            "(embedded alone with --naive); --late or --long window keeps every token"
        )
    if as_json:
        emit_json([{**r.to_dict(), "id": id_} for r, id_ in zip(results, ids, strict=True)])
        return None
    for id_, r in zip(ids, results, strict=True):
        # titled by the id --json gives it (its line, or the --id-field value), not by its place
        table = Table("chunk", "start", "end", "tokens", "text", "vector", title=f"document {id_}")
        for i, ((s, e), chunk, n, vec) in enumerate(
            zip(r.spans, r.chunks, r.n_tokens, r.vectors, strict=True)
        ):
            preview = " ".join(f"{v:+.3f}" for v in vec[:4])
            short = chunk if len(chunk) <= 60 else chunk[:59] + "…"
            table.add_row(str(i), str(s), str(e), str(n), short, f"[{preview} ...]")
        out.print(table)
    return dict(results[0].spec)
