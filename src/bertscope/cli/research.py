"""The research commands: `eval pairs|words|docsim` (`cli.evaluate`), `contextuality`, `fit-post`,
`vocab add`, `plot words|layers`. Each prints a table (or --json) and writes a PNG picture."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ..errors import InvalidInput
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
    PromptNameOpt,
    PromptOpt,
    QuantizeOpt,
    StrideOpt,
    TextFieldOpt,
    ThreadsOpt,
    app,
    emit_json,
    err,
    load_model,
    old_spelling,
    out,
    read_lines,
    top_k_option,
    warn,
)
from .embed_options import given_options
from .evaluate import NoPlotOpt, OldPlotOpt, PlotOpt, eval_app, picture_path, records_table
from .pictures import OverwriteOpt, one_input, plot_app, vocab_app
from .wording import as_flags

T = TypeVar("T")

app.add_typer(eval_app, name="eval")
app.add_typer(vocab_app, name="vocab")
app.add_typer(plot_app, name="plot")


class _Reread:
    """A file's texts, read again from the start at each pass (contextuality chooses the most frequent
    words in one and measures them in the next), never held whole."""

    def __init__(self, source: str, text_field: str) -> None:
        self.source, self.text_field = source, text_field
        self._first: Iterable[str] | None = read_lines(source, text_field=text_field)  # refuses at once

    def __iter__(self) -> Iterator[str]:
        first, self._first = self._first, None
        return iter(first if first is not None else read_lines(self.source, text_field=self.text_field))


def _reread(source: str, text_field: str) -> Iterable[str]:
    """The texts of -i: a file re-read at each pass, stdin (-) read once as it streams (the library keeps
    what it must of a one-pass stream)."""
    if source == "-":
        return read_lines(source, text_field=text_field)
    return _Reread(source, text_field)


@app.command("contextuality", cls=HiddenArgumentsUnsaid)
def contextuality_cmd(
    ctx: typer.Context,
    input_path: Annotated[
        str | None,
        typer.Option(
            "--input",
            "-i",
            help="Texts: one per line, or the text field of .jsonl/.csv/.tsv/.parquet (- for stdin).",
        ),
    ] = None,
    corpus: Annotated[str | None, typer.Argument(hidden=True)] = None,
    words: Annotated[
        str | None, typer.Option("--words", "-w", help="Comma-separated words (default: the most frequent).")
    ] = None,
    top: Annotated[int, top_k_option("Without --words: this many most frequent words.", least=1)] = 10,
    # --top: --top-k's old name, still read, not shown
    old_top: Annotated[int | None, typer.Option("--top", hidden=True)] = None,
    min_contexts: Annotated[
        int,
        typer.Option("--min-contexts", help="Without --words: distinct sentences a word needs (2 or more)."),
    ] = 5,
    max_contexts: Annotated[
        int,
        typer.Option("--max-contexts", help="Occurrences measured per word: its first N in the corpus."),
    ] = 200,
    baseline_pairs: Annotated[
        int,
        typer.Option(
            "--baseline-pairs",
            help="Distinct random pairs of occurrences from different sentences (anisotropy; at most 10000).",
        ),
    ] = 2000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the baseline's random pairs.")] = 0,
    output: PlotOpt = None,
    old_plot: OldPlotOpt = None,
    no_plot: NoPlotOpt = False,
    overwrite: OverwriteOpt = False,
    text_field: TextFieldOpt = "text",
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """How contextual words are per layer (Ethayarajh 2019): self-similarity, intra-sentence, anisotropy, MEV.

    Identical sentences are one context (merged, with a note). The baseline is --baseline-pairs distinct
    random pairs of occurrences from different sentences, drawn with --seed; --json carries the settings.

    Example: `bertscope contextuality -i corpus.txt --words bread,bank -o contextuality.png`
    """
    from ..core.spec import whole_number
    from ..research.contextuality import (
        BASELINE_PAIRS,
        MAX_BASELINE_PAIRS,
        MIN_CONTEXTS_LEAST,
        MIN_CONTEXTS_MEANS,
        contextuality,
    )
    from ..research.plots import plot_contextuality

    # The library's own check, in flag words, before the model loads.
    top = old_spelling(top, old_top, name="--top-k", old="--top", default=10)
    typed_top = "--top" if old_top is not None else "--top-k"  # named as typed
    whole_number(top, typed_top, meaning="the most frequent words measured")
    whole_number(min_contexts, "--min-contexts", least=MIN_CONTEXTS_LEAST, meaning=MIN_CONTEXTS_MEANS)
    whole_number(max_contexts, "--max-contexts", least=2, meaning="occurrences measured per word")
    whole_number(baseline_pairs, "--baseline-pairs", most=MAX_BASELINE_PAIRS, meaning=BASELINE_PAIRS)
    _refuse_choosing_with_words(ctx, words, top=(typed_top, top), min_contexts=min_contexts)
    if words is not None and not any(w.strip() for w in words.split(",")):  # the library's, in flags
        raise InvalidInput(f"--words {words!r} names no word: give comma-separated words, e.g. --words bank")
    picture = picture_path(output, old_plot, no_plot, overwrite=overwrite)
    source = one_input(input_path, corpus, "sentences", instead=f"words to measure go with --words {corpus}")
    texts = _reread(source, text_field)
    result = contextuality(
        load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads),
        texts,
        # as given: a blank among words is the library's to refuse, never the most frequent in silence
        words=None if words is None else words.split(","),
        top=None if words is not None else top,  # the library refuses both; -k with --words is refused above
        min_contexts=None if words is not None else min_contexts,  # with --words: refused above
        max_contexts=max_contexts,
        baseline_pairs=baseline_pairs,
        seed=seed,
    )
    if picture is not None:
        plot_contextuality(result, picture, overwrite=overwrite)
        err.print(f"wrote {picture}")
    s = result.settings
    if merged := s["repeats_merged"]:
        warn(
            f"{merged} repeated sentence(s) merged: identical sentences are one context (of "
            f"{s['n_sentences']} sentences, {s['n_distinct_sentences']} distinct)",
            label="note:",
            style="cyan",
        )
    if result.note:
        warn(as_flags(result.note), label="note:", style="cyan")
    if as_json:
        answer = (
            result.to_dict()
        )  # its note in the flags' words, as on stderr (max_contexts=5: --max-contexts 5)
        emit_json({**answer, "note": as_flags(answer["note"])} if answer["note"] else answer)
        return
    keys = [
        "layer",
        "self_similarity",
        "intra_sentence",
        "baseline",
        "self_adjusted",
        "intra_adjusted",
        "mev",
        "mev_adjusted",
    ]
    out.print(records_table(result.records, "contextuality per layer", keys))
    for line in counts_lines(result):
        out.print(line, highlight=False, soft_wrap=True)  # a line each, whatever the terminal's width
    out.print(
        "static = the word's piece rows (self-similarity 1 to float precision); layer 0 = "
        "LayerNorm(word + position + segment): occurrences differ only by position",
        highlight=False,
    )


def counts_lines(result: Any) -> list[str]:
    """The n behind each column of contextuality's table: the words' occurrences (self_similarity, mev),
    the sentences intra_sentence averages, the baseline's pairs and sample."""
    s = result.settings
    words = ", ".join(f"{w} ({n})" for w, n in result.n_occurrences.items())
    return [
        f"words (occurrences): {words}; the n of self_similarity and mev",
        f"intra_sentence over {s['n_intra_sentences']} sentences of 2 words or more (of "
        f"{s['n_distinct_sentences']} distinct sentences, {s['n_sentences']} given); baseline over "
        f"{s['n_baseline_pairs']} distinct pairs of occurrences from different sentences (a sample of "
        f"{s['n_baseline_sample']}); mev_adjusted = mev minus the MEV of that sample",
    ]


def _refuse_choosing_with_words(
    ctx: typer.Context, words: str | None, *, top: tuple[str, int], min_contexts: int
) -> None:
    """Refuse -k or --min-contexts with --words: they choose the most frequent words, which --words
    replaces (their help says "Without --words"), so they would be ignored in silence."""
    if words is None:
        return
    (top_flag, top_value), choosers = top, (("top", "old_top"), ("min_contexts",))
    flags = [(top_flag, top_value), ("--min-contexts", min_contexts)]
    typed = [flags[i] for i, names in enumerate(choosers) if any(given_options(ctx, n) for n in names)]
    if not typed:
        return
    said = " and ".join(f"{flag} {value}" for flag, value in typed)
    if len(typed) == 1:
        verb, which, leave = "applies", "it chooses", typed[0][0]
    else:
        verb, which, leave = "apply", "they choose", "them"
    raise InvalidInput(
        f"{said} {verb} without --words ({which} the most frequent words, which --words names instead): "
        f"leave {leave} out or drop --words"
    )


@app.command("fit-post", cls=HiddenArgumentsUnsaid)
def fit_post_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="Write to .safetensors (or .npz).")],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing output.")] = False,
    input_path: Annotated[
        str | None,
        typer.Option(
            "--input",
            "-i",
            help="Texts to fit on: a line each, or the text field of .jsonl/.csv/.tsv/.parquet (- stdin).",
        ),
    ] = None,
    corpus: Annotated[str | None, typer.Argument(hidden=True)] = None,
    kind: Annotated[str, typer.Option("--kind", help="whitening, abtt, pca or standardize.")] = "whitening",
    dim: Annotated[
        int | None, typer.Option("--dim", help="Dimensions kept (whitening, pca) or removed (abtt).")
    ] = None,
    layers: LayersOpt = None,
    combine: CombineOpt = "mean",
    pooling: PoolingOpt = "auto",
    mask_special: MaskSpecialOpt = False,
    long: LongOpt = "truncate",
    stride: StrideOpt = None,
    prompt_name: PromptNameOpt = None,
    prompt: PromptOpt = None,
    text_field: TextFieldOpt = "text",
    max_texts: Annotated[
        int,
        typer.Option(
            "--max-texts",
            min=2,
            help="Fit on a uniform sample (seeded) of at most this many texts: memory stays bounded.",
        ),
    ] = 100_000,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fit whitening, all-but-the-top, PCA or standardize on a corpus's sentence vectors and save it.

    A corpus of more than --max-texts texts (100,000) is read as a stream and fitted on a uniform sample
    of that many (seeded: the same file gives the same fit), so memory does not grow with the corpus. Every
    text is fitted on, a repeated one as often as it repeats (embedded once). The vectors are embedded as
    `embed` makes them, the model's default prompt included (--prompt-name, --prompt choose another: the
    prompt the corpus will be embedded with); the file records the prompt.

    Example: `bertscope fit-post -i corpus.txt --kind whitening --dim 256 -o white.safetensors`
    """
    from ..core.post import check_post_count, fit_post_on_texts

    _check_post_output(output, overwrite=overwrite)
    check_post_count(kind, dim)  # --kind and --dim, before the corpus is read or the model loads
    source = one_input(input_path, corpus, "texts to fit on")
    texts, seen = uniform_sample(read_lines(source, text_field=text_field), max_texts)
    if len(texts) < 2:  # said in the file's words, before the model loads: a fit needs two vectors
        name = "stdin" if source == "-" else source
        raise InvalidInput(f"fit-post needs 2 texts or more; {name} gives {len(texts)}")
    check_post_count(kind, dim, n_texts=len(set(texts)), n_rows=len(texts))
    if seen > len(texts):
        warn(
            f"fitting on a uniform sample of {len(texts):,} of {seen:,} texts (--max-texts)",
            label="note:",
        )
    processor = fit_post_on_texts(
        load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads),
        texts,
        kind,
        dim=dim,
        layers=layers,
        combine=combine,
        pooling=pooling,
        mask_special=mask_special,
        long=long,
        stride=stride,
        prompt_name=prompt_name,
        prompt=prompt,
    )
    processor.save(output)
    summary = {
        "output": str(output),
        "kind": processor.kind.value,
        "dim_in": processor.dim_in,
        "dim_out": processor.dim_out,
        **processor.settings,
    }
    if as_json:
        emit_json(summary)
        return
    fitted, distinct = processor.settings["n_fit"], processor.settings["n_distinct_texts"]
    # every row is fitted on, repeats too: the distinct count, which bounds the directions, where it differs
    said = f" ({distinct} distinct)" if distinct < fitted else ""
    err.print(
        f"wrote {output}: {processor.kind.value} {processor.dim_in} -> {processor.dim_out} dims, "
        f"fitted on {fitted} texts{said}"
    )


def uniform_sample(items: Iterable[T], size: int, *, seed: int = 0) -> tuple[list[T], int]:
    """At most `size` of a stream's items, a uniform sample (Algorithm R, seeded), and how many it held;
    all of them, in order, where it held no more."""
    rng = random.Random(seed)
    kept: list[T] = []
    seen = 0
    for item in items:
        if seen < size:
            kept.append(item)
        elif (slot := rng.randrange(seen + 1)) < size:
            kept[slot] = item
        seen += 1
    return kept, seen


def _check_post_output(output: Path, *, overwrite: bool) -> None:
    """Refuse, before fitting, a file `PostProcessor.save` refuses, or one that exists (no --overwrite)."""
    from ..core.post import check_post_path

    check_post_path(output)
    if output.exists() and not overwrite:
        raise InvalidInput(f"{output} exists; pass --overwrite to replace it, or choose another name")
