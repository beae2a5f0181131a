"""The command line's contextual commands: `embed` and `similarity`."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from ..core._enums import Engine, Level, LongText
from ..core.chunking import ChunkBy
from ..errors import InvalidInput
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
    check_stride,
    emit_json,
    err,
    level_option,
    load_model,
    out,
    read_lines,
    record_fields,
    remeasure_if_asked,
    warn,
    with_pair,
)
from .chunks import ChunkOverlapOpt, ChunkSizeOpt, ChunksOpt, LateOpt, print_chunks

if TYPE_CHECKING:
    from ..core.spec import EmbedOptions


NormalizeOpt = Annotated[
    bool | None,
    typer.Option(
        "--normalize/--no-normalize",
        help="Unit-length vectors (default: the model's own with --pooling auto, off with a named pooling).",
    ),
]


def _note_own_pooling(m: Any, recipe: EmbedOptions) -> None:
    """Say so when --pooling names the model's own pooling and its Normalize step is left off."""
    from ..core.spec import unnormalized_own_pooling

    note = unnormalized_own_pooling(m, recipe, pooling_name="--pooling", fix="--normalize")
    if note:
        warn(note)


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
    refuse_lone_dash(texts, command="embed", reads_input=True)
    flagged = [
        name for name, on in (("tokens", tokens), ("words", words), ("chunks", chunks is not None)) if on
    ]
    # --level word is --level words (a level's singular and plural are one name, as probe's and cka's)
    named = None if level_name is None else level_option(level_name, [v.value for v in Level])
    if len(flagged) > 1 or (named is not None and flagged and flagged != [named]):
        given = [f"--{name}" for name in flagged] + ([f"--level {level_name}"] if level_name else [])
        raise InvalidInput(f"choose one of --tokens, --chunks and --level ({', '.join(given)} given)")
    level = Level.parse(named or (flagged[0] if flagged else "sentence"), what="level").value
    tokens, words = level == "tokens", level == "words"
    if level == "chunks" and chunks is None:
        chunks = "sentence"
    _refuse_idle_chunk_options(ctx, chunks, level=level, late=late, long=long)
    if pair is not None and (output is not None or words or chunks is not None):
        raise InvalidInput(
            "--pair reads each text as [CLS] A [SEP] B [SEP]: for sentence or --tokens vectors printed "
            "here; words and chunks index into one text, and corpus jobs (-o) take single texts"
        )
    if view and (output is None or level != "sentence" or engine is Engine.RAY):
        raise InvalidInput("--view is for local sentence corpus jobs: give -o FILE.parquet")
    if view and (job_level := [f"--{name}" for name in ("layers", "pooling") if _given(ctx, name)]):
        # the syntax makes every view name both, so the job's would never be read (io.views)
        raise InvalidInput(
            "each --view names its own layers and pooling: put them in the view (NAME=LAYERS/POOLING) or "
            f"drop {'/'.join(job_level)}"
        )
    if index:
        _refuse_index(output, level, engine)
    _refuse_unused(output, as_json, collection=collection, resume=resume, overwrite=overwrite,
                   skip_bad=skip_bad, no_text=no_text, precision=_given(ctx, "precision"),
                   batch_size=batch_size is not None)  # fmt: skip
    _refuse_idle_options(ctx, output, input_path, level=level, engine=engine, collection=collection)
    if stride is not None:
        # checked now, not at the first long text part-way through a corpus job
        from ..core.folder import FolderView

        check_stride(FolderView.open(model) or load_model(model), stride)
    from ..core.spec import EmbedOptions, resolve
    from ..io.level_table import CorpusOptions
    from ..io.levels import LevelOptions

    recipe = EmbedOptions(
        layers=layers, combine=combine, pooling=pooling, mask_special=mask_special, normalize=normalize,
        long=long, stride=stride, post=post, prompt_name=prompt_name, prompt=prompt,
    )  # fmt: skip
    run: dict[str, Any] = {"device": device, "dtype": dtype, "backend": backend, "quantize": quantize}
    run.update(threads=threads, fast=fast, fast_min_cosine=fast_min_cosine)
    if chunks is not None and output is None:
        m = load_model(model, **run)
        # Late chunks see every token (windows); chunks embedded alone are cut at the window, reported.
        shown = {k: v for k, v in asdict(recipe).items() if k != "post"}
        shown["long"] = None if long == "truncate" else long
        docs, doc_ids = read_inputs(texts, input_path, text_field=text_field, id_field=id_field)
        # The sizes reach the library only with token chunks, which read them (given otherwise: refused above)
        token_chunks = ChunkBy.parse(chunks, what="chunking") is ChunkBy.TOKENS
        sizes = {"chunk_size": chunk_size, "chunk_overlap": chunk_overlap} if token_chunks else {}
        spec = print_chunks(m, docs, ids=doc_ids, as_json=as_json, chunks=chunks, late=late, **sizes, **shown)
        if spec is not None:
            out.print(f"spec: {spec_line(spec)}", highlight=False)
        return
    rows = LevelOptions(
        level=level, keep_text=not no_text, precision=precision, subword=subword, chunks=chunks or "sentence",
        late=late, chunk_size=chunk_size, chunk_overlap=chunk_overlap,
    )  # fmt: skip
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
            err.print(summary.line(), highlight=False)
        return
    if output is not None:
        from .corpus import CorpusJob, run_job

        job = CorpusJob(
            text_field=text_field, id_field=id_field, collection=collection, resume=resume,
            overwrite=overwrite, skip_bad=skip_bad, batch_size=batch_size or 1024, views=view or None,
        )  # fmt: skip
        m = load_model(model, **run)
        if level == "sentence":
            _note_own_pooling(m, recipe)
        run_job(texts, input_path, output, model=m, options=asked, job=job, quiet=quiet, index=index)
        return
    if level not in ("sentence", "tokens", "words"):
        raise InvalidInput(f"--level {level} rows are written by a corpus job: give -o FILE.parquet")
    given, ids = read_inputs(texts, input_path, text_field=text_field, id_field=id_field)
    items = with_pair(given, pair)
    m = load_model(model, **run)
    if tokens or words:
        _per_piece(m, items, ids, recipe, words=words, subword=subword, as_json=as_json)
        return
    _note_own_pooling(m, recipe)
    result = m.embed_with(items, resolve(m, recipe))
    if result.n_truncated:
        from ..core.tokens import cut_summary

        dropped = int(result.n_dropped.sum())
        warn(f"{cut_summary(result.n_truncated, len(items), m.max_tokens, dropped)}; {CUT_FIX}")
    if as_json:
        # texts and ids beside the vectors, row for row: ids as a corpus job gives them (line numbers, or
        # the --id-field values), so a row is matched to its line though empty lines were skipped
        emit_json({**result.to_dict(), "texts": given, "ids": ids, **({"pair": pair} if pair else {})})
        return
    import numpy as np

    table = Table(*(["id"] if input_path is not None else []), "text", "tokens", "norm", "vector")
    for i, (text, vec, n) in enumerate(zip(map(_shown, items), result.vectors, result.n_tokens, strict=True)):
        preview = " ".join(f"{v:+.3f}" for v in vec[:5])
        table.add_row(
            *([ids[i]] if input_path is not None else []),
            _short(text), str(n), f"{np.linalg.norm(vec):.3f}", f"[{preview} ...] ({len(vec)} dims)",
        )  # fmt: skip
    out.print(table)
    out.print(f"spec: {spec_line(result.spec)}", highlight=False)


# what a printed embedding's cut line says to do (embed and similarity take --long)
CUT_FIX = "their ends are not in the vectors; --long window keeps every token"


def refuse_lone_dash(
    texts: list[str] | None, *, command: str, reads_input: bool, takes: str = "its texts as arguments"
) -> None:
    """Refuse `-` given as a text: it would be embedded (tokenized, taken apart) as the text "-", not
    read from stdin. A command with -i is pointed to `-i -`; one without says it takes its text as an
    argument."""
    if not texts or "-" not in texts:
        return
    if reads_input:
        raise InvalidInput(
            f"`-` would be read as the text '-', not stdin: to read stdin, give -i - "
            f"(cat FILE | bertscope {command} -i -)"
        )
    raise InvalidInput(
        f"`-` would be read as the text '-': {command} takes {takes}, not from stdin; pass the text itself"
    )


def read_inputs(
    texts: list[str] | None, input_path: str | None, *, text_field: str = "text", id_field: str | None = None
) -> tuple[list[str], list[str]]:
    """The texts to print vectors of and their ids, as a corpus job reads and numbers them: arguments
    1, 2, ...; -i FILE's records by 1-based line (or data row) number, or their `id_field`. Empty lines
    (records) are skipped, and said on stderr; a file with no text at all is named."""
    if texts and input_path:
        raise InvalidInput("give texts as arguments or with -i/--input, not both")
    if input_path is None:
        if not texts:
            raise InvalidInput(
                "no texts given: pass them as arguments, or -i FILE (one per line, - for stdin)"
            )
        return list(texts), [str(number) for number in range(1, len(texts) + 1)]
    from ..io.readers import Rejects, read_corpus

    rejects = Rejects()
    records = list(read_corpus(input_path, text_field=text_field, id_field=id_field, rejects=rejects))
    name = "stdin" if input_path == "-" else input_path
    lines = input_path == "-" or input_path.lower().endswith(".txt")
    if not records:
        if lines:
            why = "every line is empty"
        elif rejects.empty:
            why = f"every record's {text_field} field is empty"
        else:
            why = "it has no records"
        raise InvalidInput(f"{name} holds no text: {why}")
    if rejects.empty:
        unit = ("line" if lines else "record") + ("s" if rejects.empty != 1 else "")
        warn(f"{rejects.empty} empty {unit} skipped (ids name each text's own line)", label="note:")
    return [r.text for r in records], [r.id for r in records]


def spec_line(spec: Any) -> str:
    """Settings as a human reads them: `layers 6, pooling mean, normalize on, long truncate` (combine
    only where several layers combine, mask-special and stride only where set), no Python reprs."""
    shown = dict(spec)
    layers = list(shown.pop("layers", ()) or ())
    parts = [f"layers {','.join(map(str, layers))}"] if layers else []
    combine = shown.pop("combine", None)
    if len(layers) > 1 and combine is not None:
        parts.append(f"combine {combine}")
    if not shown.get("mask_special"):
        shown.pop("mask_special", None)
    for key in ("stride", "prompt_name", "prompt", "prompt_length", "post"):
        if shown.get(key) in (None, "", 0):
            shown.pop(key, None)
    order = ["pooling", "mask_special", "normalize", "long", "stride"]
    keys = [k for k in order if k in shown] + [k for k in shown if k not in order]
    parts += [f"{key.replace('_', '-')} {plain_value(shown[key])}" for key in keys]
    return ", ".join(parts)


def plain_value(value: Any) -> str:
    """One setting's value as a human reads it: on/off, `-` for none, a list without brackets."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return ", ".join(plain_value(v) for v in value) if value else "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={plain_value(v)}" for k, v in value.items())
    return str(getattr(value, "value", value))


def _refuse_unused(output: Path | None, as_json: bool, **corpus_only: Any) -> None:
    """Refuse what a corpus job (-o) would leave unused, and what only a corpus job reads without -o."""
    if output is not None and as_json:
        raise InvalidInput(
            "--json prints vectors; a corpus job (-o) writes them to its file and its summary on stderr: "
            "drop --json, or -o to print the vectors"
        )
    given = [f"--{name.replace('_', '-')}" for name, value in corpus_only.items() if value]
    if output is None and given:
        them = "them" if len(given) > 1 else "it"
        raise InvalidInput(f"{', '.join(given)}: for corpus jobs only; add -o FILE or leave {them} out")


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether the option `name` was typed (or read from the environment), not left at its default."""
    # By name: typer ships its own copy of click, whose ParameterSource is not click's.
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def _refuse_idle_options(
    ctx: typer.Context, output: Path | None, input_path: str | None, *, level: str, engine: str,
    collection: str | None,
) -> None:  # fmt: skip
    """Refuse an option given where it has no effect (it would be ignored in silence), naming where it
    applies: --subword off the word level, --workers/--address without Ray, --text-field/--id-field
    without records to read them from, --collection and --precision float16 where the store has no use
    for them (the corpus-only options without -o are `_refuse_unused`'s)."""
    if _given(ctx, "subword"):  # typed, even at its default: the library's check, read in flags
        from ..io.level_table import refuse_idle_level_options
        from ..io.levels import LevelOptions

        refuse_idle_level_options(LevelOptions(level=level, subword=ctx.params["subword"]), given=["subword"])
    if ray_only := [f"--{name}" for name in ("workers", "address") if _given(ctx, name)]:
        if engine is not Engine.RAY:
            raise InvalidInput(
                f"{' and '.join(ray_only)}: for --engine ray only; add --engine ray or drop it"
            )
    named = ("text_field", "text_column", "id_field", "id_column")  # the flag typed, old spelling or new
    fields = [f"--{name.replace('_', '-')}" for name in named if _given(ctx, name)]
    if fields and (input_path is None or input_path == "-" or input_path.lower().endswith(".txt")):
        what = f"{fields[0]} names a field" if len(fields) == 1 else f"{' and '.join(fields)} name fields"
        source = "stdin" if input_path == "-" else input_path
        read = (
            "texts given as arguments are not records"
            if source is None
            else f"{source} is read a line a text"
        )
        raise InvalidInput(f"{what} of -i FILE records (.jsonl, .csv, .tsv, .parquet); {read}: drop it")
    if output is not None:  # the library's own check, read in flags (cli.wording)
        from ..io.formats import refuse_idle_store_options

        refuse_idle_store_options(output, collection=collection, precision=ctx.params["precision"])


def _refuse_idle_chunk_options(
    ctx: typer.Context, chunks: str | None, *, level: str, late: bool, long: str
) -> None:
    """Refuse a chunk option the run would not read (it would be ignored in silence), and --long truncate
    with late chunks (which would run windowed in silence). --chunk-size/--chunk-overlap: the library's
    check (typed, even at the default), read in flags, for the corpus job and the chunks printed alike."""
    from ..core.chunking import ChunkBy

    def given(name: str) -> bool:
        return _given(ctx, name)

    by = None if chunks is None else ChunkBy.parse(chunks, what="chunking")
    if sizes := [name for name in ("chunk_size", "chunk_overlap") if given(name)]:
        from ..io.level_table import refuse_idle_level_options
        from ..io.levels import LevelOptions

        asked = {name: ctx.params[name] for name in sizes}
        refuse_idle_level_options(LevelOptions(level=level, chunks=by or "sentence", **asked), given=sizes)
    if given("late") and by is None:
        raise InvalidInput(
            "--late/--naive apply with --chunks; add --chunks sentence, paragraph or tokens, or drop it"
        )
    if by is not None and late and given("long") and LongText.parse(long, what="long") is LongText.TRUNCATE:
        raise InvalidInput(
            "late chunking (--chunks) needs the whole document, which --long truncate would cut: use "
            "--long window (the default for late chunks) or drop --long, or --naive to embed each chunk alone"
        )


def _refuse_index(output: Path | None, level: str, engine: str) -> None:
    """Refuse --index where the job's output would get no index `similar` searches, saying why."""
    from ..io.formats import rules_of, suffixes_where
    from ..io.level_table import level_of

    where = suffixes_where(lambda r: r.by_row).replace(" and ", " or ")
    if output is None:
        raise InvalidInput(f"--index builds the ANN index beside a corpus job's output: add -o FILE{where}")
    if engine is Engine.RAY:
        raise InvalidInput(
            "--index builds the index of one store; --engine ray writes a folder of parts: leave --index out"
        )
    if not level_of(level).searchable:
        raise InvalidInput(
            f"--index builds the index `similar` searches by a query; {level} rows are searched by "
            "occurrence: leave --index out and run `bertscope index build OUT` after the job (.parquet only)"
        )
    rules = rules_of(output)
    if rules is not None and not rules.by_row:
        raise InvalidInput(
            f"--index builds an index beside a {where} store; {output.name} is searched by reading every "
            f"row: leave --index out, or write -o FILE{where}"
        )


def _shown(item: Any) -> str:
    """A text, or an (A, B) pair as `A + B`."""
    return item if isinstance(item, str) else " + ".join(item)


def _per_piece(
    m: Any, items: list[Any], ids: list[str], recipe: EmbedOptions, *, words: bool, subword: str,
    as_json: bool,
) -> None:  # fmt: skip
    """Token or word vectors printed: the recipe's layers, combine and long-text policy (not pooled)."""
    options = {
        "layers": recipe.layers,
        "combine": recipe.combine,
        "long": recipe.long,
        "stride": recipe.stride,
    }
    results = m.embed_words(items, subword=subword, **options) if words else m.embed_tokens(items, **options)
    labels = [(r.words if words else r.tokens) for r in results]
    if as_json:
        from ..core.results import per_text

        found = per_text(results)
        for item, id_ in zip(found["items"], ids, strict=True):
            item["id"] = id_  # as the sentence rows' ids: a line number, or the --id-field value
        emit_json(found)
        return
    import numpy as np

    for r, lab in zip(results, labels, strict=True):
        title = _short(r.text if getattr(r, "pair", None) is None else f"{r.text} + {r.pair}")
        table = Table("word" if words else "token", "norm", "vector", title=title)
        for label, vec in zip(lab, r.vectors, strict=True):
            table.add_row(
                label, f"{np.linalg.norm(vec):.3f}", " ".join(f"{v:+.3f}" for v in vec[:5]) + " ..."
            )
        out.print(table)


@app.command()
def similarity(
    texts: Annotated[list[str], typer.Argument(help="Two or more texts: every pair is compared.")],
    layers: LayersOpt = None,
    combine: CombineOpt = "mean",
    pooling: PoolingOpt = "auto",
    mask_special: MaskSpecialOpt = False,
    normalize: NormalizeOpt = None,
    long: LongOpt = "truncate",
    post: Annotated[
        Path | None, typer.Option("--post", help="A fitted post-processing file (see fit-post).")
    ] = None,
    baseline: Annotated[
        bool, typer.Option("--baseline", help="Add each score's percentile among unrelated pairs.")
    ] = False,
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference",
            help="Baseline corpus: a line each, or .jsonl/.csv/.tsv/.parquet text field (default: shipped)",
        ),
    ] = None,
    threshold_file: Annotated[
        Path | None, typer.Option("--threshold-file", help="A threshold from `bertscope calibrate`.")
    ] = None,
    stride: StrideOpt = None,
    prompt_name: PromptNameOpt = None,
    prompt: PromptOpt = None,
    pair: PairOpt = None,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Cosine similarity of every pair of texts, as a matrix.

    Examples: `bertscope similarity "a cat" "a dog" "a car"`,
    `bertscope similarity "a cat" "a kitten" --baseline` (the percentile among unrelated pairs),
    `bertscope similarity "a" "b" -p mean --threshold-file threshold.json` (as `calibrate -p mean` made it),
    `bertscope similarity "How are you?" "How old are you?" --pair "Fine."` (each text read with B)
    """
    refuse_lone_dash(texts, command="similarity", reads_input=False)
    if len(texts) < 2:
        raise InvalidInput("similarity needs at least two texts")
    if pair is not None and (baseline or threshold_file is not None):
        raise InvalidInput("--baseline and --threshold-file score single texts; leave --pair out with them")
    if reference is not None:
        baseline = True
    m = load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads)
    check_stride(m, stride)
    options: dict[str, Any] = dict(layers=layers, combine=combine, pooling=pooling, long=long, stride=stride)
    options.update(mask_special=mask_special, normalize=normalize)
    if (baseline or threshold_file is not None) and (prompt_name or prompt):
        raise InvalidInput("--baseline and --threshold-file do not take a prompt yet; leave --prompt* out")
    items = with_pair(texts, pair)
    matrix = m.similarity(items, post=post, prompt_name=prompt_name, prompt=prompt, **options)
    percentiles = same = None
    if baseline:
        refs = list(read_lines(reference)) if reference is not None else None
        percentiles = m.baseline(reference=refs, post=post, **options).percentile(matrix)
    if threshold_file is not None:
        threshold = checked_threshold(m, threshold_file, post, options)
        same = matrix >= threshold.threshold
    if as_json:
        extra = {"percentile": percentiles} if percentiles is not None else {}
        if same is not None:
            extra["same"] = same.tolist()
        emit_json({"texts": texts, "cosine": matrix, **extra})
        return
    title = "cosine similarity" + (" (percentile among unrelated pairs)" if baseline else "")
    table = Table("", *[f"{i}" for i in range(len(texts))], title=title)
    for i, row in enumerate(matrix):
        cells = []
        for j, v in enumerate(row):
            cell = f"{v:.3f}"
            if percentiles is not None:
                cell += f" (p{100 * percentiles[i, j]:.0f})"
            if same is not None:
                cell += " same" if same[i, j] else " diff"
            cells.append(cell)
        table.add_row(f"{i} {_short(_shown(items[i]), 30)}", *cells)
    out.print(table)


def checked_threshold(m: Any, path: Path, post: Path | None, options: dict[str, Any]) -> Any:
    """The threshold in `path`, refused unless it was calibrated with this model and these settings."""
    from ..core.post import prepare_post
    from ..research.baseline import load_threshold, score_settings

    threshold = load_threshold(path)
    spec = m.spec(**options).as_dict()
    threshold.check(m.loaded.source, score_settings(spec, prepare_post(post, spec)))
    return threshold


def _short(text: str, width: int = 50) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
