"""What each layer holds: `probe` (linear probes per layer, control task, selectivity), `cka` (layer and
model similarity) and `compare` (a base model against its fine-tuned child)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ..core.folder import check_model_argument
from ..errors import InvalidSpec
from .app import (
    BackendOpt,
    DeviceOpt,
    DtypeOpt,
    InputOpt,
    JsonOpt,
    ModelOpt,
    QuantizeOpt,
    TextFieldOpt,
    ThreadsOpt,
    app,
    at_most_cpus,
    emit_json,
    err,
    level_option,
    load_model,
    old_spelling,
    out,
    read_lines,
    top_k_option,
    warn,
)
from .pictures import OverwriteOpt, picture_output
from .wording import as_flags

PictureOpt = Annotated[Path | None, typer.Option("--output", "-o", help="Also write a PNG picture here.")]
CONTROL_NOTE = (
    "selectivity = task - control: a probe that also learns random per-{unit} labels well is memorising "
    "{unit} identity, not reading the property from the layer"
)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _defined(value: float) -> float | None:
    """`value`, or None (shown '-') where it is nan: a figure the note says is undefined."""
    return None if math.isnan(value) else value


def _worded(answer: dict[str, Any]) -> dict[str, Any]:
    """`answer` with its note in the command line's words (--debiased), as the note printed on stderr."""
    return {**answer, "note": as_flags(answer["note"])} if answer.get("note") else answer


def _written(path: Path) -> None:
    err.print(f"wrote {path}", highlight=False)


@app.command("probe")
def probe_command(
    input_path: Annotated[
        str,
        typer.Option(
            "--input",
            "-i",
            help="Word level: `word<TAB>label` per line, a blank line between sentences, label _ for "
            "context only (or CoNLL-U with --label-field). Sentence level: `text<TAB>label`. Structural "
            "probes (--task distance|depth): CoNLL-U with heads.",
        ),
    ],
    test: Annotated[
        str | None,
        typer.Option(
            "--test",
            help="Score on this file (same layout), trained on --input. Without it a label probe "
            "cross-validates (--folds), a structural probe holds out every 5th distinct sentence.",
        ),
    ] = None,
    probe_kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            help="Label probes: linear (logistic regression, default) or mlp (one hidden layer, 64 units).",
        ),
    ] = None,
    # --probe: --kind's old spelling (the library's kind=), still read, not shown
    old_probe: Annotated[str | None, typer.Option("--probe", hidden=True)] = None,
    sweep: Annotated[
        str | None,
        typer.Option(
            "--sweep",
            help="Probe capacity, a row per size per layer: hidden=16,64,256 (MLP hidden units) or "
            "rank=8,32,128 (a linear probe on the top r principal components of the standardised vectors).",
        ),
    ] = None,
    per_label: Annotated[
        bool,
        typer.Option(
            "--per-label", help="Per-label precision, recall, F1 and the confusion matrix of a row."
        ),
    ] = False,
    per_label_layer: Annotated[
        str | None,
        typer.Option(
            "--per-label-layer", help="The row --per-label reports (a layer or static; default the best)."
        ),
    ] = None,
    task: Annotated[
        str,
        typer.Option(
            "--task",
            help="label (a linear probe of the labels), or a structural probe on CoNLL-U trees: distance "
            "(UUAS, DSpr) or depth (root accuracy, NSpr).",
        ),
    ] = "label",
    rank: Annotated[
        int | None, typer.Option("--rank", min=1, help="Structural probes: the rank of B (default 128).")
    ] = None,
    epochs: Annotated[
        int | None, typer.Option("--epochs", min=1, help="Structural probes: training epochs (default 40).")
    ] = None,
    punct: Annotated[
        str | None,
        typer.Option(
            "--punct",
            help="Structural probes: the punctuation scores leave out: upos (UPOS PUNCT, default) or xpos "
            "(Hewitt & Manning's Penn Treebank tags).",
        ),
    ] = None,
    level: Annotated[
        str,
        typer.Option("--level", help="words (a label per word) or sentence (per text); word reads as words."),
    ] = "words",
    layers: Annotated[str, typer.Option("--layers", "-l", help="Layers to probe (a layer spec).")] = "all",
    folds: Annotated[int, typer.Option("--folds", min=2, help="Cross-validation folds (by sentence).")] = 5,
    control: Annotated[
        bool, typer.Option("--control", help="Also run the control task (random label per word type).")
    ] = False,
    label_field: Annotated[
        str | None,
        typer.Option("--label-field", help="The CoNLL-U field holding the label: upos, xpos, deprel, ..."),
    ] = None,
    # --column: --label-field's old name, still read, not shown (--column is a vector column elsewhere:
    # `index build --column layer_6`)
    old_column: Annotated[str | None, typer.Option("--column", hidden=True)] = None,
    subword: Annotated[
        str, typer.Option("--subword", help="Pieces of one word: first, last, mean, first_last.")
    ] = "mean",
    seed: Annotated[
        int,
        typer.Option(
            "--seed",
            help="Label probes: the folds and the control labels. Structural probes: B's start and the "
            "sentence order.",
        ),
    ] = 0,
    n_jobs: Annotated[
        int | None,
        typer.Option(
            "--n-jobs",
            min=-1,
            callback=at_most_cpus,
            help="Processes for the fits (-1: every CPU; default: every CPU from 2,000 items, else 1).",
        ),
    ] = None,
    output: PictureOpt = None,
    overwrite: OverwriteOpt = False,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Probes per layer: labels (default), or the parse tree with --task distance|depth.

    Label probes: accuracy and macro-F1 (95% CI over folds; accuracy's at least Wilson's), the majority
    baseline, and with --control the control task and selectivity. Structural probes (Hewitt & Manning):
    a rank-k map per layer trained on CoNLL-U trees, scored by UUAS and DSpr (distance) or root accuracy
    and NSpr (depth) beside the linear chain. Rows: `static` (input rows alone), then layers 0..L.

    Examples: `bertscope probe -i examples/senses.tsv`,
    `bertscope probe -i examples/pos.conllu --label-field upos --control -o probe.png`,
    `bertscope probe -i examples/topics.tsv --level sentence --json`,
    `bertscope probe -i examples/trees.conllu --test examples/trees-test.conllu --label-field upos
    --per-label`,
    `bertscope probe -i examples/pos.conllu --label-field upos --control --sweep hidden=16,256`,
    `bertscope probe -i examples/trees.conllu --test examples/trees-test.conllu --task distance`,
    `bertscope probe -i examples/ewt/train.conllu --task depth --layers 2:5 --punct xpos --seed 1` (a treebank
    with Penn Treebank XPOS tags, which --punct xpos reads)
    """
    from ..research.probe import probe

    label_field = old_spelling(label_field, old_column, name="--label-field", old="--column")
    probe_kind = old_spelling(probe_kind, old_probe, name="--kind", old="--probe")
    level = level_option(level, ["words", "sentence"])  # the probe's levels; --level word is words
    from ..core._enums import SubwordPooling

    # named by its flag, before the model loads (the library's refusal names `subword pooling`)
    pieces = SubwordPooling.parse(subword, what="--subword")
    run: dict[str, Any] = dict(
        device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads
    )
    picture = picture_output(output, overwrite=overwrite)  # before the work, with the matrix beside it
    if picture is not None and per_label and task.strip().lower() == "label":
        picture_output(_beside(picture, "confusion"), overwrite=overwrite)
    if task.strip().lower() != "label":
        from .syntax import TASKS, run_structural

        if task.strip().lower() not in TASKS:
            raise InvalidSpec(f"unknown --task {task!r}; choose one of: label, {', '.join(TASKS)}")
        label_only = {
            "--control": control, "--column" if old_column else "--label-field": label_field is not None,
            "--level": level != "words",
            "--folds": folds != 5, "--probe" if old_probe else "--kind": probe_kind is not None,
            "--sweep": sweep is not None,
            "--per-label": per_label, "--per-label-layer": per_label_layer is not None,
            "--n-jobs": n_jobs is not None,
        }  # fmt: skip
        if given := [name for name, set_ in label_only.items() if set_]:
            raise InvalidSpec(
                f"{', '.join(given)}: for label probes (--task label) only; a structural probe (--task "
                f"{task.strip().lower()}) takes --test, --layers, --rank, --epochs, --punct, --subword and "
                "--seed"
            )
        from ..research.conllu import Punct

        rule = Punct.parse("upos" if punct is None else punct, what="--punct")  # before the model loads
        _read_before_load(input_path, test, structural=True, level=level, label_field=None)
        m = load_model(model, **run)
        run_structural(
            m, input_path, test, task=task, layers=layers, rank=128 if rank is None else rank,
            epochs=40 if epochs is None else epochs, subword=pieces.value, seed=seed, output=picture,
            overwrite=overwrite, as_json=as_json, punct=rule.value,
        )  # fmt: skip
        return
    if rank is not None or epochs is not None or punct is not None:
        structural = (("--rank", rank), ("--epochs", epochs), ("--punct", punct))
        given = [flag for flag, value in structural if value is not None]  # 0 and '' are given too
        raise InvalidSpec(
            f"{', '.join(given)}: for structural probes (--task distance or depth); a label probe's "
            "capacity is --kind and --sweep"
        )
    if per_label_layer is not None and not per_label:
        raise InvalidSpec("--per-label-layer chooses the row --per-label reports: add --per-label")
    _read_before_load(input_path, test, structural=False, level=level, label_field=label_field)
    m = load_model(model, **run)
    result = probe(
        m, input_path, level=level, layers=layers, folds=folds, control=control, subword=pieces,
        label_field=label_field, seed=seed, n_jobs=n_jobs, test=test, kind=probe_kind, sweep=sweep,
        per_label=per_label, per_label_layer=per_label_layer,
    )  # fmt: skip
    if picture is not None:
        from ..research.layer_plots import plot_confusion, plot_probe

        _written(plot_probe(result, picture, title=Path(input_path).name, overwrite=overwrite))
        if result.per_label is not None:
            beside = _beside(picture, "confusion")
            _written(plot_confusion(result.per_label, beside, overwrite=overwrite))
    if as_json:
        emit_json(result.to_dict())
        return
    _probe_table(result, input_path, test, sized=probe_kind is not None or sweep is not None)
    if control:
        out.print(CONTROL_NOTE.format(unit="text" if result.level == "sentence" else "word"), highlight=False)
    if result.per_label is not None:
        _per_label_tables(result.per_label)


def _read_before_load(
    input_path: str, test: str | None, *, structural: bool, level: str, label_field: str | None
) -> None:
    """Read -i and --test as the probe reads them, so a malformed file is refused in one line before the
    model loads (a load can take 20 s and an export); the probe reads them again, as EWT's 3,000 lines
    read in about 10 ms."""
    from ..research.conllu import read_trees
    from ..research.probe_data import read_sentences, read_words

    for path, held_out in ((input_path, False), (test, True)):
        if path is None:
            continue
        if structural:
            read_trees(path)
        elif level == "words":
            read_words(path, label_field=label_field, test=held_out)
        elif label_field is None and Path(path).suffix.lower() != ".conllu":
            read_sentences(path)  # else the probe refuses the level for the file's kind before it reads


def _beside(path: Path, what: str) -> Path:
    return path.with_name(f"{path.stem}-{what}{path.suffix}")


def _probe_name(row: dict[str, Any]) -> str:
    if row["probe"] == "mlp":
        return f"mlp {row['capacity']}"
    return "linear" if row["capacity"] is None else f"linear rank {row['capacity']}"


def _probe_table(result: Any, input_path: str, test: str | None, *, sized: bool) -> None:
    labels = ", ".join(f"{k} {v}" for k, v in result.labels.items())
    # Repeated sentences are merged into one group (never on both sides of a fold): count them as such.
    merged = result.n_groups < result.n_sentences
    sentences = f"{result.n_groups} distinct sentences" if merged else f"{result.n_groups} sentences"
    if test is None:
        how = f"{result.folds}-fold CV grouped by sentence"
    else:
        how = f"trained on it, scored on {result.n_test} held-out items of {test}"
    columns = ["layer", "accuracy", "95% CI", "macro-F1", "control", "selectivity"]
    title = f"{input_path}: {result.n_items} items ({labels}), {sentences}, {how}"
    table = Table(*(["probe"] if sized else []), *columns, title=title)
    for row in result.rows:
        low, high = row["accuracy_ci"]
        table.add_row(
            *([_probe_name(row)] if sized else []), str(row["layer"]), _fmt(row["accuracy"]),
            f"{low:.3f}-{high:.3f}", _fmt(row["macro_f1"]), _fmt(row["control_accuracy"]),
            _fmt(row["selectivity"]),
        )  # fmt: skip
    out.print(table)
    out.print(f"majority baseline: {result.majority:.3f}", highlight=False)


def _per_label_tables(report: dict[str, Any]) -> None:
    """Precision, recall, F1 and support per label, then the confusion matrix (rows true)."""
    name = f"layer {report['layer']}, {_probe_name(report)}"
    table = Table("label", "precision", "recall", "F1", "support", title=f"per label: {name}")
    for i, label in enumerate(report["labels"]):
        table.add_row(
            label, _fmt(report["precision"][i]), _fmt(report["recall"][i]), _fmt(report["f1"][i]),
            str(report["support"][i]),
        )  # fmt: skip
    out.print(table)
    # narrow columns (one space of padding): 17 UPOS tags fit in 100 columns
    matrix = Table(
        "true \\ predicted", *report["labels"], title=f"confusion matrix: {name}", padding=(0, 1, 0, 0)
    )
    for label, counts in zip(report["labels"], report["confusion"], strict=True):
        matrix.add_row(label, *(str(c) for c in counts))
    out.print(matrix)


@app.command("cka")
def cka_command(
    input_path: InputOpt,
    model_b: Annotated[
        str | None, typer.Option("--model-b", help="Compare every layer of --model with every layer of this.")
    ] = None,
    level: Annotated[
        str,
        typer.Option(
            "--level", help="tokens (every non-pad token) or sentence (mean per text); token reads as tokens."
        ),
    ] = "tokens",
    debiased: Annotated[
        bool, typer.Option("--debiased", help="The debiased estimator (Nguyen et al.): for few rows.")
    ] = False,
    output: PictureOpt = None,
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
    """Linear CKA between every pair of layers of one model, or of --model against --model-b; streamed
    (sums of d x d products, not n x n Gram matrices: memory does not grow with the texts).

    Examples: `bertscope cka -i examples/news.txt -o cka.png`,
    `bertscope cka -i examples/news.txt --model-b ./finetuned --level sentence --debiased --json`
    (--device, --dtype, --backend, --quantize and --threads load both models alike)
    """
    from ..research.cka import cka

    level = level_option(level, ["tokens", "sentence"])  # CKA's levels; --level token is tokens
    picture = picture_output(output, overwrite=overwrite)  # before the work, not after it
    # the load options apply to both models alike
    run: dict[str, Any] = dict(
        device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads
    )
    if model_b is not None:
        check_model_argument(model_b, "--model-b")  # before -m's load, and named: leaving it out is no fix
    a = load_model(model, **run)
    b = None if model_b is None else load_model(model_b, **run)
    result = cka(a, read_lines(input_path, text_field=text_field), b, level=level, debiased=debiased)
    if result.note:
        warn(as_flags(result.note), label="note:", style="cyan")
    if picture is not None:
        from ..research.layer_plots import plot_cka

        _written(plot_cka(result, picture, overwrite=overwrite))
    if as_json:
        emit_json(_worded(result.to_dict()))
        return
    s = result.settings
    table = Table(
        "A \\ B", *(str(k) for k in result.layers_b),
        title=f"{s['estimator']} CKA, {s['level']} level, {_rows_of(result)}: rows are layers of "
        f"{s['model_a']}, columns layers of {s['model_b']}",
    )  # fmt: skip
    for layer, row in zip(result.layers_a, result.cka, strict=True):
        # an undefined cell (nan: the note says why) is '-', as compare's table and --json's null
        table.add_row(str(layer), *(_fmt(_defined(float(v))) for v in row))
    out.print(table)


def _rows_of(result: Any) -> str:
    """'777 rows of 50 texts' (token rows), or '50 rows' where each text is a row."""
    texts = result.n_texts
    return f"{result.n_rows} rows" + ("" if texts in (None, result.n_rows) else f" of {texts} texts")


@app.command("compare")
def compare_command(
    model_a: Annotated[
        str, typer.Argument(metavar="BASE", help="The base model (a folder; `bundled` for the default).")
    ],
    model_b: Annotated[str, typer.Argument(metavar="FINETUNED", help="Its fine-tuned child (a folder).")],
    input_path: InputOpt,
    top: Annotated[int, top_k_option("How many most-moved static rows to show.", least=1)] = 20,
    # --top: --top-k's old name, still read, not shown
    old_top: Annotated[int | None, typer.Option("--top", hidden=True, min=1)] = None,
    debiased: Annotated[
        bool, typer.Option("--debiased", help="The debiased CKA estimator (Nguyen et al.): for few tokens.")
    ] = False,
    text_field: TextFieldOpt = "text",
    output: PictureOpt = None,
    overwrite: OverwriteOpt = False,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What fine-tuning changed: the static rows that moved most, which parts' weights changed
    (embeddings, each block, other) and by how much, per layer the CKA and mean token cosine between the
    two models on the same texts, and the first layer whose outputs differ.

    Examples: `bertscope compare bundled ./finetuned -i examples/news.txt`,
    `bertscope compare ./base ./child -i texts.txt -k 50 --json -o compare.png`
    (--device, --dtype, --backend, --quantize and --threads load both models alike)
    """
    from ..research.compare import compare

    top = old_spelling(top, old_top, name="--top-k", old="--top", default=20)
    picture = picture_output(output, overwrite=overwrite)  # before the work, not after it
    # the load options apply to both models alike
    run: dict[str, Any] = dict(
        device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads
    )
    # both required, so the load's fix for -m (leave it out) is none; both checked before either loads
    check_model_argument(model_a, "BASE")
    check_model_argument(model_b, "FINETUNED")
    a = load_model(model_a, **run)
    b = load_model(model_b, **run)
    result = compare(a, b, read_lines(input_path, text_field=text_field), top=top, debiased=debiased)
    if result.note:
        warn(as_flags(result.note), label="note:", style="cyan")
    if picture is not None:
        from ..research.layer_plots import plot_compare

        _written(plot_compare(result, picture, overwrite=overwrite))
    if as_json:
        emit_json(_worded(result.to_dict()))
        return
    if result.vocabulary["note"]:
        err.print(f"note: {result.vocabulary['note']}", highlight=False)
    vocab = result.vocabulary
    changed = vocab["shared"] - vocab["unchanged_rows"]
    if result.static:
        moved = Table("token", "id", "cosine", "norm A", "norm B", title="static rows that moved most")
        for r in result.static:
            moved.add_row(
                r["token"], str(r["id"]), _fmt(_defined(r["cosine"])), _fmt(r["norm_a"]), _fmt(r["norm_b"])
            )
        out.print(moved)
    out.print(
        f"static rows: {changed} of the {vocab['shared']} shared rows changed, the others are identical",
        highlight=False,
    )
    if result.weights:
        _weights_table(result)
    layers = Table(
        "layer", "output of", "CKA", "mean cosine",
        title=f"per layer, {result.n_rows} tokens of {result.n_texts} texts",
    )  # fmt: skip
    for r in result.layers:  # an undefined figure (nan: the note says why) is '-', as in --json's null
        layers.add_row(
            str(r["layer"]), r["output_of"], *(_fmt(_defined(r[key])) for key in ("cka", "mean_cosine"))
        )
    out.print(layers)
    out.print(_first_changed(result.first_changed_layer), highlight=False)


def _weights_table(result: Any) -> None:
    """Per part, the weights' relative change, and a line naming the parts that changed."""
    table = Table("part", "parameters", "relative change", title="weights: |W_B - W_A| / |W_A| per part")
    for r in result.weights:
        table.add_row(r["part"], str(r["parameters"]), _change(r["relative_change"]))
    out.print(table)
    changed = result.changed_parts
    measured = [r for r in result.weights if r["parameters"]]
    if not changed:
        said = "identical in every part"
    else:
        rest = "" if len(changed) == len(measured) else "; the others are identical"
        said = f"{', '.join(changed)} changed{rest}"
    unread = [r["part"] for r in result.weights if not r["parameters"]]
    if unread:  # ALBERT's blocks hold no weights of their own: not measured, not identical
        said += f"; no weights read for {_listed(unread)}"
    out.print(f"weights: {said}", highlight=False)


def _change(value: float | None) -> str:
    """A relative change in significant digits: a change of 1e-7 reads 1.0e-07, not 0.000; '-' where
    none was read (or undefined: nan)."""
    if value is None or math.isnan(value):
        return "-"
    if value == 0:
        return "0"
    return f"{value:.3f}" if value >= 0.01 else f"{value:.1e}"


def _listed(parts: list[str]) -> str:
    """Parts named, the first three and how many more."""
    return ", ".join(parts[:3]) + (f" and {len(parts) - 3} more" if len(parts) > 3 else "")


def _first_changed(layer: int | None) -> str:
    """Where the outputs first differ: a change in block k shows in layers k + 1 .. L, the last often most."""
    if layer is None:
        return "layer outputs: identical at every layer"
    part = "the embeddings" if layer == 0 else f"block {layer - 1}"
    return (
        f"layer outputs: first differ at layer {layer} (the output of {part}); a block's change moves "
        "every layer after it"
    )
