"""`probe --task distance|depth`: the structural probes' run, table and picture (the probe command in
layers.py hands over here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from .app import emit_json, err, out

TASKS = ("distance", "depth")
NOTE = {
    "distance": "UUAS: gold undirected edges ({punct} left out) found by the minimum spanning tree of "
    "the predicted distances; DSpr: Spearman of predicted and gold distances, averaged over lengths 5-50",
    "depth": "root acc.: the least deep word ({punct} left out) is the root; NSpr: Spearman of "
    "predicted and gold depths, averaged over lengths 5-50; the chain's root is the first word",
}
# The punctuation each --punct rule leaves out of the scores, as the note names it.
PUNCT = {"upos": "UPOS PUNCT", "xpos": "Penn Treebank XPOS punctuation"}


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def _count(n: int, noun: str) -> str:
    """`1 sentence`, `2 sentences`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def run_structural(
    model: Any, train: str, test: str | None, *, task: str, layers: str, rank: int, epochs: int,
    subword: str, seed: int, output: Path | None, as_json: bool, overwrite: bool = False, punct: str = "upos",
) -> None:  # fmt: skip
    """Train on `train`, score on `test` (or every 5th distinct sentence of `train`), print or emit JSON."""
    from ..research.structural import structural_probe
    from ..research.structural_plots import SCORES, why_undefined

    result = structural_probe(
        model,
        train,
        test,
        task=task,
        layers=layers,
        rank=rank,
        epochs=epochs,
        subword=subword,
        seed=seed,
        punct=punct,
    )
    if output is not None:
        from ..research.structural_plots import plot_structural

        plot_structural(result, output, title=Path(train).name, overwrite=overwrite)
        err.print(f"wrote {output}", highlight=False)
    if as_json:
        emit_json(result.to_dict())
        return
    (a, name_a), (b, name_b) = SCORES[result.task]
    held = test if test is not None else f"{result.settings['test']} distinct sentence of {train}"
    if result.settings.get("test_overlap"):
        held += f"; {result.settings['test_overlap']} of its distinct sentences also in training"
    table = Table("layer", name_a, name_b, title=f"{result.task} probe per layer")
    for row in result.rows:
        table.add_row(str(row["layer"]), _fmt(row[a]), _fmt(row[b]))
    table.add_row("chain", _fmt(result.baseline[a]), _fmt(result.baseline[b]), style="dim")
    out.print(table)
    settings = result.settings
    ranks = sorted(set(settings["rank"].values()))
    # what produced the table, in the flags that choose it: another --subword, --punct or --seed differs
    how = (
        f"(rank {'/'.join(map(str, ranks))}, {_count(settings['epochs'], 'epoch')}) with --subword "
        f"{settings['subword']}, --punct {settings['punct']} and --seed {settings['seed']}"
    )
    out.print(
        f"trained on {_count(result.n_train, 'sentence')} of {train} {how}, tested on {result.n_test} "
        f"({held}); chain: the linear-chain baseline (each word linked to the next)",
        highlight=False,
    )
    note = NOTE[result.task].format(punct=PUNCT.get(settings["punct"], settings["punct"]))
    rows = [*result.rows, result.baseline]
    # (root acc. is None only without test sentences, which the probe refuses)
    for key, name in ((a, name_a), (b, name_b)):
        if key != "root_acc" and any(row[key] is None for row in rows):
            note += f"; {name} -: {why_undefined(result.task, rows, key)}"
    out.print(note, highlight=False)
