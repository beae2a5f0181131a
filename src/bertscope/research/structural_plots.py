"""The picture of a structural probe: its two scores per row (static, layers 0..L), each beside the
linear-chain baseline's; a score undefined on some row is said on the axes, with the reason the table's
note gives (`why_undefined`)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .layer_plots import save_figure
from .structural_metrics import SPEARMAN_LENGTHS

if TYPE_CHECKING:
    from .structural import StructuralResult

__all__ = ["plot_structural", "SCORES", "why_undefined"]

# The two scores of each task, as the rows name them and as a person reads them.
SCORES = {
    "distance": (("uuas", "UUAS"), ("dspr", "DSpr")),
    "depth": (("root_acc", "root acc."), ("nspr", "NSpr")),
}


def why_undefined(task: str, rows: list[dict[str, Any]], key: str) -> str:
    """Why score `key` is None (`-` in the table) on some of `rows` (the probe's rows, then the
    baseline's): no test sentence it can be computed on, or a row's constant predictions."""
    if key == "uuas":  # UUAS counts gold edges between words that are not punctuation
        return "no test sentence has two words that are not punctuation"
    low, high = SPEARMAN_LENGTHS
    # the chain's distances |i - j| and depths i vary on every sentence of 2 words or more, as gold ones
    # do: its Spearman is None only where no test sentence has low-high words
    if rows[-1][key] is None:
        return f"no test sentence has {low}-{high} words"
    named = [
        "the static row's" if row["layer"] == "static" else f"layer {row['layer']}'s"
        for row in rows[:-1]
        if row[key] is None
    ]
    which = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    what = "distances" if task == "distance" else "depths"
    return (
        f"{which} predicted {what} are constant on every {low}-{high}-word test sentence (Spearman undefined)"
    )


def plot_structural(
    result: StructuralResult, path: str | Path, *, title: str = "structural probe", overwrite: bool = False
) -> Path:
    """Each score per row as a line, the baseline's as a dashed line of the same colour; a score
    undefined on some row is said in words on the axes (a score undefined everywhere draws nothing)."""
    from matplotlib.figure import Figure

    labels = [str(r["layer"]) for r in result.rows]
    x = np.arange(len(labels))
    figure = Figure(figsize=(7.0, 4.2))
    ax = figure.add_subplot()
    drawn = [0.0]
    said = []
    for (key, name), colour in zip(SCORES[result.task], ("C0", "C1"), strict=True):
        values = [np.nan if r[key] is None else r[key] for r in result.rows]
        if not all(np.isnan(values)):  # a line of no point is a legend entry for nothing
            ax.plot(x, values, marker="o", color=colour, label=f"{name} (probe)")
        drawn += [v for v in values if not np.isnan(v)]
        base = result.baseline[key]
        if base is not None:
            ax.axhline(base, linestyle="--", color=colour, label=f"{name}, linear chain ({base:.2f})")
            drawn.append(base)
        if any(r[key] is None for r in [*result.rows, result.baseline]):
            reason = why_undefined(result.task, [*result.rows, result.baseline], key)
            said.append(textwrap.fill(f"{name} undefined: {reason}", 90))
    if said:  # an empty picture would read as a probe that was not run
        alone = len(drawn) == 1  # nothing drawn: the words in the middle, else below the lines
        ax.text(
            0.5,
            0.5 if alone else 0.04,
            "\n".join(said),
            transform=ax.transAxes,
            ha="center",
            va="center" if alone else "bottom",
            fontsize=8,
            bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "0.7"},
        )
    ax.set_xticks(x, labels)
    ax.set_xlabel("static rows, then layer (0 = embedding layer output)")
    ax.set_ylabel("score on the test sentences")
    # a Spearman score can be negative (a layer that orders words against the tree): the axis goes below
    # 0 to show it, as the label probe's does
    ax.set_ylim(min(min(drawn) - 0.05, 0.0), 1.05)
    ax.set_title(f"{title}: {result.task} probe, {result.n_train} train / {result.n_test} test sentences")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return save_figure(figure, path, overwrite=overwrite)
