"""Static vectors beyond the input rows: `static --corpus` (aggregated) and `distill` (model2vec)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import InvalidInput
from .app import JsonOpt, ModelOpt, app, emit_json, err, load_model, old_spelling
from .typer_setup import warn


def aggregate_to_file(
    model: Any,
    corpus: str,
    export: Path | None,
    *,
    layers: str | None,
    fmt: str | None,
    min_count: int,
    subword: str,
    long: str,
    resume: bool,
    overwrite: bool,
    batch_size: int,
    quiet: bool,
    as_json: bool,
    engine: str = "local",
    workers: int = 2,
    device: str = "auto",
    threads: int | None = None,
    text_field: str = "text",
) -> None:
    """`bertscope static --corpus FILE -o OUT`: aggregate, checkpointing in `OUT.parts/`
    (or on Ray's actors with `--engine ray`, not resumable; `device` and `threads` are the actors')."""
    from ..core._enums import Engine
    from ..core.exports import EXPORTS, export_format

    if export is None:
        suffixes = ", ".join(rule.suffixes[0] for rule in EXPORTS.values() if rule.suffixes)
        raise InvalidInput(f"--corpus writes its vectors to a file: add -o OUT ({suffixes})")
    if not export.parent.exists():
        raise InvalidInput(f"cannot write {export}: the folder {export.parent} does not exist")
    export_format(export, fmt)  # an unknown suffix is refused now, not after the whole corpus has run
    checkpoint = export.with_name(export.name + ".parts")
    chosen = layers if layers is not None else 1
    # The local job refuses files it would replace (every layer's, side files too) before its first
    # forward, --resume of a finished one included (research.aggregate.check_export); so does Ray's here.
    if Engine.parse(engine, what="engine") is Engine.RAY:
        if resume:
            raise InvalidInput(
                "--engine ray is not resumable (Ray retries failed actors itself); drop --resume"
            )
        from ..research.aggregate import aggregated, check_export, word_level
        from ..research.aggregate_ray import aggregate_on_ray

        level, _ = word_level(model, aggregated(layers=chosen, long=long), subword)
        check_export(export, level.spec.layers, format=fmt, resume=False, overwrite=overwrite)

        # The actors load the model themselves: --device and --threads reach them as `embed --engine ray`
        # hands them on (--threads: each actor's torch threads and the CPUs it asks Ray for).
        result = aggregate_on_ray(
            corpus, model=model, layers=chosen, min_count=min_count, subword=subword, long=long,
            workers=workers, batch_size=batch_size, progress=not quiet, device=device,
            cpus_per_worker=threads or 1, text_field=text_field,
        )  # fmt: skip
        result.files = result.export(export, format=fmt, overwrite=True)  # check_export said it first
    else:
        result = model.static_from_corpus(
            corpus, layers=chosen, min_count=min_count, subword=subword, long=long, checkpoint=checkpoint,
            export=export, format=fmt, resume=resume, overwrite=overwrite, batch_size=batch_size,
            progress=False if quiet else None, text_field=text_field,
        )  # fmt: skip
    truncated = result.summary.n_truncated if result.summary is not None else 0
    summary = {
        "files": [str(p) for p in result.files],
        "n_words": len(result.words),
        "layers": list(result.layers),
        "n_texts": result.settings["n_texts"],
        "n_words_seen": result.settings["n_words_seen"],
        # an aggregation written before words the vocabulary cannot spell were left out counts none
        "n_words_unspelled": int(result.settings.get("n_words_unspelled", 0)),
        "min_count": min_count,
        "n_truncated": truncated,
    }
    if truncated:
        # a warning, so it shows even with --quiet and --json: words past the limit were not aggregated
        err.print(
            f"warning: {truncated} text(s) ran past the model's {model.max_tokens} tokens and were truncated "
            "(--long truncate): their last words are not in the vectors; --long window keeps every word",
            highlight=False,
        )
    if as_json:
        emit_json(summary)
    elif not quiet:
        if result.summary is not None and engine != "ray":
            err.print(result.summary.line(), highlight=False)
        err.print(
            f"wrote {', '.join(summary['files'])}: {_words_line(summary, result.layers)}", highlight=False
        )


def _words_line(summary: dict[str, Any], layers: Any) -> str:
    """'N words at layer(s) L', with how many rare and unspellable words were left out, if any."""
    count = summary["n_words"]
    line = f"{count} word{'' if count == 1 else 's'} at layer(s) {', '.join(map(str, layers))}"
    unspelled = summary["n_words_unspelled"]
    rare = summary["n_words_seen"] - summary["n_words"] - unspelled
    parts = [f"{rare} seen fewer than {summary['min_count']} times"] if rare else []
    parts += [f"{unspelled} the vocabulary cannot spell"] if unspelled else []
    if parts:
        line += f" ({' and '.join(parts)} left out)"
    return line


@app.command()
def distill(
    output: Annotated[Path, typer.Option("--output", "-o", help="The new model2vec folder to write.")],
    dim: Annotated[
        int, typer.Option("--dim", help="PCA dimensions kept (0: no PCA, the model's width).")
    ] = 256,
    vocabulary: Annotated[
        Path | None,
        typer.Option(
            "--vocabulary", help="Extra whole words to distil, one per line (distill(vocabulary=))."
        ),
    ] = None,
    # --vocab: --vocabulary's old name (model2vec's and the library's is vocabulary), still read, not shown
    old_vocab: Annotated[Path | None, typer.Option("--vocab", hidden=True)] = None,
    precision: Annotated[
        str,
        typer.Option(
            "--precision",
            help="The saved rows' precision: float16 (half the size) or float32 (the rows as computed; "
            "model2vec's quantize_to).",
        ),
    ] = "float16",
    # --dtype: --precision's first name (a storage precision; --dtype is the compute dtype elsewhere)
    old_dtype: Annotated[str | None, typer.Option("--dtype", hidden=True)] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing folder.")] = False,
    model: ModelOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Distil a static sentence embedder (model2vec's format): every piece alone through the model,
    PCA, Zipf weights. Loads with `model2vec.StaticModel.from_pretrained(FOLDER)`; encodes with no forward.

    Examples: `bertscope distill -o ./static-minilm`,
    `bertscope distill -o ./s128 --dim 128 --vocabulary words.txt`,
    `bertscope distill -o ./s32 --precision float32` (the rows as computed, not float16)
    """
    from ..core.folder import model_name
    from ..core.loading import is_model2vec
    from ..research.distill import (
        check_dim,
        check_output,
        check_precision,
        distillable_width,
        read_vocabulary,
    )
    from ..research.distill import distill as run_distill

    vocabulary = old_spelling(vocabulary, old_vocab, name="--vocabulary", old="--vocab")
    words = read_vocabulary(vocabulary) if vocabulary is not None else None
    check_output(output, overwrite=overwrite)  # before the model loads: a wrong -o costs nothing
    check_dim(dim or None, option="--dim", keep_all="0")
    precision = old_spelling(precision, old_dtype, name="--precision", old="--dtype", default="float16")
    if old_dtype is not None:
        warn("distill --dtype is deprecated; use --precision (the saved rows' precision)")
    saved = check_precision(precision, option="--precision")
    # on torch: the distillation runs the PyTorch module itself, so the exact default's choice of runtime
    # (an ONNX export and each runtime timed, half a minute on the bundled model) would go unused; a static
    # folder loads as it is, for distillable_width's own refusal (it takes no --backend)
    static = is_model2vec(model_name(model))
    m = load_model(model, device="cpu", backend="auto" if static else "torch")
    # a static model refused first (the library's line), then a --dim wider than the model, said as --dim
    check_dim(dim or None, width=distillable_width(m), option="--dim", keep_all="0")
    folder = run_distill(m, output, dim=dim or None, vocabulary=words, precision=saved, overwrite=overwrite)
    summary = {"output": str(folder), "files": sorted(p.name for p in folder.iterdir())}
    if as_json:
        emit_json(summary)
    else:
        err.print(f"wrote {folder} ({', '.join(summary['files'])})", highlight=False)
