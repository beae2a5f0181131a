"""Why and how similar: `explain`, `calibrate`, `attention`, and `plot static`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from ..errors import InvalidInput
from .app import (
    BackendOpt,
    CombineOpt,
    CutOpt,
    DeviceOpt,
    DtypeOpt,
    HiddenArgumentsUnsaid,
    JsonOpt,
    LayersOpt,
    LongOpt,
    MaskSpecialOpt,
    ModelOpt,
    PoolingOpt,
    PromptNameOpt,
    PromptOpt,
    QuantizeOpt,
    StrideOpt,
    ThreadsOpt,
    app,
    emit_json,
    err,
    load_model,
    old_spelling,
    out,
    say_cut,
    top_k_option,
)
from .embed_options import NormalizeOpt
from .embed_printed import spec_line
from .evaluate import line_of
from .pictures import OverwriteOpt, picture_output
from .research import plot_app
from .typer_setup import missing_argument

PostOpt = Annotated[Path | None, typer.Option("--post", help="A fitted post-processing file (see fit-post).")]


@app.command()
def explain(
    a: Annotated[str, typer.Argument(help="The first text.")],
    b: Annotated[str, typer.Argument(help="The second text.")],
    layers: LayersOpt = None,
    combine: CombineOpt = "mean",
    pooling: PoolingOpt = "auto",
    mask_special: MaskSpecialOpt = False,
    normalize: NormalizeOpt = None,
    long: LongOpt = "truncate",
    stride: StrideOpt = None,
    post: PostOpt = None,
    prompt_name: PromptNameOpt = None,
    prompt: PromptOpt = None,
    top: Annotated[int, top_k_option("How many token pairs to list.", least=0)] = 10,
    # --top: --top-k's old name, still read, not shown
    old_top: Annotated[int | None, typer.Option("--top", hidden=True, min=0)] = None,
    exact: Annotated[
        bool, typer.Option("--exact", help="Refuse poolings that have no exact split (cls, pooler).")
    ] = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write a heatmap of the contributions (PNG).")
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
    """Why two texts score what they score: the cosine split into token-pair contributions.

    Exact for mean, mean_sqrt_len, first_last_avg and max pooling (through --post too); cls and pooler
    show the first token's ([CLS]) attention row instead, marked as not exact.
    Example: `bertscope explain "The cat sat on the mat." "A dog lay on the rug." -p mean -o why.png`
    """
    top = old_spelling(top, old_top, name="--top-k", old="--top", default=10)
    picture = picture_output(output, overwrite=overwrite)
    m = load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads)
    options = dict(layers=layers, combine=combine, pooling=pooling, mask_special=mask_special)
    options.update(prompt_name=prompt_name, prompt=prompt)
    result = m.explain(
        a, b, post=post, top=top, exact=exact, normalize=normalize, long=long, stride=stride, **options
    )
    if picture is not None:
        from ..explain import plot_explanation

        err.print(f"wrote {plot_explanation(result, picture, overwrite=overwrite)}")
    if as_json:
        emit_json({"model": m.loaded.source, **result.to_dict()})  # as /explain and similarity --json
        return
    out.print(f"cosine {result.score:.4f}  ({result.method})", highlight=False)
    out.print(result.note, highlight=False)
    if result.top_pairs:
        table = Table("token in a", "token in b", "contribution", "of the score", title="top token pairs")
        for pair in result.top_pairs:
            share = pair["contribution"] / result.score if result.score else float("nan")
            table.add_row(pair["token_a"], pair["token_b"], f"{pair['contribution']:+.4f}", f"{share:.1%}")
        out.print(table)
    if result.contributions is None:  # the model's own first token: [CLS], or <s> (RoBERTa, XLM-R, MPNet)
        heading = f"{result.tokens_a[0]} attention (not exact)"
    else:  # not exact where they were measured not to sum to the score (the note says by how much)
        heading = "share of the score" + ("" if result.exact else " (not exact)")
    table = Table("a", "", "b", "", title=f"each token: {heading}")
    for row in range(max(len(result.tokens_a), len(result.tokens_b))):
        a_cells = _cells(result.tokens_a, result.share_a, row)
        table.add_row(*a_cells, *_cells(result.tokens_b, result.share_b, row))
    out.print(table)


def _cells(tokens: list[str], shares: np.ndarray, row: int) -> tuple[str, str]:
    return (tokens[row], f"{shares[row]:+.4f}") if row < len(tokens) else ("", "")


@app.command(cls=HiddenArgumentsUnsaid)
def calibrate(
    input_path: Annotated[
        Path | None,
        typer.Option(
            "--input",
            "-i",
            help="TSV file: text, text, 0/1 label per line (header allowed); - reads standard input.",
        ),
    ] = None,
    # `calibrate PAIRS`: the older form, still read (a script passes it), not shown: -i as `eval pairs`
    pairs_file: Annotated[Path | None, typer.Argument(hidden=True)] = None,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to save the threshold (JSON).")
    ] = Path("threshold.json"),
    layers: LayersOpt = None,
    combine: CombineOpt = "mean",
    pooling: PoolingOpt = "auto",
    mask_special: MaskSpecialOpt = False,
    normalize: NormalizeOpt = None,
    long: LongOpt = "truncate",
    post: PostOpt = None,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
    overwrite: Annotated[
        bool,
        typer.Option("--overwrite", help="Replace the threshold file if it exists."),
    ] = False,
) -> None:
    """The cosine threshold that best separates labelled pairs (by F1), saved for `similarity`/`similar`.

    Example: `bertscope calibrate -i pairs.tsv -p mean -o threshold.json`, then
    `bertscope similarity "a" "b" -p mean --threshold-file threshold.json`
    (`bertscope calibrate pairs.tsv`, the older form, still works)
    """
    from ..core.text_files import shown_path
    from ..core.tokens import named_as
    from ..research.baseline import calibrate as fit_threshold
    from ..research.baseline import check_threshold_file, read_numbered_pairs

    if input_path is not None and pairs_file is not None:
        raise InvalidInput(
            "give the pairs file once: -i/--input FILE (a file as an argument is its older form)"
        )
    if (pairs := input_path or pairs_file) is None:
        raise missing_argument(
            "name the pairs file with -i/--input FILE (TSV: text, text, 0/1 label per line)"
        )
    rows, numbers = read_numbered_pairs(pairs)
    check_threshold_file(output, overwrite=overwrite)  # before the load and the fit, not after
    m = load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads)
    with named_as(line_of(pairs, numbers)):  # a refused text is named by its line of the file
        threshold = fit_threshold(
            m, rows, post=post, layers=layers, combine=combine, pooling=pooling, mask_special=mask_special,
            normalize=normalize, long=long,
        )  # fmt: skip
    threshold.save(output, overwrite=overwrite)
    err.print(f"wrote {output}")
    if as_json:
        emit_json(threshold.to_dict())
        return
    title = f"calibrated on {shown_path(pairs)}"  # <stdin> for -, as eval pairs names it
    table = Table("threshold", "precision", "recall", "F1", "pairs (1 / 0)", title=title)
    table.add_row(
        f"{threshold.threshold:.4f}",
        f"{threshold.precision:.3f}",
        f"{threshold.recall:.3f}",
        f"{threshold.f1:.3f}",
        f"{threshold.n_positives} / {threshold.n_negatives}",
    )
    out.print(table)
    out.print(f"settings: {spec_line(threshold.settings)}", highlight=False)  # as embed prints them


@app.command()
def attention(
    text: Annotated[str, typer.Argument(help="One text (A with --pair).")],
    pair: Annotated[
        str | None,
        typer.Option(
            "--pair",
            help="A second text B: the text is read as the pair [CLS] A [SEP] B [SEP].",
        ),
    ] = None,
    layer: Annotated[
        int, typer.Option("--layer", help="Encoder layer 1..L (negative counts from the end).")
    ] = -1,
    head: Annotated[
        int | None, typer.Option("--head", help="One head (default: the mean over heads).")
    ] = None,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    long: CutOpt = "truncate",
    as_json: JsonOpt = False,
) -> None:
    """Attention weights of one layer: what each token reads most (heads averaged, or one head).

    Example: `bertscope attention "The animal didn't cross the street because it was tired" --layer 5`
    """
    from ..attention import attention_layer, attention_of
    from ..core.tokens import named_as
    from .embed_printed import only_text_named

    m = load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads)
    index = attention_layer(m, layer, head=head)  # before any forward, or a first export
    # counts a cut, says none
    with named_as(only_text_named):  # "the text", "the pair", as anatomy names its one text, not "text 0"
        tokens, weights = attention_of(m, text if pair is None else (text, pair), long=long)
    say_cut(
        [tokens.n_dropped], m.max_tokens, "attention is read within one window; split the text to see its end"
    )
    grid = weights[index].mean(axis=0) if head is None else weights[index, head]
    if as_json:
        # The service's /attention fields: head null with mean_heads true is the mean over heads.
        answer = {
            "model": m.loaded.source,
            "tokens": tokens.tokens,
            "token_type_ids": tokens.token_type_ids,
            "special": tokens.special_tokens_mask,
            "n_dropped": tokens.n_dropped,
            "n_layers": int(weights.shape[0]),
            "n_heads": int(weights.shape[1]),
            "layer": index % m.n_layers + 1,
            "head": head,
            "mean_heads": head is None,
            "attention": grid,
        }
        emit_json(answer)
        return
    which = "mean over heads" if head is None else f"head {head}"
    table = Table("token", "reads most", "weight", "then", title=f"layer {index % m.n_layers + 1}, {which}")
    for i, token in enumerate(tokens.tokens):
        order = np.argsort(-grid[i])
        first, second = int(order[0]), int(order[1]) if len(order) > 1 else int(order[0])
        table.add_row(token, tokens.tokens[first], f"{grid[i, first]:.3f}", tokens.tokens[second])
    out.print(table)


@plot_app.command("static")
def plot_static_cmd(
    items: Annotated[list[str] | None, typer.Argument(help="Word pieces to draw.")] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Draw the first N whole-word pieces of the vocabulary."),
    ] = None,
    old_limit: Annotated[int | None, typer.Option("--top", hidden=True, min=1)] = None,
    method: Annotated[str, typer.Option("--method", help="pca, tsne, or umap (needs umap-learn).")] = "pca",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="PNG file to write (default: static.png).")
    ] = None,
    overwrite: OverwriteOpt = False,
    model: ModelOpt = None,
) -> None:
    """Static word-piece rows (no position, no segment) as points in 2-D, each labelled.

    Examples: `bertscope plot static king queen man woman bread cake -o static.png`,
    `bertscope plot static --limit 300 --method tsne` (the first N, as `--limit` is elsewhere; `--top`, its
    old spelling, is still read)
    """
    from ..research.plots import each_piece_once, plot_static
    from ..static import first_words

    top = old_spelling(limit, old_limit, name="--limit", old="--top")
    if not items and top is None:
        raise InvalidInput("name word pieces (e.g. king queen bread), or give --limit N")
    if items and top is not None:
        raise InvalidInput("name word pieces, or give --limit N (not both)")
    each_piece_once(items or [])  # before the model loads; plot_static also finds a piece and its id
    picture = picture_output(output, overwrite=overwrite, default="static.png")
    m = load_model(model)
    ids: list[Any] = first_words(m, top) if top is not None else m.static_ids(items or [])
    err.print(f"wrote {plot_static(m, ids, picture, method=method, overwrite=overwrite)}")
