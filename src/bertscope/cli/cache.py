"""The cache command: what bertscope keeps (exports, measurements) per model, with sizes; or remove it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ..errors import InvalidInput
from .app import JsonOpt, app, emit_json, err, out
from .typer_setup import warn

if TYPE_CHECKING:
    from ..backends.cache import CachedFile, CachedModel

# The summary's length: the largest models, then a line saying how many more --all lists.
SHOWN = 20


def _size(count: int) -> str:
    return f"{count / 1e6:.1f} MB" if count >= 1e5 else f"{count / 1e3:.1f} kB"


@app.command()
def cache(
    model: Annotated[
        str | None,
        typer.Argument(
            metavar="MODEL", help="Only this model's files: its folder, or `bundled` for the bundled one."
        ),
    ] = None,
    every: Annotated[
        bool,
        typer.Option("--all", help=f"List every model and each of its files (default: the {SHOWN} largest)."),
    ] = False,
    clear: Annotated[
        bool,
        typer.Option("--clear", help="Remove the files (every model's, or MODEL's) instead of listing them."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """What bertscope keeps per model (ONNX exports, OpenVINO models, runtime measurements), largest first,
    with sizes and the model folders seen; or remove it.

    One line per model content (the same model in two checkouts or venvs is one content, one export),
    the 20 largest; --all lists every model with each file and every folder seen, MODEL only that model's.
    The next load of a model whose files were removed exports and measures it again.

    Examples: `bertscope cache` (the 20 largest models, and the total), `bertscope cache --all` (every
    model, every file), `bertscope cache ./my-model` (one model's files), `bertscope cache bundled --json`,
    `bertscope cache --clear` (every model's), `bertscope cache --clear ./my-model` (one model's)
    """
    from ..backends.cache import by_model, cached_files, clear_cache
    from ..backends.recorded import cache_root

    if every and (clear or model is not None):
        what = (
            "--clear removes every model's files without it" if clear else f"{model}'s files are all listed"
        )
        raise InvalidInput(f"--all lists every model; {what}: drop --all")
    digest = None if model is None else _digest(model, clear=clear)
    if clear:
        removed = clear_cache(digest)
        if as_json:
            emit_json({"removed": [f.to_dict() for f in removed]})
        else:
            size = _size(sum(f.bytes for f in removed))
            err.print(f"removed {_count(len(removed), 'cached file')} ({size})", highlight=False)
            if digest is None:
                _print_left(cached_files())
        return
    files = [f for f in cached_files() if digest is None or f.digest == digest]
    models = by_model(files)
    if as_json:
        emit_json({"files": [f.to_dict() for f in files], "models": [m.to_dict() for m in models]})
        return
    root = cache_root()
    if not models:
        whose = "" if model is None else f" of {model} (content {digest})"
        err.print(f"no cached files{whose} in {root}", highlight=False)
        return
    _print(models, root, every=every or model is not None)


def _print_left(files: list[CachedFile]) -> None:
    """On stderr, what --clear left of what killed writers leave, and why: a process may be writing it."""
    from ..backends.cache import STAGED_AGE_S, UNFINISHED_FILE, UNFINISHED_FOLDER

    # an unfinished folder stays while its writer's lock file is held; a staged file while it is recent,
    # as some are written outside any lock
    why = {
        UNFINISHED_FOLDER: "that a running process is writing",
        UNFINISHED_FILE: f"staged less than {STAGED_AGE_S / 60:.0f} minutes ago, that a running process may "
        "be writing",
    }
    for kind, reason in why.items():
        if left := [f for f in files if f.kind == kind]:
            size = _size(sum(f.bytes for f in left))
            err.print(f"left {_count(len(left), kind)} ({size}) {reason}", highlight=False)


def _print(models: list[CachedModel], root: Path, *, every: bool) -> None:
    """The summary (the largest models, a line per model content) or every file of every model; the
    total, and how many models the summary left out, on stderr."""
    if every:
        for m in models:
            _print_files(m)
    else:
        out.print(_summary_table(models[:SHOWN]))
    files = sum(len(m.files) for m in models)
    size = _size(sum(m.bytes for m in models))
    named = sum(m.digest is not None for m in models)  # the "(none)" group is files of no model
    err.print(f"{_count(files, 'file')} of {_count(named, 'model')}, {size} in {root}", highlight=False)
    if not every and len(models) > SHOWN:
        rest = models[SHOWN:]
        left = _size(sum(m.bytes for m in rest))
        err.print(f"... and {len(rest)} more ({left}); --all lists every one", highlight=False)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _digest(model: str, *, clear: bool = False) -> str:
    """The content digest of the model `model` names: a folder, or `bundled` (with `clear`, refused where a
    folder of that name is here too: which files go is not for cache to guess)."""
    from ..backends.digest import content_digest
    from ..core.folder import BUNDLED, bundled_path, looks_like_hub_id

    # load's message (local_folder's) offers leaving the model out for the bundled one: here that means
    # every model, so cache says its own
    fix = "give the model's folder, `bundled` for the bundled model, or no MODEL for every model's files"
    path = Path(model).expanduser()
    if model in (BUNDLED, "default"):  # "default": this argument's first name for the bundled model
        if clear:
            _refuse_both(model)
        else:
            _note_both(model)
        folder = bundled_path()
    elif path.is_dir():
        folder = path
    elif path.is_file():
        raise InvalidInput(f"{model} is a file, not a model folder; {fix}")
    elif not looks_like_hub_id(model):
        raise InvalidInput(f"no model folder at {model}: the path does not exist; {fix}")
    else:  # the cache knows a model by its folder's content, not its hub id
        raise typer.BadParameter(f"{model} is not a local folder; {fix}")
    if not (folder / "config.json").is_file():
        # its digest would be of whatever the folder holds (of nothing, for an empty one): no model's files
        raise InvalidInput(f"{model} holds no config.json, so it is no model folder; {fix}")
    return content_digest(folder)


def _note_both(word: str) -> None:
    """Say, where a model folder named `word` is here too, that `word` lists the bundled model (as `-m
    bundled` names it wherever a model is named) and how to name the folder."""
    if (Path(word) / "config.json").is_file():
        warn(
            f"`{word}` names the bundled model, listed here; ./{word} here is a model folder too: give "
            f"`./{word}` for its files",
            label="note:",
        )


def _refuse_both(word: str) -> None:
    """Refuse `word` (`bundled`, `default`) with --clear where a model folder of that name is here too:
    which model's files --clear removes is not for cache to guess (a listing only says so)."""
    if not (Path(word) / "config.json").is_file():
        return
    other = "default" if word == "bundled" else "bundled"
    bundled = f"`{other}`" if not (Path(other) / "config.json").is_file() else "run it from another folder"
    raise InvalidInput(
        f"`{word}` names the bundled model, and ./{word} here is a model folder too: give `./{word}` for the "
        f"folder, {bundled} for the bundled model"
    )


def _seen(folders: tuple[str, ...]) -> str:
    """One folder seen with a model (one that still exists, if any), and how many more."""
    if not folders:
        return "-"
    shown = next((f for f in folders if Path(f).is_dir()), folders[0])
    return shown if len(folders) == 1 else f"{shown} (+{len(folders) - 1} more)"


def _summary_table(models: list[CachedModel]) -> Table:
    """One row per model content: its size, what it holds, and a folder seen with it."""
    table = Table("model content", "family", "size", "holds", "model folders seen")
    for m in models:
        table.add_row(m.digest or "(none)", m.family or "-", _size(m.bytes), m.holds(), _seen(m.folders))
    return table


def _print_files(m: CachedModel) -> None:
    """One model's files (a table titled with its content, size and what it holds), then every model
    folder seen with that content, one a line."""
    title = f"{m.digest or '(no content named)'} ({m.family or '-'}): {_size(m.bytes)}, {m.holds()}"
    table = Table("kind", "size", "file", title=title, title_justify="left")
    for f in m.files:
        table.add_row(f.kind, _size(f.bytes), f.path.name)
    out.print(table)
    out.print(f"model folders seen ({len(m.folders)}):" if m.folders else "model folders seen: none")
    for folder in m.folders:
        gone = "" if Path(folder).is_dir() else " (gone)"
        out.print(f"  {folder}{gone}", highlight=False, soft_wrap=True)
