"""`bertscope bench`: every fast mode against float32 on your own texts: speed and drift."""

from __future__ import annotations

from itertools import islice
from typing import Annotated

import typer
from rich.table import Table

from ..errors import InvalidInput, InvalidSpec
from .app import (
    DeviceOpt,
    JsonOpt,
    ModelOpt,
    TextFieldOpt,
    ThreadsOpt,
    app,
    cuts_said_once,
    emit_json,
    err,
    out,
    read_lines,
)


@app.command()
def bench(
    input_path: Annotated[
        str | None,
        typer.Option(
            "--input",
            "-i",
            help="Texts: a line each, or the text field of .jsonl/.csv/.tsv/.parquet (default: bundled)",
        ),
    ] = None,
    modes: Annotated[
        str,
        typer.Option(
            "--modes",
            help="Comma list of: float32, bfloat16, float16 (CUDA), onnxruntime, int8, int8_fused, "
            "int8_static, openvino, openvino-bfloat16, openvino-int8, openvino-int8_static (as --quantize "
            "spells them; int8-fused is read too).",
        ),
    ] = "float32,onnxruntime,int8",
    drift: Annotated[
        bool, typer.Option("--drift", help="Drift only: one untimed run per mode, no speed figures.")
    ] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Use the first N texts.")] = 500,
    repeats: Annotated[
        int, typer.Option("--repeats", min=1, help="Timed runs per mode (their median is kept).")
    ] = 2,
    text_field: TextFieldOpt = "text",
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Speed and drift of each mode against float32: texts/s, ratio, cosine min/mean to float32.

    Examples: `bertscope bench -i corpus.txt`, `bertscope bench -i corpus.txt --drift --modes int8`,
    `bertscope bench --modes float32,bfloat16 --device cuda`. Read the min cosine before embedding a
    corpus with a fast mode; the bundled sample is the int8 calibration set, so pass your own texts.
    """
    from ..backends.modes import compare_modes, mode_name
    from ..backends.onnx import calibration_texts
    from ..core.loading import device_kind, modes_spelled, resolve_device
    from ..static_model import is_model2vec, load_static

    if is_model2vec(model):  # rows and no forward: no mode to time or drift
        raise load_static(model).refusal("bench (each fast mode of the forward against float32)")

    # int8-fused as int8_fused, as --quantize spells it (int8_fused,int8-fused: one mode, one row)
    try:
        names = list(dict.fromkeys(mode_name(n) for n in modes.split(",") if n.strip()))
    except InvalidSpec as exc:
        raise InvalidInput(f"--modes: {exc}") from None
    if not names:
        raise InvalidInput("--modes is empty: give e.g. float32,int8")
    kind = device_kind(resolve_device(device))  # a device this machine lacks: its one line, before any other
    if "float16" in names and kind != "cuda":  # bench has no --dtype to name
        raise InvalidInput("--modes float16 runs on CUDA only; on CPU use --modes bfloat16 or float32")
    if text_field != "text" and not input_path:
        raise InvalidInput("--text-field names a field of -i FILE's records; add -i FILE or drop it")
    if input_path:
        texts = list(islice(read_lines(input_path, text_field=text_field), limit))
    else:
        texts = calibration_texts()[:limit]
    if not texts:
        raise InvalidInput(f"{input_path}: no texts (every line is empty)")
    if input_path is None:
        err.print("no -i given: using bertscope's own sample sentences (also int8's calibration set)")
    if threads is not None:  # every mode is opened and timed at this count, as load(threads=) runs it
        from ..core.cpu import ask_threads

        ask_threads(threads)
    cut = "they are timed as cut, as embed cuts them by default (--long truncate)"
    with cuts_said_once(cut), modes_spelled("--modes {}"):  # a slow mode's warning names it as typed
        reports = compare_modes(texts, names, model=model, device=device, repeats=repeats, time_it=not drift)
    if as_json:
        # a mode not timed (--drift) has no seconds (None in the report), as it has no texts/s: null
        emit_json([r.as_dict() for r in reports])
        return
    table = Table(title=f"{len(texts)} texts, against float32" + ("" if drift else f", median of {repeats}"))
    table.add_column("mode")
    if not drift:
        table.add_column("texts/s", justify="right")
        table.add_column("vs float32", justify="right")
    table.add_column("cos min", justify="right")
    table.add_column("cos mean", justify="right")
    table.add_column("max |diff|", justify="right")
    for r in reports:
        speed = [] if drift else [f"{r.texts_per_s:.1f}", f"{r.vs_float32:.2f}x"]
        # the mode asked, and what ran where that differs (OpenVINO bfloat16 without native bfloat16)
        label = r.mode if r.ran_as_asked() else f"{r.mode} (ran {r.ran})"
        table.add_row(label, *speed, f"{r.cos_min:.6f}", f"{r.cos_mean:.6f}", f"{r.max_abs:.2e}")
    out.print(table)
