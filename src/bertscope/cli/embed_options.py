"""`embed`'s options checked before anything loads: `--normalize` (shared with similarity and explain), the
level a row is (--level or its shortcut flags), and each option refused where the run would not read it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..core._enums import Engine, Level, LongText
from ..errors import InvalidInput
from .app import level_option

NormalizeOpt = Annotated[
    bool | None,
    typer.Option(
        "--normalize/--no-normalize",
        help="Unit-length vectors (default: the model's own with --pooling auto, off with a named pooling).",
    ),
]


def level_asked(level_name: str | None, *, tokens: bool, words: bool, chunks: str | None) -> str:
    """The level a row is: --level NAME, or the one shortcut typed (--tokens, --words, --chunks), else
    sentence; two that disagree are refused."""
    flagged = [
        name for name, on in (("tokens", tokens), ("words", words), ("chunks", chunks is not None)) if on
    ]
    # --level word is --level words (a level's singular and plural are one name, as probe's and cka's)
    named = None if level_name is None else level_option(level_name, [v.value for v in Level])
    if len(flagged) > 1 or (named is not None and flagged and flagged != [named]):
        given = [f"--{name}" for name in flagged] + ([f"--level {level_name}"] if level_name else [])
        raise InvalidInput(f"choose one of --tokens, --chunks and --level ({', '.join(given)} given)")
    return Level.parse(named or (flagged[0] if flagged else "sentence"), what="level").value


def refuse_unused(output: Path | None, as_json: bool, **corpus_only: Any) -> None:
    """Refuse what a corpus job (-o) would leave unused, and what only a corpus job reads without -o."""
    if output is not None and as_json:
        raise InvalidInput(
            "--json prints vectors; a corpus job (-o) writes them to its file and its summary on stderr: "
            "drop --json, or -o to print the vectors"
        )
    if corpus_only.get("resume") and corpus_only.get("overwrite"):
        from ..io.job import refuse_resume_with_overwrite

        refuse_resume_with_overwrite(resume=True, overwrite=True)
    given = [f"--{name.replace('_', '-')}" for name, value in corpus_only.items() if value]
    if output is None and given:
        them = "them" if len(given) > 1 else "it"
        raise InvalidInput(f"{', '.join(given)}: for corpus jobs only; add -o FILE or leave {them} out")


def refuse_options_every_view_sets(ctx: typer.Context, views: list[str]) -> None:
    """Refuse --combine, --mask-special or --normalize/--no-normalize typed beside --view options that
    all set it for themselves (at its default too, which the library cannot tell from left out)."""
    from ..io.views import parse_views, unread_options

    typed = [name for name in ("combine", "mask_special", "normalize") if given_options(ctx, name)]
    unread = unread_options(parse_views(views), typed)
    if unread:
        flags = " and ".join("--normalize/--no-normalize" if k == "normalize" else f"--{k.replace('_', '-')}"
                             for k in unread)  # fmt: skip
        raise InvalidInput(
            f"every --view sets its own {' and '.join(unread)}, so {flags} would be read by none: drop "
            f"{'them' if len(unread) > 1 else 'it'}, or leave it out of a view that should take it"
        )


def given_options(ctx: typer.Context, name: str) -> bool:
    """Whether the option `name` was typed (or read from the environment), not left at its default."""
    # By name: typer ships its own copy of click, whose ParameterSource is not click's.
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def refuse_idle_options(
    ctx: typer.Context, output: Path | None, input_path: str | None, *, level: str, engine: str,
    collection: str | None,
) -> None:  # fmt: skip
    """Refuse an option given where it has no effect (it would be ignored in silence), naming where it
    applies: --subword off the word level, --workers/--address without Ray, --text-field/--id-field
    without records to read them from, --collection and --precision float16 where the store has no use
    for them (the corpus-only options without -o are `refuse_unused`'s)."""
    if given_options(ctx, "subword"):  # typed, even at its default: the library's check, read in flags
        from ..io.level_table import refuse_idle_level_options
        from ..io.levels import LevelOptions

        refuse_idle_level_options(LevelOptions(level=level, subword=ctx.params["subword"]), given=["subword"])
    if ray_only := [f"--{name}" for name in ("workers", "address") if given_options(ctx, name)]:
        if engine is not Engine.RAY:
            raise InvalidInput(
                f"{' and '.join(ray_only)}: for --engine ray only; add --engine ray or drop it"
            )
    named = ("text_field", "text_column", "id_field", "id_column")  # the flag typed, old spelling or new
    fields = [f"--{name.replace('_', '-')}" for name in named if given_options(ctx, name)]
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


def refuse_idle_chunk_options(
    ctx: typer.Context, chunks: str | None, *, level: str, late: bool, long: str
) -> None:
    """Refuse a chunk option the run would not read (it would be ignored in silence), and --long truncate
    with late chunks (which would run windowed in silence). --chunk-size/--chunk-overlap: the library's
    check (typed, even at the default), read in flags, for the corpus job and the chunks printed alike."""
    from ..core.chunking import ChunkBy

    def given(name: str) -> bool:
        return given_options(ctx, name)

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


def refuse_index_options(output: Path | None, level: str, engine: str) -> None:
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
