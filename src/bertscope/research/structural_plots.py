"""The picture of a structural probe: its two scores per row (static, layers 0..L), each beside the
linear-chain baseline's."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .layer_plots import save_figure

if TYPE_CHECKING:
    from .structural import StructuralResult

__all__ = ["plot_structural", "SCORES"]

# The two scores of each task, as the rows name them and as a person reads them.
SCORES = {
    "distance": (("uuas", "UUAS"), ("dspr", "DSpr")),
    "depth": (("root_acc", "root acc."), ("nspr", "NSpr")),
}


def plot_structural(
    result: StructuralResult, path: str | Path, *, title: str = "structural probe", overwrite: bool = False
) -> Path:
    """Each score per row as a line, the baseline's as a dashed line of the same colour."""
    from matplotlib.figure import Figure

    labels = [str(r["layer"]) for r in result.rows]
    x = np.arange(len(labels))
    figure = Figure(figsize=(7.0, 4.2))
    ax = figure.add_subplot()
    drawn = [0.0]
    for (key, name), colour in zip(SCORES[result.task], ("C0", "C1"), strict=True):
        values = [np.nan if r[key] is None else r[key] for r in result.rows]
        ax.plot(x, values, marker="o", color=colour, label=f"{name} (probe)")
        drawn += [v for v in values if not np.isnan(v)]
        base = result.baseline[key]
        if base is not None:
            ax.axhline(base, linestyle="--", color=colour, label=f"{name}, linear chain ({base:.2f})")
            drawn.append(base)
    ax.set_xticks(x, labels)
    ax.set_xlabel("static rows, then layer (0 = embedding layer output)")
    ax.set_ylabel("score on the test sentences")
    # a Spearman score can be negative (a layer that orders words against the tree): the axis goes below
    # 0 to show it, as the label probe's does
    ax.set_ylim(min(min(drawn) - 0.05, 0.0), 1.05)
    ax.set_title(f"{title}: {result.task} probe, {result.n_train} train / {result.n_test} test sentences")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return save_figure(figure, path, overwrite=overwrite)
