"""The command line's `similarity`: the cosine of every pair of texts, as a matrix (registered by
cli/embed.py, after `embed`, where `bertscope --help` lists it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ..errors import InvalidInput
from .app import (
    BackendOpt,
    CombineOpt,
    DeviceOpt,
    DtypeOpt,
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
    StrideOpt,
    ThreadsOpt,
    check_stride,
    emit_json,
    load_model,
    out,
    read_lines,
    with_pair,
)
from .embed_options import NormalizeOpt
from .embed_printed import check_argument_texts, short_text, shown_value
from .typer_setup import missing_argument


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
    check_argument_texts(texts, command="similarity", reads_input=False)
    if len(texts) < 2:  # a missing argument, as click's own: exit 2 (docs/errors.md)
        raise missing_argument("similarity needs at least two texts (every pair is compared); give another")
    if pair is not None and (baseline or threshold_file is not None):
        raise InvalidInput("--baseline and --threshold-file score single texts; leave --pair out with them")
    if reference is not None:
        baseline = True
    m = load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads)
    check_stride(m, stride, long)
    options: dict[str, Any] = dict(layers=layers, combine=combine, pooling=pooling, long=long, stride=stride)
    options.update(mask_special=mask_special, normalize=normalize)
    if (baseline or threshold_file is not None) and (prompt_name or prompt):
        raise InvalidInput("--baseline and --threshold-file do not take a prompt yet; leave --prompt* out")
    items = with_pair(texts, pair)
    matrix = m.similarity(items, post=post, prompt_name=prompt_name, prompt=prompt, **options)
    percentiles = same = fitted = None
    if baseline:
        refs = list(read_lines(reference)) if reference is not None else None
        fitted = m.baseline(reference=refs, post=post, **options)
        percentiles = fitted.percentile(matrix)
    if threshold_file is not None:
        threshold = checked_threshold(m, threshold_file, post, options)
        same = matrix >= threshold.threshold
    if as_json:
        from ..core.spec import EmbedOptions, resolve

        # /v2/similarity's fields: the model, the spec the scores were made with, the baseline's figures
        recipe = resolve(m, EmbedOptions.given(post=post, prompt_name=prompt_name, prompt=prompt, **options))
        answer: dict[str, Any] = {"model": m.loaded.source, "texts": texts, "scores": matrix}
        answer["spec"] = recipe.provenance()
        if pair is not None:  # each text was read with B, named as tokens --pair --json names it
            answer["pair"] = answer["spec"]["pair"] = pair
        if fitted is not None:
            answer.update(percentile=percentiles, baseline=fitted.describe())
        if same is not None:
            answer["same"] = same.tolist()
        emit_json(answer)
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
        table.add_row(f"{i} {short_text(shown_value(items[i]), 30)}", *cells)
    out.print(table)


def checked_threshold(m: Any, path: Path, post: Path | None, options: dict[str, Any]) -> Any:
    """The threshold in `path`, refused unless it was calibrated with this model and these settings."""
    from ..core.post import prepare_post
    from ..research.baseline import load_threshold, score_settings

    threshold = load_threshold(path)
    spec = m.spec(**options).as_dict()
    from ..core.fingerprint_facts import model_files

    settings = score_settings(spec, prepare_post(post, spec, model=m), cut=True)
    threshold.check(m.loaded.source, settings, files=model_files(m))
    return threshold
