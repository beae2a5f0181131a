"""The geometry command: the shape of the space per layer (IsoScore, rogue dimensions, TwoNN)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from .app import (
    BackendOpt,
    DeviceOpt,
    DtypeOpt,
    InputOpt,
    JsonOpt,
    LayersOpt,
    ModelOpt,
    QuantizeOpt,
    TextFieldOpt,
    ThreadsOpt,
    app,
    emit_json,
    load_model,
    old_spelling,
    out,
    read_lines,
    top_k_option,
    warn,
)


@app.command()
def geometry(
    input_path: InputOpt,
    layers: LayersOpt = None,
    top: Annotated[int, top_k_option("How many rogue dimensions to name.", least=1)] = 3,
    # --top: --top-k's old name, still read, not shown
    old_top: Annotated[int | None, typer.Option("--top", hidden=True, min=1)] = None,
    max_tokens_sampled: Annotated[
        int,
        typer.Option(
            "--max-tokens-sampled", min=3, help="Tokens TwoNN samples per layer (uniformly, seeded)."
        ),
    ] = 5000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the TwoNN sample.")] = 0,
    text_field: TextFieldOpt = "text",
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    threads: ThreadsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The shape of the space per layer, over the vectors of every token but the special ones: IsoScore
    (1 isotropic, 0 one direction; capped below 1 when the tokens are not many more than the
    dimensions), the expected cosine of two different random tokens and the rogue dimensions that hold
    most of it, and the intrinsic dimension (TwoNN, on distinct vectors). Repeated texts count once.
    Streamed: memory does not grow with the texts; TwoNN runs on a uniform sample of at most
    --max-tokens-sampled tokens.

    Examples: `bertscope geometry -i examples/news.txt`,
    `bertscope geometry -i corpus.txt --layers -1 -k 10 --json`
    """
    from ..research.geometry import geometry as measure
    from ..research.states import check_seed

    top = old_spelling(top, old_top, name="--top-k", old="--top", default=3)
    check_seed(seed)  # before the model loads
    m = load_model(model, device=device, dtype=dtype, backend=backend, quantize=quantize, threads=threads)
    result = measure(
        m, read_lines(input_path, text_field=text_field), layers=layers or "all", top=top,
        max_tokens_sampled=max_tokens_sampled, seed=seed,
    )  # fmt: skip
    merged = result.settings["repeats_merged"]
    if merged:
        warn(
            f"{merged} repeated text(s) merged: texts that tokenize alike have the same vectors, one text "
            f"(of {result.settings['n_texts']} texts, {result.settings['n_distinct_texts']} distinct)",
            label="note:",
            style="cyan",
        )
    for note in (result.note, result.twonn_note, result.twonn_sample_note):
        if note:
            warn(note, label="note:", style="cyan")
    if as_json:
        emit_json(result.to_dict())
        return
    s = result.settings
    sampled = "all of them" if s["twonn_sample"] == s["n_tokens"] else f"a sample of {s['twonn_sample']}"
    table = Table(
        "layer", "IsoScore", "intrinsic dim (points)", "E[cos]", "rogue dimensions (share of E[cos])",
        title=f"{s['n_tokens']} tokens, {s['tokens_per_dimension']:.1f} per dimension (special tokens left "
        f"out); TwoNN on {sampled}",
    )  # fmt: skip
    for row in result.layers:
        rogue = ", ".join(f"{r['dim']}: {r['share']:.2f}" for r in row["rogue"])
        table.add_row(
            str(row["layer"]), _fmt(row["isoscore"]),
            f"{_fmt(row['intrinsic_dim'], '.1f')} ({row['n_points']})",
            _fmt(row["expected_cosine"]), rogue,
        )  # fmt: skip
    out.print(table)
    for row in result.layers:
        if row["twins"]:
            out.print(
                f"layer {row['layer']}: TwoNN merged {row['twins']} tokens into another with the same "
                f"vector{' (the same piece at the same position)' if row['layer'] == 0 else ''}",
                highlight=False,
            )


def _fmt(value: Any, spec: str = ".3f") -> str:
    return "-" if value is None or value != value else format(value, spec)
