"""The command line's corpus commands: `similar` and `collections` (embed -o runs the corpus job)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from ..errors import InvalidInput
from .app import (
    JsonOpt,
    ModelOpt,
    PromptNameOpt,
    PromptOpt,
    ThreadsOpt,
    app,
    emit_json,
    err,
    old_spelling,
    out,
    top_k_option,
    warn,
)
from .embed_printed import check_text_source, say_job_cut, short_text
from .typer_setup import missing_argument

if TYPE_CHECKING:
    from ..io.level_table import CorpusOptions

# How the query's model runs; each left out is the store's own (as it was made), not a fixed default.
_StoreDevice = Annotated[str | None, typer.Option("--device", help="auto, cpu, cuda or cuda:N.")]
_StoreDtype = Annotated[
    str | None, typer.Option("--dtype", help="float32, bfloat16, float16 (default: the store's).")
]
_StoreBackend = Annotated[
    str | None, typer.Option("--backend", help="torch, onnxruntime, openvino (default: the store's).")
]
_StoreQuantize = Annotated[
    str | None,
    typer.Option("--quantize", help="none, int8, int8_fused or int8_static (default: the store's)."),
]


@dataclass(frozen=True)
class CorpusJob:
    """How `bertscope embed -o FILE` reads its corpus and runs the job (what it embeds: `CorpusOptions`)."""

    text_field: str = "text"
    id_field: str | None = None
    collection: str | None = None
    resume: bool = False
    overwrite: bool = False
    skip_bad: bool = False
    batch_size: int = 1024
    views: list[str] | None = None


def run_job(
    items: list[str] | None,
    input_path: str | None,
    output: Path,
    *,
    model: Any,
    options: CorpusOptions,
    job: CorpusJob,
    quiet: bool,
    index: bool = False,
) -> None:
    """Run a corpus job for `bertscope embed -o FILE` (and `--index`) and print its one-line summary."""
    from ..io.job import embed_corpus

    check_text_source(items, input_path)
    summary = embed_corpus(
        items if items else str(input_path), output, model=model, options=options,
        progress=False if quiet else None, **asdict(job),
    )  # fmt: skip
    if not quiet:
        say_job_cut(summary.n_truncated, summary.embedded, model.max_tokens)
        err.print(summary.line(), highlight=False)
    if index:
        from ..io.index_build import build_index
        from ..io.stores import open_store, with_view

        opened = open_store(output)
        for name in opened.settings.get("views") or [None]:
            state = build_index(with_view(opened, name), overwrite=True)
            if not quiet and state.meta is not None:
                err.print(f"{state.meta['rows']} vectors indexed -> {state.index}", highlight=False)


@app.command()
def similar(
    query: Annotated[str | None, typer.Argument(help="The text to search with.")] = None,
    store: Annotated[
        Path | None, typer.Option("--store", help="The store to search: a bertscope .db, .parquet or .npy.")
    ] = None,
    # --in: --store's old name, still read, not shown (verify --store, serve --store and the library's
    # and the service's `store` name the same file)
    old_in: Annotated[Path | None, typer.Option("--in", hidden=True)] = None,
    collection: Annotated[
        str | None, typer.Option("--collection", "-c", help="Collection in a .db file.")
    ] = None,
    item_id: Annotated[str | None, typer.Option("--id", help="Search with a stored item's vector.")] = None,
    word: Annotated[
        str | None, typer.Option("--word", help="A token or word store: the occurrences of this word.")
    ] = None,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            help="With --word: rank occurrences by the sense it has here (its first use, if used twice).",
        ),
    ] = None,
    k: Annotated[int, top_k_option("How many results (texts, or a word's occurrences).", least=1)] = 5,
    post: Annotated[
        Path | None, typer.Option("--post", help="The post-processing file the store used.")
    ] = None,
    view: Annotated[
        str | None, typer.Option("--view", help="Which view of a store with several views to search.")
    ] = None,
    exact: Annotated[
        bool, typer.Option("--exact", help="Scan every row even when the store has an ANN index.")
    ] = False,
    nprobe: Annotated[
        int | None, typer.Option("--nprobe", min=1, help="Index cells to visit (default: the index's).")
    ] = None,
    threshold_file: Annotated[
        Path | None,
        typer.Option("--threshold-file", help="Keep hits at or above a `bertscope calibrate` threshold."),
    ] = None,
    prompt_name: PromptNameOpt = None,
    prompt: PromptOpt = None,
    model: ModelOpt = None,
    device: _StoreDevice = None,
    dtype: _StoreDtype = None,
    backend: _StoreBackend = None,
    quantize: _StoreQuantize = None,
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Nearest stored texts by cosine: exact, in chunks (stores larger than memory), or through the
    store's ANN index when it has a fresh one (`bertscope index build`), re-ranked by exact cosine.

    The query is embedded the store's way; a store made with a passage prompt is searched with the
    model's query prompt (--prompt-name/--prompt choose another).

    Examples: `bertscope similar "a storm hits the coast" --store docs.db --collection news -k 5`,
    `bertscope similar "how many people live there?" --store chunks.parquet` (a chunk store: each hit
    with its document, chunk number and span),
    `bertscope similar --id 42 --store corpus.parquet -k 5`,
    `bertscope similar "a storm" --store corpus.parquet --view cls4 --exact`,
    `bertscope similar --store tokens.parquet --word bank --context "we sat on the bank of the river" -k 10`
    (a store made with `embed --tokens` or `--level words`; `--word bank` alone lists its occurrences)
    """
    import warnings

    from ..io.search import search

    store = old_spelling(store, old_in, name="--store", old="--in")
    if store is None:
        raise missing_argument("name the store to search with --store FILE (.db, .parquet or .npy)")
    if query == "-":  # '-' is stdin to every other command: searched as a text, it would find noise
        raise InvalidInput(
            "similar searches with one query text, its argument, and reads no stdin ('-'): give the text "
            f'in quotes (bertscope similar "a storm hits the coast" --store {store})'
        )
    if exact and nprobe is not None:
        raise InvalidInput(
            "--nprobe is how many cells of the ANN index to visit, and --exact reads every row without "
            "the index: give one or the other"
        )
    if store.is_dir() or store.name.startswith("part-"):
        # the shard is named under the flag typed
        ray_shards(store, option="--in" if old_in is not None else "--store", command="similar")
    from ..io.formats import refuse_collection

    refuse_collection(store, collection)  # before the model loads: open_store's own check
    run = {"device": device, "dtype": dtype, "backend": backend, "quantize": quantize, "threads": threads}
    running = [f"--{name}" for name, value in run.items() if value is not None]
    running = (["-m/--model"] if model is not None else []) + running
    if word is not None or context is not None:
        if word is None:
            raise InvalidInput("--context goes with --word WORD: name the word it uses")
        if query is not None or item_id is not None:
            given = "a query text" if query is not None else "--id"
            raise InvalidInput(
                f"--word searches a word's occurrences and {given} searches whole texts: give one or the "
                "other"
            )
        if nprobe is not None:  # occurrences are read by their rows, every cosine exact: no cells to visit
            raise InvalidInput(
                "--nprobe is how many cells of the ANN index a query text visits, and --word reads the "
                "word's own rows with exact cosines: leave --nprobe out"
            )
        _refuse_unread_by_word(
            context, running, view=view, post=post, threshold_file=threshold_file, prompt=prompt,
            prompt_name=prompt_name,
        )  # fmt: skip
        if any(value is not None for value in run.values()):
            model = _store_model(store, collection, model, run, occurrences=True)
        _occurrences(store, word, context, k, model, as_json, exact=exact)
        return
    if item_id is not None and running:
        raise InvalidInput(
            f"--id searches with the stored vector of {item_id!r}, so no model runs: "
            f"drop {', '.join(running)}"
        )
    if any(value is not None for value in run.values()):
        model = _store_model(store, collection, model, run)
    if (query is None) == (item_id is None):
        raise InvalidInput("give either a query text or --id ID (or --word WORD for a token store)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hits = search(
            query, store, collection=collection, top_k=k, item_id=item_id, model=model, post=post,
            view=view, exact=exact, nprobe=nprobe, prompt_name=prompt_name, prompt=prompt,
        )  # fmt: skip
    _said(caught, store)
    if threshold_file is not None:
        hits = _above_threshold(hits, threshold_file, store, collection, view)
    if as_json:
        emit_json([h.to_dict() for h in hits])
        return
    chunked = any(h.chunk is not None for h in hits)
    # a long query shortened as `similarity` shortens its rows: the title is a label, not the text
    title = f"nearest to {short_text(query or 'id ' + str(item_id), 60)!r}"
    table = Table("rank", "id", *(("chunk", "span") if chunked else ()), "score", "text", title=title)
    for rank, hit in enumerate(hits, 1):
        where = (str(hit.chunk), f"{hit.start}-{hit.end}") if chunked else ()
        table.add_row(str(rank), hit.id, *where, f"{hit.score:.4f}", hit.text or "")
    out.print(table)


def _said(caught: list[Any], store: Path) -> None:
    """The search's warnings on stderr. A model at another precision than the store's ran as --dtype or
    --quantize asked (the store's own files, or -m's: same_model refuses others), so leaving those flags
    out is the fix, named, not the library's 'leave model= out'."""
    from ..io.query import PrecisionWarning, precision_note

    for warning in caught:
        message = warning.message
        if isinstance(message, PrecisionWarning) and message.differ:
            warn(precision_note(store, message.differ, flags=True))
        else:
            warn(message)


def _refuse_unread_by_word(
    context: str | None, running: list[str], *, view: str | None, post: Path | None,
    threshold_file: Path | None, prompt: str | None, prompt_name: str | None,
) -> None:  # fmt: skip
    """Refuse what a --word search would ignore: a view, post-processing, a calibrated threshold or a
    prompt (the occurrences are a token store's rows, the --context embedded its way), and a model or
    how it runs where no --context is embedded."""
    given = {
        "--view": view, "--post": post, "--threshold-file": threshold_file, "--prompt": prompt,
        "--prompt-name": prompt_name,
    }  # fmt: skip
    unread = [flag for flag, value in given.items() if value is not None]
    if unread:
        raise InvalidInput(
            f"{', '.join(unread)}: --word reads a token or word store's rows, and embeds --context the "
            "store's way (its layers, no view, post-processing, prompt or sentence threshold): drop "
            f"{'them' if len(unread) > 1 else 'it'}"
        )
    if context is None and running:
        raise InvalidInput(
            "--word without --context lists the stored occurrences, so no model runs: "
            f"drop {', '.join(running)}, or add --context TEXT to rank them by a use of the word"
        )


def ray_shards(store: Path, *, option: str, command: str) -> None:
    """Refuse a Ray job's folder of shards (a store is one file), and warn that a shard of a job that
    did not finish holds only some of its rows (`option`, `command`: how the store was given)."""
    from ..distributed import shard_folder_note

    note = shard_folder_note(store)
    if note is None:
        return
    if store.is_dir() and not any(store.glob("part-*.parquet")):
        raise InvalidInput(f"{option} {store}: {note}, so there is nothing to read: run the job again")
    if store.is_dir():
        first = min(store.glob("part-*.parquet"), default=store / "part-000000.parquet")
        raise InvalidInput(
            f"{option} {store}: {note}; `{command}` reads one store file: give a shard ({option} {first})"
        )
    warn(note)


def _store_model(
    store: Path, collection: str | None, model: str | None, run: dict[str, Any], *, occurrences: bool = False
) -> Any:
    """The query's model loaded with the run options given, the store's own settings for the rest; a -m
    folder whose files are not the store's model's is refused before it loads (seconds, an export), in
    the words the load without run options refuses it (`occurrences`: a token store, named by its model,
    layers and combine)."""
    from ..io.occurrences import token_store_made
    from ..io.query import refuse_other_folder
    from ..io.stores import open_store
    from .app import load_model

    opened = open_store(store, collection=collection)
    settings = opened.settings
    made = token_store_made(opened) if occurrences else None
    refuse_other_folder(settings, model or settings.get("model_arg"), path=store, made=made)
    return load_model(
        model or settings.get("model_arg"),
        device=run["device"] or "auto",
        dtype=run["dtype"] or settings.get("dtype") or "float32",
        backend=run["backend"] or settings.get("backend") or "auto",
        quantize=run["quantize"] or settings.get("quantize") or "none",
        threads=run["threads"],
    )


def _above_threshold(
    hits: list[Any], path: Path, store: Path, collection: str | None, view: str | None
) -> list[Any]:
    """The hits at or above the threshold in `path`, refused unless it matches the settings of what was
    searched: the store's, or the view's in a store with several."""
    from ..core.fingerprint_facts import files_digest
    from ..io.stores import open_store, view_settings, with_view
    from ..research.baseline import load_threshold

    threshold = load_threshold(path)
    settings = view_settings(with_view(open_store(store, collection=collection), view))
    keys = ("layers", "combine", "pooling", "mask_special", "normalize", "post")
    recorded = settings.get("fingerprint")  # its files' hashes: the model whatever path named it
    files = files_digest(recorded.get("files") or {}) if isinstance(recorded, dict) else None
    given = {k: settings.get(k) for k in keys}
    # how its long texts were read, where the store says (a store from before may not): a threshold
    # calibrated another way is refused
    given.update({k: settings[k] for k in ("long", "stride") if k in settings})
    threshold.check(str(settings.get("model")), given, store=str(store), files=files)
    kept = [h for h in hits if h.score >= threshold.threshold]
    err.print(f"{len(kept)} of {len(hits)} hits at or above the calibrated {threshold.threshold:.4f}")
    return kept


def _occurrences(
    store: Path, word: str, context: str | None, k: int, model: Any, as_json: bool, *, exact: bool
) -> None:
    import warnings

    from ..io.occurrences import search_occurrences

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = search_occurrences(store, word=word, context=context, top_k=k, model=model, exact=exact)
    _said(caught, store)
    if as_json:
        emit_json(
            {
                "word": word,
                "context": context,
                "context_span": None if found.context_span is None else list(found.context_span),
                "n_occurrences": found.n_occurrences,
                "n_dropped": found.n_dropped,
                "hits": [h.__dict__ for h in found.hits],
            }
        )
        return
    what = (
        f"{word!r} nearest to its use in {short_text(context, 60)!r}"
        if context
        else f"occurrences of {word!r}"
    )
    table = Table(
        "rank", "id", "span", "score", "snippet", title=f"{what} ({found.n_occurrences} in the store)"
    )
    for rank, hit in enumerate(found.hits, 1):
        score = "" if hit.score is None else f"{hit.score:.4f}"
        table.add_row(str(rank), hit.id, f"{hit.start}-{hit.end}", score, hit.snippet)
    out.print(table)


@app.command()
def collections(
    store: Annotated[Path, typer.Argument(help="An SQLite store written by bertscope.")],
    as_json: JsonOpt = False,
) -> None:
    """What an SQLite store holds: collections with their model, settings, size and date.

    Example: `bertscope collections docs.db`
    """
    from ..io.sqlite_reader import list_collections
    from ..io.sqlite_store import JOB_KEY

    found = list_collections(store)
    if as_json:
        emit_json(found)
        return
    table = Table("name", "n_texts", "dimension", "model", "settings", "created", title=str(store))
    for c in found:
        settings = ", ".join(
            f"{k}={_shown_setting(k, v)}" for k, v in c["settings"].items() if k not in (*_NOT_SHOWN, JOB_KEY)
        )
        name = f"{c['name']} (unfinished)" if JOB_KEY in c["settings"] else c["name"]
        table.add_row(name, str(c["n_texts"]), str(c["dimension"]), c["model"], settings, c["created"])
    out.print(table)
    for c in found:
        if JOB_KEY in c["settings"]:
            # a mark, not a setting: search, verify and index refuse the collection until it is finished
            warn(
                f"collection {c['name']!r} holds the {c['n_texts']} texts of a job that stopped before it "
                "finished; run that job again with --resume to finish it first"
            )


# The model column names the model; the checksum proves the settings and is read by verify, not people.
_NOT_SHOWN = ("model", "model_arg", "settings_sha256")


def _shown_setting(key: str, value: object) -> object:
    """A setting as the table shows it: a model fingerprint by its id (every file's digest is in --json)."""
    if key == "fingerprint" and isinstance(value, dict) and "id" in value:
        return value["id"]
    return value
