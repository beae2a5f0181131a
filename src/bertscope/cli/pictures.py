"""`bertscope vocab add` and `bertscope plot words|layers`: a model with whole-word tokens, and pictures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, overload

import typer
from rich.table import Table

from ..errors import InvalidInput
from .app import (
    BackendOpt,
    DeviceOpt,
    DtypeOpt,
    JsonOpt,
    ModelOpt,
    QuantizeOpt,
    TextFieldOpt,
    ThreadsOpt,
    check_layers_unloaded,
    cuts_said_once,
    emit_json,
    err,
    load_model,
    out,
    read_lines,
)
from .typer_setup import missing_argument

__all__ = ["OverwriteOpt", "one_input", "picture_output", "plot_app", "split_list", "vocab_app"]

vocab_app = typer.Typer(
    help="Extend the vocabulary with whole-word tokens.\n\n"
    "Example: `bertscope vocab add covid19 mRNA --init pieces -o ./extended`.",
    no_args_is_help=True,
)
plot_app = typer.Typer(
    help="Pictures of word occurrences, of token-to-token cosine per layer and of static rows.\n\n"
    "Examples: `bertscope plot words bank,river -i corpus.txt -o words.png`, "
    '`bertscope plot layers "a cat"`.',
    no_args_is_help=True,
)


# Every command that writes a picture takes it: an existing picture is replaced only when asked.
OverwriteOpt = Annotated[
    bool, typer.Option("--overwrite", help="Replace the picture file if it exists (else it is refused).")
]


@overload
def picture_output(output: Path | None, *, overwrite: bool, default: str) -> Path: ...
@overload
def picture_output(
    output: Path | None, *, overwrite: bool, default: str | None = None, no_plot: bool | None = None
) -> Path | None: ...
def picture_output(
    output: Path | None, *, overwrite: bool, default: str | None = None, no_plot: bool | None = None
) -> Path | None:
    """Where a command writes its picture, checked before any model loads: -o/--output, else `default`
    (a command that draws only with -o has none), or nowhere with --no-plot (`no_plot` is None for a
    command without that option). The path must take a picture (`picture_file`: a picture suffix, a
    folder that exists) and hold no file unless --overwrite: one line, `P exists; pass --overwrite to
    replace it, or choose another name`, naming the default when the command chose the name, and
    --no-plot where the command has it (a second run of a measurement need not draw again).
    --overwrite with no picture to write is refused as unused."""
    from ..research.plots import picture_file

    if no_plot and (output is not None or overwrite):
        given = "-o/--output" if output is not None else "--overwrite"
        raise InvalidInput(f"{given} names a picture, and --no-plot writes none: drop one of them")
    path = output if output is not None else (Path(default) if default and not no_plot else None)
    if path is None:
        if overwrite:
            raise InvalidInput("--overwrite replaces an existing picture: add -o FILE.png, or drop it")
        return None
    try:
        return picture_file(path, overwrite=overwrite)
    except InvalidInput as exc:
        if output is not None:
            raise
        # A name the user did not type: say where it came from (a default name only fails by existing)
        skip = "" if no_plot is None else ", or --no-plot to write none"
        raise InvalidInput(
            f"{exc} with -o FILE{skip} ({default} is where this command draws by default)"
        ) from None


# --method of `plot words` and `senses`: research.plots.Projection's members (its import is heavy)
METHODS = "pca, tsne or umap (umap needs pip install umap-learn)."


def split_list(value: str | None) -> list[str]:
    """The items of a comma-separated option, stripped, empty ones left out."""
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def one_input(
    input_path: str | None, positional: str | None, what: str, *, instead: str = "", layout: str = ""
) -> str:
    """The text file named by -i/--input, or by the older positional argument; exactly one of them.

    `instead`: what an argument given beside -i more likely meant (contextuality's words: --words);
    `layout`: what a line of the file holds, where it is not one text a line (- for stdin)."""
    if input_path and positional:
        meant = f"; {instead}" if instead else ""
        raise InvalidInput(
            f"give the {what} once: -i/--input FILE ({positional!r}, an argument, is read as a second file, "
            f"the older form of -i{meant})"
        )
    if not (input_path or positional):
        said = layout or "one per line, - for stdin"
        raise missing_argument(f"name the {what} with -i/--input FILE ({said})")
    return str(input_path or positional)


@vocab_app.command("add")
def vocab_add(
    words: Annotated[list[str], typer.Argument(help="Words to keep whole as new tokens.")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Write the extended model to this new folder.")
    ],
    init: Annotated[str, typer.Option("--init", help="pieces, mean or random.")] = "pieces",
    init_from: Annotated[
        list[str] | None, typer.Option("--init-from", help="word=a,b: row from these words.")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace a folder an earlier `vocab add` wrote.")
    ] = False,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add whole-word tokens with informed rows and save a model folder that transformers loads.

    Examples: `bertscope vocab add covid19 mRNA --init pieces -o ./extended`,
    `bertscope vocab add covid19 --init-from covid19=virus,disease -o ./extended`
    """
    from ..vocab import (
        Init,
        add_tokens,
        check_save_folder,
        new_words,
        normalised_forms,
        pieces_refusal,
        save,
        unspelled,
    )  # fmt: skip

    check_save_folder(output, overwrite=overwrite)  # before the model loads: a folder not to write

    how: Any = init
    if init_from and init != "pieces":
        # each --init-from gives its word's row: an --init beside them would be read by none
        raise InvalidInput(f"--init {init} and --init-from both set the new rows; give one of them")
    if init_from:
        # read and checked before the model loads: each --init-from is WORD=a,b (the row from words a and b)
        how = {}
        for item in init_from:
            word, _, sources = item.partition("=")
            if not word.strip() or not split_list(sources):
                raise InvalidInput(
                    f"--init-from {item!r} is malformed: give WORD=a,b (WORD's row from words a and b), "
                    f"e.g. --init-from {words[0]}=virus"
                )
            if word.strip() in how:
                # two lists for one token: neither is quietly dropped
                raise InvalidInput(
                    f"--init-from {word.strip()} is given twice; give it once with all its words, "
                    f"e.g. --init-from {word.strip()}=a,b"
                )
            how[word.strip()] = split_list(sources)
        if missing := [w for w in words if w not in how]:
            raise InvalidInput(
                f"--init-from names no words for {', '.join(missing)}; add --init-from {missing[0]}=a,b "
                "for each word added"
            )
    m = load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads)
    added = new_words(m, words)  # first: a static model is refused here, in the library's one line
    if not init_from and Init.parse(init, what="--init") is Init.PIECES and (bad := unspelled(m, added)):
        word, pieces = next(iter(bad.items()))
        raise InvalidInput(pieces_refusal(word, pieces, option="--init"))
    before = {w: _pieces(m, w) for w in words}
    extended = add_tokens(m, words, init=how)
    save(extended, output, overwrite=overwrite)
    # A special token ("[MASK]") is one piece of the vocabulary, but text that spells it is read as its
    # characters ([ mask ]), never as the special id: it is no word a text can reach, so not "one piece"
    specials = set(m.loaded.tokenizer.all_special_tokens)
    forms = normalised_forms(m, words)
    firsts: dict[str, str] = {}  # each normalised form's first word: a later one is that same token
    records: list[dict[str, Any]] = []
    for w in words:
        repeat = forms[w] in firsts
        earlier = firsts.setdefault(forms[w], w)
        rec: dict[str, Any] = {
            "word": w,
            "before": before[w],
            "after": _pieces(extended, w),
            "added": not repeat and w in added,
        }
        if repeat and earlier in added:
            rec["same_token_as"] = earlier  # "COVID19" after "covid19" (uncased), or covid19 twice
        records.append(rec)
    twin = [r for r in records if "same_token_as" in r]
    special = [w for w in words if w not in added and w in specials]
    whole = [r["word"] for r in records if not r["added"] and r["word"] not in specials and r not in twin]
    sizes = {"vocab_size_before": len(m.vocab), "vocab_size": len(extended.vocab)}
    if as_json:
        found = {"added": added, "already_one_piece": whole, "special_tokens": special}
        emit_json({"output": str(output), **found, **sizes, "words": records})
        return
    title = f"saved to {output}: vocabulary {sizes['vocab_size_before']:,} -> {sizes['vocab_size']:,}"
    table = Table("word", "pieces before", "tokens now", "added", title=title)
    for rec in records:
        said = "yes" if rec["added"] else "no: already one piece"
        if rec["word"] in special:
            said = "no: a special token (text spelling it reads as characters)"
        if "same_token_as" in rec:
            said = f"no: the same token as {rec['same_token_as']}"
        table.add_row(rec["word"], " ".join(rec["before"]), " ".join(rec["after"]), said)
    out.print(table)
    kept = f"; not added, already one piece: {', '.join(whole)}" if whole else ""
    if special:
        kept += f"; not added, special tokens: {', '.join(special)}"
    if twin:
        kept += "; the same token: " + ", ".join(f"{r['word']} as {r['same_token_as']}" for r in twin)
    out.print(f"added {len(added)} of {len(words)}: {', '.join(added) or 'none'}{kept}", highlight=False)


def _pieces(m: Any, word: str) -> list[str]:
    tok = m.tokenize(word)
    return tok.tokens[tok.n_prefix : len(tok) - tok.n_suffix]


@plot_app.command("words")
def plot_words_cmd(
    words: Annotated[str, typer.Argument(help="Comma-separated words, e.g. bank,river,money,bread.")],
    input_path: Annotated[
        str | None,
        typer.Option(
            "--input",
            "-i",
            help="Texts: one per line, or the text field of .jsonl/.csv/.tsv/.parquet (- for stdin).",
        ),
    ] = None,
    contexts: Annotated[str | None, typer.Option("--contexts", hidden=True)] = None,
    layer: Annotated[int, typer.Option("--layer", help="Layer (0 = embedding output, -1 = last).")] = -1,
    method: Annotated[str, typer.Option("--method", help=f"2-D layout: {METHODS}")] = "pca",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="PNG file to write (default: words.png).")
    ] = None,
    overwrite: OverwriteOpt = False,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the 2-D layout (t-SNE, UMAP; PCA's solver).")
    ] = 0,
    text_field: TextFieldOpt = "text",
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Each occurrence of each word as a point in 2-D, coloured by word (--json: the points too). The
    texts stream: a file is never held whole.

    Example: `bertscope plot words bank,river,money,bread -i corpus.txt --layer 6 -o words.png`
    """
    from ..research.plots import Projection, draw_words, word_points
    from ..research.states import check_seed

    chosen = split_list(words)
    if not chosen:  # the library's words=['bank'] in the command line's words, before the model loads
        raise InvalidInput(
            f"no word given in {words!r}: name one or more, comma-separated, e.g. bertscope plot words "
            "bank,river -i corpus.txt"
        )
    Projection.parse(method, what="projection")  # --method, before the model loads
    check_seed(seed)
    picture = picture_output(output, overwrite=overwrite, default="words.png")  # before the work

    # streamed, as contextuality reads them: only the words' occurrences are kept, never the file
    contexts_read = read_lines(one_input(input_path, contexts, "sentences"), text_field=text_field)
    found = word_points(
        load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads),
        chosen,
        contexts_read,
        layer=layer,
        method=method,
        seed=seed,
    )
    draw_words(found, picture, overwrite=overwrite)
    err.print(f"wrote {picture}")
    if as_json:
        emit_json(found.to_dict())


@plot_app.command("layers")
def plot_layers_cmd(
    text: Annotated[str, typer.Argument(help="One text.")],
    layers: Annotated[str, typer.Option("--layers", "-l", help="Layers to show (a layer spec).")] = "all",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="PNG file to write (default: layers.png).")
    ] = None,
    overwrite: OverwriteOpt = False,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Heatmaps of token-to-token cosine at each layer of one text (--json: the matrices too).

    Example: `bertscope plot layers "I like eating bread" -l 0,6 -o layers.png --json`
    """
    from ..research.plots import draw_layers, layer_cosines

    check_layers_unloaded(model, layers)  # a layer the model has not, said before the picture's name
    picture = picture_output(output, overwrite=overwrite, default="layers.png")  # before the work

    m = load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads)
    with cuts_said_once("the picture stops there; split the text to see its end"):  # no --long here
        found = layer_cosines(m, text, layers=layers)
    draw_layers(found, picture, overwrite=overwrite)
    err.print(f"wrote {picture}")
    if as_json:
        emit_json(found.to_dict())
