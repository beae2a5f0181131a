"""The command line's contextual commands: `embed` and `similarity`.

`embed`'s options and where each run goes (the vectors printed, a corpus job, a Ray job) are here;
`embed_options.py` checks the options, `embed_printed.py` prints the vectors, `similarity.py` holds
`similarity`, which is registered here. Every name imported from this module before the split still is.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..core._enums import Engine, Level
from ..core.chunking import ChunkBy
from ..errors import CorpusError, InvalidInput
from .app import (
    BackendOpt,
    CombineOpt,
    DeviceOpt,
    DtypeOpt,
    EngineOpt,
    FastMinCosineOpt,
    FastOpt,
    IdColumnOpt,
    IdFieldOpt,
    JsonOpt,
    LayersOpt,
    LongOpt,
    MaskSpecialOpt,
    ModelOpt,
    PairOpt,
    PoolingOpt,
    PromptNameOpt,
    PromptOpt,
    QuantizeOpt,
    RemeasureOpt,
    StrideOpt,
    TextColumnOpt,
    TextFieldOpt,
    ThreadsOpt,
    app,
    check_layers_unloaded,
    check_stride,
    err,
    load_model,
    out,
    record_fields,
    remeasure_if_asked,
    with_pair,
)
from .chunks import ChunkOverlapOpt, ChunkSizeOpt, ChunksOpt, LateOpt, print_chunks
from .embed_options import (
    NormalizeOpt,
    given_options,
    level_asked,
    refuse_idle_chunk_options,
    refuse_idle_options,
    refuse_index_options,
    refuse_options_every_view_sets,
    refuse_unused,
)
from .embed_printed import CUT_FIX as CUT_FIX
from .embed_printed import (
    check_argument_texts,
    check_text_source,
    note_own_pooling,
    per_piece,
    print_sentences,
    printed_names,
    read_inputs,
    say_job_cut,
    spec_line,
)
from .embed_printed import plain_value as plain_value
from .similarity import checked_threshold as checked_threshold
from .similarity import similarity

if TYPE_CHECKING:
    from .corpus import CorpusJob


@app.command()
def embed(
    ctx: typer.Context,
    texts: Annotated[list[str] | None, typer.Argument(help="Texts to embed.")] = None,
    input_path: Annotated[
        str | None,
        typer.Option(
            "--input",
            "-i",
            help="Texts: one per line, or the text field of .jsonl/.csv/.tsv/.parquet (- for stdin).",
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to .parquet, .npy or .db (a corpus job).")
    ] = None,
    text_field: TextFieldOpt = "text",
    id_field: IdFieldOpt = None,
    text_column: TextColumnOpt = None,
    id_column: IdColumnOpt = None,
    collection: Annotated[
        str | None, typer.Option("--collection", "-c", help="Collection name in a .db store.")
    ] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted job.")] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing output.")] = False,
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="Set malformed records aside in OUTPUT.rejects.")
    ] = False,
    no_text: Annotated[
        bool, typer.Option("--no-text", help="Do not store the texts with the vectors.")
    ] = False,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size",
            min=1,
            help="Texts per saved batch (default 1024); with --engine ray, rows per actor call "
            "(default 512 on CPUs).",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress and no summary.")] = False,
    post: Annotated[
        Path | None, typer.Option("--post", help="A fitted post-processing file (see fit-post).")
    ] = None,
    layers: LayersOpt = None,
    combine: CombineOpt = "mean",
    pooling: PoolingOpt = "auto",
    mask_special: MaskSpecialOpt = False,
    normalize: NormalizeOpt = None,
    long: LongOpt = "truncate",
    stride: StrideOpt = None,
    prompt_name: PromptNameOpt = None,
    prompt: PromptOpt = None,
    chunks: ChunksOpt = None,
    late: LateOpt = True,
    chunk_size: ChunkSizeOpt = 128,
    chunk_overlap: ChunkOverlapOpt = 0,
    level_name: Annotated[
        str | None,
        typer.Option(
            "--level",
            help=f"What a row is: {', '.join(v.value for v in Level)} (the corpus-level table; "
            "word reads as words; --tokens and --chunks name one each).",
        ),
    ] = None,
    tokens: Annotated[
        bool, typer.Option("--tokens", help="Token vectors instead of one vector per text.")
    ] = False,
    # --words: `--level words`'s old shortcut, still read, not shown: elsewhere --words lists words
    # (`contextuality --words bank,bread`, the library's words=)
    words: Annotated[bool, typer.Option("--words", hidden=True)] = False,
    subword: Annotated[
        str,
        typer.Option(
            "--subword", help="With --level words: word pieces to word by first, last, mean or first_last."
        ),
    ] = "mean",
    view: Annotated[
        list[str] | None,
        typer.Option(
            "--view",
            help="A named sentence view NAME=LAYERS/POOLING[/OPTION...] (repeat it; one forward pass, "
            "one Parquet column each), e.g. last=-1/mean, cls4=-4:/cls/concat; --combine, --mask-special "
            "and --normalize apply to each view that sets none of its own.",
        ),
    ] = None,
    index: Annotated[
        bool, typer.Option("--index", help="Build the ANN index beside the .parquet/.npy output.")
    ] = False,
    precision: Annotated[
        str,
        typer.Option(
            "--precision",
            help="Stored vectors of a corpus job (-o .parquet or .npy): float32 (exact) or float16 (half "
            "the size); printed vectors are float32.",
        ),
    ] = "float32",
    pair: PairOpt = None,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    threads: ThreadsOpt = None,
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    fast: FastOpt = False,
    fast_min_cosine: FastMinCosineOpt = None,
    remeasure: RemeasureOpt = False,
    as_json: JsonOpt = False,
    engine: EngineOpt = "local",
    workers: Annotated[
        int, typer.Option("--workers", min=1, help="With --engine ray: Ray actors, each with its own model.")
    ] = 2,
    address: Annotated[
        str | None,
        typer.Option("--address", help="With --engine ray: the Ray cluster to join (auto: the running one)."),
    ] = None,
) -> None:
    """Contextual vectors of any layer, pooled per text (default), per token or per word.

    Examples: `bertscope embed "I like eating bread" --layers -2 --pooling mean`,
    `bertscope embed -i corpus.txt -o corpus.parquet`,
    `bertscope embed -i examples/docs.jsonl --id-field id -o docs.db --collection news`,
    `bertscope embed "a cat" --tokens --layers 0,6`,
    `bertscope embed -i corpus.txt -o tok.parquet --tokens --layers 4,6 --combine stack --precision float16`
    (one row per token, resumable with --resume; --level words for one row per word),
    `bertscope embed -i 'dir/*.parquet' -o out_dir/ --engine ray --workers 4`,
    `bertscope embed -i corpus.txt -o corpus.parquet --quantize int8` (faster on CPU, drift recorded),
    `bertscope embed -i corpus.txt -o corpus.parquet --fast` (the fastest mode within cosine 0.999),
    `bertscope embed -i corpus.txt -o views.parquet --view last=-1/mean --view cls4=-4:/cls`,
    `bertscope embed -i docs.txt --chunks sentence --late` (a vector per sentence of each line, in context),
    `bertscope embed -i corpus.txt -o words.parquet --level words` (any level of the table by name),
    `bertscope embed "what is late chunking?" -m Snowflake/snowflake-arctic-embed-m-v1.5 --prompt-name query`
    (the query prompt of a model that ships prompts; the bundled model has none),
    `bertscope embed "How are you?" --pair "Fine, thanks."` ([CLS] A [SEP] B [SEP]; with --tokens too)
    """
    text_field, id_field = record_fields(text_field, id_field, text_column, id_column)
    check_argument_texts(texts, command="embed", reads_input=True)
    level = level_asked(level_name, tokens=tokens, words=words, chunks=chunks)
    tokens, words = level == "tokens", level == "words"
    if level == "chunks" and chunks is None:
        chunks = "sentence"
    refuse_idle_chunk_options(ctx, chunks, level=level, late=late, long=long)
    if pair is not None and (output is not None or words or chunks is not None):
        raise InvalidInput(
            "--pair reads each text as [CLS] A [SEP] B [SEP]: for sentence or --tokens vectors printed "
            "here; words and chunks index into one text, and corpus jobs (-o) take single texts"
        )
    if view and (output is None or level != "sentence" or engine is Engine.RAY):
        raise InvalidInput("--view is for local sentence corpus jobs: give -o FILE.parquet")
    if view and (job_level := [f"--{name}" for name in ("layers", "pooling") if given_options(ctx, name)]):
        # the syntax makes every view name both, so the job's would never be read (io.views)
        raise InvalidInput(
            "each --view names its own layers and pooling: put them in the view (NAME=LAYERS/POOLING) or "
            f"drop {'/'.join(job_level)}"
        )
    if view:
        refuse_options_every_view_sets(ctx, view)
    if index:
        refuse_index_options(output, level, engine)
    refuse_unused(output, as_json, collection=collection, resume=resume, overwrite=overwrite,
                   skip_bad=skip_bad, no_text=no_text, precision=given_options(ctx, "precision"),
                   batch_size=batch_size is not None)  # fmt: skip
    refuse_idle_options(ctx, output, input_path, level=level, engine=engine, collection=collection)
    if output is None and texts:
        from ..core.texts_given import text_refusal

        # named as the ids that print them: the first argument is text 1 (the library counts from 0);
        # chunked, each is a document, as every other chunk error names it
        kind = "document" if chunks is not None else "text"
        for number, text in enumerate(texts, 1):
            if (why := text_refusal(text)) is not None:
                raise InvalidInput(f"{kind} {number} {why}")
    if stride is not None:
        # checked now, not at the first long text part-way through a corpus job
        from ..core.folder import FolderView

        check_stride(FolderView.open(model) or load_model(model, facts_only=True), stride, long)
    from ..core.spec import EmbedOptions
    from ..io.level_table import CorpusOptions, level_of
    from ..io.levels import LevelOptions

    recipe = EmbedOptions(
        layers=layers, combine=combine, pooling=pooling, mask_special=mask_special, normalize=normalize,
        long=long, stride=stride, post=post, prompt_name=prompt_name, prompt=prompt,
    )  # fmt: skip
    run: dict[str, Any] = {"device": device, "dtype": dtype, "backend": backend, "quantize": quantize}
    run.update(threads=threads, fast=fast, fast_min_cosine=fast_min_cosine)
    if chunks is not None and output is None:
        m = _loaded(model, run, recipe)
        # Late chunks see every token (windows); chunks embedded alone are cut at the window, reported.
        shown = {k: v for k, v in asdict(recipe).items() if k != "post"}
        shown["long"] = None if long == "truncate" else long
        docs, doc_ids = read_inputs(texts, input_path, text_field=text_field, id_field=id_field)
        # The sizes reach the library only with token chunks, which read them (given otherwise: refused above)
        token_chunks = ChunkBy.parse(chunks, what="chunking") is ChunkBy.TOKENS
        sizes = {"chunk_size": chunk_size, "chunk_overlap": chunk_overlap} if token_chunks else {}
        from ..core.tokens import named_as

        with named_as(printed_names(doc_ids, from_file=input_path is not None)):
            spec = print_chunks(
                m, docs, ids=doc_ids, as_json=as_json, chunks=chunks, late=late, **sizes, **shown
            )
        if spec is not None:
            out.print(f"spec: {spec_line(spec)}", highlight=False)
        return
    rows = LevelOptions(
        level=level, keep_text=not no_text, precision=precision, subword=subword, chunks=chunks or "sentence",
        late=late, chunk_size=chunk_size, chunk_overlap=chunk_overlap,
    )  # fmt: skip
    if not given_options(ctx, "long") and level_of(rows).name is Level.CHUNKS and late:
        recipe = replace(recipe, long="window")  # late chunks' own default (--long truncate is refused)
    # The level table says which options the level reads: token and word rows are not pooled.
    asked = CorpusOptions(recipe, rows).for_level()
    if engine is Engine.RAY:
        if output is None or not (texts or input_path) or skip_bad or collection:
            raise InvalidInput(
                "--engine ray runs corpus jobs only: -i/texts and -o FOLDER, no --skip-bad/--collection"
            )
        from ..distributed import run_ray_job

        # --threads: each actor's torch threads, and the CPUs it asks Ray for. --remeasure (checked
        # against the options first) forgets this machine's measurements: the driver measures again,
        # and its --fast choice is what every actor runs.
        remeasure_if_asked(backend=backend, quantize=quantize, fast=fast, fast_min_cosine=fast_min_cosine)
        # The bound only where given: `load` refuses one without --fast, and has its own default.
        bound: dict[str, Any] = {} if fast_min_cosine is None else {"fast_min_cosine": fast_min_cosine}
        summary = run_ray_job(
            texts or str(input_path), output, model=model, device=device, dtype=dtype, backend=backend,
            quantize=quantize, workers=workers, cpus_per_worker=threads or 1, batch_size=batch_size,
            mode="fast" if fast else "exact", address=address, text_field=text_field, id_field=id_field,
            resume=resume, overwrite=overwrite, progress=not quiet, options=asked, **bound,
        )  # fmt: skip
        if not quiet:
            # the local job's lines (`corpus.run_job`): the cut said, then the summary
            say_job_cut(summary.n_truncated, summary.embedded, summary.max_tokens)
            err.print(summary.line(), highlight=False)
        return
    if output is not None:
        from .corpus import CorpusJob, run_job

        job = CorpusJob(
            text_field=text_field, id_field=id_field, collection=collection, resume=resume,
            overwrite=overwrite, skip_bad=skip_bad, batch_size=batch_size or 1024, views=view or None,
        )  # fmt: skip
        _refuse_job_unloaded(texts, input_path, output, job, level)
        m = _loaded(model, run, recipe)
        if level == "sentence":
            note_own_pooling(m, recipe)
        run_job(texts, input_path, output, model=m, options=asked, job=job, quiet=quiet, index=index)
        return
    if level not in ("sentence", "tokens", "words"):
        raise InvalidInput(f"--level {level} rows are written by a corpus job: give -o FILE.parquet")
    given, ids = read_inputs(texts, input_path, text_field=text_field, id_field=id_field)
    items = with_pair(given, pair)
    m = _loaded(model, run, recipe)
    from ..core.tokens import named_as

    with named_as(printed_names(ids, from_file=input_path is not None)):
        if tokens or words:
            per_piece(m, items, ids, recipe, words=words, subword=subword, as_json=as_json)
            return
        print_sentences(m, items, given, ids, recipe, input_path=input_path, pair=pair, as_json=as_json)


def _refuse_job_unloaded(
    texts: list[str] | None, input_path: str | None, output: Path, job: CorpusJob, level: str
) -> None:
    """Refuse before the model loads what the corpus job refuses without it (`corpus.run_job`, the sink):
    a load can take minutes (a fresh cache's timing, an int8 or --fast export) before that one line.
    The job checks all of it again; an SQLite collection's refusals need the model's settings."""
    from ..core.writable import cannot_create
    from ..io.formats import Format, open_sink, rules_of
    from ..io.job_lock import lock_path, unwritable_output
    from ..io.readers import check_readable

    check_text_source(texts, input_path)  # run_job's check
    if input_path is not None:  # the input's refusal first, as the job reads it before its output
        check_readable(input_path)
    rules = rules_of(output)
    if (
        rules is None
        or not output.parent.exists()
        or (rules.levels is not None and level not in rules.levels)
    ):
        # open_sink refuses these by the path and level alone, before it makes anything
        open_sink(output, settings={"level": level})
    if rules is None:  # open_sink raised above: this only tells mypy
        return
    if output.parent.is_file():  # main's words for a NotADirectoryError met later
        raise InvalidInput(f"{output.parent} is a file, not a folder: give a path inside a folder")
    if why := cannot_create(output.parent):  # the job's lock file is its first file there
        raise unwritable_output(output, lock_path(output, job.collection), why)
    parts = output.with_name(output.name + ".parts")  # an unfinished job's: the sink says what it holds
    if rules.format is not Format.SQLITE and output.exists() and not parts.exists():
        if not (job.overwrite or job.resume):  # a --resume of a finished output: the sink's own line
            raise CorpusError(f"{output} exists; pass overwrite=True (--overwrite) to replace it")


def _loaded(model: str | None, run: dict[str, Any], recipe: Any) -> Any:
    """The model loaded; a static one refuses --layers first, in its own line (it has no layers), where the
    layer parser would say only 'layers are 0..0'."""
    from ..static_model import StaticModel

    check_layers_unloaded(model, recipe.layers)
    m = load_model(model, **run)
    if isinstance(m, StaticModel):
        m.checked_options(recipe)
    return m


# similarity's command, registered after embed's: `bertscope --help` lists the two in this order
app.command()(similarity)
