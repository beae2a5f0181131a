"""The `eval` commands: `eval pairs|words|docsim`, which layer, pooling and post-processing match human
judgements; each prints a table (or --json) and writes a PNG picture. The picture and table options are
shared with the other research commands (`cli.research`, which registers this group)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ..errors import CorpusError, InvalidInput
from .app import (
    BackendOpt,
    CombineOpt,
    DeviceOpt,
    DtypeOpt,
    HiddenArgumentsUnsaid,
    JsonOpt,
    LayersOpt,
    LongOpt,
    MaskSpecialOpt,
    ModelOpt,
    PoolingOpt,
    QuantizeOpt,
    StrideOpt,
    ThreadsOpt,
    check_stride,
    emit_json,
    err,
    load_model,
    out,
    warn,
)
from .pictures import OverwriteOpt, one_input, picture_output, split_list
from .wording import flags_named

eval_app = typer.Typer(
    help="Measure which layer, pooling and post-processing match human judgements.\n\n"
    "Examples: `bertscope eval pairs -i pairs.tsv`, `bertscope eval words --dataset simlex999`.",
    no_args_is_help=True,
)
PlotOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Draw the picture to this PNG file (none without it).",
    ),
]
# --plot was this option's name before -o/--output everywhere; still read, no longer shown
OldPlotOpt = Annotated[Path | None, typer.Option("--plot", hidden=True)]
# --no-plot: what a measurement does without -o since it draws only when asked (as probe, cka and explain
# do); still read, no longer shown, and still refused beside -o or --overwrite
NoPlotOpt = Annotated[bool, typer.Option("--no-plot", hidden=True)]


def picture_path(
    output: Path | None, old_plot: Path | None, no_plot: bool, *, overwrite: bool
) -> Path | None:
    """Where a measurement draws its picture: -o (or the old --plot), else nowhere: a second run or a
    --json run leaves no file it was not asked for. Checked by `picture_output` (a picture suffix, a
    folder, no existing file without --overwrite), so call it before the work."""
    return picture_output(output or old_plot, overwrite=overwrite, no_plot=no_plot)


def cell(value: Any) -> str:
    """A table cell: floats to 4 places, None as "-"."""
    return f"{value:.4f}" if isinstance(value, float) else "-" if value is None else str(value)


def records_table(records: list[dict[str, Any]], title: str, keys: list[str]) -> Table:
    """A table of result records, one row each, the `keys` as columns."""
    table = Table(*keys, title=title)
    for rec in records:
        table.add_row(*(cell(rec[k]) for k in keys))
    return table


def text_file(read: Any, path: Path) -> Any:
    """`read(path)`, a file that is not UTF-8 turned into one line naming it and the fix."""
    try:
        return read(path)
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"{path}: not UTF-8 text ({exc.reason}); convert the file to UTF-8 "
            "(e.g. iconv -f latin1 -t utf-8)"
        ) from None


def line_of(path: Path, numbers: list[int]) -> Callable[[str, int], str]:
    """A `core.tokens.named_as` naming of pair i of a pairs file by its line: "pairs.tsv:4"."""
    from ..core.text_files import shown_path

    return lambda _kind, i: f"{shown_path(path)}:{numbers[i]}"


def post_option(post: str | None) -> list[Any]:
    """--post's comma-separated kinds, each fitted file among them loaded."""
    from ..core.post import load_post

    return [load_post(p) if Path(p).suffix in (".safetensors", ".npz") else p for p in split_list(post)]


@eval_app.command("pairs", cls=HiddenArgumentsUnsaid)
def eval_pairs(
    input_path: Annotated[
        str | None,
        typer.Option(
            "--input",
            "-i",
            help="TSV: text_a, text_b, gold score per line (header optional); - reads standard input.",
        ),
    ] = None,
    pairs_file: Annotated[str | None, typer.Argument(hidden=True)] = None,
    layers: Annotated[str, typer.Option("--layers", "-l", help="Layers to sweep (a layer spec).")] = "all",
    pooling: Annotated[
        str, typer.Option("--pooling", "-p", help="Poolings to sweep: cls, mean, max, mean_sqrt_len.")
    ] = "cls,mean,max",
    post: Annotated[
        str | None,
        typer.Option(
            "--post", help="Also sweep post-processing: whitening, abtt, pca, standardize, or a fitted file."
        ),
    ] = None,
    post_dim: Annotated[
        int | None,
        typer.Option(
            "--post-dim",
            min=1,
            help="Dimensions kept by whitening/pca, or directions removed by abtt, fitted here.",
        ),
    ] = None,
    mask_special: MaskSpecialOpt = False,
    long: LongOpt = "truncate",
    stride: StrideOpt = None,
    output: PlotOpt = None,
    old_plot: OldPlotOpt = None,
    no_plot: NoPlotOpt = False,
    overwrite: OverwriteOpt = False,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Spearman/Pearson of cosine vs gold for every layer x pooling (x post); one forward per text.

    Examples: `bertscope eval pairs -i sts.tsv`, `bertscope eval pairs -i sts.tsv --layers -3: --pooling mean
    --post whitening -o sweep.png`
    """
    from ..core.text_files import shown_path
    from ..core.tokens import named_as
    from ..research.analysis import read_numbered_pairs, sweep
    from ..research.plots import plot_sweep

    layout = "text<TAB>text<TAB>score a line"
    pairs = Path(one_input(input_path, pairs_file, "pairs file", layout=layout))
    if post_dim is not None and post is None:
        raise InvalidInput(
            "--post-dim is the dimensions --post whitening or pca keeps (or the directions abtt removes); "
            "add --post or drop it"
        )

    picture = picture_path(output, old_plot, no_plot, overwrite=overwrite)
    left, right, gold, numbers = text_file(read_numbered_pairs, pairs)
    m = load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads)
    check_stride(m, stride, long)
    # the post fits' dim is this command's --post-dim; a pair is named by its line of the file
    with flags_named(dim="--post-dim"), named_as(line_of(pairs, numbers)):
        result = sweep(
            m,
            left,
            right,
            gold,
            layers=layers,
            poolings=split_list(pooling),
            post=post_option(post),
            post_dim=post_dim,
            mask_special=mask_special,
            long=long,
            stride=stride,
        )
    if result.settings["n_truncated"]:
        warn(
            f"{result.settings['n_truncated']} text(s) longer than the model's limit were truncated "
            f"({result.settings['n_dropped']} tokens dropped); --long window keeps them all"
        )
    if picture is not None:
        plot_sweep(result, picture, overwrite=overwrite)
        err.print(f"wrote {picture}")
    if as_json:
        emit_json(
            {"records": result.records, "best": result.best, "settings": result.settings, "note": result.note}
        )
    else:
        keys = ["layer", "pooling", "post", "fitted", "spearman", "pearson"]
        # <stdin> for -, as the warnings name it
        out.print(records_table(result.records, f"{shown_path(pairs)}: {len(gold)} pairs", keys))
        if result.note:
            out.print(result.note, highlight=False, soft_wrap=True)  # why cells are nan (all: why no best)
    best = result.best
    if best is None:  # no cell has a correlation: the note says why, and a script must not read a result
        raise typer.Exit(1)
    if as_json:
        return
    # A post-processing fitted on these very pairs' texts flatters them: say so where it wins.
    mark = " (in-sample: fitted on these pairs' own texts)" if best.get("fitted") == "in-sample" else ""
    n = best["n_pairs"]
    if best["spearman_ci"] is None:
        spread = f" (no 95% interval under 4 pairs: n_pairs={n})"
        inside = ""
    else:
        low, high = best["spearman_ci"]
        spread = f" (95% interval {low:.2f}-{high:.2f}, Fisher z, n_pairs={n})"
        # a count, not a test: the cells are dependent correlations on the same pairs, and the interval
        # is the best cell's own, so it says nothing of whether another cell differs from it
        inside = f"; {best['n_cells_within_ci']} other cell(s) inside the best cell's 95% interval"
    out.print(
        f"best: layer {best['layer']}, pooling {best['pooling']}, post {best['post']}{mark}: "
        f"spearman {best['spearman']:.4f}{spread}, pearson {best['pearson']:.4f}{inside}",
        highlight=False,
        soft_wrap=True,  # one line, however narrow the terminal: scripts read it by its start
    )


@eval_app.command("words")
def eval_words(
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="simlex999 or wordsim353 (gensim's files).")
    ] = None,
    input_path: Annotated[
        Path | None,
        typer.Option(
            "--input", "-i", help="TSV: word_a, word_b, gold score per line; - reads standard input."
        ),
    ] = None,
    old_pairs: Annotated[Path | None, typer.Option("--pairs", hidden=True)] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Use only the first N pairs.")] = None,
    layers: Annotated[
        str, typer.Option("--layers", "-l", help="Layers of the decontextualized and aggregated kinds.")
    ] = "all",
    corpus: Annotated[
        str | None, typer.Option("--corpus", help="Also aggregate each word over this corpus (one per line).")
    ] = None,
    min_count: Annotated[
        int, typer.Option("--min-count", min=1, help="With --corpus: rarer words get none.")
    ] = 1,
    long: LongOpt = "window",
    distilled: Annotated[
        Path | None, typer.Option("--distilled", help="Also a model2vec folder (bertscope distill).")
    ] = None,
    output: PlotOpt = None,
    old_plot: OldPlotOpt = None,
    no_plot: NoPlotOpt = False,
    overwrite: OverwriteOpt = False,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Spearman of cosine vs gold for each kind of static vector: the input rows, each word alone
    ([CLS] w [SEP]) at each layer, aggregated over --corpus at each layer, a --distilled model2vec model.

    Examples: `bertscope eval words --dataset simlex999`,
    `bertscope eval words --dataset wordsim353 --corpus lee_background.cor --distilled ./static-minilm`
    """
    from ..core.text_files import shown_path
    from ..core.tokens import named_as
    from ..research.analysis import read_numbered_pairs, word_dataset
    from ..research.distill import load_static
    from ..research.static_kinds import compare_kinds, distilled_for, plot_kinds

    pairs = input_path or old_pairs
    if min_count != 1 and corpus is None:
        raise InvalidInput("--min-count is the count a word needs in --corpus; add --corpus FILE or drop it")
    if (dataset is None) == (pairs is None):
        raise InvalidInput("give one of --dataset simlex999|wordsim353 and -i/--input FILE")
    picture = picture_path(output, old_plot, no_plot, overwrite=overwrite)
    naming = None
    if dataset:
        data = word_dataset(dataset)
    else:
        left, right, gold, numbers = text_file(read_numbered_pairs, pairs)  # type: ignore[arg-type]
        data = list(zip(left, right, gold.tolist(), strict=True))
        naming = line_of(pairs, numbers)  # type: ignore[arg-type]  # a refused word by its file and line
    if distilled is not None and not (distilled / "config.json").is_file():
        load_static(distilled)  # says in one line why it is no model2vec folder, before the model loads
    m = load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads)
    # a missing or another model's folder refused before the corpus is read (minutes on a real corpus)
    static = None if distilled is None else distilled_for(m, distilled)
    aggregated = None
    if corpus is not None:
        aggregated = m.static_from_corpus(
            corpus, layers=layers, min_count=min_count, long=long, progress=None
        )
    with named_as(naming) if naming else nullcontext():
        result = compare_kinds(m, data if limit is None else data[:limit], layers=layers,
                               aggregated=aggregated, distilled=static)  # fmt: skip
    name = dataset or shown_path(pairs)  # <stdin> for -, as its warnings name it
    if picture is not None:
        plot_kinds(result, picture, title=name, overwrite=overwrite)
        err.print(f"wrote {picture}")
    if as_json:
        emit_json({"records": result.records, "coverage": result.coverage, "settings": result.settings})
        return
    shown = [{**r, "layer": "-" if r["layer"] is None else r["layer"]} for r in result.records]
    keys = ["kind", "layer", "n_pairs_covered", "spearman", "pearson", "spearman_common"]
    out.print(records_table(shown, f"{name}: Spearman of cosine vs gold, per kind of static vector", keys))
    cov = result.coverage
    out.print(
        f"coverage: {cov['n_pairs']} pairs, {cov['n_words']} words: {cov['n_words_whole']} whole, "
        f"{cov['n_words_split']} split into word pieces (rows and decontextualized: a split word is the "
        "mean of its pieces)",
        highlight=False,
    )
    if aggregated is not None:
        out.print(
            f"aggregated over {aggregated.settings['n_texts']} texts: {len(aggregated.words)} words "
            f"(min count {min_count}); a pair is covered when the corpus held both words; "
            f"spearman_common: on the {result.records[0]['n_pairs_common']} pairs every kind covers",
            highlight=False,
        )


@eval_app.command("docsim")
def eval_docsim(
    layers: LayersOpt = None,
    combine: CombineOpt = "mean",
    pooling: PoolingOpt = "auto",
    mask_special: MaskSpecialOpt = False,
    long: LongOpt = "truncate",
    stride: StrideOpt = None,
    post: Annotated[
        Path | None, typer.Option("--post", help="A fitted post-processing file to apply.")
    ] = None,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Document similarity vs human scores on gensim's Lee corpus (50 documents, 1225 pairs).

    Example: `bertscope eval docsim --layers -2 --pooling mean --long window`
    """
    from ..core.post import load_post
    from ..research.analysis import evaluate_docsim

    m = load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads)
    check_stride(m, stride, long)
    result = evaluate_docsim(
        m,
        post=load_post(post) if post else None,
        layers=layers,
        combine=combine,
        pooling=pooling,
        mask_special=mask_special,
        long=long,
        stride=stride,
    )
    if as_json:
        emit_json(result)
        return
    out.print(
        records_table(
            # the table's columns keep the plain words
            [
                {
                    **result,
                    "documents": result["n_documents"],
                    "pairs": result["n_pairs"],
                    "truncated": result["n_truncated"],
                }
            ],
            "Lee corpus: document cosine vs human similarity",
            ["documents", "pairs", "pearson", "spearman", "truncated"],
        )
    )
    from .embed_printed import spec_line

    out.print(f"spec: {spec_line(result['spec'])}", highlight=False)
