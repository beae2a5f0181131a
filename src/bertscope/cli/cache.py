"""The cache command: list what bertscope keeps (exports, measurements) and remove it."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from .app import JsonOpt, app, emit_json, err, out


def _size(count: int) -> str:
    return f"{count / 1e6:.1f} MB" if count >= 1e5 else f"{count / 1e3:.1f} kB"


@app.command()
def cache(
    model: Annotated[
        str | None,
        typer.Argument(
            help="With --clear: only this model's files (a folder; `bundled` for the bundled one)."
        ),
    ] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the files instead of listing them.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List the ONNX exports and runtime measurements bertscope keeps, with sizes, or remove them.

    One export per model content, however many checkouts or venvs hold the model. The next load of a
    model whose files were removed exports and measures it again.

    Examples:
      bertscope cache
      bertscope cache --clear                  # every model's
      bertscope cache --clear ./my-model       # one model's
      bertscope cache --clear bundled          # the bundled model's
    """
    from ..backends.cache import cached_files, clear_cache
    from ..backends.onnx import content_digest
    from ..core.folder import BUNDLED, bundled_path, local_folder

    if model is not None and not clear:
        raise typer.BadParameter("a MODEL is taken with --clear only; `bertscope cache` lists every model")
    if clear:
        digest = None
        if model is not None:
            # "default" was this option's first name for the bundled model
            folder = bundled_path() if model in (BUNDLED, "default") else local_folder(model)
            if folder is None:
                raise typer.BadParameter(f"{model} is not a local folder; give the model's folder")
            digest = content_digest(folder)
        removed = clear_cache(digest)
        if as_json:
            emit_json({"removed": [f.to_dict() for f in removed]})
        else:
            total = sum(f.bytes for f in removed)
            err.print(f"removed {len(removed)} cached files ({_size(total)})", highlight=False)
        return
    files = cached_files()
    if as_json:
        emit_json({"files": [f.to_dict() for f in files]})
        return
    table = Table("kind", "model content", "size", "file", "model folders seen")
    for f in files:
        table.add_row(f.kind, f.digest or "", _size(f.bytes), f.path.name, "\n".join(f.folders))
    out.print(table)
    where = files[0].path.parents[1] if files else "the cache"
    err.print(f"{len(files)} files, {_size(sum(f.bytes for f in files))} in {where}", highlight=False)
